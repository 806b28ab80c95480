"""Minimum slots: the SWA floor, the n-token step need, and the per-pool-group minimum.

``swa_floor = S + ceil((W - 1) / t) + 1``: the sink blocks plus the most blocks the ``W`` tokens of the
live window ``[h + 1 - W, h]`` can touch. An n-token step (capacity ``h + n``) keeps the tokens
``[h + 1 - W, h + n - 1]``, ``W + n - 1`` of them, so its worst case is
``S + ceil((W + n - 2) / t) + 1``; decode is ``n = 1``. Written on the arithmetic kernel.
"""

from __future__ import annotations

import enum
from typing import Any, Iterable, Sequence

import attrs

from .arith import cdiv, fdiv, imax
from .lifecycle import LifeCycle, LifeCycleKind, allocated_blocks, released_history, window_span_blocks

__all__ = [
    "FloorRule",
    "window_blocks",
    "step_floor",
    "swa_floor",
    "in_flight_floor",
    "lookahead_floor",
    "mixed_full_attention_floor",
    "full_share_in_blocks",
    "mixed_min_slots",
    "legacy_floor",
    "full_attention_floor",
    "full_attention_max_capacity",
    "life_cycle_min_slots",
    "worst_case_history",
    "first_floor_history",
    "eviction_cursor",
    "eviction_due",
    "eviction_floor",
    "prompt_lock_floor",
    "load_blocks",
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


def lookahead_floor(t: Any, window: Any, sink_blocks: Any, lookahead: Any, in_flight: Any = 0) -> Any:
    """The floor of an SWA life cycle whose decode steps also hold ``lookahead`` slots for draft tokens
    (speculative decoding: capacity ``h + 1 + lookahead``), with ``in_flight`` tokens in flight. The
    live window then keeps the tokens ``[h + 1 - W - in_flight, h + lookahead]``, ``W + in_flight +
    lookahead`` of them: the in-flight floor at ``in_flight + lookahead`` (the same formula, not a
    second one; ``lookahead`` alone is also :func:`step_floor` at ``n = lookahead + 1``)."""
    return in_flight_floor(t, window, sink_blocks, in_flight + lookahead)


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


def prompt_lock_floor(t: Any, window: Any, sink_blocks: Any) -> Any:
    """The floor of an SWA life cycle whose requests keep their prompt's last window locked
    (``Semantics.prompt_lock``, SGLang's tree lock): :func:`swa_floor` plus the locked blocks,
    ``S + 2 * ceil((W - 1) / t) + 1``: a lone decoding request holds its live window and, once that
    window has moved past its prompt, the ``ceil((W - 1) / t)`` blocks the lock keeps
    (:func:`~.lifecycle.prompt_lock_range`). Theorems ``prompt-lock-floor-*``."""
    return swa_floor(t, window, sink_blocks) + cdiv(window - 1, t)


def load_blocks(t: Any, capacity: Any) -> Any:
    """The blocks an attention life cycle holds after a first resume that loads its reused history as new
    tokens of a request with nothing computed (``Semantics.load_holds_prefix``, no cache hit; a hit of
    ``L`` tokens leaves out the blocks before the hit's window): every block up to the
    capacity, ``ceil(c / t)``, whatever the window; more than :func:`swa_floor` exactly when
    ``c > swa_floor * t`` (theorem ``load-holds-prefix-floor``)."""
    return allocated_blocks(capacity, t)


def life_cycle_min_slots(
    life_cycle: LifeCycle,
    t: int,
    rule: FloorRule,
    all_life_cycles: Iterable[LifeCycle],
    in_flight: int = 0,
    lookahead: int = 0,
    eviction_interval: int = 1,
    prompt_lock: bool = False,
) -> int:
    """One life cycle's share of its pool group's minimum under ``rule``, with ``in_flight`` tokens
    in flight, ``lookahead`` draft slots and an eviction interval (the fixed rule's SWA floor is
    :func:`eviction_floor` above interval 1, else :func:`lookahead_floor`, :func:`in_flight_floor`
    without drafts, :func:`swa_floor` with neither). ``t``: the config's tokens per block; a life cycle
    with a block size of its own (``LifeCycle.tokens_per_block``) counts in that. Full attention's
    share is :func:`full_attention_floor` of the largest SWA share, each first converted to blocks of
    full attention's own size (:func:`full_share_in_blocks`; the same number where the sizes agree).
    With one SWA life cycle it also evaluates on solver terms and numpy arrays (the window, sinks and
    block sizes of the life cycles may be terms; the rule, tokens in flight, drafts and interval not)."""
    if rule is FloorRule.LEGACY:
        return legacy_floor()
    if life_cycle.kind is LifeCycleKind.SWA:
        if prompt_lock:  # SGLang's radix cache: no tokens in flight, drafts or interval (the semantics needs none)
            return prompt_lock_floor(life_cycle.block_size(t), life_cycle.window, life_cycle.sink_blocks)
        return _swa_share(life_cycle.block_size(t), life_cycle, in_flight, lookahead, eviction_interval)
    if life_cycle.kind is LifeCycleKind.FULL:
        t_full = life_cycle.block_size(t)
        shares = []
        for lc in all_life_cycles:
            if lc.kind is LifeCycleKind.SWA:
                t_i = lc.block_size(t)
                # in blocks of t_full (the share itself where t_i == t_full: theorem mixed-pool-group-tight)
                shares.append(full_share_in_blocks(_swa_share(t_i, lc, in_flight, lookahead, eviction_interval), t_i, t_full))
        return full_attention_floor(max(shares, default=0))
    return 1  # SSM: one state page per request


def _swa_share(t: int, life_cycle: LifeCycle, in_flight: int, lookahead: int = 0, eviction_interval: int = 1) -> int:
    if eviction_interval > 1:
        # k2 draft slots over k1 tokens in flight at history h are k1 + k2 tokens in flight at history
        # h + k2 (the same capacity, the same release points), as lookahead_floor is the in-flight floor
        return eviction_floor(t, life_cycle.window, life_cycle.sink_blocks, in_flight + lookahead, eviction_interval)
    if in_flight == 0 and lookahead == 0:
        return swa_floor(t, life_cycle.window, life_cycle.sink_blocks)
    if lookahead == 0:
        return in_flight_floor(t, life_cycle.window, life_cycle.sink_blocks, in_flight)
    return lookahead_floor(t, life_cycle.window, life_cycle.sink_blocks, lookahead, in_flight)


def full_share_in_blocks(swa_floor_blocks: Any, t_swa: Any, t_full: Any) -> Any:
    """Blocks of ``t_full`` tokens that full attention holds when an SWA life cycle of ``t_swa`` tokens
    per block first holds its floor of ``F`` blocks: nothing is released before then, so the SWA life
    cycle holds every block its capacity spans and first holds ``F`` at capacity ``(F - 1) * t_swa + 1``
    (:func:`first_floor_history` plus the token in flight); full attention spans ``ceil(((F - 1) *
    t_swa + 1) / t_full)`` blocks there. With ``t_swa == t_full`` it is ``F``."""
    return cdiv((swa_floor_blocks - 1) * t_swa + 1, t_full)


def mixed_full_attention_floor(t_full: Any, swa: Iterable[tuple[Any, Any, Any]], reach: Any = 0) -> Any:
    """Full attention's minimum when life cycles have block sizes of their own: it must serve the
    longest history at which some SWA life cycle ``(t_i, W_i, S_i)`` first holds its floor (all life
    cycles see the same sequence), a decode step of capacity ``first_floor_history_i + 1`` in blocks of
    ``t_full``: ``max(1, max_i ceil((first_floor_history_i + 1) / t_full))``. With one block size this
    is :func:`full_attention_floor` of the largest SWA floor. ``reach``: tokens in flight plus draft
    slots (the SWA floors are then :func:`in_flight_floor` at ``reach``)."""
    best: Any = 0
    for t_i, window, sink_blocks in swa:
        best = imax(best, full_share_in_blocks(in_flight_floor(t_i, window, sink_blocks, reach), t_i, t_full))
    return full_attention_floor(best)


def mixed_min_slots(
    life_cycles: Sequence[LifeCycle],
    block_sizes: Sequence[int],
    pool_group_of: Sequence[int],
    rule: FloorRule = FloorRule.FIXED,
    in_flight: int = 0,
    lookahead: int = 0,
) -> tuple[int, ...]:
    """Per pool group minimum slots when each life cycle has its own block size: the sum of the
    group's life cycles' :func:`life_cycle_min_slots`, each with its own ``t`` (SWA at
    :func:`lookahead_floor`, full attention at :func:`mixed_full_attention_floor`, SSM one page). A
    pool group may mix block sizes (a slot is one page, whatever block it holds; see
    :class:`~.config.Config`). Concrete arguments; what :func:`~.config.build_layout` computes for a
    config whose layers carry these block sizes."""
    if not (len(life_cycles) == len(block_sizes) == len(pool_group_of)):
        raise ValueError("mixed_min_slots: one block size and one pool group per life cycle")
    sized = [attrs.evolve(lc, tokens_per_block=t) for lc, t in zip(life_cycles, block_sizes)]
    minimum = [0] * (max(pool_group_of, default=-1) + 1)
    for lc, t, g in zip(sized, block_sizes, pool_group_of):
        minimum[g] += life_cycle_min_slots(lc, t, rule, sized, in_flight, lookahead)
    return tuple(minimum)


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
