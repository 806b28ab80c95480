"""``Semantics.preallocate_tokens`` (issue 33): vLLM 0.8.3's pre-allocation, a layer of the reference
(reference/preallocation.py).

The expected values are vLLM 0.8.3's, read from its ``allocate_slots`` (a step needing ``n > 0`` blocks
takes ``min(n + ceil(64 / t), free)``) and from what the release showed in the evidence traces
(tests/regressions/vllm-0.8.3-preallocation*.json: the engine's tables), written here by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swafloor.proofs import mutations
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics

ROOT = Path(__file__).resolve().parent.parent
VLLM_083 = dict(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, preallocate_tokens=64)


def _held(m: Manager, rid: str) -> tuple[int, tuple]:
    table = next(r for r in m.snapshot().requests if r.request_id == rid).tables[0]
    return table.length, table.held


def test_the_evidence_traces_hold_what_vllm_0_8_3_held():
    """A 3-token step on t = 2 in a pool of 6 holds all 6 blocks (not 2); a first resume loading one token
    (W = 2, t = 1, the floor's 2 slots, the load as new tokens) holds blocks 0 and 1."""
    first = json.loads((ROOT / "tests/regressions/vllm-0.8.3-preallocation.json").read_text())
    assert first["divergence"]["backend"] == [0, 1, 2, 3, 4, 5]  # the engine's table, as recorded
    m = Manager(Config(2, [AttentionLayer(4)], slots=[6], semantics=Semantics(**VLLM_083)))
    m.create("r0")
    assert m.resume("r0").ok and m.resize("r0", 3, 0).ok
    m.check()
    assert _held(m, "r0") == (6, ((0, 6),))
    m = Manager(Config(1, [AttentionLayer(2)], semantics=Semantics(**VLLM_083, load_holds_prefix=True)))
    m.create("r0", reused_history=1)
    assert m.resume("r0").ok
    m.check()
    assert _held(m, "r0") == (2, ((0, 2),))


def test_a_decode_run_takes_blocks_only_past_its_table():
    """t = 2, 40 slots, one window of 4: the first step takes 1 + 32 blocks; the steps within them take
    nothing and free the blocks that leave the window; the step past them takes 1 + 32 of what is free."""
    m = Manager(Config(2, [AttentionLayer(4)], slots=[40], semantics=Semantics(**VLLM_083)))
    m.create("r0")
    assert m.resume("r0").ok
    lengths = []
    for h in range(0, 68):
        assert m.resize("r0", h + 1, h).ok
        m.check()
        m.commit("r0", 1)
        lengths.append(_held(m, "r0")[0])
    assert lengths[0] == lengths[65] == 33 and lengths[66] == 66  # capacity 67 needs block 33: 1 + 32 more
    assert _held(m, "r0")[1] == ((32, 66),)  # freed on h = 67 (W = 4: tokens 64..67 live): blocks 0..31 left


def test_the_gate_is_the_spec_s_and_the_cost_falls_on_a_waiting_request():
    """Full attention, t = 1, 10 slots: a step of 3 blocks takes min(3 + P, 10); a second request's step,
    which the spec admits (3 + b <= 10), is out of slots exactly when 3 + b + P > 10 (the cost theorem)."""
    for option, held, second, ok in ((0, 3, 4, True), (4, 7, 3, True), (4, 7, 4, False), (64, 10, 1, False)):
        m = Manager(Config(1, [AttentionLayer(None)], slots=[10], semantics=Semantics(preallocate_tokens=option)))
        for rid in ("a", "b"):
            m.create(rid)
            assert m.resume(rid).ok
        assert m.resize("a", 3, 0).ok
        assert _held(m, "a")[0] == held
        assert m.resize("b", second, 0).ok is ok, (option, second)
        m.check()


def test_suspension_drops_the_table():
    m = Manager(Config(1, [AttentionLayer(None)], slots=[10], semantics=Semantics(**VLLM_083)))
    m.create("a")
    assert m.resume("a").ok and m.resize("a", 2, 0).ok
    assert _held(m, "a")[0] == 10
    m.suspend("a")
    m.check()
    assert m.resume("a").ok  # recompute: nothing to allocate
    assert _held(m, "a") == (0, ())
    m.check()


def test_the_option_is_a_count():
    with pytest.raises(ConfigError, match="preallocate_tokens"):
        Semantics(preallocate_tokens=-1)
    assert "preallocate_tokens" not in Semantics().to_dict()  # written only when set: older traces unchanged
    assert Semantics.from_dict({"preallocate_tokens": 64}).preallocate_tokens == 64


def test_the_seeded_bug_is_caught_at_its_step():
    """preallocation-in-tokens (64 blocks where ceil(64/2) = 32): the decode run's first step holds 40 blocks
    (all the pool has) where vLLM 0.8.3's rule holds 33."""
    bug = next(b for b in mutations.MUTATIONS if b.name == "preallocation-in-tokens")
    m = Manager(Config(2, [AttentionLayer(4)], slots=[40], semantics=Semantics(**VLLM_083)))
    m.create("r0")
    assert m.resume("r0").ok
    with mutations.applied(bug):
        assert m.resize("r0", 1, 0).ok
    assert _held(m, "r0")[0] == 40 != 33
