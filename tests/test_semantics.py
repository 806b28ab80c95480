"""The reference's modelled semantics (what real engines do differently) and the range-based manager:
tokens in flight, lazy freeing, suspend modes, first-resume copies, string ids, pools of any size."""

from __future__ import annotations

import itertools

import pytest

from swafloor.reference import (
    AttentionLayer,
    Config,
    ConfigError,
    FreeStale,
    Manager,
    RequestError,
    RequestState,
    Semantics,
    SsmLayer,
    SuspendMode,
    in_flight_floor,
    swa_floor,
    worst_case_history,
)

from . import brute
from .test_manager import decode as decode_steps, swa


# ------------------------------------------------------------------ the manager against a brute force
@pytest.mark.parametrize("t", [1, 2, 3, 4, 7])
def test_required_blocks_equal_the_token_level_brute_force_with_tokens_in_flight(t):
    for window, sinks, k in itertools.product(range(1, 12), (0, 1, t + 1), (0, 1, 2, 5)):
        m = Manager(swa(t, window, sinks, semantics=Semantics(in_flight_tokens=k)))
        for h in range(0, 3 * (window + t) + k):
            for c in (h, h + 1, h + 3):
                # with k in flight, blocks are released on history h - k, and every allocated block
                # past it is held: the brute force's live set at max(0, h - k) with capacity c
                expected = sorted(brute.live_set(max(0, h - k), c, t, window, sinks) | (
                    {b for b in range(-(-c // t)) if b * t >= max(0, h - k)}))
                assert list(m.required_blocks(0, h, c)) == expected, (t, window, sinks, k, h, c)


# ------------------------------------------------------------------ tokens in flight
def test_one_token_in_flight_needs_more_than_the_floor():
    """The issue's example: W = 16, t = 3, k = 1 needs 7 blocks against the floor 6."""
    assert swa_floor(3, 16, 0) == 6 and in_flight_floor(3, 16, 0, 1) == 7
    short = Manager(swa(3, 16, slots=[6], semantics=Semantics(in_flight_tokens=1), below_minimum="bump"))
    assert short.layout.min_slots == (7,) and short.layout.slots == (7,)
    undersized = Manager(swa(3, 16, slots=[6], floor_rule="legacy", semantics=Semantics(in_flight_tokens=1)))
    undersized.create("r")
    undersized.resume("r")
    assert decode_steps(undersized, "r", 200) is not None  # a lone decode runs out at the floor


@pytest.mark.parametrize("t,window,sinks,k", [(3, 16, 0, 1), (4, 4, 0, 2), (4, 5, 5, 3), (1, 3, 0, 1), (8, 9, 1, 4)])
def test_in_flight_floor_serves_and_is_reached(t, window, sinks, k):
    m = Manager(swa(t, window, sinks, semantics=Semantics(in_flight_tokens=k)))
    floor = m.layout.min_slots[0]
    m.create("r")
    m.resume("r")
    assert decode_steps(m, "r", worst_case_history(t, window, -(-sinks // t), k) + 3 * t) is None
    assert m.peak_used(0) == floor


# ------------------------------------------------------------------ lazy freeing
def test_lazy_free_keeps_stale_blocks_until_the_next_resize():
    eager = Manager(swa(4, 4, slots=[4]))
    lazy = Manager(swa(4, 4, slots=[4], semantics=Semantics(free_stale="at-allocate")))
    for m in (eager, lazy):
        m.create("r")
        m.resume("r")
        assert m.resize("r", 8, 0)
        m.commit("r", 8)  # blocks 0 is stale at h = 8 (window [5, 8])
        m.check()
    assert eager.snapshot().pools[0].free == 3 and lazy.snapshot().pools[0].free == 2
    assert lazy.snapshot().requests[0].tables[0].dense() == (0, 1)
    assert lazy.resize("r", 9, 8)  # frees block 0 first, then allocates block 2
    assert lazy.snapshot().requests[0].tables[0].dense() == (None, 1, 2)
    lazy.check()


def test_lazy_free_release_stands_when_the_allocation_fails():
    m = Manager(swa(4, 4, slots=[2], semantics=Semantics(free_stale="at-allocate")))
    m.create("r")
    m.resume("r")
    assert m.resize("r", 8, 0)
    m.commit("r", 8)
    before = m.snapshot()
    outcome = m.resize("r", 17, 8)  # needs blocks 2..4 (3 slots) but only 2 exist
    assert not outcome
    after = m.snapshot()
    assert after != before and after.requests[0].tables[0].dense() == (None, 1)  # block 0 was freed and stays freed
    assert after.requests[0].history == 8 and after.requests[0].capacity == 8
    m.check()


# ------------------------------------------------------------------ suspend modes
def test_suspend_modes():
    def run(mode):
        m = Manager(swa(4, 6, slots=[5], semantics=Semantics(suspend=mode)))
        m.create("r")
        m.resume("r")
        m.resize("r", 10, 9)
        m.suspend("r")
        m.check()
        return m

    release, recompute, keep = run("release"), run("recompute"), run("keep")
    assert release.snapshot().pools[0].free == 5 and release.capacity_of("r") == 10 and release.history_of("r") == 9
    assert recompute.snapshot().pools[0].free == 5 and recompute.capacity_of("r") == 0 and recompute.history_of("r") == 0
    assert keep.snapshot().pools[0].free == 5 - 2 and keep.state_of("r") is RequestState.SUSPENDED
    for m in (release, recompute, keep):
        held = m.snapshot().requests[0].tables
        assert m.resume("r")
        m.check()
    assert keep.snapshot().pools[0].free == 3  # resume after keep allocates nothing new
    assert [t.dense() for t in recompute.snapshot().requests[0].tables] == [()]


def test_first_resume_copy_can_be_switched_off():
    for copy, peak in ((True, 3), (False, 2)):
        m = Manager(swa(4, 5, slots=[3], semantics=Semantics(first_resume_copy=copy)))
        m.create("r", reused_history=6)
        assert m.resume("r")
        assert m.peak_used(0) == peak


def test_semantics_round_trip_and_validation():
    config = swa(4, 5, semantics=Semantics(3, "at-allocate", "keep", False))
    assert Config.from_dict(config.to_dict()) == config
    legacy_dict = config.to_dict()
    del legacy_dict["semantics"]
    assert Config.from_dict(legacy_dict).semantics == Semantics()  # traces written before it still load
    bad = [
        ({"in_flight_tokens": -1}, "config.semantics.in_flight_tokens"),
        ({"in_flight_tokens": True}, "config.semantics.in_flight_tokens"),
        ({"free_stale": "never"}, "config.semantics.free_stale"),
        ({"suspend": 3}, "config.semantics.suspend"),
        ({"first_resume_copy": 1}, "config.semantics.first_resume_copy"),
        ({"bogus": 1}, "config.semantics.bogus"),
    ]
    for fields, field in bad:
        data = config.to_dict()
        data["semantics"] = fields
        with pytest.raises(ConfigError) as info:
            Config.from_dict(data)
        assert info.value.field.endswith(field.split("config.")[1]), (fields, info.value.field)
    with pytest.raises(ConfigError):
        Config.from_dict({**config.to_dict(), "semantics": [1]})
    assert FreeStale("at-allocate") is FreeStale.AT_ALLOCATE and SuspendMode("keep") is SuspendMode.KEEP


# ------------------------------------------------------------------ ids, sizes, costs
@pytest.mark.parametrize("bad_id", [0, None, "", {"a": 1}, {"r0"}, float("nan"), b"r0", ("r",)])
def test_request_ids_must_be_strings(bad_id):
    m = Manager(swa(4, 4))
    m.create("r")
    before = m.snapshot()
    for call in (lambda: m.create(bad_id), lambda: m.resume(bad_id), lambda: m.resize(bad_id, 1, 0),
                 lambda: m.commit(bad_id, 1), lambda: m.suspend(bad_id), lambda: m.close(bad_id)):
        with pytest.raises(RequestError) as info:
            call()
        assert info.value.field == "request_id"
    assert m.snapshot() == before
    m.check()


def test_error_messages_quote_bounded_values():
    m = Manager(swa(4, 4))
    m.create("r")
    m.resume("r")
    with pytest.raises(RequestError) as info:
        m.resize("r", -(10**5000), 0)
    assert len(str(info.value)) < 200 and "digits" in str(info.value)
    long_id = "x" * 10**6 + "\n"
    m.create(long_id)  # any non-empty string is an id
    with pytest.raises(RequestError) as info:
        m.create(long_id)
    assert len(str(info.value)) < 300 and "\n" not in str(info.value) and "already exists" in str(info.value)


def test_pools_cost_memory_for_slots_in_use_only():
    m = Manager(swa(1, 4, slots=[10**12]))  # no free list of every slot
    m.create("r")
    m.resume("r")
    assert decode_steps(m, "r", 50) is None
    assert m.snapshot().pools[0].free == 10**12 - 3  # at rest (c = h) the window holds 3 blocks
    huge = Manager(swa(1, 10**12))  # a window of 10**12 tokens: the floor is 10**12 + 1 slots
    huge.create("r")
    huge.resume("r")
    assert decode_steps(huge, "r", 20) is None


def test_a_step_does_not_walk_the_window():
    """With W / t = 10**9 a decode step deep into the window is planned from range endpoints: a
    request resumed at a reused history of 10**9 tokens holds 10**9 live blocks, so a walk over them
    would not finish, while the steps below take microseconds each."""
    m = Manager(swa(1, 10**9, slots=[10**9 + 5]))
    m.create("r", reused_history=0)
    m.resume("r")
    assert m.resize("r", 3, 0)
    for _ in range(3):
        h = m.history_of("r")
        assert m.resize("r", h + 1, h)
        m.commit("r", 1)


# ------------------------------------------------------------------ the fast path against planning every step
class _PlanEveryStep(Manager):
    """The same manager with the no-change cache switched off through its named hook: every
    operation plans from scratch."""

    def skips_unchanged_steps(self):
        return False


def test_the_fast_path_agrees_with_planning_every_step():
    from hypothesis import given, settings, strategies as st

    layers = st.lists(
        st.one_of(
            st.builds(AttentionLayer, window=st.integers(1, 20), sink_tokens=st.integers(0, 9)),
            st.just(AttentionLayer()),
            st.just(SsmLayer()),
        ),
        min_size=1,
        max_size=3,
    )
    semantics = st.builds(
        Semantics,
        in_flight_tokens=st.integers(0, 3),
        free_stale=st.sampled_from(["at-commit", "at-allocate"]),
        suspend=st.sampled_from(["release", "recompute", "keep"]),
    )
    ops = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, 12)), max_size=60)

    @settings(max_examples=150, deadline=None, database=None, derandomize=True)
    @given(t=st.integers(1, 6), layers=layers, semantics=semantics, extra=st.integers(0, 6), ops=ops)
    def agree(t, layers, semantics, extra, ops):
        if not any(isinstance(x, AttentionLayer) for x in layers):
            layers = [AttentionLayer(window=3)] + layers
        base = Config(t, layers, semantics=semantics)
        config = Config(t, layers, semantics=semantics, slots=[m + extra for m in build_layout_min(base)])
        fast, slow = Manager(config), _PlanEveryStep(config)
        assert fast.skips_unchanged_steps() and not slow.skips_unchanged_steps()
        for m in (fast, slow):
            m.create("r0")
            m.create("r1", reused_history=5)
        for op, who, n in ops:
            rid = f"r{who % 2}"
            results = []
            for m in (fast, slow):
                try:
                    if op == 0:
                        results.append(m.resume(rid).ok)
                    elif op in (1, 2):  # decode-like and n-token steps
                        h = m.history_of(rid)
                        results.append(m.resize(rid, h + (1 if op == 1 else n), h).ok)
                    elif op == 3:
                        results.append(m.commit(rid, min(n, m.capacity_of(rid) - m.history_of(rid))))
                    elif op == 4:
                        c, h = m.capacity_of(rid), m.history_of(rid)
                        results.append(m.resize(rid, max(h + 1, c - n) if n % 2 else c + n, h + min(n, c - h)).ok)
                    else:
                        results.append(m.suspend(rid))
                except RequestError as exc:
                    results.append(exc.field)
            assert results[0] == results[1]
            assert fast.snapshot() == slow.snapshot()
            fast.check()

    agree()


def build_layout_min(config):
    from swafloor.reference import build_layout

    return build_layout(config).min_slots


def test_first_change_search_against_a_linear_scan():
    """The cache's search finds the first change of a monotone function exactly, with or without a
    (right or wrong) guess, and never evaluates at its limit."""
    import random

    from swafloor.reference.values import first_change as _first_change

    rng = random.Random(7)
    for _ in range(3000):
        x = rng.randrange(0, 50)
        change = x + rng.randrange(1, 80)
        limit = rng.choice([float("inf"), x + rng.randrange(1, 100)])

        def f(y, change=change, limit=limit):
            assert x < y < limit, (x, y, limit)
            return int(y >= change)

        expected = change if change < limit else limit
        for guess in (0, 1, rng.randrange(1, 90), change - x):
            assert _first_change(f, x, 0, limit, guess) == expected, (x, change, limit, guess)
