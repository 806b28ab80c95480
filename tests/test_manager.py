"""The reference manager: life of requests, floors in action, failures that change nothing."""

from __future__ import annotations

import attrs
import pytest

from swafloor.reference import (
    AttentionLayer,
    Config,
    ConfigError,
    Manager,
    ReleaseOrder,
    RequestError,
    RequestState,
    Semantics,
    Shortfall,
    SsmLayer,
    build_layout,
    live_blocks,
    sink_blocks_for,
    resize_peak,
    swa_floor,
    transition_peak,
    worst_case_history,
)

from . import brute


def swa(t, window, sinks=0, **kw):
    return Config(tokens_per_block=t, layers=[AttentionLayer(window=window, sink_tokens=sinks)], **kw)


def decode(m, rid, steps):
    """Decode steps from the current history; returns the history of the first failure, or None."""
    for _ in range(steps):
        h = m.history_of(rid)
        if not m.resize(rid, h + 1, h):
            return h
        m.commit(rid, 1)
        m.check()
    return None


# ------------------------------------------------------------------ upstream figures (facts §1.2-1.3)
def test_upstream_min_slot_figures():
    assert build_layout(swa(32, 128, sinks=1)).min_slots == (6,)
    assert build_layout(swa(32, 32)).min_slots == (2,)
    shared = Config(32, [AttentionLayer(32), AttentionLayer(None)], pool_groups=[0, 0])
    assert build_layout(shared).min_slots == (4,)


def test_mixed_config_figures():
    layers = [AttentionLayer(8), AttentionLayer(64), AttentionLayer(128), AttentionLayer(None), SsmLayer()]
    assert build_layout(Config(32, layers)).min_slots == (2, 3, 5, 5, 1)
    assert build_layout(Config(32, layers, pool_groups=[0] * 5)).min_slots == (16,)
    assert build_layout(Config(16, layers)).min_slots == (2, 5, 9, 9, 1)
    assert build_layout(Config(16, layers, pool_groups=[0] * 5)).min_slots == (26,)
    assert build_layout(Config(16, layers, floor_rule="legacy")).min_slots == (1,) * 5


def test_layers_share_life_cycles_by_window_and_sink_blocks():
    layout = build_layout(
        Config(4, [AttentionLayer(8, 1), AttentionLayer(8, 3), AttentionLayer(8, 5), SsmLayer(), SsmLayer()])
    )
    assert layout.layer_life_cycle == (0, 0, 1, 2, 2)  # sinks 1 and 3 are both one block at t = 4


def test_bump_raises_slots_to_the_minimum():
    layout = build_layout(swa(4, 8, slots=[1], below_minimum="bump"))
    assert layout.slots == (3,) and layout.bumped == (0,)
    with pytest.raises(ConfigError, match=r"slots\[0\]=1"):
        swa(4, 8, slots=[1])


# ------------------------------------------------------------------ the deadlock and its fix
def test_legacy_floor_deadlocks_where_the_window_first_spans_two_blocks():
    t = window = 4
    m = Manager(swa(t, window, floor_rule="legacy"))
    m.create("r")
    assert m.resume("r")
    before_fail = None
    failed = decode(m, "r", 20)
    first_straddle = next(h for h in range(100) if len(brute.live_set(h, h + 1, t, window, 0)) == 2)
    assert failed == first_straddle == 4
    before_fail = m.snapshot()
    outcome = m.resize("r", 5, 4)
    assert not outcome and outcome.shortfalls[0].lacking == 1
    assert m.snapshot() == before_fail


@pytest.mark.parametrize("t,window,sinks", [(4, 4, 0), (1, 1, 0), (3, 7, 2), (16, 33, 17), (8, 64, 1), (2, 5, 0)])
def test_fixed_floor_serves_one_request_for_ten_windows(t, window, sinks):
    m = Manager(swa(t, window, sinks))
    m.create("r")
    assert m.resume("r")
    assert decode(m, "r", 10 * window) is None
    assert m.peak_used(0) == swa_floor(t, window, sink_blocks_for(sinks, t))


@pytest.mark.parametrize("n_requests", [1, 2, 5])
@pytest.mark.parametrize("t,window,sinks", [(4, 4, 0), (3, 7, 2), (4, 5, 0)])
def test_n_floors_serve_n_requests_at_aligned_worst_cases(n_requests, t, window, sinks):
    floor = swa_floor(t, window, sink_blocks_for(sinks, t))
    m = Manager(swa(t, window, sinks, slots=[n_requests * floor]))
    ids = [f"r{i}" for i in range(n_requests)]
    for rid in ids:
        m.create(rid)
        assert m.resume(rid)
    for _ in range(4 * window + 3 * t):  # all requests in lockstep: their worst cases coincide
        for rid in ids:
            assert decode(m, rid, 1) is None
    assert m.peak_used(0) == n_requests * floor


def test_one_slot_short_of_n_floors_fails_n_requests():
    t, window = 4, 5
    floor = swa_floor(t, window, 0)
    m = Manager(swa(t, window, slots=[3 * floor - 1]))
    ids = ["r0", "r1", "r2"]
    for rid in ids:
        m.create(rid)
        m.resume(rid)
    failures = [decode(m, rid, 1) for _ in range(worst_case_history(t, window, 0) + 1) for rid in ids]
    assert any(f is not None for f in failures)


# ------------------------------------------------------------------ transients
@pytest.mark.parametrize("t", [1, 2, 3, 4, 5, 8])
def test_resize_peak_matches_transition_peak(t):
    for window in range(1, 14):
        for sinks in (0, 1, t + 1):
            s = sink_blocks_for(sinks, t)
            for order, hold in (("release-first", False), ("hold-until-return", True)):
                for h0 in range(0, 3 * window + 2 * t):
                    for dc, dh, dn in ((1, 1, 1), (1, 1, 2), (2, 2, 0), (1, 3, 1), (0, 0, 4), (5, 2, 0), (0, 2 * t, 1)):
                        c0, h1 = h0 + dc, h0 + dh
                        c1 = h1 + dn
                        m = Manager(swa(t, window, sinks, slots=[100]), release_order=order)
                        m.create("r")
                        m.resume("r")
                        m.resize("r", c0, h0)
                        m.reset_peaks()
                        assert m.resize("r", c1, h1)
                        m.check()
                        peak = resize_peak(h0, c0, h1, c1, t, window, s, hold)
                        before = live_blocks(h0, c0, t, window, s)
                        case = (t, window, sinks, order, h0, c0, h1, c1)
                        assert m.peak_used(0) == max(before, peak), case
                        if c0 >= h1:
                            assert transition_peak(h0, h1, c1, t, window, s, hold) == peak, case


def test_history_in_resize_needs_one_more_slot_when_upstream_holds_stale_blocks():
    t, window = 4, 5  # (W - 1) % t == 0
    for order, ok in (("release-first", True), ("hold-until-return", False)):
        m = Manager(swa(t, window), release_order=order)
        m.create("r")
        m.resume("r")
        results = [bool(m.resize("r", h + 1, h)) for h in range(40)]
        assert all(results) is ok, order


def test_first_resume_after_reuse_holds_a_copy_slot():
    t, window = 4, 6
    s = 0
    for k in range(1, 30):
        m = Manager(swa(t, window, slots=[50]))
        m.create("r", reused_history=k)
        m.reset_peaks()
        assert m.resume("r")
        m.check()
        expected = live_blocks(k, k, t, window, s) + (1 if k % t else 0)
        assert m.peak_used(0) == expected, k
        m.suspend("r")
        m.reset_peaks()
        assert m.resume("r")  # a later resume copies nothing
        assert m.peak_used(0) == live_blocks(k, k, t, window, s)


def test_out_of_slots_on_resume_keeps_request_suspended():
    m = Manager(swa(4, 4, slots=[2]))
    m.create("a")
    m.create("b", reused_history=6)
    m.resume("a")
    m.resize("a", 7, 6)
    before = m.snapshot()
    outcome = m.resume("b")
    assert not outcome and outcome.shortfalls[0].pool_group == 0
    assert m.snapshot() == before and m.state_of("b") is RequestState.SUSPENDED


# ------------------------------------------------------------------ lifecycle and snapshots
def test_suspend_resume_close_and_snapshot_equality():
    cfg = Config(4, [AttentionLayer(6, 2), AttentionLayer(None), SsmLayer()], slots=[10, 20, 2])
    a, b = Manager(cfg), Manager(cfg)
    for m in (a, b):
        m.create("x")
        m.resume("x")
        m.resize("x", 13, 12)
        m.commit("x", 1)
    assert a.snapshot() == b.snapshot()
    snap = a.snapshot().requests[0]
    assert snap.tables[0].dense() == (0, None, 2, 3)  # sink block 0, block 1 stale, window blocks 2-3
    assert snap.tables[1].dense() == (0, 1, 2, 3) and snap.tables[2].dense() == (0,)
    a.suspend("x")
    a.check()
    assert a.snapshot().pools == tuple(type(p)(p.total, p.total) for p in a.snapshot().pools)
    assert a.snapshot() != b.snapshot()
    assert a.resume("x")
    assert a.snapshot() == b.snapshot()
    a.close("x")
    a.check()
    assert a.snapshot().requests == () and a.state_of("x") is RequestState.CLOSED
    assert "request 'x': closed" in repr(a)


def test_full_attention_and_ssm_pools():
    cfg = Config(4, [AttentionLayer(None), SsmLayer()], slots=[3, 1])
    m = Manager(cfg)
    m.create("r")
    m.resume("r")
    assert decode(m, "r", 12) is None  # 12 tokens fill 3 blocks
    outcome = m.resize("r", 13, 12)
    assert not outcome and [s.pool_group for s in outcome.shortfalls] == [0]


# ------------------------------------------------------------------ bad input: typed error, state intact
BAD_CONFIGS = [
    (dict(tokens_per_block=0, layers=[AttentionLayer(4)]), "tokens_per_block=0"),
    (dict(tokens_per_block=-3, layers=[AttentionLayer(4)]), "tokens_per_block=-3"),
    (dict(tokens_per_block="4", layers=[AttentionLayer(4)]), "tokens_per_block='4'"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(0)]), r"layers\[0\].window=0"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(-1)]), r"layers\[0\].window=-1"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4, -1)]), r"layers\[0\].sink_tokens=-1"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4), AttentionLayer(None, 2)]), r"layers\[1\].sink_tokens=2"),
    (dict(tokens_per_block=4, layers=[]), "layers=()"),
    (dict(tokens_per_block=4, layers=[3]), r"layers\[0\]=3"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4)], pool_groups=[1]), "pool_groups"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4)], pool_groups=[0, 0]), "pool_groups"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4)], slots=[5, 5]), "slots"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4)], slots=[-1]), r"slots\[0\]=-1"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4)], floor_rule="newest"), "floor_rule='newest'"),
    (dict(tokens_per_block=4, layers=[AttentionLayer(4)], below_minimum="x"), "below_minimum='x'"),
]


@pytest.mark.parametrize("kwargs,message", BAD_CONFIGS)
def test_bad_config_raises_config_error_naming_field_and_value(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Config(**kwargs)


@pytest.mark.parametrize(
    "data,field",
    [
        ([], "config"),
        ({"layers": []}, "config.tokens_per_block"),
        ({"tokens_per_block": 4}, "config.layers"),
        ({"tokens_per_block": 4, "layers": [{"kind": "mlp"}]}, r"config.layers\[0\]"),
        ({"tokens_per_block": 4, "layers": [{"kind": "attention", "widow": 3}]}, r"config.layers\[0\]"),
        ({"tokens_per_block": 4, "layers": [{"kind": "ssm"}], "colour": 1}, "config.colour"),
        ({"tokens_per_block": 4, "layers": [{"kind": "ssm"}], "slots": 3}, "config.slots"),
        ({"tokens_per_block": 4, "layers": [{"kind": "ssm"}], "floor_rule": "x"}, "config.floor_rule"),
    ],
)
def test_malformed_config_dicts(data, field):
    with pytest.raises(ConfigError, match=field):
        Config.from_dict(data)


def test_config_round_trips_through_dict():
    cfg = Config(8, [AttentionLayer(9, 3), AttentionLayer(None), SsmLayer()], pool_groups=[0, 1, 0],
                 slots=[10, 4], floor_rule="legacy", below_minimum="bump")
    assert Config.from_dict(cfg.to_dict()) == cfg


def _active_manager():
    m = Manager(swa(4, 6, 1, slots=[8]))
    m.create("a")
    m.resume("a")
    m.resize("a", 9, 8)
    m.create("s")
    m.create("c")
    m.close("c")
    return m


BAD_OPS = [
    (lambda m: m.resize("a", 9, 7), "history=7"),  # backwards
    (lambda m: m.resize("a", 8, 9), "capacity=8"),  # capacity below history
    (lambda m: m.resize("a", -1, 0), "capacity=-1"),
    (lambda m: m.resize("a", 10, -2), "history=-2"),
    (lambda m: m.resize("a", 10.5), "capacity=10.5"),
    (lambda m: m.resize("a", True), "capacity=True"),
    (lambda m: m.resize("zz", 10), "request_id='zz'"),
    (lambda m: m.resize("s", 10), "state='suspended'"),
    (lambda m: m.resize("c", 10), "state='closed'"),
    (lambda m: m.commit("a", 2), "tokens=2"),  # past capacity 9 from history 8
    (lambda m: m.commit("a", -1), "tokens=-1"),
    (lambda m: m.commit("c", 1), "state='closed'"),
    (lambda m: m.commit("s", 0), "state='suspended'"),
    (lambda m: m.suspend("s"), "state='suspended'"),
    (lambda m: m.suspend("c"), "state='closed'"),
    (lambda m: m.resume("a"), "state='active'"),
    (lambda m: m.resume("c"), "state='closed'"),
    (lambda m: m.close("c"), "state='closed'"),
    (lambda m: m.close("nobody"), "request_id='nobody'"),
    (lambda m: m.create("a"), "request_id='a'"),
    (lambda m: m.create("c"), "request_id='c'"),
    (lambda m: m.create("n", reused_history=-4), "reused_history=-4"),
]


@pytest.mark.parametrize("op,message", BAD_OPS)
def test_bad_operations_raise_request_error_and_change_nothing(op, message):
    m = _active_manager()
    before, text = m.snapshot(), repr(m)
    with pytest.raises(RequestError, match=message):
        op(m)
    assert m.snapshot() == before and repr(m) == text
    m.check()


def test_first_resume_after_reuse_copies_the_ssm_state():
    cfg = Config(4, [AttentionLayer(6), SsmLayer()])
    assert build_layout(cfg).min_slots == (3, 1)
    m = Manager(cfg)
    m.create("r", reused_history=8)  # 8 % 4 == 0: no attention copy, but the SSM snapshot is copied
    outcome = m.resume("r")
    assert not outcome and outcome.shortfalls == (Shortfall(1, 2, 1),)
    m = Manager(Config(4, [AttentionLayer(6), SsmLayer()], slots=[3, 2]))
    m.create("r", reused_history=8)
    assert m.resume("r") and m.peak_used(1) == 2 and m.peak_used(0) == live_blocks(8, 8, 4, 6, 0)
    m.check()


def test_check_catches_broken_invariants():
    """check() is not vacuous: each kind of corruption is reported."""

    def fresh():
        m = Manager(swa(4, 6, 1, slots=[8]))
        m.create("a")
        m.resume("a")
        m.resize("a", 21, 20)  # blocks 1 and 2 stale; 0 (sink) and 3-5 live
        m.check()
        assert sorted(m.record_of("a").held[0]) == [0, 3, 4, 5]
        return m

    m = fresh()  # a stale block kept
    req = m.record_of("a")
    req.held[0][1] = m.pool_of(0).take()
    with pytest.raises(AssertionError, match="must hold exactly"):
        m.check()
    m = fresh()  # a live block dropped without freeing its slot
    req = m.record_of("a")
    req.held[0].pop(max(req.held[0]))
    with pytest.raises(AssertionError, match="must hold exactly"):
        m.check()
    m = fresh()  # a slot both free and owned
    slot = next(iter(m.record_of("a").held[0].values()))
    m.pool_of(0).returned.append(slot)
    with pytest.raises(AssertionError, match="both free and owned|listed|twice"):
        m.check()
    m = fresh()  # two blocks share a slot
    held = m.record_of("a").held[0]
    first, second = sorted(held)[:2]
    m.pool_of(0).give(held[second])
    held[second] = held[first]
    with pytest.raises(AssertionError, match="owned twice"):
        m.check()


# ----------------------------------------------------------------------------- issue 16: bad input
def test_manager_without_a_config_names_the_argument():
    with pytest.raises(ConfigError) as info:
        Manager(None)
    assert info.value.field == "config" and "must be a Config" in str(info.value)


@pytest.mark.parametrize("order", ["RELEASE-FIRST", "", 3, ["release-first"]])
def test_an_unknown_release_order_names_the_argument(order):
    with pytest.raises(ConfigError) as info:
        Manager(swa(4, 8), release_order=order)
    assert info.value.field == "release_order" and "release-first" in str(info.value)


def test_no_release_order_argument_reads_the_semantics():
    """None (the default) takes the order the config's semantics name; an argument overrides it."""
    hold = attrs.evolve(swa(4, 8), semantics=Semantics(release_order="hold-until-return"))
    assert Manager(hold).release_order is ReleaseOrder.HOLD_UNTIL_RETURN
    assert Manager(hold, release_order=None).release_order is ReleaseOrder.HOLD_UNTIL_RETURN
    assert Manager(hold, release_order="release-first").release_order is ReleaseOrder.RELEASE_FIRST
    assert Manager(swa(4, 8)).release_order is ReleaseOrder.RELEASE_FIRST


def test_a_snapshot_costs_the_held_blocks_not_the_history():
    """Issue 16: a request reusing 10**12 tokens listed every block of its capacity (MemoryError)."""
    from swafloor.reference import BlockTable

    m = Manager(Config(4, [AttentionLayer(window=8, sink_tokens=4), AttentionLayer(None), SsmLayer()]))
    m.create("r", reused_history=10**12)
    suspended = m.snapshot().requests[0]
    assert suspended.tables == (BlockTable(250_000_000_000), BlockTable(250_000_000_000), BlockTable(1))
    w = Manager(swa(4, 8, sinks=4, slots=[10]))
    w.create("r", reused_history=10**12 + 2)
    assert w.resume("r")
    table = w.snapshot().requests[0].tables[0]
    live = live_blocks(10**12 + 2, 10**12 + 2, 4, 8, 1)
    assert table.length == 250_000_000_001 and table.held_count == live
    assert table.held == ((0, 1), (250_000_000_001 - (live - 1), 250_000_000_001))
    w.check()


def test_block_tables_equal_their_dense_form():
    from swafloor.reference import BlockTable

    dense = (0, None, 2, 3, None)
    table = BlockTable.from_dense(dense)
    assert table == BlockTable(5, ((0, 1), (2, 4))) == BlockTable.from_blocks(5, {3, 0, 2})
    assert table.dense() == dense and list(table.blocks()) == [0, 2, 3] and table.held_count == 3
    assert table.truncated(3) == BlockTable(3, ((0, 1), (2, 3)))
    for bad in [(1,), (0, 0), (None, "1")]:
        with pytest.raises(ValueError):
            BlockTable.from_dense(bad)
    for held in [((2, 1),), ((0, 1), (1, 2)), ((0, 6),), ((3, 4), (0, 1))]:
        with pytest.raises(ValueError):
            BlockTable(5, held)
