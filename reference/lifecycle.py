"""Life cycles and the block ranges of one request: stale, allocated, live, scratch.

A life cycle is what layers with equal attention geometry share: sliding-window attention (SWA,
window ``W`` tokens, ``S`` sink blocks), full attention, or SSM. Token ``p`` lives in block ``p // t``.
At history ``h`` (tokens already computed) attention runs for at least one in-flight token at
position ``h``, so a window keeps the inclusive token range ``[h + 1 - W, h]`` plus the sink blocks.

Every function below is written on the arithmetic kernel and takes plain numbers, so it evaluates
on ints and on Z3 terms. ``window=None`` means full attention (only with concrete arguments).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from .arith import cdiv, fdiv, fmod, imax, imin, ite

__all__ = [
    "LifeCycleKind",
    "LifeCycle",
    "sink_blocks_for",
    "blocks_touched",
    "window_span_blocks",
    "stale_range",
    "window_start",
    "stale_by_tokens",
    "prompt_lock_range",
    "prompt_lock_held",
    "stale_count",
    "allocated_blocks",
    "live_blocks",
    "live_block_indices",
    "scratch_range",
    "range_overlap",
    "resize_peak",
    "transition_peak",
    "first_resume_peak",
    "partial_block",
    "released_history",
]


def sink_blocks_for(sink_tokens: Any, t: Any) -> Any:
    """Sink blocks ``S`` for ``sink_tokens`` sink tokens: a partial sink block counts whole."""
    return cdiv(sink_tokens, t)


def blocks_touched(first: Any, length: Any, t: Any) -> Any:
    """How many blocks the ``length >= 1`` consecutive tokens starting at ``first >= 0`` touch."""
    return fdiv(first + length - 1, t) - fdiv(first, t) + 1


def window_span_blocks(length: Any, t: Any) -> Any:
    """The most blocks ``length >= 1`` consecutive tokens can touch: ``ceil((length - 1) / t) + 1``."""
    return cdiv(length - 1, t) + 1


def stale_range(h: Any, t: Any, window: Any, sink_blocks: Any) -> tuple[Any, Any]:
    """The half-open block range ``[start, end)`` an attention life cycle may release at history h.

    Block ``b`` is stale iff ``b >= S`` and ``(b + 1) * t <= h + 1 - W`` (it ends before the live window).
    Full attention (``window is None``) releases nothing. The range depends on history only.
    """
    if window is None:
        return (0, 0)
    start = imin(cdiv(h, t), sink_blocks)
    return (start, imax(start, fdiv(h + 1 - window, t)))


def window_start(h: Any, window: Any) -> Any:
    """The live window's first token at history ``h``: ``h + 1 - W`` (the token at ``h``, the one in
    flight, is its last). What a worker's attention mask lets a query at ``h`` read, sinks apart."""
    return h + 1 - window


def prompt_lock_range(prompt: Any, t: Any, window: Any) -> tuple[Any, Any]:
    """The SWA blocks ``[start, end)`` a prompt of ``prompt`` tokens keeps locked (SGLang's tree lock on
    the prefix a request matched or published): the last ``ceil((W - 1) / t)`` whole blocks before the
    prompt's last whole block ends, ``[max(0, p // t - ceil((W - 1) / t)), p // t)``; empty for full
    attention (its blocks are held anyway)."""
    if window is None:
        return (0, 0)
    end = fdiv(prompt, t)
    return (imax(0, end - cdiv(window - 1, t)), end)


def prompt_lock_held(h: Any, capacity: Any, prompt: Any, t: Any, window: Any, sink_blocks: Any) -> Any:
    """Blocks an SWA life cycle holds at ``(h, capacity)`` while its request keeps its prompt's last
    window locked (:func:`prompt_lock_range`, clipped to the allocated blocks): its live blocks plus
    the locked ones that are stale, ``live + |lock & stale|``."""
    lo, hi = prompt_lock_range(prompt, t, window)
    start, end = stale_range(h, t, window, sink_blocks)
    return live_blocks(h, capacity, t, window, sink_blocks) + range_overlap(
        lo, imin(hi, allocated_blocks(capacity, t)), start, end)


def stale_by_tokens(b: Any, h: Any, t: Any, window: Any, sink_blocks: Any) -> Any:
    """Token-level staleness of block ``b`` at history ``h``, without block ranges: it is past the
    ``sink_blocks`` and every token in it, ``b*t .. (b+1)*t - 1``, lies before the live window's first
    token (:func:`window_start`). :func:`stale_range` is this, as a range (a theorem proves it)."""
    return ite(b >= sink_blocks, (b + 1) * t - 1 < window_start(h, window), False)


def released_history(h: Any, in_flight: Any) -> Any:
    """The history stale blocks are computed on with ``k = in_flight`` tokens in flight:
    ``max(0, h - k)`` (the window keeps ``W + k`` tokens); ``k = 0`` is ``h``."""
    return imax(0, h - in_flight)


def stale_count(h: Any, t: Any, window: Any, sink_blocks: Any) -> Any:
    """The number of stale blocks at history ``h``."""
    start, end = stale_range(h, t, window, sink_blocks)
    return end - start


def allocated_blocks(capacity: Any, t: Any) -> Any:
    """Blocks ``[0, ceil(c / t))`` that a capacity of ``c`` tokens spans."""
    return cdiv(capacity, t)


def live_blocks(h: Any, capacity: Any, t: Any, window: Any, sink_blocks: Any) -> Any:
    """Blocks an attention life cycle must hold at history ``h`` and capacity ``c >= h``."""
    return allocated_blocks(capacity, t) - stale_count(h, t, window, sink_blocks)


def live_block_indices(h: int, capacity: int, t: int, window: int | None, sink_blocks: int) -> tuple[int, ...]:
    """The indices of the live blocks (concrete arguments only), in increasing order."""
    start, end = stale_range(h, t, window, sink_blocks)
    allocated = allocated_blocks(capacity, t)
    return tuple(range(0, min(start, allocated))) + tuple(range(end, allocated))


def scratch_range(
    h: Any, capacity: Any, t: Any, window: Any, sink_blocks: Any, max_rewind_len: Any
) -> tuple[Any, Any]:
    """Blocks of an SWA prefill that need no private page (scratch reuse).

    They are the blocks stale at ``max(0, c - max_rewind_len)`` that the step newly allocates,
    ``stale(max(0, c - rewind)) ∩ [ceil(h / t), ceil(c / t))``, as a half-open range.
    """
    lo, hi = stale_range(imax(0, capacity - max_rewind_len), t, window, sink_blocks)
    first = imax(lo, cdiv(h, t))
    return (first, imax(first, imin(hi, allocated_blocks(capacity, t))))


def partial_block(h: Any, t: Any) -> Any:
    """Whether the block holding token ``h`` is partially filled by history ``h`` (``h % t != 0``)."""
    return fmod(h, t) != 0


def range_overlap(lo1: Any, hi1: Any, lo2: Any, hi2: Any) -> Any:
    """How many integers the half-open ranges ``[lo1, hi1)`` and ``[lo2, hi2)`` share."""
    return imax(0, imin(hi1, hi2) - imax(lo1, lo2))


def resize_peak(
    h0: Any, c0: Any, h1: Any, c1: Any, t: Any, window: Any, sink_blocks: Any, hold_stale: Any
) -> Any:
    """The most blocks held inside one resize of an active request from ``(h0, c0)`` to ``(h1, c1)``,
    with ``h0 <= c0``, ``h0 <= h1 <= c1``.

    Releasing before allocating, the peak is what the step keeps, ``live_blocks(h1, c1)``. When blocks
    made stale by the same call stay held until it returns (``hold_stale``), the call holds every
    block it held before below ``ceil(c1 / t)`` while it allocates the new ones: all of
    ``[0, ceil(c1 / t))`` but the blocks stale at ``h0`` and the blocks past the old allocation that
    are already stale at ``h1`` (never allocated).
    """
    a1 = allocated_blocks(c1, t)
    kept_end = imin(allocated_blocks(c0, t), a1)
    s1, e1 = stale_range(h1, t, window, sink_blocks)
    held_peak = a1 - stale_count(h0, t, window, sink_blocks) - range_overlap(s1, e1, kept_end, a1)
    return ite(hold_stale, held_peak, live_blocks(h1, c1, t, window, sink_blocks))


def transition_peak(
    h0: Any, h1: Any, c1: Any, t: Any, window: Any, sink_blocks: Any, hold_stale: Any
) -> Any:
    """:func:`resize_peak` of a step whose previous capacity already covered the new history
    (``c0 >= h1``, as in decode and chunked prefill): then the peak is ``live_blocks(h1, c1)``
    releasing first, and ``live_blocks(h0, c1)`` holding the blocks the call made stale."""
    return resize_peak(h0, c1, h1, c1, t, window, sink_blocks, hold_stale)


def first_resume_peak(h: Any, capacity: Any, t: Any, window: Any, sink_blocks: Any) -> Any:
    """The most blocks an attention life cycle holds during the first resume of a request that reuses
    ``h`` committed tokens: its live blocks at ``(h, c)`` plus, when the block of token ``h`` is
    partially filled, one transient slot for the private copy made while the source is still held."""
    return live_blocks(h, capacity, t, window, sink_blocks) + ite(partial_block(h, t), 1, 0)


class LifeCycleKind(str, enum.Enum):
    """What a life cycle's layers compute."""

    SWA = "swa"
    FULL = "full"
    SSM = "ssm"


@attrs.frozen
class LifeCycle:
    """The geometry a set of layers shares. Validated by :mod:`.config`; concrete values only."""

    kind: LifeCycleKind
    window: int | None = None
    sink_blocks: int = 0
    # Its own tokens per block; None: the config's (every life cycle of a config with one block size).
    # A layout sets it only where it differs from the config's, so one-size layouts are as before.
    tokens_per_block: int | None = None

    @property
    def is_attention(self) -> bool:
        return self.kind is not LifeCycleKind.SSM

    def block_size(self, default: int) -> int:
        """This life cycle's tokens per block: its own, else ``default`` (the config's)."""
        return default if self.tokens_per_block is None else self.tokens_per_block

    def live_indices(self, h: int, capacity: int, t: int) -> tuple[int, ...]:
        """Block indices this life cycle holds for a request at ``(h, c)``; SSM holds one state page."""
        if self.kind is LifeCycleKind.SSM:
            return (0,)
        return live_block_indices(h, capacity, self.block_size(t), self.window, self.sink_blocks)

    def describe(self) -> str:
        own = "" if self.tokens_per_block is None else f"t={self.tokens_per_block}"
        if self.kind is LifeCycleKind.SWA:
            return f"swa(window={self.window}, sink_blocks={self.sink_blocks}{', ' + own if own else ''})"
        return self.kind.value + (f"({own})" if own else "")
