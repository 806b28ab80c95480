"""The ring layer: a sliding window kept as a fixed ring of blocks (``window_ring``).

An SWA life cycle under ``window_ring`` keeps the token at position ``p`` in ring slot ``p % W`` of
the request's blocks (block ``(p % W) // t``, offset ``(p % W) % t``): it holds the blocks of its
first ``min(c, W)`` token positions, :func:`ring_blocks`, from the first step that reaches them until
the request is released, and frees nothing as the window slides (a new token overwrites the one that
just left the window). Nothing is ever stale; full attention and SSM life cycles are unchanged.
transformers' continuous batching (its sliding-window cache allocator) behaves so. Defined for
windows without sink tokens (a config with sink tokens is refused, :mod:`.config`).

What it costs against the rule is the theorem ``ring-window-floor``: at most the floor
``ceil((W-1)/t) + 1`` (no sinks), one block less unless ``(W-1) % t == 0``, and never more than the
spec's live blocks at a step with a new token.
"""

from __future__ import annotations

from typing import Any

from .arith import cdiv, imin
from .core import CoreManager
from .lifecycle import LifeCycleKind
from .values import Ranges

__all__ = ["ring_blocks", "RingWindow"]


def ring_blocks(capacity: Any, t: Any, window: Any) -> Any:
    """The blocks a ring of a ``window``-token sliding window holds at capacity ``c``:
    ``ceil(min(c, W) / t)`` (the blocks of ring slots ``0 .. min(c, W) - 1``)."""
    return cdiv(imin(capacity, window), t)


class RingWindow(CoreManager):
    """The core with sliding windows kept as rings (the option off: the core's behaviour)."""

    def stale_range(self, life_cycle: int, history: int) -> tuple[int, int]:
        if self.semantics.window_ring:
            return (0, 0)  # a ring frees nothing as the window slides
        return super().stale_range(life_cycle, history)

    def moving_windows(self) -> list[int]:
        return [] if self.semantics.window_ring else super().moving_windows()

    def required_ranges(self, life_cycle: int, history: int, capacity: int) -> Ranges:
        lc = self.layout.life_cycles[life_cycle]
        if not self.semantics.window_ring or lc.kind is not LifeCycleKind.SWA:
            return super().required_ranges(life_cycle, history, capacity)
        held = ring_blocks(capacity, self.block_sizes[life_cycle], lc.window)
        return ((0, held),) if held > 0 else ()
