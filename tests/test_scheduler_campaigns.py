"""Issue 32's seeded bugs of admission and preemption: each flips its theorem (tests/test_proofs_mutations.py
runs every flip) and the scheduler campaigns (fuzz/scheduler_campaigns.py) catch it, with the formula's
patch applied; on the reference itself they find nothing."""

from __future__ import annotations

import pytest

from swafloor.fuzz import scheduler_campaigns as campaigns
from swafloor.proofs import mutations
from swafloor.reference.scheduler import Victim
from swafloor.reference.seeded_bugs import SCHEDULER, SEEDED_BUGS

CAUGHT_BY = {  # which campaign catches each, and a phrase of its failure line
    "admission-charges-prompt": (campaigns.lone_requests, "the reference gate charges"),
    "resume-gate-at-full-utilisation": (campaigns.kept_resumes, "the resume gate refused it"),
    "preempt-newest-other": (campaigns.preemptions, "livelock"),
}


def test_the_campaigns_find_nothing_on_the_reference():
    assert campaigns.run() == []


def test_every_scheduler_bug_is_seeded_in_the_formulas_and_listed_here():
    scheduler_bugs = [bug.name for bug in SEEDED_BUGS if SCHEDULER in bug.campaigns]
    assert sorted(scheduler_bugs) == sorted(CAUGHT_BY)
    assert set(scheduler_bugs) <= {m.name for m in mutations.MUTATIONS}


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_the_scheduler_campaigns_catch_the_bug(name):
    (mutation,) = [m for m in mutations.MUTATIONS if m.name == name]
    campaign, phrase = CAUGHT_BY[name]
    with mutations.applied(mutation):
        found = campaign()
        assert found and all(phrase in line for line in found), found[:3]
        assert campaigns.run()  # the whole run catches it too
    assert campaign() == []  # the patch is undone


def test_the_over_charging_gate_is_caught_where_the_run_fits():
    """The lone-request campaign's second check has its own oracle, the peak the manager measures: an
    over-charging gate (charging the prompt) deadlocks a long prompt that fits in that peak."""
    (mutation,) = [m for m in mutations.MUTATIONS if m.name == "admission-charges-prompt"]
    with mutations.applied(mutation):
        found = campaigns.lone_requests()
    assert any("(measured) but the reference gate charges" in line and "deadlock" in line for line in found)


def test_the_other_policies_livelock_by_their_own_names_too():
    """Only FCFS preemption (newest) spares the oldest; newest-other and oldest both undo it (the campaign
    catches each without a patch)."""
    assert campaigns.preemptions(Victim.NEWEST_OTHER)
    assert campaigns.preemptions(Victim.OLDEST)
