"""Minimum slots: the SWA floor, the n-token step need, and the per-pool-group minimum.

``swa_floor = S + ceil((W - 1) / t) + 1``: the sink blocks plus the most blocks the ``W`` tokens of the
live window ``[h + 1 - W, h]`` can touch. An n-token step (capacity ``h + n``) keeps the tokens
``[h + 1 - W, h + n - 1]``, ``W + n - 1`` of them, so its worst case is
``S + ceil((W + n - 2) / t) + 1``; decode is ``n = 1``. Written on the arithmetic kernel.
"""

from __future__ import annotations

import enum
from typing import Any, Iterable

from .arith import cdiv, fdiv, imax
from .lifecycle import LifeCycle, LifeCycleKind, released_history, window_span_blocks

__all__ = [
    "FloorRule",
    "window_blocks",
    "step_floor",
    "swa_floor",
    "in_flight_floor",
    "legacy_floor",
    "full_attention_floor",
    "full_attention_max_capacity",
    "life_cycle_min_slots",
    "worst_case_history",
    "first_floor_history",
    "eviction_cursor",
    "eviction_due",
    "eviction_floor",
]


class FloorRule(str, enum.Enum):
    """How a pool group's minimum slots are derived."""

    FIXED = "fixed"  # after TensorRT-LLM PR #15588: SWA floors, full attention at the largest floor
    LEGACY = "legacy"  # before it: one slot per life cycle


def step_floor(t: Any, window: Any, sink_blocks: Any, n: Any) -> Any:
    """The most blocks an SWA life cycle holds over all histories of an ``n``-token step."""
    return sink_blocks + window_span_blocks(window + n - 1, t)


def window_blocks(t: Any, window: Any) -> Any:
    """The most blocks the live window of a decode step touches: ``ceil((W - 1) / t) + 1``."""
    return window_span_blocks(window, t)


def swa_floor(t: Any, window: Any, sink_blocks: Any) -> Any:
    """The post-fix floor of an SWA life cycle: ``S + ceil((W - 1) / t) + 1`` (a decode step)."""
    return step_floor(t, window, sink_blocks, 1)


def in_flight_floor(t: Any, window: Any, sink_blocks: Any, in_flight: Any) -> Any:
    """The floor of an SWA life cycle when ``k = in_flight`` tokens are in flight: blocks are released
    only on history ``h - k``, so the live window keeps ``W + k`` tokens ``[h + 1 - W - k, h]``:
    ``S + ceil((W - 1 + k) / t) + 1``. ``k = 0`` is :func:`swa_floor`."""
    return sink_blocks + window_span_blocks(window + in_flight, t)


def legacy_floor() -> int:
    """The pre-fix minimum of any life cycle: one slot."""
    return 1


def full_attention_floor(largest_swa_floor: Any) -> Any:
    """The post-fix minimum of a full-attention life cycle: ``max(1, largest SWA floor)``."""
    return imax(1, largest_swa_floor)


def full_attention_max_capacity(t: Any, slots: Any) -> Any:
    """The largest capacity (tokens) a full-attention life cycle serves from ``slots`` slots."""
    return slots * t


def eviction_cursor(r: Any, t: Any, window: Any, sink_blocks: Any, in_flight: Any = 0) -> Any:
    """The eviction cursor of an SWA life cycle that last freed its stale blocks at history ``r``: the
    first token of the first block past the sinks it has not freed, ``t * max(S, floor((r - k + 1 - W)
    / t))`` (``r - k`` floored at 0); ``t * S`` before anything was freed."""
    return t * imax(sink_blocks, fdiv(released_history(r, in_flight) + 1 - window, t))


def eviction_due(h: Any, r: Any, t: Any, window: Any, sink_blocks: Any, in_flight: Any, interval: Any) -> Any:
    """Whether an SWA life cycle whose cursor was set at history ``r`` frees its stale blocks at history
    ``h`` under an eviction interval ``e``: at least ``e`` tokens left the window since the cursor,
    ``max(0, h - k) + 1 - W >= cursor + e``. At ``e = 1`` a step that is not due has nothing newly stale."""
    return released_history(h, in_flight) + 1 - window >= eviction_cursor(r, t, window, sink_blocks, in_flight) + interval


def eviction_floor(t: Any, window: Any, sink_blocks: Any, in_flight: Any, interval: Any) -> Any:
    """The floor of an SWA life cycle under an eviction interval ``e`` (k tokens in flight):
    ``S + ceil((W - 1 + k + max(e, t)) / t)``. A decode step that is due holds at most
    :func:`in_flight_floor` (``S + ceil((W - 1 + k + t) / t)``); one that is not holds the blocks from the
    cursor ``c`` to token ``h <= c + e + W - 2 + k``, ``S + ceil((W - 1 + k + e) / t)``. At ``e <= t`` it
    is :func:`in_flight_floor`; the theorems ``eviction-floor-*`` prove both bounds and their tightness."""
    return sink_blocks + cdiv(window - 1 + in_flight + imax(interval, t), t)


def life_cycle_min_slots(
    life_cycle: LifeCycle,
    t: int,
    rule: FloorRule,
    all_life_cycles: Iterable[LifeCycle],
    in_flight: int = 0,
    eviction_interval: int = 1,
) -> int:
    """One life cycle's share of its pool group's minimum under ``rule``, with ``in_flight`` tokens
    in flight (the fixed rule's SWA floor is :func:`in_flight_floor`, :func:`swa_floor` at 0) and an
    eviction interval (:func:`eviction_floor` above 1)."""
    if rule is FloorRule.LEGACY:
        return legacy_floor()
    if life_cycle.kind is LifeCycleKind.SWA:
        return _swa_share(t, life_cycle, in_flight, eviction_interval)
    if life_cycle.kind is LifeCycleKind.FULL:
        shares = [
            _swa_share(t, lc, in_flight, eviction_interval) for lc in all_life_cycles if lc.kind is LifeCycleKind.SWA
        ]
        return full_attention_floor(max(shares, default=0))
    return 1  # SSM: one state page per request


def _swa_share(t: int, life_cycle: LifeCycle, in_flight: int, eviction_interval: int = 1) -> int:
    if eviction_interval > 1:
        return eviction_floor(t, life_cycle.window, life_cycle.sink_blocks, in_flight, eviction_interval)
    if in_flight == 0:
        return swa_floor(t, life_cycle.window, life_cycle.sink_blocks)
    return in_flight_floor(t, life_cycle.window, life_cycle.sink_blocks, in_flight)


def worst_case_history(t: Any, window: Any, sink_blocks: Any, in_flight: Any = 0) -> Any:
    """A history at which an SWA life cycle's step need peaks: the live window (``W + k`` tokens with
    ``k`` in flight) starts at the last token of the first block past the sinks,
    ``h = (S + 1) * t + W - 2 + k`` (for every step size n)."""
    return (sink_blocks + 1) * t + window - 2 + in_flight


def first_floor_history(t: Any, window: Any, sink_blocks: Any, in_flight: Any = 0) -> Any:
    """The first history at which an SWA life cycle's decode step holds its floor ``F`` (with ``k``
    tokens in flight, :func:`in_flight_floor`): ``h = (F - 1) * t``. Until the first block past the
    sinks goes stale nothing is released, so a decode step holds ``ceil((h + 1) / t)`` blocks, which
    first reaches ``F`` at ``h + 1 = (F - 1) * t + 1``; that is never after :func:`worst_case_history`."""
    return (in_flight_floor(t, window, sink_blocks, in_flight) - 1) * t
