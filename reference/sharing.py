"""Shared prefixes: blocks held by several requests, counted once.

Requests may share a prefix of ``p`` whole blocks (a system prompt of ``n`` tokens shares
``p = n // t`` blocks; a cache hit on ``k`` committed tokens shares ``k // t``). A shared block takes
one slot; it is stale for its pool only when stale for every holder, and it is freed when its last
holder releases it. Every holder's capacity covers the prefix (``c >= p * t``).

For one holder at ``(h, c)`` the prefix blocks it does not need are one half-open range, its *gap*
(:func:`prefix_gap`): the stale range clipped to the prefix. A prefix block is needed by no holder
exactly when it lies in every holder's gap, so the batch's unneeded prefix blocks are the
intersection of the gaps, ``[max lo_i, min hi_i)`` (:func:`batch_gap`). A batch therefore holds

    ``shared_batch_slots = (p - |batch gap|) + sum_i (live_i - (p - |gap_i|))``

slots of one attention life cycle: the prefix blocks live for any holder, once, plus each request's
own live blocks past the prefix. Written on the arithmetic kernel (ints and solver terms).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from .arith import fdiv, imax, imin
from .lifecycle import live_blocks, stale_range

__all__ = ["prefix_blocks", "prefix_gap", "batch_gap", "gap_size", "shared_live", "own_live", "shared_batch_slots"]


def prefix_blocks(prefix_tokens: Any, t: Any) -> Any:
    """The whole blocks a prefix of ``prefix_tokens`` tokens shares: ``prefix_tokens // t`` (a partial
    last block is private to each request)."""
    return fdiv(prefix_tokens, t)


def prefix_gap(h: Any, t: Any, window: Any, sink_blocks: Any, p: Any) -> tuple[Any, Any]:
    """The prefix blocks ``[0, p)`` a holder at history ``h`` does not need, as ``[lo, hi)`` with
    ``lo <= hi <= p``: its stale range clipped to the prefix (full attention: empty, ``[p, p)``)."""
    if window is None:
        return (p, p)
    start, end = stale_range(h, t, window, sink_blocks)
    return (imin(start, p), imin(end, p))


def gap_size(gap: tuple[Any, Any]) -> Any:
    lo, hi = gap
    return imax(0, hi - lo)


def batch_gap(gaps: Iterable[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The prefix blocks no holder needs: the intersection ``[max lo_i, min hi_i)`` of the holders'
    gaps (empty when ``max lo_i >= min hi_i``). Needs at least one gap."""
    gaps = list(gaps)
    lo, hi = gaps[0]
    for g_lo, g_hi in gaps[1:]:
        lo, hi = imax(lo, g_lo), imin(hi, g_hi)
    return lo, hi


def shared_live(p: Any, gaps: Sequence[tuple[Any, Any]]) -> Any:
    """The prefix blocks live for at least one holder: one slot each."""
    return p - gap_size(batch_gap(gaps))


def own_live(h: Any, c: Any, t: Any, window: Any, sink_blocks: Any, p: Any) -> Any:
    """A holder's live blocks past the prefix: its live blocks less the prefix blocks it needs."""
    return live_blocks(h, c, t, window, sink_blocks) - (p - gap_size(prefix_gap(h, t, window, sink_blocks, p)))


def shared_batch_slots(requests: Sequence[tuple[Any, Any]], t: Any, window: Any, sink_blocks: Any, p: Any) -> Any:
    """Slots one attention life cycle holds for a batch of ``(history, capacity)`` requests sharing a
    prefix of ``p`` blocks (each ``capacity >= p * t``): shared blocks live for any holder, once, plus
    each request's own live blocks. ``p = 0`` is the sum of the requests' live blocks."""
    if not requests:
        return 0
    gaps = [prefix_gap(h, t, window, sink_blocks, p) for h, _ in requests]
    own = 0
    for h, c in requests:
        own = own + own_live(h, c, t, window, sink_blocks, p)
    return shared_live(p, gaps) + own
