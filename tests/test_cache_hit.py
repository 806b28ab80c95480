"""Issue 23's model: lookahead (draft) slots, the prefix-cache hit rule with EAGLE and alignment, and
per-life-cycle block sizes, each against a token-level brute force written here (not the reference's
formulas)."""

from __future__ import annotations

import itertools
import math

import pytest

from swafloor.reference import (
    AttentionLayer, Config, ConfigError, LifeCycle, LifeCycleKind, Semantics, build_layout, floors,
)
from swafloor.reference import cache_hit


# ----------------------------------------------------------------------------- token-level brute force
def _brute_valid(L, cached, ts, windows, eagle, M, reach=None):
    """A hit of L tokens is usable: aligned to every block size, within M, and every token the first
    uncomputed token (position L) attends to, and the token L - 1, lies in a cached block of each life
    cycle; with EAGLE also every token of the block at L (recomputed by the drafter), within M."""
    if L == 0:
        return True
    if L > M or any(L % t for t in ts):
        return False
    for blocks, t, w, e in zip(cached, ts, windows, eagle):
        lo = 0 if w is None else max(0, min(L + 1 - w, L - 1))
        tokens = list(range(lo, L)) + (list(range(L, L + t)) if e else [])
        if e and L + t > (M if reach is None else reach):
            return False
        for p in tokens:
            b = p // t
            if b >= len(blocks) or not blocks[b]:
                return False
    return True


def _brute_longest(cached, ts, windows, eagle, M):
    return max(L for L in range(0, M + 1) if _brute_valid(L, cached, ts, windows, eagle, M))


def _patterns(n):
    return itertools.product((False, True), repeat=n)


@pytest.mark.parametrize("t", [1, 2, 3])
@pytest.mark.parametrize("window", [None, 1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("eagle", [False, True])
def test_longest_hit_single_life_cycle_equals_brute_force(t, window, eagle):
    for pattern in _patterns(6):
        for M in range(0, 6 * t + 2):
            got = cache_hit.longest_hit([pattern], [t], [window], eagle, M)
            assert got == _brute_longest([pattern], [t], [window], [eagle], M), (pattern, M)


@pytest.mark.parametrize("ts", [(2, 4), (2, 3), (4, 2), (3, 2)])
@pytest.mark.parametrize("windows", [(3, None), (None, 3), (5, 2), (2, 7)])
@pytest.mark.parametrize("eagle", [(False, False), (True, True), (True, False)])
def test_longest_hit_mixed_block_sizes_equals_brute_force(ts, windows, eagle):
    A = math.lcm(*ts)
    M = 12
    for p0 in _patterns(12 // ts[0] + 1):
        for p1 in _patterns(12 // ts[1] + 1):
            got = cache_hit.longest_hit([p0, p1], list(ts), list(windows), list(eagle), M)
            assert got % A == 0
            assert got == _brute_longest([p0, p1], ts, windows, eagle, M), (p0, p1)


def _runs(pattern):
    """Maximal runs of cached blocks as (r0, r1)."""
    runs, start = [], None
    for b, c in enumerate(list(pattern) + [False]):
        if c and start is None:
            start = b
        elif not c and start is not None:
            runs.append((start, b))
            start = None
    return runs


@pytest.mark.parametrize("t", [1, 2, 3])
@pytest.mark.parametrize("a", [1, 2, 3])
@pytest.mark.parametrize("window", [None, 1, 2, 4, 6])
@pytest.mark.parametrize("eagle", [0, 1])
def test_run_hit_is_the_longest_over_runs(t, a, window, eagle):
    """With one life cycle and alignment A = a*t (a second life cycle's block size folded in), the
    longest valid hit is the best run's closed form."""
    A = a * t
    for pattern in _patterns(7):
        for M in (0, 3, 7 * t, 7 * t + 1):
            runs = _runs(pattern)
            best = max([cache_hit.run_hit(r0, r1, t, window, a, eagle, M) for r0, r1 in runs], default=0)
            brute = max(L for L in range(0, M + 1) if L % A == 0
                        and _brute_valid(L, [pattern], [t], [window], [eagle], M))
            assert best == brute, (pattern, M)


def test_hit_table_null_entries_are_the_stale_blocks():
    from swafloor.reference import lifecycle

    for t, W, L in itertools.product(range(1, 5), range(2, 12), range(0, 40)):
        if L % t == 0:
            assert cache_hit.hit_null_entries(L, t, W) == lifecycle.stale_count(L, t, W, 0)
            assert cache_hit.hit_real_blocks(L, t, W) == len(
                {p // t for p in range(max(0, L + 1 - W), L)})


def test_alignment_is_the_lcm():
    assert cache_hit.alignment([2, 4]) == 4
    assert cache_hit.alignment([2, 3, 4]) == 12
    assert cache_hit.alignment([16]) == 16


# ----------------------------------------------------------------------------- lookahead slots
def _brute_decode_peak(t, W, S, in_flight, lookahead, horizon=200):
    """The most blocks one SWA life cycle holds over decode steps: capacity h + 1 + lookahead, blocks
    released on history max(0, h - in_flight); a block is held iff allocated and a sink or touching a
    token at or after the released history's window start."""
    best = 0
    for h in range(horizon):
        c, r = h + 1 + lookahead, max(0, h - in_flight)
        held = sum(1 for b in range(-(-c // t)) if b < S or (b + 1) * t - 1 >= r + 1 - W)
        best = max(best, held)
    return best


def test_lookahead_floor_is_the_decode_peak():
    for t, W, S, k1, k2 in itertools.product((1, 2, 3, 4), (1, 2, 3, 5, 8, 9), (0, 1), (0, 1, 2), (0, 1, 3)):
        assert floors.lookahead_floor(t, W, S, k2, k1) == _brute_decode_peak(t, W, S, k1, k2), (t, W, S, k1, k2)


def test_semantics_lookahead_raises_the_minimum_and_round_trips():
    base = Config(tokens_per_block=4, layers=[AttentionLayer(window=8)])
    ahead = Config(tokens_per_block=4, layers=[AttentionLayer(window=8)], semantics=Semantics(lookahead_tokens=3))
    assert build_layout(base).min_slots == (_brute_decode_peak(4, 8, 0, 0, 0),)
    assert build_layout(ahead).min_slots == (_brute_decode_peak(4, 8, 0, 0, 3),) == (4,)
    assert Config.from_dict(ahead.to_dict()) == ahead
    assert "lookahead_tokens" not in base.to_dict()["semantics"]  # older traces read the same
    with pytest.raises(ConfigError, match="semantics.lookahead_tokens"):
        Semantics(lookahead_tokens=-1)


# ----------------------------------------------------------------------------- per-life-cycle block sizes
def _brute_group_need(life_cycles, ts, groups, horizon):
    """Per pool group, the most blocks a lone decoding request holds over h < horizon, each life cycle
    with its own block size (full attention: every allocated block; SSM: one page)."""
    need = [0] * (max(groups) + 1)
    for h in range(horizon):
        now = [0] * len(need)
        for lc, t, g in zip(life_cycles, ts, groups):
            if lc.kind is LifeCycleKind.SSM:
                now[g] += 1
                continue
            blocks = -(-(h + 1) // t)
            if lc.kind is LifeCycleKind.FULL:
                now[g] += blocks
            else:
                now[g] += sum(1 for b in range(blocks) if b < lc.sink_blocks or (b + 1) * t - 1 >= h + 1 - lc.window)
        need = [max(a, b) for a, b in zip(need, now)]
    return need


@pytest.mark.parametrize("t_swa,t_full", [(2, 4), (2, 8), (4, 4), (3, 2), (1, 16)])
@pytest.mark.parametrize("window,sinks", [(2, 0), (5, 0), (8, 1), (13, 0)])
def test_mixed_min_slots_is_the_need_up_to_the_first_floor(t_swa, t_full, window, sinks):
    """Each SWA life cycle's share is its own floor with its own t, and full attention's is what it
    holds at the last history where an SWA life cycle first reaches its floor."""
    swa = LifeCycle(LifeCycleKind.SWA, window, sinks)
    life_cycles = [swa, LifeCycle(LifeCycleKind.FULL), LifeCycle(LifeCycleKind.SSM)]
    ts = [t_swa, t_full, t_swa]
    horizon = floors.first_floor_history(t_swa, window, sinks) + 1
    for groups in ([0, 1, 2], [0, 1, 0], [0, 0, 0]):
        assert floors.mixed_min_slots(life_cycles, ts, groups) == tuple(_brute_group_need(life_cycles, ts, groups, horizon))
    # one block size: the same minimum as the layout of a Config
    config = Config(tokens_per_block=t_swa, layers=[AttentionLayer(window=window, sink_tokens=sinks * t_swa), AttentionLayer()])
    assert floors.mixed_min_slots(life_cycles[:2], [t_swa, t_swa], [0, 1]) == build_layout(config).min_slots


def test_mixed_min_slots_lets_a_pool_group_mix_block_sizes():
    """A slot is one page whatever block it holds (vLLM: one block pool for every KV-cache group), so a
    pool group of an SWA life cycle at t=2 and full attention at t=4 needs the sum of their shares."""
    life_cycles = [LifeCycle(LifeCycleKind.SWA, 4, 0), LifeCycle(LifeCycleKind.FULL)]
    apart = floors.mixed_min_slots(life_cycles, [2, 4], [0, 1])
    assert floors.mixed_min_slots(life_cycles, [2, 4], [0, 0]) == (sum(apart),)
    horizon = floors.first_floor_history(2, 4, 0) + 1
    assert (sum(apart),) == tuple(_brute_group_need(life_cycles, [2, 4], [0, 0], horizon))


# ----------------------------------------------------------------------------- seeded hit bugs, caught
def _first_run_disagreement(t, a, window, eagle, M, blocks):
    """The first pattern where the best run's closed form differs from the token-level brute force."""
    for pattern in _patterns(blocks):
        best = max([cache_hit.run_hit(r0, r1, t, window, a, eagle, M) for r0, r1 in _runs(pattern)], default=0)
        brute = max(L for L in range(0, M + 1) if L % (a * t) == 0
                    and _brute_valid(L, [pattern], [t], [window], [eagle], M))
        if best != brute:
            return pattern, best, brute
    return None


@pytest.mark.parametrize("name", ["eagle-pops-first-block", "align-after-pop", "align-before-pop"])
def test_each_seeded_hit_bug_makes_the_closed_form_disagree_with_the_brute_force(name):
    """Under each seeded bug the per-run hit (run_hit) differs from the token-level brute force on some
    pattern (t = 2, alignment 4 tokens, EAGLE, W = 5); unpatched it agrees on all of them.
    (longest_hit's fixed point re-checks every candidate with the reusable length capped at it, which
    happens to undo align-after-pop; the theorems catch that one too.)"""
    from swafloor.proofs import mutations

    (mutation,) = [m for m in mutations.MUTATIONS if m.name == name]
    assert _first_run_disagreement(2, 2, 5, 1, 12, 7) is None
    with mutations.applied(mutation):
        found = _first_run_disagreement(2, 2, 5, 1, 12, 7)
    assert found, f"{name}: no pattern tells the seeded bug from the brute force"


def test_null_counted_free_is_caught_by_the_pool_accounting():
    from swafloor.proofs import mutations

    (mutation,) = [m for m in mutations.MUTATIONS if m.name == "null-counted-free"]
    assert cache_hit.pool_free_blocks(5, 4) == 0  # a pool of 5 blocks (one null) with 4 held: none free
    with mutations.applied(mutation):
        assert cache_hit.pool_free_blocks(5, 4) == 1


def test_eagle_reach_lets_the_drafters_block_pass_the_reusable_length():
    for ts, windows in (((2,), (5,)), ((4, 2), (None, 5))):
        for p0 in _patterns(12 // ts[0]):
            cached = [p0] + ([[True] * 6] if len(ts) > 1 else [])
            for M, reach in ((11, 12), (9, 12), (7, 8)):
                got = cache_hit.longest_hit(cached, list(ts), list(windows), True, M, eagle_reach=reach)
                brute = max(L for L in range(0, M + 1)
                            if _brute_valid(L, cached, ts, windows, [True] * len(ts), M, reach))
                assert got == brute, (p0, M, reach)
