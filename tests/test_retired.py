"""Retired requests (closed on both sides after an accepted outcome slack, left out of later comparison)
are counted, reported (``retired`` in --json and the summary), and, for a backend whose outcome is
one-sided, more than runner.MAX_RETIRED_SHARE of the requests retired fails the campaign (issue 28)."""

from __future__ import annotations

import attrs

from swafloor.fuzz.runner import MAX_RETIRED_SHARE, CampaignResult, format_report


def _result(requests: int, retired: int, limited: bool) -> CampaignResult:
    return CampaignResult(backend="b", against="reference", profile="ci", seed=0, examples=1, runs=1, steps=1,
                          seconds=1.0, requests=requests, retired=retired, retire_limited=limited)


def test_above_the_share_a_one_sided_campaign_fails_and_says_so():
    over = _result(100, int(100 * MAX_RETIRED_SHARE) + 1, True)
    assert over.result == "too-many-retired" and over.too_many_retired
    assert over.to_dict()["retired"] == over.retired and over.to_dict()["requests"] == 100
    assert "ABOVE: the campaign fails" in format_report(over)
    at = _result(100, int(100 * MAX_RETIRED_SHARE), True)
    assert at.result == "pass" and "retired: 5 of 100" in format_report(at)


def test_an_exact_outcome_backend_has_no_limit_its_slack_is_a_divergence():
    assert _result(10, 0, False).result == "pass"
    assert attrs.evolve(_result(10, 0, False)).to_dict()["max_retired_share"] is None


def test_a_real_campaign_counts_requests_and_retirements():
    from swafloor.fuzz.runner import run_campaign

    result = run_campaign("oracle", profile="ci", examples=5, seed=0, out_dir=None)
    assert result.requests > 0 and result.retired == 0 and result.result == "pass"


def test_a_retires_outcome_retires_either_way_and_is_limited():
    """``retires`` (sglang-radix: SGLang's own outcome at the reference's pool sizes): a difference either
    way is a slack that retires the request, never a divergence; the campaign is retire-limited; the mode
    is for the outcome only."""
    import pytest

    from swafloor.fuzz.compare import Result, compare_results
    from swafloor.fuzz.protocol import Capabilities, Comparison, Operation, Part
    from swafloor.fuzz.runner import retire_limited
    from swafloor.fuzz.trace import Step

    ops = [Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.CLOSE]
    caps = Capabilities(operations=ops, observations={Part.OUTCOME: "retires"})
    ok, short = Result("ok"), Result("out-of-slots")
    step = Step.resume("r0")
    assert compare_results(0, step, ok, short, caps) == (None, True)
    assert compare_results(0, step, short, ok, caps) == (None, True)
    assert compare_results(0, step, short, short, caps) == (None, False)
    at_least = Capabilities(operations=ops, observations={Part.OUTCOME: "at-least"})
    assert compare_results(0, step, ok, short, at_least)[0] is not None  # at-least: never out where the reference is ok
    assert retire_limited(caps) and retire_limited(at_least)
    assert not retire_limited(Capabilities(operations=ops, observations={Part.OUTCOME: "exact"}))
    assert caps.mode(Part.OUTCOME) is Comparison.RETIRES
    with pytest.raises(ValueError, match="outcome only"):
        Capabilities(operations=ops, observations={Part.OUTCOME: "retires", Part.TABLES: "retires"})
    with pytest.raises(ValueError, match="needs 'close'"):
        Capabilities(operations=ops[:3], observations={Part.OUTCOME: "retires"})
