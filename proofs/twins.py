"""Token-level twins: every catalogue theorem checked a second time, by brute force over tokens.

The bounded concrete check (:mod:`.concrete`) evaluates the theorem's own goal on ints, so a formula
that is wrong on both sides of a goal (say, ``cdiv`` turned into floor division inside the life-cycle
arithmetic, which shrinks both the live count and the floor) goes unseen by the solver and by it.
A twin restates the theorem's *plain statement* over a small grid and counts token by token: it
lists the tokens a step holds, marks each block live or stale from its own tokens (a block past the
sinks is stale when every token in it lies before the window's first token ``h + 1 - W``), and
counts the set of blocks. The only division is ``p // t``, the block of token ``p``.

A twin never calls the goal, nor the reference's counting functions (``live_blocks``,
``stale_range``, ``transition_peak``, ``first_resume_peak``, ``window_span_blocks`` as a count,
``shared_batch_slots`` as a count, ...); it compares what it counts with the number the theorem
claims, the formula under test (``floors.swa_floor``, ``floors.step_floor``, ``sharing.shared_batch_slots``,
``cache_hit.run_hit``, ...), looked up through its module at call time so a patched reference is
the one checked. Tightness is found by scanning histories, not by evaluating the claimed worst case
alone; a refutation's twin must find a counterexample.

:data:`TWINS` maps each theorem name to its twin, ``twin(grid) -> TwinResult``.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs

from swafloor.reference import (admission, cache_hit, cadence, draft_return, execution, floors, free_order, peers, preallocation, refusal,
                                scheduler, sharing)
from swafloor.reference.pool import Pool
from swafloor.reference.lifecycle import LifeCycle, LifeCycleKind

__all__ = ["Grid", "TwinResult", "TWINS", "run_twin", "DEFAULT_GRID"]


@attrs.frozen
class Grid:
    """The bounds a twin enumerates: ``t <= t_max``, ``W <= w_max``, ``S <= s_max``, step sizes and
    tokens in flight up to ``n_max`` and ``k_max``; histories to ``S*t + 3*(W + t)`` unless a theorem
    bounds them itself."""

    t_max: int = 4
    w_max: int = 8
    s_max: int = 2
    n_max: int = 3
    k_max: int = 2

    def tws(self, t_max: int | None = None, w_max: int | None = None, s_max: int | None = None) -> Iterator[tuple[int, int, int]]:
        for t in range(1, (t_max or self.t_max) + 1):
            for W in range(1, (w_max or self.w_max) + 1):
                for S in range(0, (self.s_max if s_max is None else s_max) + 1):
                    yield t, W, S

    @staticmethod
    def histories(t: int, W: int, S: int, extra: int = 0) -> range:
        return range(0, S * t + 3 * (W + t) + extra + 1)


DEFAULT_GRID = Grid()


@attrs.frozen
class TwinResult:
    """``holds``: the statement held at every grid point (for a refutation: False, with the first
    ``counterexample`` found). ``points``: grid points checked. ``error``: the twin could not run
    (the code under test raised, or the theorem has no twin): neither a pass nor a counterexample."""

    holds: bool
    points: int
    seconds: float
    counterexample: dict[str, int] | None = None
    error: str | None = None
    #: the theorem has no twin: not checked token by token, so never a pass (prove: unknown, exit 3)
    missing: bool = False


class _Fail(Exception):
    def __init__(self, point: Mapping[str, int]):
        self.point = dict(point)


class _Counter:
    def __init__(self) -> None:
        self.points = 0

    def check(self, ok: Any, **point: int) -> None:
        self.points += 1
        if not ok:
            raise _Fail(point)


def _run(body: Callable[[_Counter, Grid], None]) -> Callable[[Grid], TwinResult]:
    def twin(grid: Grid = DEFAULT_GRID) -> TwinResult:
        counter, start = _Counter(), time.perf_counter()
        try:
            body(counter, grid)
        except _Fail as fail:
            return TwinResult(False, counter.points, time.perf_counter() - start, fail.point)
        return TwinResult(True, counter.points, time.perf_counter() - start)

    twin.__name__ = body.__name__
    twin.__doc__ = body.__doc__
    return twin


# ----------------------------------------------------------------------------- token-level geometry
def _block_tokens(b: int, t: int) -> range:
    return range(b * t, b * t + t)


def _stale(b: int, h: int, t: int, W: int | None, S: int) -> bool:
    """Block b is stale at history h: past the sink blocks, and every token in it before h + 1 - W."""
    if W is None or b < S:
        return False
    return all(p < h + 1 - W for p in _block_tokens(b, t))


@functools.lru_cache(maxsize=1 << 12)
def _allocated(c: int, t: int) -> frozenset[int]:
    """Blocks holding at least one of the tokens 0 .. c-1."""
    return frozenset(p // t for p in range(c))


def _held(h: int, c: int, t: int, W: int | None, S: int, released: int | None = None) -> frozenset[int]:
    """Blocks a step at history h and capacity c holds: allocated, not stale at ``released``
    (default h; with k tokens in flight stale blocks are those at max(0, h - k))."""
    return _held_at(h if released is None else released, c, t, W, S)


@functools.lru_cache(maxsize=1 << 16)
def _held_at(at: int, c: int, t: int, W: int | None, S: int) -> frozenset[int]:
    return frozenset(b for b in _allocated(c, t) if not _stale(b, at, t, W, S))


def _need(h: int, c: int, t: int, W: int | None, S: int, k: int = 0) -> int:
    return len(_held(h, c, t, W, S, max(0, h - k)))


def _scan_max(t: int, W: int, S: int, n: int = 1, k: int = 0, extra: int = 0) -> tuple[int, int]:
    """The most blocks an n-token step (capacity h + n, k in flight) holds over the grid's histories,
    and the first history that holds it."""
    best, at = -1, -1
    for h in Grid.histories(t, W, S, extra + k + n):
        need = _need(h, h + n, t, W, S, k)
        if need > best:
            best, at = need, h
    return best, at


def _first_reaching(target: int, t: int, W: int, S: int, k: int = 0) -> int | None:
    for h in Grid.histories(t, W, S, k):
        if _need(h, h + 1, t, W, S, k) >= target:
            return h
    return None


def _transition_peak(h0: int, c0: int, h1: int, c1: int, t: int, W: int, S: int, hold_stale: bool) -> int:
    """One resize from (h0, c0) to (h1, c1), token by token: releasing first, the blocks of (h0, c0)
    stale at h1 go, then the new blocks come; holding, what it held stays until the call returns and
    the new blocks come on top (a new block already stale at h1 is never allocated)."""
    before = _held(h0, c0, t, W, S)
    new = {b for b in _allocated(c1, t) - _allocated(c0, t) if not _stale(b, h1, t, W, S)}
    if hold_stale:
        return len(before | new)
    kept = {b for b in before if not _stale(b, h1, t, W, S)}
    return max(len(kept), len(kept | new))


def _resume_peak(h: int, t: int, W: int, S: int) -> int:
    """A first resume reusing h committed tokens (capacity h): its held blocks plus, when the block of
    token h already holds earlier tokens, a fresh slot for the private copy while the source is held."""
    partial = any(p < h for p in _block_tokens(h // t, t))
    return len(_held(h, h, t, W, S)) + (1 if partial else 0)


# ----------------------------------------------------------------------------- basic geometry
@_run
def window_span(c: _Counter, g: Grid) -> None:
    """L consecutive tokens from f touch at most window_span_blocks(L) blocks; from offset t-1 exactly."""
    from swafloor.reference import lifecycle

    for t in range(1, g.t_max + 1):
        for L in range(1, 2 * g.w_max + 1):
            most = lifecycle.window_span_blocks(L, t)
            for f in range(0, 3 * t):
                c.check(len({p // t for p in range(f, f + L)}) <= most, t=t, L=L, f=f)
            for b in range(0, 4):
                f = b * t + t - 1
                c.check(len({p // t for p in range(f, f + L)}) == most, t=t, L=L, b=b)


@_run
def decode_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        for h in g.histories(t, W, S):
            c.check(_need(h, h + 1, t, W, S) <= floor, t=t, W=W, S=S, h=h)
            c.check(_transition_peak(h, h, h, h + 1, t, W, S, False) <= floor, t=t, W=W, S=S, h=h)
            c.check(_transition_peak(h, h + 1, h + 1, h + 2, t, W, S, False) <= floor, t=t, W=W, S=S, h=h)


@_run
def first_floor_history(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        first = _first_reaching(floor, t, W, S)
        c.check(first is not None and _need(first, first + 1, t, W, S) == floor
                and first == floors.first_floor_history(t, W, S), t=t, W=W, S=S)


@_run
def decode_tight(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        worst = floors.worst_case_history(t, W, S)
        most, _ = _scan_max(t, W, S)
        c.check(most == floor and _need(worst, worst + 1, t, W, S) == floor, t=t, W=W, S=S)


@_run
def step_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for n in range(1, g.n_max + 1):
            floor = floors.step_floor(t, W, S, n)
            for h in g.histories(t, W, S):
                c.check(_need(h, h + n, t, W, S) <= floor, t=t, W=W, S=S, h=h, n=n)


@_run
def step_tight(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        worst = floors.worst_case_history(t, W, S)
        for n in range(1, g.n_max + 1):
            floor = floors.step_floor(t, W, S, n)
            most, _ = _scan_max(t, W, S, n)
            c.check(most == floor and _need(worst, worst + n, t, W, S) == floor, t=t, W=W, S=S, n=n)


def _full_capacity(t: int, slots: int) -> int:
    """The largest capacity whose tokens fit in ``slots`` full-attention blocks, by scanning."""
    c = 0
    while len(_allocated(c + 1, t)) <= slots:
        c += 1
    return c


@_run
def full_attention_lower_bound(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        minimum = floors.full_attention_floor(floor)
        most_swa, at = _scan_max(t, W, S)
        c.check(_need(at, at + 1, t, None, 0) >= floor, t=t, W=W, S=S)
        c.check(floors.full_attention_max_capacity(t, minimum) == _full_capacity(t, minimum), t=t, W=W, S=S)
        for h in g.histories(t, W, S):
            full = _need(h, h + 1, t, None, 0)
            c.check(full >= _need(h, h + 1, t, W, S), t=t, W=W, S=S, h=h)


@_run
def pool_group_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(t_max=3, w_max=6, s_max=1):
        for W2 in (1, 2):
            for S2 in (0, 1):
                fa, fb = floors.swa_floor(t, W, S), floors.swa_floor(t, W2, S2)
                full_min = floors.full_attention_floor(max(fa, fb))
                for h in range(0, _full_capacity(t, full_min)):  # every h + 1 within full attention's length
                    need = _need(h, h + 1, t, W, S) + _need(h, h + 1, t, W2, S2) + _need(h, h + 1, t, None, 0)
                    c.check(need <= fa + fb + full_min, t=t, W=W, S=S, W2=W2, S2=S2, h=h)


@_run
def pool_group_tight(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        full_min = floors.full_attention_floor(floor)
        for k in range(0, floor + 4):
            h = k * t
            swa, full = _need(h, h + 1, t, W, S), _need(h, h + 1, t, None, 0)
            c.check(k < floor - 1 or (swa == floor and full >= full_min), t=t, W=W, S=S, k=k)
            c.check(k != floor - 1 or full == full_min, t=t, W=W, S=S, k=k)


@_run
def mixed_steps_tight(c: _Counter, g: Grid) -> None:
    """Several requests (1 to 3) at histories a multiple of t past the worst case, each with its own
    step size, hold together exactly the sum of their step floors: the pool needs the sum."""
    for t, W, S in g.tws(t_max=3, w_max=6, s_max=1):
        worst = floors.worst_case_history(t, W, S)
        kinds = [(j, n) for j in range(0, 3) for n in range(1, g.n_max + 1)]
        for size in (1, 2, 3):
            for batch in itertools.combinations_with_replacement(kinds, size):
                held = sum(_need(worst + j * t, worst + j * t + n, t, W, S) for j, n in batch)
                claimed = sum(floors.step_floor(t, W, S, n) for _, n in batch)
                c.check(held == claimed, t=t, W=W, S=S, requests=size, **{f"j{i}": j for i, (j, _) in enumerate(batch)},
                        **{f"n{i}": n for i, (_, n) in enumerate(batch)})


def _group_need(h: int, t: int, W: int, S: int) -> int:
    return _need(h, h + 1, t, W, S) + _need(h, h + 1, t, None, 0)


@_run
def full_attention_below_floor(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        first = _first_reaching(floor, t, W, S)
        for m in range(1, floor):
            for h in range(0, (first or 0) + 1):
                c.check(_group_need(h, t, W, S) <= floor + m, t=t, W=W, S=S, m=m, h=h)


@_run
def full_attention_floor_exact(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        minimum = floors.full_attention_floor(floor)
        first = _first_reaching(floor, t, W, S)
        c.check(first is not None and _group_need(first, t, W, S) == 2 * floor, t=t, W=W, S=S)
        for h in range(0, first + 1):
            c.check(_group_need(h, t, W, S) <= floor + minimum, t=t, W=W, S=S, h=h)
        for m in range(1, floor + 2):
            serves = all(_group_need(h, t, W, S) <= floor + m for h in range(0, first + 1))
            c.check(serves == (m >= floor), t=t, W=W, S=S, m=m)


def _least_ceiling(x: int, t: int) -> int:
    """ceil(x / t) by scanning: the least k with k * t >= x."""
    k = -abs(x) - 1
    while k * t < x:
        k += 1
    return k


@_run
def ceil_identity(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        term = peers.upstream_window_term(t, W)
        c.check(term == _least_ceiling(W - 1, t), t=t, W=W, S=S)
        c.check(peers.upstream_swa_floor(t, W, S) == _scan_max(t, W, S)[0], t=t, W=W, S=S)


@_run
def ceil_identity_at_zero(c: _Counter, g: Grid) -> None:
    for t in range(1, 4 * g.t_max + 1):
        c.check(peers.upstream_window_term(t, 0) == _least_ceiling(-1, t), t=t)


def _aligned(W: int, t: int) -> bool:
    return (W - 1) % t == 0


@_run
def vllm_sizing_covers(c: _Counter, g: Grid) -> None:
    for t, W, _ in g.tws(s_max=0):
        for n in range(1, g.n_max + 1):
            c.check(peers.vllm_blocks_per_request(t, W, n) >= _scan_max(t, W, 0, n)[0], t=t, W=W, n=n)
        c.check((peers.vllm_blocks_per_request(t, W, 1) > _scan_max(t, W, 0)[0]) == _aligned(W, t), t=t, W=W)


@_run
def cpp_sizing_covers(c: _Counter, g: Grid) -> None:
    for t, W, _ in g.tws(s_max=0):
        cpp, most = peers.trtllm_cpp_blocks(t, W), _scan_max(t, W, 0)[0]
        c.check(cpp >= most and (cpp > most) == _aligned(W, t), t=t, W=W)


@_run
def ssm_minimum(c: _Counter, g: Grid) -> None:
    """A pool group of an SSM life cycle (one state page) and an SWA one: the sum of their minimums
    serves a lone request's decode steps, counted block by block, and the largest step holds exactly it."""
    ssm = LifeCycle(LifeCycleKind.SSM)
    for t, W, S in g.tws():
        group = (ssm, LifeCycle(LifeCycleKind.SWA, W, S))
        minimum = sum(floors.life_cycle_min_slots(lc, t, floors.FloorRule.FIXED, group) for lc in group)
        needs = [1 + _need(h, h + 1, t, W, S) for h in g.histories(t, W, S)]
        for h, need in zip(g.histories(t, W, S), needs):
            c.check(need <= minimum, t=t, W=W, S=S, h=h)
        c.check(max(needs) == minimum, t=t, W=W, S=S)


@_run
def stale_is_token_level(c: _Counter, g: Grid) -> None:
    from swafloor.reference import lifecycle

    for t, W, S in g.tws():
        for h in g.histories(t, W, S):
            start, end = lifecycle.stale_range(h, t, W, S)
            for b in range(0, h // t + S + 3):
                c.check((start <= b < end) == _stale(b, h, t, W, S), t=t, W=W, S=S, h=h, b=b)


@_run
def in_flight_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for k in range(0, g.k_max + 1):
            floor = floors.in_flight_floor(t, W, S, k)
            for h in g.histories(t, W, S, k):
                c.check(_need(h, h + 1, t, W, S, k) <= floor, t=t, W=W, S=S, k=k, h=h)


@_run
def in_flight_tight(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        c.check(floors.in_flight_floor(t, W, S, 0) == _scan_max(t, W, S)[0], t=t, W=W, S=S, k=0)
        for k in range(0, g.k_max + 1):
            floor = floors.in_flight_floor(t, W, S, k)
            worst = floors.worst_case_history(t, W, S, k)
            first = _first_reaching(floor, t, W, S, k)
            c.check(_scan_max(t, W, S, 1, k)[0] == floor and _need(worst, worst + 1, t, W, S, k) == floor
                    and first == floors.first_floor_history(t, W, S, k), t=t, W=W, S=S, k=k)


# ----------------------------------------------------------------------------- eviction interval
def _evicting_held(h: int, freed: set[int], t: int, W: int, S: int, k: int, e: int) -> tuple[int, set[int]]:
    """A decode step at h whose window freed ``freed`` so far: due when max(0, h-k) + 1 - W reaches the
    cursor (the first token of the first block past the sinks not freed) plus e; then it frees every
    stale block at max(0, h - k). Returns the blocks held and the freed set after the step."""
    cursor_block = S
    while cursor_block in freed:
        cursor_block += 1
    released = max(0, h - k)
    if released + 1 - W >= cursor_block * t + e:
        freed = freed | {b for b in _allocated(h + 1, t) if _stale(b, released, t, W, S)}
    return len(_allocated(h + 1, t) - freed), freed


@functools.lru_cache(maxsize=1 << 14)
def _freed_at(r: int, t: int, W: int, S: int, k: int) -> set[int]:
    """What a window whose cursor was set at r has freed: every block stale at max(0, r - k)."""
    return frozenset(b for b in _allocated(r + 1, t) if _stale(b, max(0, r - k), t, W, S))


_EVICTION_GRID = dict(t_max=3, w_max=5, s_max=1)


# ----------------------------------------------------------------------------- eviction clocks
def _clock_run(r0: int, n: int, decodes: int, t: int, W: int, S: int, k: int, due) -> list[int]:
    """A request's extend of n tokens from r0 (freeing what is stale at max(0, r0 - k)), then ``decodes``
    decodes at histories r0 + n + d (capacity one more), decode d freeing every stale block at
    max(0, h - k) when ``due(d)``: the blocks each decode holds, as sets of token-level blocks."""
    freed = {b for b in _allocated(r0 + n, t) if _stale(b, max(0, r0 - k), t, W, S)}
    held = []
    for d in range(decodes):
        h = r0 + n + d
        if due(d):
            freed |= {b for b in _allocated(h + 1, t) if _stale(b, max(0, h - k), t, W, S)}
        held.append(len(_allocated(h + 1, t) - freed))
    return held


@_run
def decode_clock_due_every_e(c: _Counter, g: Grid) -> None:
    for e in range(2, 10):
        for d in range(0, 3 * e + 1):
            c.check(bool(cadence.decode_clock_due(d, e)) == (d % e == 1), e=e, d=d)
            if d >= 1:
                last = max(j for j in range(1, d + 1) if j % e == 1)
                c.check(d - last <= e - 1, e=e, d=d)


@_run
def decode_clock_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(**_EVICTION_GRID):
        for k in (0, 1):
            for e in range(2, 2 * t + 3):
                floor = cadence.decode_clock_floor(t, W, S, k, e)
                for n in range(1, 5):
                    first = floors.in_flight_floor(t, W, S, k + n)
                    for r0 in range(0, (S + 2) * t + W + k + 1):
                        held = _clock_run(r0, n, 2 * e + 2, t, W, S, k, lambda d: d % e == 1)
                        c.check(held[0] <= first and max(held[1:]) <= floor, t=t, W=W, S=S, k=k, e=e, n=n, r=r0)


@_run
def decode_clock_tight(c: _Counter, g: Grid) -> None:
    """Runs from every extend reach decode_clock_floor at some decode past the first."""
    for t, W, S in g.tws(**_EVICTION_GRID):
        for k in (0, 1):
            for e in range(2, 2 * t + 3):
                most = max(max(_clock_run(r0, 1, 2 * e + 2, t, W, S, k, lambda d: d % e == 1)[1:])
                           for r0 in range(0, (S + 2) * t + W + k + 1))
                c.check(most == cadence.decode_clock_floor(t, W, S, k, e), t=t, W=W, S=S, k=k, e=e)


@_run
def decode_clock_interval_one(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(**_EVICTION_GRID):
        sglang = (max(t, W - 1) // t) * t  # page-floored max(page, window - 1)
        c.check(cadence.window_interval(t, W) == sglang and (sglang == 1) == (t == 1 and W <= 2), t=t, W=W)
        for k in (0, 1):
            for r0 in range(0, (S + 2) * t + W + k + 1):
                held = _clock_run(r0, 1, 3 * t + 4, t, W, S, k, lambda d: bool(cadence.decode_clock_due(d, 1)))
                c.check(all(held[d + t] == held[d] + 1 for d in range(len(held) - t)), t=t, W=W, S=S, k=k, r=r0)


@_run
def forward_clock_no_floor(c: _Counter, g: Grid) -> None:
    """A manager's forwards counted one by one: a request stepping once every e forwards (e - 1 others
    between), from the number f of its extend: its decode j (j >= 1) sees its previous step's number."""
    for e in range(2, 10):
        for f in range(0, 2 * e + 1):
            numbers, forward = [], f
            for _ in range(3 * e + 1):
                numbers.append(forward)
                forward += e  # e - 1 other requests' forwards, then its own
            for j in range(1, 3 * e + 1):
                seen = numbers[j - 1] if j >= 1 else f
                c.check(bool(cadence.forward_clock_due(seen, j, e)) == (f % e == 0), e=e, f=f, j=j)


@_run
def refused_keeps_stale_cost(c: _Counter, g: Grid) -> None:
    """A request released at r by an n-token step (capacity r + n) commits d tokens: a refused resize
    keeps the blocks it held at r, at-allocate those live at r + d; counted as sets of blocks."""
    for t, W, S in g.tws(**_EVICTION_GRID):
        for k in (0, 1):
            most = 0
            for n in range(1, 4):
                for r in range(0, (S + 2) * t + W + k + 1):
                    kept_by_refusal = _held(r, r + n, t, W, S, max(0, r - k))
                    for d in range(0, n + 1):
                        after_catch_up = _held(r + d, r + n, t, W, S, max(0, r + d - k))
                        extra = kept_by_refusal - after_catch_up
                        c.check(after_catch_up <= kept_by_refusal and len(extra) <= math.ceil(d / t),
                                t=t, W=W, S=S, k=k, n=n, r=r, d=d)
                        if n == 1 and d == 1:
                            most = max(most, len(extra))
            c.check(most == 1, t=t, W=W, S=S, k=k)


def _growth_twin(less: int) -> Callable[[Grid], TwinResult]:
    def body(c: _Counter, g: Grid) -> None:
        most: dict[tuple[int, int], int] = {}
        for t, W, S in g.tws(t_max=4, w_max=6, s_max=1):
            for n in range(1, 5):
                for r in range(0, (S + 2) * t + W + n + 1):
                    for d in range(n, n + t + 1):
                        h = r + d
                        grew = len(_allocated(r + n, t)) > len(_allocated(r, t))
                        still = _allocated(h + 1, t) <= _allocated(r + n, t)
                        if not (grew and still):
                            continue
                        with_option = _held_at(r, h + 1, t, W, S)  # stale at r released, none since
                        without = _held_at(h, h + 1, t, W, S)
                        kept = len(with_option - without)
                        most[t, n] = max(most.get((t, n), 0), kept)
                        c.check(without <= with_option and kept <= refusal.growth_kept_blocks(t, n) - less,
                                t=t, W=W, S=S, n=n, r=r, d=d)
        if not less:  # tight: for every t >= 2 and n some window, sinks and histories reach it (found by scanning)
            for (t, n), seen in sorted(most.items()):
                if t >= 2:
                    c.check(seen == refusal.growth_kept_blocks(t, n), t=t, n=n)

    body.__name__ = "stale_freed_on_growth_cost" + ("_one_less" if less else "")
    body.__doc__ = ("A step at r of n tokens adds a block, a later one at h = r + d adds none (blocks listed from "
                    "their tokens): the blocks held with the stale ones at r released, against those at h, counted "
                    "as sets; " + ("claimed at most one fewer than the bound." if less else
                                   "at most the bound, and for every t >= 2 and n the bound met by scanning windows "
                                   "up to 6, sinks, r and d."))
    return _run(body)


stale_freed_on_growth_cost = _growth_twin(0)
stale_freed_on_growth_cost_one_less = _growth_twin(1)


@_run
def ring_window_floor(c: _Counter, g: Grid) -> None:
    """A ring keeps token p in ring slot p % W, block (p % W) // t: the blocks of a step to capacity h + n
    are listed from its tokens, against the floor and the blocks the spec holds (no sinks); the most a
    decode step holds is found by scanning histories."""
    for t, W, _ in g.tws(s_max=0):
        floor = floors.swa_floor(t, W, 0)
        most = 0
        for h in g.histories(t, W, 0):
            for n in range(1, g.n_max + 1):
                ring = frozenset((p % W) // t for p in range(h + n))
                c.check(len(ring) <= floor and len(ring) <= len(_held(h, h + n, t, W, 0)), t=t, W=W, h=h, n=n)
                if n == 1:
                    most = max(most, len(ring))
        c.check(most == (floor if (W - 1) % t == 0 else floor - 1), t=t, W=W)


def _evicted_by_a_pool(f: int, q: int, x: int, k: int, m: int, tail: bool) -> int:
    """A caching pool of f + q + x + k slots run through its operations: q slots freed keeping content, then
    one release of x slots keeping nothing followed by k keeping content (``tail_now``: the release puts the
    x at the queue's end), f never used; m slots taken: the cached contents lost."""
    pool = Pool(f + q + x + k, cache=True, release_tail=tail)
    old = [pool.take() for _ in range(q)]
    for i, slot in enumerate(old):
        pool.name(slot, ("old", i))
    pool.give_back(old)
    released = [pool.take() for _ in range(x + k)]
    for i, slot in enumerate(released[x:]):
        pool.name(slot, ("released", i))
    pool.tail_now = tail
    pool.give_back(released)
    pool.tail_now = False
    before = len(pool.cached_content())
    for _ in range(m):
        pool.take()
    return before - len(pool.cached_content())


@_run
def free_order_cost(c: _Counter, g: Grid) -> None:
    """The free queue itself (the reference's Pool, driven by take, name and give_back) counts the cached
    slots m takes evict in either order, against free_order.evicted_cached and the statement's bounds."""
    for f, q, x, k in itertools.product(range(4), range(4), range(4), range(4)):
        for m in range(f + q + x + k + 1):
            front, tail = _evicted_by_a_pool(f, q, x, k, m, False), _evicted_by_a_pool(f, q, x, k, m, True)
            point = dict(f=f, q=q, x=x, k=k, m=m)
            c.check(front == free_order.evicted_cached(m, f, q, x, k, False), **point)
            c.check(tail == free_order.evicted_cached(m, f, q, x, k, True), **point)
            c.check(front <= tail <= front + x and tail <= q + k, **point)
            c.check(m < f + q + x or tail == front, **point)
            c.check(not (x >= 1 and q >= 1 and m == f + 1) or tail == front + 1, **point)


def _locked(p: int, t: int, W: int) -> frozenset[int]:
    """Blocks a prompt of p tokens keeps locked: those holding one of the W - 1 tokens before the end
    of its last whole block."""
    end = (p // t) * t
    return frozenset(q // t for q in range(max(0, end - (W - 1)), end))


@_run
def prompt_lock_sufficient(c: _Counter, g: Grid) -> None:
    """A decode step at h >= p holds its live blocks and its prompt's locked ones, counted as one set."""
    for t, W, S in g.tws():
        floor = floors.prompt_lock_floor(t, W, S)
        for h in range(0, (S + 2) * t + 3 * W + 1):
            for p in range(0, h + 1):
                c.check(len(_held(h, h + 1, t, W, S) | _locked(p, t, W)) <= floor, t=t, W=W, S=S, h=h, p=p)


@_run
def prompt_lock_tight(c: _Counter, g: Grid) -> None:
    """The most blocks a decode step holds over every prompt p and history h >= p is the floor."""
    for t, W, S in g.tws():
        most = max(len(_held(h, h + 1, t, W, S) | _locked(p, t, W))
                   for h in range(0, (S + 3) * t + 3 * W + 1) for p in range(0, h + 1))
        c.check(most == floors.prompt_lock_floor(t, W, S), t=t, W=W, S=S)


@_run
def load_holds_prefix_floor(c: _Counter, g: Grid) -> None:
    """A load of c tokens as new ones holds the block of each of its positions; that set fits the SWA
    floor exactly when c <= floor * t, and is what a request holds at history 0 and capacity c."""
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        for cap in range(1, 2 * (S + W + 2 * t) + 1):
            loaded = frozenset(q // t for q in range(cap))
            c.check(loaded == _held(0, cap, t, W, S) and (len(loaded) <= floor) == (cap <= floor * t),
                    t=t, W=W, S=S, c=cap)


def _preallocating_step(t: int, P: int, n: int, F: int) -> int | None:
    """vLLM 0.8.3's step, block by block: the n blocks it needs (None: they do not fit in F), then one
    block more while the tokens of its pre-allocated blocks fall short of P and a slot is free."""
    if n > F:
        return None
    took = n
    while (took - n) * t < P and took < F:
        took += 1
    return took


@_run
def preallocation_within_free(c: _Counter, g: Grid) -> None:
    """Blocks taken one by one: never past the pool, at most ceil(P/t) past the need (counted as the least
    number of blocks whose tokens reach P), and what is withheld is what preallocation.withheld_blocks says."""
    for t in range(1, 7):
        for P in range(0, 21):
            cover = next(k for k in range(0, P + 1) if k * t >= P)  # the least blocks holding P tokens
            c.check(preallocation.preallocation_blocks(P, t) == cover, t=t, P=P)
            for n in range(1, 6):
                for F in range(0, n + 9):
                    took = _preallocating_step(t, P, n, F)
                    if took is None:
                        continue
                    c.check(n <= took <= F and took - n <= cover, t=t, P=P, n=n, F=F)
                    c.check(preallocation.preallocated_blocks(n, cover, F) == took, t=t, P=P, n=n, F=F)
                    c.check(preallocation.withheld_blocks(n, cover, F) == took - n, t=t, P=P, n=n, F=F)


def _keeps_waiting(c: _Counter, claim: Callable[[int, int, int, int, int, int], bool]) -> None:
    for t in range(1, 7):
        for P in range(0, 21):
            for n in range(1, 6):
                for F in range(0, n + 9):
                    took = _preallocating_step(t, P, n, F)
                    for b in range(1, 7):
                        if took is not None and n + b <= F:
                            c.check(claim(t, P, n, F, b, F - took), t=t, P=P, n=n, F=F, b=b)


@_run
def preallocation_keeps_waiting(c: _Counter, g: Grid) -> None:
    """A waiting request the spec admits next is kept waiting exactly when its blocks exceed what the
    block-by-block step left free, and that is when n + b + (the blocks covering P) > F."""
    def claim(t, P, n, F, b, left):  # left: counted block by block; the bound: the formula under test
        return (b > left) == (n + b + preallocation.preallocation_blocks(P, t) > F)

    _keeps_waiting(c, claim)


@_run
def preallocation_never_keeps_waiting(c: _Counter, g: Grid) -> None:
    """The claim, block by block: what the step left free always serves the waiting request (refuted)."""
    _keeps_waiting(c, lambda t, P, n, F, b, left: b <= left)


@_run
def eviction_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(**_EVICTION_GRID):
        for k in (0, 1):
            for e in range(1, 2 * t + 3):
                floor = floors.eviction_floor(t, W, S, k, e)
                for h in range(0, (S + 2) * t + W + e + k + 1):
                    for r in range(0, h + 1, 3 if h > 8 else 1):
                        held, _ = _evicting_held(h, _freed_at(r, t, W, S, k), t, W, S, k, e)
                        c.check(held <= floor, t=t, W=W, S=S, k=k, e=e, h=h, r=r)


@_run
def eviction_tight(c: _Counter, g: Grid) -> None:
    """A decode run from history 0, evicting whenever due, reaches eviction_floor and never exceeds it."""
    for t, W, S in g.tws(**_EVICTION_GRID):
        for k in (0, 1):
            for e in range(1, 2 * t + 3):
                floor, freed, most = floors.eviction_floor(t, W, S, k, e), set(), 0
                for h in range(0, (S + 3) * t + 2 * W + 2 * e + k):
                    held, freed = _evicting_held(h, freed, t, W, S, k, e)
                    most = max(most, held)
                c.check(most == floor, t=t, W=W, S=S, k=k, e=e)
                if e <= t:
                    c.check(floor == _scan_max(t, W, S, 1, k)[0], t=t, W=W, S=S, k=k, e=e)


@_run
def eviction_interval_one(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(**_EVICTION_GRID):
        for k in (0, 1):
            for h in range(0, (S + 2) * t + W + k + 3):
                for r in range(0, h + 1):
                    held, _ = _evicting_held(h, _freed_at(r, t, W, S, k), t, W, S, k, 1)
                    c.check(held == _need(h, h + 1, t, W, S, k), t=t, W=W, S=S, k=k, h=h, r=r)


# ----------------------------------------------------------------------------- refutations and their exact forms
@_run
def sync_floor_short_in_flight(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for h in g.histories(t, W, S, 1):
            c.check(_need(h, h + 1, t, W, S, 1) <= floors.swa_floor(t, W, S), t=t, W=W, S=S, h=h)


@_run
def sync_floor_short_in_flight_exact(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor, aligned = floors.swa_floor(t, W, S), _aligned(W, t)
        for h in g.histories(t, W, S, 1):
            need = _need(h, h + 1, t, W, S, 1)
            c.check(need <= floor + 1 and (need <= floor or aligned), t=t, W=W, S=S, h=h)
        most = _scan_max(t, W, S, 1, 1)[0]
        c.check(not aligned or most == floor + 1, t=t, W=W, S=S)
        c.check((floors.in_flight_floor(t, W, S, 1) > floor) == aligned, t=t, W=W, S=S)


@_run
def legacy_floor_insufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for h in g.histories(t, W, S):
            c.check(_need(h, h + 1, t, W, S) <= floors.legacy_floor(), t=t, W=W, S=S, h=h)


@_run
def decode_floor_short_for_multi_token(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for h in g.histories(t, W, S):
            for n in range(2, g.n_max + 1):
                c.check(_need(h, h + n, t, W, S) <= floors.swa_floor(t, W, S), t=t, W=W, S=S, h=h, n=n)


def _hold_peak(h: int, t: int, W: int, S: int) -> int:
    return _transition_peak(h, h + 1, h + 1, h + 2, t, W, S, True)


@_run
def same_call_release_transient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for h in g.histories(t, W, S):
            c.check(_hold_peak(h, t, W, S) <= floors.swa_floor(t, W, S), t=t, W=W, S=S, h=h)


@_run
def same_call_release_transient_exact(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor, aligned = floors.swa_floor(t, W, S), _aligned(W, t)
        peaks = [_hold_peak(h, t, W, S) for h in g.histories(t, W, S)]
        for h, peak in enumerate(peaks):
            c.check(peak <= floor + 1 and (peak <= floor or aligned), t=t, W=W, S=S, h=h)
        worst = floors.worst_case_history(t, W, S)
        c.check(not aligned or (max(peaks) == floor + 1 and _hold_peak(worst, t, W, S) == floor + 1), t=t, W=W, S=S)


@_run
def resume_partial_copy(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        for h in g.histories(t, W, S):
            c.check(_resume_peak(h, t, W, S) <= floors.swa_floor(t, W, S), t=t, W=W, S=S, h=h)


@_run
def resume_partial_copy_exact(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws():
        floor = floors.swa_floor(t, W, S)
        exceeds = t >= 2 and not (W >= 2 and (W - 2) % t == 0)
        peaks = [_resume_peak(h, t, W, S) for h in g.histories(t, W, S, t)]
        for h, peak in enumerate(peaks):
            c.check(peak <= floor + 1 and (peak <= floor or exceeds), t=t, W=W, S=S, h=h)
        c.check(not exceeds or max(peaks) == floor + 1, t=t, W=W, S=S)


# ----------------------------------------------------------------------------- shared prefixes
def _batch_slots(holders: Iterable[tuple[int, int]], t: int, W: int, S: int, p: int) -> int:
    """Slots a batch of (history, capacity) holders of a p-block prefix holds, block by block: a prefix
    block takes one slot while live for any holder; every other block is the holder's own."""
    shared: set[int] = set()
    own = 0
    for h, cap in holders:
        held = _held(h, cap, t, W, S)
        shared |= {b for b in held if b < p}
        own += len({b for b in held if b >= p})
    return len(shared) + own


_SHARE_GRID = dict(t_max=3, w_max=4, s_max=1)


def _share_holders(t: int, W: int, S: int) -> list[tuple[int, int]]:
    return [(d, n) for d in range(0, S * t + W + 2 * t + 1) for n in (1, 2)]


@_run
def shared_batch_exact(c: _Counter, g: Grid) -> None:
    """Batches of 1 to 4 holders: sharing.shared_batch_slots is the block-by-block count, and each
    holder's prefix_gap is exactly the prefix blocks it does not hold."""
    for t, W, S in g.tws(**_SHARE_GRID):
        kinds = _share_holders(t, W, S)
        sparse = kinds[:: max(1, len(kinds) // 4)]
        for p in range(0, 3):
            for d, n in kinds:
                h = p * t + d
                lo, hi = sharing.prefix_gap(h, t, W, S, p)
                unneeded = {b for b in range(p) if b not in _held(h, h + n, t, W, S)}
                c.check(0 <= lo <= hi <= p and set(range(lo, hi)) == unneeded, t=t, W=W, S=S, p=p, d1=d, n1=n)
            for size, pool in ((1, kinds), (2, kinds), (3, sparse), (4, sparse)):
                for batch in itertools.combinations_with_replacement(pool, size):
                    holders = [(p * t + d, p * t + d + n) for d, n in batch]
                    point = {"t": t, "W": W, "S": S, "p": p, "holders": size}
                    point.update({f"d{i + 1}": d for i, (d, _) in enumerate(batch)})
                    point.update({f"n{i + 1}": n for i, (_, n) in enumerate(batch)})
                    c.check(sharing.shared_batch_slots(holders, t, W, S, p) == _batch_slots(holders, t, W, S, p), **point)


@_run
def sharing_never_raises(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(**_SHARE_GRID):
        kinds = _share_holders(t, W, S)
        for p in range(0, 3):
            for (d1, n1), (d2, n2) in itertools.combinations_with_replacement(kinds, 2):
                holders = [(p * t + d1, p * t + d1 + n1), (p * t + d2, p * t + d2 + n2)]
                slots = _batch_slots(holders, t, W, S, p)
                own = sum(len(_held(h, cap, t, W, S)) for h, cap in holders)
                point = dict(t=t, W=W, S=S, p=p, d1=d1, d2=d2, n1=n1, n2=n2)
                c.check(slots <= own and (p != 0 or slots == own), **point)
                c.check(slots <= floors.step_floor(t, W, S, n1) + floors.step_floor(t, W, S, n2), **point)


# ----------------------------------------------------------------------------- lookahead
@_run
def lookahead_sufficient(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(t_max=3, w_max=6):
        for k1 in range(0, 3):
            for k2 in range(0, 4):
                floor = floors.lookahead_floor(t, W, S, k2, k1)
                for h in g.histories(t, W, S, k1 + k2):
                    c.check(_need(h, h + 1 + k2, t, W, S, k1) <= floor, t=t, W=W, S=S, k1=k1, k2=k2, h=h)


@_run
def lookahead_tight(c: _Counter, g: Grid) -> None:
    for t, W, S in g.tws(t_max=3, w_max=6):
        for k1 in range(0, 3):
            for k2 in range(0, 4):
                floor = floors.lookahead_floor(t, W, S, k2, k1)
                worst = floors.worst_case_history(t, W, S, k1)
                most = max(_need(h, h + 1 + k2, t, W, S, k1) for h in g.histories(t, W, S, k1 + k2))
                c.check(most == floor and _need(worst, worst + 1 + k2, t, W, S, k1) == floor,
                        t=t, W=W, S=S, k1=k1, k2=k2)
                c.check(most == _scan_max(t, W, S, k1 + k2 + 1)[0], t=t, W=W, S=S, k1=k1, k2=k2)
            c.check(floors.lookahead_floor(t, W, S, 0, k1) == _scan_max(t, W, S, 1, k1)[0], t=t, W=W, S=S, k1=k1)


@_run
def drafts_returned_at_commit(c: _Counter, g: Grid) -> None:
    """A decode step with k2 draft slots (tokens h .. h + k2 allocated) commits d tokens and keeps only its
    committed tokens h + d: its blocks listed from those tokens (stale at the commit's released history, or
    at the step's under at-allocate), against the blocks the drafts kept would hold, the step's peak and the
    in-flight floor without drafts; the difference against draft_return.returned_blocks, the claim."""
    for t, W, S in g.tws(t_max=3, w_max=6):
        for k1 in range(0, 3):
            floor = floors.in_flight_floor(t, W, S, k1)
            for k2 in range(0, 4):
                for h in g.histories(t, W, S, k1 + k2):
                    cap = h + 1 + k2
                    peak = _held(h, cap, t, W, S, max(0, h - k1))
                    for d in range(0, k2 + 2):
                        after = h + d
                        kept = _held(after, cap, t, W, S, max(0, after - k1))
                        returned = _held(after, after, t, W, S, max(0, after - k1))
                        lazy = _held(h, after, t, W, S, max(0, h - k1))
                        gone = kept - returned
                        point = dict(t=t, W=W, S=S, k1=k1, k2=k2, h=h, d=d)
                        c.check(returned <= kept and all(b * t >= after for b in gone), **point)
                        c.check(len(gone) == draft_return.returned_blocks(t, after, cap) <= -(-(cap - after) // t), **point)
                        c.check(len(returned) <= floor and len(peak) <= floors.lookahead_floor(t, W, S, k2, k1), **point)
                        c.check(lazy <= peak, **point)


# ----------------------------------------------------------------------------- prefix-cache hits
def _hit_valid(L: int, cached: set[int], t: int, W: int, A: int, e: int, M: int) -> bool:
    """A hit of L tokens, token by token: zero, or a multiple of A within M (with the drafter's block,
    L + e*t <= M) whose needed tokens lie in cached blocks: the window of the first uncomputed token
    [L+1-W, L-1], the token L - 1, and with EAGLE the drafter's block (tokens L .. L+t-1)."""
    if L == 0:
        return True
    if L < 0 or L % A or L + e * t > M:
        return False
    tokens = set(range(max(0, L + 1 - W), L)) | {L - 1} | set(range(L, L + e * t))
    return all(p // t in cached for p in tokens)


def _longest_valid(cached: set[int], t: int, W: int, A: int, e: int, M: int) -> int:
    return max(L for L in range(0, M + 1) if _hit_valid(L, cached, t, W, A, e, M))


def _hit_points(g: Grid) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    for t in range(1, g.t_max + 1):
        for W in (1, 2, 5):
            for a in (1, 2, 3):
                for e in (0, 1):
                    for r0 in range(0, 3):
                        for d in range(0, 4):
                            for M in range(0, (r0 + d + 1) * t + 2):
                                yield t, W, a, e, r0, d, M


@_run
def hit_window_backed(c: _Counter, g: Grid) -> None:
    for t, W, a, e, r0, d, M in _hit_points(g):
        L = cache_hit.run_hit(r0, r0 + d, t, W, a, e, M)
        point = dict(t=t, W=W, a=a, e=e, r0=r0, d=d, M=M)
        c.check(0 <= L <= M, **point)
        if L > 0:
            tokens = set(range(max(0, L + 1 - W), L)) | {L - 1} | set(range(L, L + e * t))
            c.check(all(r0 <= p // t < r0 + d for p in tokens) and L + e * t <= M, **point)
            # no window token maps to a null entry: the null entries are the blocks stale at history L
            nulls = cache_hit.hit_null_entries(L, t, W)
            c.check(all(p // t >= nulls for p in range(max(0, L + 1 - W), L)), **point)


@_run
def hit_aligned(c: _Counter, g: Grid) -> None:
    for t, W, a, e, r0, d, M in _hit_points(g):
        L = cache_hit.run_hit(r0, r0 + d, t, W, a, e, M)
        c.check(L % (a * t) == 0, t=t, W=W, a=a, e=e, r0=r0, d=d, M=M)


@_run
def hit_valid(c: _Counter, g: Grid) -> None:
    for t, W, a, e, r0, d, M in _hit_points(g):
        run = set(range(r0, r0 + d))
        L = cache_hit.run_hit(r0, r0 + d, t, W, a, e, M)
        c.check(_hit_valid(L, run, t, W, a * t, e, M), t=t, W=W, a=a, e=e, r0=r0, d=d, M=M)
        for x in range(max(0, L // t - 1), L // t + 3):  # valid_in_run, the predicate other theorems use, is validity
            c.check(cache_hit.valid_in_run(x * t, r0, r0 + d, t, W, a, e, M) == _hit_valid(x * t, run, t, W, a * t, e, M),
                    t=t, W=W, a=a, e=e, r0=r0, d=d, M=M, x=x)


@_run
def hit_longest(c: _Counter, g: Grid) -> None:
    for t, W, a, e, r0, d, M in _hit_points(g):
        L = cache_hit.run_hit(r0, r0 + d, t, W, a, e, M)
        c.check(L == _longest_valid(set(range(r0, r0 + d)), t, W, a * t, e, M), t=t, W=W, a=a, e=e, r0=r0, d=d, M=M)


@_run
def hit_null_accounting(c: _Counter, g: Grid) -> None:
    """A hit's table: the blocks stale at history L are null entries, the rest real blocks. A pool of P
    block ids, id 0 the null block, with u real blocks held: the free ids (neither null nor held)."""
    for t in range(1, g.t_max + 1):
        for W in range(1, 13):
            for q in range(0, 9):
                L = q * t
                stale = {b for b in range(q) if _stale(b, L, t, W, 0)}
                real = cache_hit.hit_real_blocks(L, t, W)
                nulls = cache_hit.hit_null_entries(L, t, W)
                c.check(real + nulls == q, t=t, W=W, q=q)
                c.check(W < 2 or nulls == len(stale), t=t, W=W, q=q)
    for P in range(1, 13):
        for u in range(0, P):
            pool, null = set(range(P)), 0
            held = set(range(1, u + 1))
            free = pool - held - {null}
            c.check(cache_hit.pool_free_blocks(P, u) == len(free), P=P, u=u)
            for real in range(0, len(free) + 1):  # admitted on the free count: takes real blocks from free ids
                taken = set(sorted(free)[:real])
                c.check(null not in taken and len(held | taken) <= P - 1, P=P, u=u, real=real)


# ----------------------------------------------------------------------------- block sizes per life cycle
_MIXED = ((1, 1), (2, 2), (1, 2), (2, 4), (2, 8), (4, 8), (1, 4), (2, 1), (4, 2), (8, 2), (2, 3), (3, 2), (3, 4))


def _mixed_shares(ts: int, tf: int, W: int, S: int, k: int) -> tuple[int, int, int]:
    lcs = (LifeCycle(LifeCycleKind.SWA, W, S), LifeCycle(LifeCycleKind.FULL))
    swa, full = floors.mixed_min_slots(lcs, (ts, tf), (0, 1), in_flight=k)
    (together,) = floors.mixed_min_slots(lcs, (ts, tf), (0, 0), in_flight=k)
    return swa, full, together


@_run
def mixed_pool_group_sufficient(c: _Counter, g: Grid) -> None:
    for ts, tf in _MIXED:
        for W in range(1, 9):
            for S in (0, 1):
                for k in (0, 1):
                    swa, full, minimum = _mixed_shares(ts, tf, W, S, k)
                    served = _full_capacity(tf, full)
                    first = _first_reaching(swa, ts, W, S, k)
                    point = dict(ts=ts, tf=tf, W=W, S=S, k=k)
                    c.check(first is not None and first + 1 <= served, **point)
                    for h in range(0, served):
                        held = _need(h, h + 1, ts, W, S, k) + _need(h, h + 1, tf, None, 0)
                        c.check(held <= minimum, h=h, **point)


@_run
def mixed_pool_group_tight(c: _Counter, g: Grid) -> None:
    for ts, tf in _MIXED:
        for W in range(1, 9):
            for S in (0, 1):
                for k in (0, 1):
                    swa, full, minimum = _mixed_shares(ts, tf, W, S, k)
                    point = dict(ts=ts, tf=tf, W=W, S=S, k=k)
                    c.check(swa == _scan_max(ts, W, S, 1, k)[0], **point)
                    first = _first_reaching(swa, ts, W, S, k)
                    c.check(first is not None and _need(first, first + 1, tf, None, 0) == full
                            and _need(first, first + 1, ts, W, S, k) + full == minimum, **point)
                    c.check(ts != tf or full == swa, **point)


@_run
def hit_mixed_valid(c: _Counter, g: Grid) -> None:
    """cache_hit.longest_hit over two life cycles (each a cached pattern of blocks) is the longest L
    valid for both, found by scanning every L."""
    sizes = ((1, 2), (2, 1), (2, 3), (3, 2))
    for t1, t2 in sizes:
        A = math.lcm(t1, t2)
        for W1 in (1, 3):
            for W2 in (2, 4):
                for e in (0, 1):
                    for r1, d1, r2, d2 in itertools.product(range(0, 3), range(1, 5), range(0, 2), range(1, 4)):
                        for M in range(0, 25, 5):
                            run1, run2 = set(range(r1, r1 + d1)), set(range(r2, r2 + d2))
                            pattern1 = [b in run1 for b in range(r1 + d1 + 1)]
                            pattern2 = [b in run2 for b in range(r2 + d2 + 1)]
                            got = cache_hit.longest_hit((pattern1, pattern2), (t1, t2), (W1, W2), bool(e), M)
                            best = max(L for L in range(0, M + 1)
                                       if _hit_valid(L, run1, t1, W1, A, e, M) and _hit_valid(L, run2, t2, W2, A, e, M))
                            c.check(got == best, t1=t1, t2=t2, W1=W1, W2=W2, e=e, r1=r1, d1=d1, r2=r2, d2=d2, M=M)


# ----------------------------------------------------------------------------- admission (issue 32)
def _schedule(P: int, O: int, C: int, k: int) -> Iterator[tuple[int, int, int]]:
    """A lone request's run, restated: (history, capacity, tokens committed) per step; prefill chunks
    of at most C prompt tokens, then one token a step with k draft slots, until P + O are computed."""
    h = 0
    while h < P + O:
        if h < P:
            n = min(C, P - h)
            yield h, h + n, n
            h += n
        else:
            yield h, h + 1 + k, 1
            h += 1


@_run
def lone_request_completes(c: _Counter, g: Grid) -> None:
    """Each run on the grid, step by step: the blocks it holds (SWA: counted token by token; full: every
    block allocated) within what admission charges; it ends within P + O steps, never overshooting,
    with capacities that never fall."""
    for t, W, S in g.tws():
        for P in range(1, 7):
            for O in range(1, 3):
                for C in range(1, 5):
                    for k in range(0, g.k_max + 1):
                        swa = admission.swa_admission_blocks(t, W, S, P, C, k)
                        full = admission.full_run_blocks(t, P, O, k)
                        steps, last_c, end = 0, 0, 0
                        for h, cap, done in _schedule(P, O, C, k):
                            point = dict(t=t, W=W, S=S, P=P, O=O, C=C, k=k, h=h)
                            c.check(len(_held(h, cap, t, W, S)) <= swa, **point)
                            c.check(len(_allocated(cap, t)) <= full, **point)
                            c.check(done >= 1 and h + done <= P + O and cap >= last_c, **point)
                            steps, last_c, end = steps + 1, cap, h + done
                        c.check(end == P + O and steps <= P + O, t=t, W=W, S=S, P=P, O=O, C=C, k=k, h=end)


def _vllm_gate_twin(capped: bool) -> Callable[[_Counter, Grid], None]:
    def body(c: _Counter, g: Grid) -> None:
        for t, W, _ in g.tws(s_max=0):
            for P in range(1, 9):
                for C in range(1, 5):
                    for k in range(0, g.k_max + 1):
                        n = max(min(C, P), 1 + k)  # the run's largest step, restated
                        most = _scan_max(t, W, 0, n)[0]  # what that step holds at worst, token by token
                        charged = peers.vllm_admission_blocks(t, W, P, k, C, None, capped)
                        c.check(charged <= most, t=t, W=W, P=P, C=C, k=k)

    body.__name__ = f"vllm_{'capped' if capped else 'uncapped'}_gate_admits_at_chunk_floor"
    return body


vllm_capped_gate_admits_at_chunk_floor = _run(_vllm_gate_twin(True))
vllm_uncapped_gate_admits_at_chunk_floor = _run(_vllm_gate_twin(False))



@_run
def sglang_gate_admits_at_chunk_floor(c: _Counter, g: Grid) -> None:
    """SGLang's budget in free pages against the most blocks the run's largest step holds, token by token."""
    for t, W, _ in g.tws(s_max=0):
        for P in range(1, 9):
            for C in range(1, 5):
                for k in range(0, g.k_max + 1):
                    most = _scan_max(t, W, 0, max(min(C, P), 1 + k))[0]
                    c.check(peers.sglang_admission_blocks(t, W, P, C) <= most, t=t, W=W, P=P, C=C, k=k)


@_run
def sglang_prefill_budget_admits_at_chunk_floor(c: _Counter, g: Grid) -> None:
    """SGLang's current threshold against the larger of the most blocks the run's largest step holds, token by
    token, and SGLang's least pool, its threshold restated from SGLang's arithmetic (reservation strictly
    below the free tokens, else the chunk cut to the whole pages above an empty pass's headroom)."""
    for t, W, _ in g.tws(s_max=0):
        if W < 2:
            continue
        w = W - 1
        least = (w + t) // t + 1  # the least N with w + t < N * t
        for P in range(1, 9):
            paged = -(-P // t) * t
            for C in range(t, 5, t):
                for O in range(1, 4):
                    most = max(_scan_max(t, W, 0, min(C, P))[0], least)
                    needed = max(min(paged, C) - w, 0) + min(paged + O, w) + t
                    headroom = min(O, w) + t
                    # the least pool admitting: a reservation below N * t, or a positive page-floored cut
                    admits = next(N for N in range(1, needed + 2 * t + 2)
                                  if needed < N * t or (N * t - headroom) // t * t > 0)
                    c.check(admits <= most, t=t, W=W, P=P, C=C, O=O)


def _kept_twin(gate: Callable[[int, int], Any], decode_only: bool) -> Callable[[_Counter, Grid], None]:
    """Each run on the grid, suspended after each step with its slots kept: what it holds, counted token by
    token, is all the pool uses; ``gate(total, held)`` must admit its resume at pools of the rule's charge
    plus X <= 1."""

    def body(c: _Counter, g: Grid) -> None:
        for t, W, S in g.tws():
            for P in range(1, 6):
                for O in range(1, 3):
                    for C in range(1, 4):
                        for k in range(0, g.k_max + 1):
                            charge = admission.swa_admission_blocks(t, W, S, P, C, k)
                            for h, cap, _ in _schedule(P, O, C, k):
                                if decode_only and h < P:
                                    continue
                                held = len(_held(h, cap, t, W, S))
                                for X in (0, 1):
                                    c.check(gate(charge + X, held), t=t, W=W, S=S, P=P, O=O, C=C, k=k, h=h, X=X)

    return body


kept_lone_request_resumes = _run(_kept_twin(lambda total, held: admission.resume_admits(total, held, held, held), False))
trtllm_resume_gate_admits_kept_lone_request = _run(_kept_twin(
    lambda total, held: peers.trtllm_resume_admits(held, total, *peers.TRTLLM_MAX_UTIL_FOR_RESUME), True))


@_run
def preemption_spares_the_oldest(c: _Counter, g: Grid) -> None:
    """Every running list of up to 6 requests and every requester: the scheduler's pick (victim newest) is
    running, and not the oldest while another runs."""
    for N in range(1, 7):
        running = [f"q{i}" for i in range(N)]
        for r in range(N):
            victim = scheduler.pick_victim(running, running[r], scheduler.Victim.NEWEST)
            c.check(victim in running and (N == 1 or victim != running[0]), N=N, r=r)



@_run
def fcfs_pair_finishes(c: _Counter, g: Grid) -> None:
    """The serving loop itself (scheduler.serve on the reference manager, not its transition system) for two
    requests of prompts and outputs up to 3 tokens (past the model check's 2), one full-attention pool
    group at one token per block, pools up to 2 slots above the larger's need: both done by step L0 + L1."""
    from swafloor.reference import AttentionLayer, Config

    for P0, O0, P1, O1 in itertools.product(range(1, 4), repeat=4):
        for X in range(0, 3):
            pool = max(P0 + O0, P1 + O1) + X
            config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
            arrivals = [scheduler.Arrival("r0", 0, P0, O0), scheduler.Arrival("r1", 0, P1, O1)]
            result = scheduler.serve(config, arrivals, chunk=1, victim=scheduler.Victim.NEWEST,
                                     max_steps=4 * (P0 + O0 + P1 + O1))
            last = max(result.finished_at.values(), default=None)
            c.check(result.completed and last is not None and last <= P0 + O0 + P1 + O1,
                    P0=P0, O0=O0, P1=P1, O1=O1, X=X)


@_run
def fcfs_three_ranked(c: _Counter, g: Grid) -> None:
    """The serving loop itself (scheduler.serve on the reference manager, not its transition system) for three
    requests of prompts and outputs up to 2 tokens, pools up to 2 slots above the largest's need: all done
    by step L0 + L1 + L2."""
    from swafloor.reference import AttentionLayer, Config

    for lens in itertools.product(range(1, 3), repeat=6):
        prompts, outputs = lens[0::2], lens[1::2]
        total = sum(prompts) + sum(outputs)
        for X in range(0, 3):
            pool = max(p + o for p, o in zip(prompts, outputs)) + X
            config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
            arrivals = [scheduler.Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(zip(prompts, outputs))]
            result = scheduler.serve(config, arrivals, chunk=1, victim=scheduler.Victim.NEWEST, max_steps=4 * total)
            last = max(result.finished_at.values(), default=None)
            point = {f"{k}{i}": v for i, (p, o) in enumerate(zip(prompts, outputs)) for k, v in (("P", p), ("O", o))}
            c.check(result.completed and last is not None and last <= total, **point, X=X)


def _ranked_swa_twin(count: int) -> Callable[[Grid], TwinResult]:
    def body(c: _Counter, g: Grid) -> None:
        from swafloor.reference import AttentionLayer, Config

        for lens in itertools.product(range(1, 3), repeat=2 * count):
            prompts, outputs = lens[0::2], lens[1::2]
            total = sum(prompts) + sum(outputs)
            point = {f"{k}{i}": v for i, (p, o) in enumerate(zip(prompts, outputs)) for k, v in (("P", p), ("O", o))}
            for W, S, X in itertools.product(range(1, 4), range(0, 2), range(0, 2)):
                asked = Config(tokens_per_block=1, layers=[AttentionLayer(W, S)], slots=(64,))  # to ask the gate
                floor = max(scheduler.gate_charge("reference", asked, p, o, 1, 0)[0] for p, o in zip(prompts, outputs))
                config = Config(tokens_per_block=1, layers=[AttentionLayer(W, S)], slots=(floor + X,))
                arrivals = [scheduler.Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(zip(prompts, outputs))]
                result = scheduler.serve(config, arrivals, chunk=1, victim=scheduler.Victim.NEWEST, max_steps=4 * total)
                last = max(result.finished_at.values(), default=None)
                c.check(result.completed and last is not None and last <= total, **point, W=W, S=S, X=X)

    body.__name__ = f"fcfs_{count}_ranked_swa"
    body.__doc__ = (f"The serving loop itself (scheduler.serve on the reference manager) for {count} requests of "
                    "prompts and outputs up to 2 tokens through one SWA life cycle at one token per block (windows 1 "
                    "to 3 tokens, 0 or 1 sink blocks), pools up to 1 slot above the rule's chunk floor (what the "
                    "reference gate charges a request): all done by step sum(P + O).")
    return _run(body)


fcfs_pair_ranked_swa = _ranked_swa_twin(2)
fcfs_three_ranked_swa = _ranked_swa_twin(3)


@_run
def fcfs_pair_ranked_blocks(c: _Counter, g: Grid) -> None:
    """The serving loop itself (scheduler.serve on the reference manager) for two requests of prompts up to 3
    and outputs up to 2 tokens, chunks of 1 to 3 tokens, blocks of 1 or 2 tokens, a full-attention layer beside
    a sliding-window one (windows 1 to 3 tokens, 0 or 1 sink blocks): the sliding-window group X <= 1 slots
    above the rule's chunk floor (what the reference gate charges), the full-attention group X above the
    larger whole run (its blocks counted here, a ceiling of tokens over t) and not below the sliding-window
    group: both done by step sum(P + O)."""
    from swafloor.reference import AttentionLayer, Config

    for P0, O0, P1, O1 in itertools.product(range(1, 4), range(1, 3), range(1, 4), range(1, 3)):
        prompts, outputs = (P0, P1), (O0, O1)
        total = sum(prompts) + sum(outputs)
        for C, t, W, S, X in itertools.product(range(1, 4), range(1, 3), range(1, 4), range(0, 2), range(0, 2)):
            layers = [AttentionLayer(), AttentionLayer(W, S * t)]
            asked = Config(tokens_per_block=t, layers=layers, slots=(64, 64))  # to ask the gate
            floor = max(scheduler.gate_charge("reference", asked, p, o, C, 0)[1] for p, o in zip(prompts, outputs))
            run = max(-(-(p + o) // t) for p, o in zip(prompts, outputs))
            config = Config(tokens_per_block=t, layers=layers, slots=(max(run + X, floor + X), floor + X))
            arrivals = [scheduler.Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(zip(prompts, outputs))]
            result = scheduler.serve(config, arrivals, chunk=C, victim=scheduler.Victim.NEWEST, max_steps=4 * total)
            last = max(result.finished_at.values(), default=None)
            c.check(result.completed and last is not None and last <= total,
                    P0=P0, O0=O0, P1=P1, O1=O1, C=C, t=t, W=W, S=S, X=X)


@_run
def oldest_three_livelock(c: _Counter, g: Grid) -> None:
    """The serving loop itself (scheduler.serve on the reference manager, not its transition system) for three
    requests of prompts and outputs up to 2 tokens under victim oldest, pools up to 1 slot above the largest's
    whole run, 10 steps: no state serve reports after a step (on_step: the histories read from the manager, the
    running list, the waiting queue) is one it reported after an earlier step with a request not done."""
    from swafloor.reference import AttentionLayer, Config

    for lens in itertools.product(range(1, 3), repeat=6):
        prompts, outputs = lens[0::2], lens[1::2]
        lengths = [p + o for p, o in zip(prompts, outputs)]
        for X in range(0, 2):
            config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(max(lengths) + X,))
            arrivals = [scheduler.Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(zip(prompts, outputs))]
            seen = {scheduler.loop_start(3)}  # before step 0: every request waiting, nothing held
            repeats: list[int] = []

            def after(step: int, state: tuple) -> None:
                if state in seen and any(h < L for h, L in zip(state[0], lengths)):
                    repeats.append(step)
                seen.add(state)

            scheduler.serve(config, arrivals, chunk=1, victim=scheduler.Victim.OLDEST, max_steps=10, on_step=after)
            point = {f"{k}{i}": v for i, (p, o) in enumerate(zip(prompts, outputs)) for k, v in (("P", p), ("O", o))}
            c.check(not repeats, **point, X=X)


# ----------------------------------------------------------------------------- schedule and execute (issue 34)
def _execution(t: int, window: int | None = None, sinks: int = 0, in_flight: int = 0, slots: int = 64) -> Any:
    """The reference's execution layer over a manager with one attention layer, prefix sharing, ample slots."""
    from swafloor.reference import AttentionLayer, Config, Manager, Semantics, SuspendMode

    semantics = Semantics(prefix_sharing=True, in_flight_tokens=in_flight, suspend=SuspendMode.RECOMPUTE,
                          first_resume_copy=False)
    config = Config(tokens_per_block=t, layers=[AttentionLayer(window, sinks * t)], slots=(slots,), semantics=semantics)
    return execution.Execution(Manager(config))


def _writer(t: int, w: int, f: int) -> tuple[Any, set[int], list[Any]]:
    """Request "a" on the execution layer: w tokens scheduled and executed one a step, then f more scheduled
    one a step and left in flight. Returns the layer, the positions executed, the steps in flight."""
    ex = _execution(t, in_flight=f)
    ex.create("a")
    ex.resume("a")
    done: set[int] = set()
    for _ in range(w):
        ex.schedule("a", 1)
        step = ex.execute()
        done.update(range(step.start, step.end))
    return ex, done, [ex.schedule("a", 1) for _ in range(f)]


@_run
def hit_covers_written_kv(c: _Counter, g: Grid) -> None:
    """The layer itself: a writer with w tokens executed and f in flight, a reader created on its content
    (its lookup), then g of the writer's steps executed and the rest dropped (an abort). Every token of the
    reader's hit must be among the positions executed by the read, and the block after the hit must not have been
    all executed at the lookup."""
    for t in range(1, g.t_max + 1):
        for w in range(0, 9):
            for f in range(0, 4):
                for ran in range(0, f + 1):
                    ex, done, _ = _writer(t, w, f)
                    hit = ex.create("r", share_with="a")
                    at_lookup = set(done)
                    for _ in range(ran):
                        step = ex.execute()
                        done.update(range(step.start, step.end))
                    ex.drop("a", "abort")
                    point = dict(t=t, w=w, f=f, g=ran)
                    c.check(all(p in done for p in range(hit)), **point)
                    c.check(not all(p in at_lookup for p in _block_tokens(hit // t, t)), **point)


@_run
def named_hit_covers_written_kv(c: _Counter, g: Grid) -> None:
    """The layer with a lookup that trusts every name (its ``hit_blocks`` hook: every block named at
    schedule, counted token by token here), the same runs as hit-covers-written-kv: a reader's hit must find
    a token no executed step wrote (the refutation)."""
    from swafloor.reference.hooks import ExecutionHooks

    def trusting(named_end: int, written: int, t: int) -> int:
        return len([b for b in range(named_end + 1) if (b + 1) * t <= named_end])  # whole blocks named

    for t in range(1, g.t_max + 1):
        for w in range(0, 9):
            for f in range(0, 4):
                for ran in range(0, f + 1):
                    ex, done, _ = _writer(t, w, f)
                    ex.hooks = ExecutionHooks(hit_blocks=trusting)
                    if f:  # one more in flight: the manager can share all w + f
                        ex.schedule("a", 1)
                    hit = ex.create("r", share_with="a")
                    for _ in range(ran):
                        step = ex.execute()
                        done.update(range(step.start, step.end))
                    ex.drop("a", "abort")
                    c.check(all(p in done for p in range(hit)), t=t, w=w, f=f, g=ran)


@_run
def dropped_step_names_no_hit(c: _Counter, g: Grid) -> None:
    """The layer itself: a writer with w tokens executed and f in flight, its steps dropped (an abort): every
    block still named holds only executed tokens, and every block of executed tokens stays named."""
    for t in range(1, g.t_max + 1):
        for w in range(0, 9):
            for f in range(0, 4):
                ex, done, _ = _writer(t, w, f)
                ex.drop("a", "abort")
                named = ex.named("a")
                for b in range(0, (w + f) // t + 2):
                    whole = all(p in done for p in _block_tokens(b, t))
                    c.check((b < named) == whole, t=t, w=w, f=f, b=b)


@_run
def worker_mask_reads_held_blocks(c: _Counter, g: Grid) -> None:
    """The layer itself: a request decoding one token a step; at each query h, every position from the
    layer's mask start to h lies in a block no token-level count calls stale at h, and the manager holds it."""
    for t, W, S in g.tws():
        ex = _execution(t, W, S)
        ex.create("a")
        ex.resume("a")
        for h in Grid.histories(t, W, S):
            ex.schedule("a", 1)
            held = ex.manager.record_of("a").held[0]
            for p in range(max(0, ex.mask_of(h, W)), h + 1):
                c.check(not _stale(p // t, h, t, W, S) and p // t in held, t=t, W=W, S=S, h=h, p=p)
            ex.execute()


@_run
def drafts_write_allocated_blocks(c: _Counter, g: Grid) -> None:
    """The layer itself: a step to e tokens with d drafts; every draft position's block is one the step's
    capacity allocates, counted token by token, and one the manager holds after the step is scheduled."""
    for t in range(1, g.t_max + 1):
        for e in range(1, 13):
            for d in range(0, 4):
                ex = _execution(t)
                ex.create("a")
                ex.resume("a")
                step = ex.schedule("a", e, d)
                held = ex.manager.record_of("a").held[0]
                for p in range(e, e + d):
                    c.check(p // t in _allocated(step.capacity, t) and p // t in held, t=t, e=e, d=d, p=p)


def _quota_twin(post_fix: bool) -> Callable[[_Counter, Grid], None]:
    def body(c: _Counter, g: Grid) -> None:
        from swafloor.reference.peers import TRTLLM_QUOTA_LAYOUTS

        for t, W, S in g.tws():
            most = _scan_max(t, W, S)[0]  # the most blocks a decode step holds, token by token
            least_slots = S + (W + t - 2) // t + 1 if post_fix else 1  # upstream's minimum, restated
            for sizes, gran in TRTLLM_QUOTA_LAYOUTS:
                least = gran * sum(-(-least_slots * size // gran) for size in sizes)
                for Q in range(1, 49):
                    granules = -(-Q // gran)
                    if granules * gran < least:
                        continue  # refused
                    held = 0  # the most slots the group's granules hold, one slot at a time
                    while sum(-(-(held + 1) * size // gran) for size in sizes) <= granules:
                        held += 1
                    c.check(held >= most, t=t, W=W, S=S, Q=Q)

    body.__name__ = f"trtllm_{'' if post_fix else 'prefix_'}min_quota_holds_floor"
    return body


trtllm_min_quota_holds_floor = _run(_quota_twin(True))
trtllm_prefix_min_quota_holds_floor = _run(_quota_twin(False))


TWINS: dict[str, Callable[[Grid], TwinResult]] = {
    "window-span": window_span,
    "decode-sufficient": decode_sufficient,
    "first-floor-history": first_floor_history,
    "decode-tight": decode_tight,
    "step-sufficient": step_sufficient,
    "step-tight": step_tight,
    "full-attention-lower-bound": full_attention_lower_bound,
    "pool-group-sufficient": pool_group_sufficient,
    "pool-group-tight": pool_group_tight,
    "mixed-steps-tight": mixed_steps_tight,
    "full-attention-below-floor": full_attention_below_floor,
    "full-attention-floor-exact": full_attention_floor_exact,
    "ceil-identity": ceil_identity,
    "ceil-identity-at-zero": ceil_identity_at_zero,
    "vllm-sizing-covers": vllm_sizing_covers,
    "cpp-sizing-covers": cpp_sizing_covers,
    "ssm-minimum": ssm_minimum,
    "stale-is-token-level": stale_is_token_level,
    "in-flight-sufficient": in_flight_sufficient,
    "in-flight-tight": in_flight_tight,
    "eviction-floor-sufficient": eviction_sufficient,
    "eviction-floor-tight": eviction_tight,
    "prompt-lock-floor-sufficient": prompt_lock_sufficient,
    "load-holds-prefix-floor": load_holds_prefix_floor,
    "prompt-lock-floor-tight": prompt_lock_tight,
    "eviction-interval-one": eviction_interval_one,
    "decode-clock-due-every-e": decode_clock_due_every_e,
    "decode-clock-floor-sufficient": decode_clock_sufficient,
    "decode-clock-floor-tight": decode_clock_tight,
    "decode-clock-interval-one": decode_clock_interval_one,
    "forward-clock-no-floor": forward_clock_no_floor,
    "refused-keeps-stale-cost": refused_keeps_stale_cost,
    "ring-window-floor": ring_window_floor,
    "free-order-cost": free_order_cost,
    "preallocation-within-free": preallocation_within_free,
    "preallocation-keeps-waiting": preallocation_keeps_waiting,
    "preallocation-never-keeps-waiting": preallocation_never_keeps_waiting,
    "sync-floor-short-in-flight": sync_floor_short_in_flight,
    "sync-floor-short-in-flight-exact": sync_floor_short_in_flight_exact,
    "legacy-floor-insufficient": legacy_floor_insufficient,
    "trtllm-min-quota-holds-floor": trtllm_min_quota_holds_floor,
    "trtllm-prefix-min-quota-holds-floor": trtllm_prefix_min_quota_holds_floor,
    "decode-floor-short-for-multi-token": decode_floor_short_for_multi_token,
    "same-call-release-transient": same_call_release_transient,
    "same-call-release-transient-exact": same_call_release_transient_exact,
    "resume-partial-copy": resume_partial_copy,
    "resume-partial-copy-exact": resume_partial_copy_exact,
    "shared-batch-exact": shared_batch_exact,
    "sharing-never-raises": sharing_never_raises,
    "lookahead-sufficient": lookahead_sufficient,
    "drafts-returned-at-commit": drafts_returned_at_commit,
    "lookahead-tight": lookahead_tight,
    "hit-window-backed": hit_window_backed,
    "hit-aligned": hit_aligned,
    "hit-valid": hit_valid,
    "hit-longest": hit_longest,
    "hit-null-accounting": hit_null_accounting,
    "mixed-pool-group-sufficient": mixed_pool_group_sufficient,
    "mixed-pool-group-tight": mixed_pool_group_tight,
    "hit-mixed-valid": hit_mixed_valid,
    "lone-request-completes": lone_request_completes,
    "vllm-capped-gate-admits-at-chunk-floor": vllm_capped_gate_admits_at_chunk_floor,
    "vllm-uncapped-gate-admits-at-chunk-floor": vllm_uncapped_gate_admits_at_chunk_floor,
    "sglang-gate-admits-at-chunk-floor": sglang_gate_admits_at_chunk_floor,
    "sglang-prefill-budget-admits-at-chunk-floor": sglang_prefill_budget_admits_at_chunk_floor,
    "kept-lone-request-resumes": kept_lone_request_resumes,
    "trtllm-resume-gate-admits-kept-lone-request": trtllm_resume_gate_admits_kept_lone_request,
    "preemption-spares-the-oldest": preemption_spares_the_oldest,
    "fcfs-pair-finishes": fcfs_pair_finishes,
    "fcfs-pair-ranked": fcfs_pair_finishes,  # the same plain statement, proved for any lengths
    "fcfs-three-ranked": fcfs_three_ranked,
    "oldest-three-livelock": oldest_three_livelock,
    "fcfs-pair-ranked-swa": fcfs_pair_ranked_swa,
    "fcfs-three-ranked-swa": fcfs_three_ranked_swa,
    "fcfs-pair-ranked-blocks": fcfs_pair_ranked_blocks,
    "stale-freed-on-growth-cost": stale_freed_on_growth_cost,
    "stale-freed-on-growth-cost-one-less": stale_freed_on_growth_cost_one_less,
    "hit-covers-written-kv": hit_covers_written_kv,
    "named-hit-covers-written-kv": named_hit_covers_written_kv,
    "dropped-step-names-no-hit": dropped_step_names_no_hit,
    "worker-mask-reads-held-blocks": worker_mask_reads_held_blocks,
    "drafts-write-allocated-blocks": drafts_write_allocated_blocks,
}


def run_twin(name: str, grid: Grid = DEFAULT_GRID) -> TwinResult:
    """The twin of theorem ``name``. An exception inside the reference, or a theorem with no twin, is
    an ``error``: it meets neither outcome (a refutation's twin must find a real counterexample)."""
    twin = TWINS.get(name)
    if twin is None:
        return TwinResult(False, 0, 0.0, error=f"no token-level twin for theorem {name}", missing=True)
    start = time.perf_counter()
    try:
        return twin(grid)
    except Exception as exc:  # a crash of the code under test is a failure with what raised, never a pass
        return TwinResult(False, 0, time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
