"""The manager models the theorems talk about, and the replays of their counterexamples: the
reference manager's observed peaks equal the formulas the theorems use, and a replay confirms only a
real failure."""

from __future__ import annotations

import pytest

from swafloor.proofs import replay
from swafloor.reference import (
    AttentionLayer,
    Config,
    Manager,
    first_resume_peak,
    live_blocks,
    swa_floor,
    transition_peak,
)


def _manager(t, w, s, slots, release_order="release-first"):
    config = Config(tokens_per_block=t, layers=[AttentionLayer(window=w, sink_tokens=s * t)], slots=(slots,))
    return Manager(config, release_order=release_order)


@pytest.mark.parametrize("t", [1, 2, 3, 4])
def test_first_resume_peak_is_what_the_manager_holds(t):
    for w in range(1, 10):
        for s in range(2):
            for h in range(0, 3 * (w + t) + s * t):
                m = _manager(t, w, s, slots=swa_floor(t, w, s) + 2)
                m.create("r", reused_history=h)
                assert m.resume("r")
                m.check()
                assert m.peak_used(0) == first_resume_peak(h, h, t, w, s), (t, w, s, h)


@pytest.mark.parametrize("order,hold", [("release-first", False), ("hold-until-return", True)])
def test_one_call_step_peak_is_transition_peak(order, hold):
    for t in (1, 2, 3, 5):
        for w in range(1, 12):
            for s in range(2):
                m = _manager(t, w, s, slots=swa_floor(t, w, s) + 2, release_order=order)
                m.create("r")
                assert m.resume("r") and m.resize("r", 1, 0)
                for h in range(0, 2 * (w + t) + s * t):
                    m.reset_peaks()
                    assert m.resize("r", h + 2, h + 1)
                    m.check()
                    before = live_blocks(h, h + 1, t, w, s)  # what the request held going in
                    expected = max(before, transition_peak(h, h + 1, h + 2, t, w, s, hold))
                    assert m.peak_used(0) == expected, (t, w, s, h)


@pytest.mark.parametrize(
    "fn,cex",
    [
        (replay.legacy_deadlock, {"t": 4, "W": 4, "S": 0, "h": 4}),  # window [1, 4] straddles
        (replay.multi_token_step, {"t": 4, "W": 4, "S": 0, "h": 2, "n": 8}),
        (replay.full_attention_short, {"t": 4, "W": 5, "S": 0, "m": 2, "h": 8}),  # F = 3 at h = (F-1)*t
        (replay.in_flight_short, {"t": 3, "W": 16, "S": 0, "h": 18}),  # issue 7's example: needs 7, floor 6
        (replay.same_call_transient, {"t": 4, "W": 5, "S": 0, "h": 7}),
        (replay.resume_copy, {"t": 4, "W": 4, "S": 1, "h": 9}),
    ],
)
def test_replays_confirm_real_failures(fn, cex):
    r = fn(cex)
    assert r.confirmed, r
    assert "out of slots" in r.summary and any("out of slots" in line for line in r.trace)


@pytest.mark.parametrize(
    "fn,cex",
    [
        (replay.legacy_deadlock, {"t": 1, "W": 1, "S": 0, "h": 5}),  # W = 1 without sinks needs 1 slot
        (replay.multi_token_step, {"t": 8, "W": 2, "S": 0, "h": 0, "n": 2}),  # one block holds both tokens
        (replay.full_attention_short, {"t": 4, "W": 5, "S": 0, "m": 3, "h": 8}),  # m = F: it fits
        (replay.full_attention_short, {"t": 4, "W": 5, "S": 0, "m": 2, "h": 7}),  # before the first floor history
        (replay.in_flight_short, {"t": 3, "W": 15, "S": 0, "h": 30}),  # (W-1) % t != 0: fits
        (replay.same_call_transient, {"t": 4, "W": 4, "S": 0, "h": 9}),  # (W-1) % t != 0: no transient
        (replay.resume_copy, {"t": 4, "W": 6, "S": 0, "h": 9}),  # (W-2) % t == 0: the copy fits
        (replay.resume_copy, {"t": 4, "W": 4, "S": 0, "h": 8}),  # block-aligned history: no copy
    ],
)
def test_replays_do_not_confirm_what_does_not_fail(fn, cex):
    r = fn(cex)
    assert not r.confirmed and r.summary.startswith("NOT REPRODUCED"), r


@pytest.mark.parametrize("t", [1, 3, 4])
def test_pool_group_tight_in_the_manager(t):
    """pool-group-tight on the manager: three SWA life cycles and full attention in one pool group; at
    h = (max F - 1) * t a lone request holds exactly the sum of the minimums, and one slot less fails."""
    from swafloor.reference import floors

    geometry = [(5, 0), (9, 1), (2, 2)]  # (W, S)
    layers = [AttentionLayer(window=w, sink_tokens=s * t) for w, s in geometry] + [AttentionLayer()]
    minimums = [swa_floor(t, w, s) for w, s in geometry]
    total = sum(minimums) + floors.full_attention_floor(max(minimums))
    h = (max(minimums) - 1) * t
    for slots, fits in ((total, True), (total - 1, False)):
        config = Config(tokens_per_block=t, layers=layers, pool_groups=(0, 0, 0, 0), slots=(slots,),
                        floor_rule="legacy")
        m = Manager(config)
        m.create("r")
        assert m.resume("r")
        for k in range(h):
            assert m.resize("r", k + 1, k)
            m.commit("r", 1)
        assert bool(m.resize("r", h + 1, h)) is fits, (t, slots)
        if fits:
            m.check()
            assert m.snapshot().pools[0].free == 0


def test_a_patched_stale_range_reaches_the_manager():
    """Mutations patch module attributes; the manager looks stale_range up through its module, so a
    patched one changes what the manager holds."""
    from swafloor.proofs import mutations

    def held(m):
        m.create("r")
        assert m.resume("r")
        for k in range(12):
            assert m.resize("r", k + 1, k)
            m.commit("r", 1)
        return m.snapshot().pools[0].free

    before = held(_manager(2, 4, 0, slots=20))
    (mutation,) = [x for x in mutations.MUTATIONS if x.name == "release-one-too-many"]
    with mutations.applied(mutation):
        during = held(_manager(2, 4, 0, slots=20))
    assert held(_manager(2, 4, 0, slots=20)) == before
    assert during > before  # one block more released: one slot more free


def test_post_fix_replays_below_the_minimum_do_not_claim_the_legacy_rule():
    """A post-fix claim's replay builds its short pool under the legacy rule only so the manager
    accepts it; its trace says the pool is below the fixed minimum instead of floor_rule=legacy."""
    from swafloor.proofs import replay

    r = replay.in_flight_short({"t": 1, "W": 1, "S": 0, "h": 1})
    assert r.confirmed and "floor_rule=legacy" not in r.trace[0]
    assert "below the fixed rule's minimum (2,)" in r.trace[0]  # in_flight_floor(1, 1, 0, 1) = 2
    r = replay.full_attention_short({"t": 1, "W": 2, "S": 0, "m": 1, "h": 1})
    assert "floor_rule=legacy" not in r.trace[0] and "minimum (4,)" in r.trace[0]  # 2 + max(1, 2)
    assert "floor_rule=legacy" in replay.legacy_deadlock({"t": 1, "W": 2, "S": 0, "h": 1}).trace[0]
