"""Prefix sharing in the fuzz harness (issue 19): traces carry share_with, the oracle models sharing on
its own and agrees with the reference, the campaign makes hits and prints the hit rate, integrity
allows exactly the modelled sharing."""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.identity import integrity
from swafloor.fuzz.lockstep import Lockstep
from swafloor.fuzz.runner import PROFILES, format_report, run_campaign
from swafloor.fuzz.trace import Step, Trace, TraceError, from_dict, to_dict
from swafloor.reference import AttentionLayer, Config, Semantics, SlotMap

SHARING = Semantics(prefix_sharing=True)


def test_a_step_on_a_prefix_round_trips_and_bad_share_with_is_a_trace_error():
    config = Config(4, [AttentionLayer(window=5)], semantics=SHARING)
    trace = Trace(config=config, steps=(Step.create("r0"), Step.create("r1", 3, "r0")), backend="oracle-sharing")
    data = to_dict(trace)
    assert data["steps"][1] == {"op": "create", "request": "r1", "reused_history": 3, "share_with": "r0"}
    assert "share_with" not in data["steps"][0]
    assert from_dict(data) == trace
    data["steps"][1]["share_with"] = 7
    with pytest.raises(TraceError) as info:
        from_dict(data)
    assert info.value.field == "steps[1].share_with"
    data["steps"][1]["op"] = "resume"
    del data["steps"][1]["reused_history"]
    data["steps"][1]["share_with"] = "r0"
    with pytest.raises(TraceError, match="unknown field"):
        from_dict(data)


def _lock(config):
    return Lockstep(config, resolve("oracle-sharing").factory, resolve("reference").factory,
                    resolve("oracle-sharing").capabilities)


def test_oracle_and_reference_agree_on_a_hit_a_late_release_and_a_second_resume():
    config = Config(2, [AttentionLayer(window=3), AttentionLayer()], slots=[12, 12], semantics=SHARING)
    lock = _lock(config)
    steps = [Step.create("a"), Step.resume("a")]
    for h in range(9):
        steps += [Step.resize("a", h + 1, h), Step.commit("a", 1)]
    steps += [Step.create("b", 9, "a"), Step.resume("b"), Step.resize("a", 12, 11), Step.commit("a", 1),
              Step.suspend("a"), Step.resume("a"), Step.close("b"), Step.close("a")]
    for step in steps:
        divergence, result = lock.apply(step)
        assert divergence is None, divergence.describe()
        if step == Step.resume("b"):
            used = [p.total - p.free for p in lock.reference.observe().pools]
            assert used == [2 + 1, 5 + 1]  # SWA: a holds 2, b only its partial block; full: 4 shared


def test_the_sharing_campaign_hits_and_prints_the_hit_rate():
    result = run_campaign("oracle-sharing", examples=200, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None
    assert result.on_prefix > 0 and result.hits > 0 and result.created_sharing >= result.on_prefix
    report = format_report(result)
    assert "requests created under prefix sharing hit a shared block" in report
    assert result.to_dict()["hits"] == result.hits


def test_integrity_allows_only_the_modelled_sharing():
    one = SlotMap({"a": ({0: 0, 1: 1},), "b": ({1: 1},)}, (((2, 3),),))
    assert integrity(one, (3,), (0,), sharing=True) is None
    assert integrity(one, (3,), (0,))[0] == "slots.pool[0].slot[1]"  # without sharing: one slot, two blocks
    other_block = SlotMap({"a": ({0: 0, 1: 1},), "b": ({0: 1},)}, (((2, 3),),))
    assert integrity(other_block, (3,), (0,), sharing=True)[0] == "slots.pool[0].slot[1]"
    same_request = SlotMap({"a": ({0: 0, 1: 0},)}, (((1, 3),),))
    assert integrity(same_request, (3,), (0,), sharing=True)[0] == "slots.pool[0].slot[0]"
