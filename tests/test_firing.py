"""When a seeded bug fires, and the check that a campaign caught it there (swafloor.fuzz.firing;
issue 28 §5): a watch on the unmutated spec never fires; a mutant fires at the step worked out by
hand; and the check rejects a divergence at another step or in another part, on made-up replays and
on a real one (a campaign that does not compare the part the bug breaks sees it only later)."""

from __future__ import annotations

import attrs
import pytest

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.firing import Fired, judge, replay_firing, watch, watched_record
from swafloor.fuzz.protocol import Part
from swafloor.fuzz.trace import Step, Trace
from swafloor.reference import AttentionLayer, Config, Manager, RequestError, Semantics, SsmLayer
from swafloor.reference.seeded_bugs import LATER, ORACLE, SEEN_LATER, SHOWN, TABLE_ONLY


def test_a_watch_on_the_spec_itself_never_fires():
    """The twin is the spec: every operation, misuse included, agrees with it."""
    for semantics in (Semantics(), Semantics(in_flight_tokens=1, free_stale="at-allocate", suspend="keep"),
                      Semantics(prefix_sharing=True, cache_freed=True)):
        config = Config(4, [AttentionLayer(5, 1), AttentionLayer(None), SsmLayer()], slots=(12, 24, 4),
                        semantics=semantics)
        m = Manager(config)
        firing = watch(m, config)
        m.create("a", reused_history=3)
        assert m.resume("a")
        for h in range(3, 30):
            m.resize("a", h + 1, h)
            m.commit("a", 1)
        m.create("b")
        m.resume("b")
        m.resize("b", 9, 0)
        with pytest.raises(RequestError):
            m.resize("b", 2, 5)  # capacity below history: refused by both, naming the same field
        m.suspend("a")
        m.resume("a")
        m.close("b")
        assert firing.fired is None and firing.shown is None and firing.calls == 2 + 2 * 27 + 3 + 1 + 3


# The trace docs/fuzzing.md shows for mutant:allocate-before-release (W = 1, t = 1: one slot).
HOLD = Trace(Config(1, [AttentionLayer(window=1)]),
             (Step.create("r0"), Step.resume("r0"), Step.resize("r0", 1, 0), Step.resize("r0", 2, 1)),
             backend="mutant:allocate-before-release")


def _replay(trace: Trace, name: str, caps=None) -> Fired:
    record = resolve(name)
    if caps is not None:
        record = attrs.evolve(record, capabilities=caps)
    firings: list = []
    return replay_firing(trace, watched_record(record, firings), resolve("reference"), firings)


def test_a_mutant_fires_at_the_step_worked_out_by_hand():
    # Step 3 moves history to 1: block 0 is stale, block 1 needed. The spec frees block 0 first and
    # takes its slot; hold-until-return keeps block 0 until the call returns, so it needs a second
    # slot of the one the pool has: the first call whose result differs from the spec's.
    fired = _replay(HOLD, "mutant:allocate-before-release")
    assert (fired.fired_at, fired.shown_at, fired.seen_at, fired.field) == (3, 3, 3, "outcome")
    assert fired.why.startswith("resize('r0', 2, 1)")
    assert judge("allocate-before-release", TABLE_ONLY, fired) is None


def test_the_check_rejects_a_divergence_at_another_step_or_in_another_part():
    fired = _replay(HOLD, "mutant:allocate-before-release")
    assert judge("allocate-before-release", TABLE_ONLY, fired) is None
    early = judge("allocate-before-release", TABLE_ONLY, attrs.evolve(fired, seen_at=2))
    assert early and "before it fired" in early
    late = judge("allocate-before-release", TABLE_ONLY, attrs.evolve(fired, seen_at=4))
    assert late and "no relation is stated" in late
    elsewhere = judge("allocate-before-release", TABLE_ONLY, attrs.evolve(fired, field="tables[r0][0][0]"))
    assert elsewhere and "not in outcome/shortfalls" in elsewhere
    never = judge("allocate-before-release", TABLE_ONLY, attrs.evolve(fired, fired_at=None, shown_at=None))
    assert never and "never fired" in never
    assert "no divergence" in judge("allocate-before-release", TABLE_ONLY, attrs.evolve(fired, seen_at=None, field=None))


def test_a_stated_relation_is_checked_too():
    shown = [(name, campaign) for (name, campaign), (relation, _) in SEEN_LATER.items() if relation == SHOWN]
    assert shown
    name, campaign = shown[0]
    part = {"cache-aligned-swapped": "pool_used[0]"}.get(name, "cached")
    fired = Fired(fired_at=1, why="named", seen_at=3, field=part, shown_at=3)
    assert judge(name, campaign, fired) is None
    off = judge(name, campaign, attrs.evolve(fired, shown_at=2))
    assert off and "not at the step its effect first showed (step 2)" in off
    assert "before it fired" in judge(name, campaign, attrs.evolve(fired, fired_at=4))


# mutant:no-inflight-token at W = 2, t = 1 (the floor: 2 slots) decoding one request.
NO_INFLIGHT = Trace(Config(1, [AttentionLayer(window=2)]),
                    (Step.create("r0"), Step.resume("r0"), Step.resize("r0", 1, 0), Step.commit("r0", 1),
                     Step.resize("r0", 2, 1), Step.commit("r0", 1), Step.resize("r0", 3, 2)))


def test_a_real_divergence_later_than_the_firing_is_rejected():
    """Worked out by hand. The commit at step 5 moves history to 2: the spec frees block 0 (its window
    [1, 2] starts in block 1); the mutant's window [0, 1] keeps it: it fires there, in the tables.
    At step 6 (capacity 3) it needs blocks 0..2 of a 2-slot pool and runs out where the spec holds
    [1, 2]. A campaign comparing tables sees it at step 5; one that compares no tables, slot counts
    or slot ids sees it only at step 6, and the check refuses that as a catch."""
    fired = _replay(NO_INFLIGHT, "mutant:no-inflight-token")
    assert (fired.fired_at, fired.seen_at, fired.field) == (5, 5, "tables[r0][0][0]")
    assert judge("no-inflight-token", TABLE_ONLY, fired) is None
    caps = resolve("mutant:no-inflight-token").capabilities
    blind = attrs.evolve(caps, observations={p: m for p, m in caps.observations.items()
                                             if p not in (Part.TABLES, Part.SLOTS, Part.POOL_USED)})
    late = _replay(NO_INFLIGHT, "mutant:no-inflight-token", blind)
    assert (late.fired_at, late.seen_at, late.field) == (5, 6, "outcome")
    verdict = judge("no-inflight-token", TABLE_ONLY, late)
    assert verdict and "fired at step 5" in verdict and "only at step 6" in verdict


def test_a_reference_mutant_is_watched_as_the_side_compared_against():
    """The oracle campaign's mutant is the side the oracle is compared against: released-one-early
    (blocks released on h + 1) frees block 0 of W = 2, t = 1 a step early: at the resize to history 1."""
    from swafloor.fuzz.reference_mutants import resolve_mutant, scoring_backend

    trace = Trace(Config(1, [AttentionLayer(window=2)]),
                  (Step.create("r0"), Step.resume("r0"), Step.resize("r0", 1, 0), Step.resize("r0", 2, 1)))
    firings: list = []
    fired = replay_firing(trace, scoring_backend("oracle"), watched_record(resolve_mutant("released-one-early"),
                                                                             firings), firings)
    assert (fired.fired_at, fired.seen_at, fired.part) == (3, 3, "tables")
    assert judge("released-one-early", ORACLE, fired) is None


def test_every_stated_relation_names_a_campaign_of_its_bug_and_says_why():
    from swafloor.reference.seeded_bugs import seeded_bug

    for (name, campaign), (relation, why) in SEEN_LATER.items():
        assert campaign in seeded_bug(name).campaigns, (name, campaign)
        assert relation in (SHOWN, LATER) and len(why) > 40, (name, relation, why)
