"""The refusal layer: a refused resize keeps the blocks that left the window (``refused_keeps_stale``).

Under ``free_stale = at-allocate`` a resize first frees what is stale at the current history, and that
release stands when the allocation is then refused. With ``refused_keeps_stale`` (LMDeploy's window
block manager, which drops blocks only inside an allocation that succeeds) nothing is freed before the
gate: the resize's plan releases everything stale at its own release point, the blocks stale since
the last release included, its gate counts them all as free, and a refused resize leaves every block
held. For one request the gate sees the same slots either way (what it holds after the step against
the pool); between requests a refused one keeps blocks another could have taken
(theorem ``refused-keeps-stale-lone-request``).

With ``stale_freed_on_growth`` as well (LMDeploy whose decode schedule calls the block manager only for a
sequence that needs a new block) a resize frees a life cycle's stale blocks only when it adds a block to
that life cycle: otherwise the life cycle keeps the release point it last freed on (its ``evicted_on``),
and the next resize that adds a block frees everything stale at its own point. A resume is planned as
before. What that keeps, beyond what the life cycle would hold without it, is at most
:func:`growth_kept_blocks` blocks (theorems ``stale-freed-on-growth-cost`` and, one block less refuted,
``stale-freed-on-growth-cost-one-less``).
"""

from __future__ import annotations

from typing import Any

from . import lifecycle
from .arith import cdiv
from .core import RequestRecord
from .release import ReleasePolicy

__all__ = ["RefusalPolicy", "growth_kept_blocks"]


def growth_kept_blocks(t: Any, n: Any) -> Any:
    """The most stale blocks a sliding-window life cycle keeps under ``stale_freed_on_growth`` beyond what it
    holds without it, at a step that adds no block, when the last step that added one was of ``n`` tokens:
    ``ceil((n + t - 2) / t)``. That step freed what was stale at its history ``r``; the steps after it add no
    block while their capacity stays within its blocks, so their history is at most ``r + n + t - 2`` and the
    window's start has moved at most ``n + t - 2`` tokens since: one block at a decode step (``n = 1``, ``t >= 2``)."""
    return cdiv(n + t - 2, t)


class RefusalPolicy(ReleasePolicy):
    """The release policy with a refused resize freeing nothing, and with ``stale_freed_on_growth`` a
    resize adding no block freeing nothing (each option off: the policy's behaviour)."""

    _resizing: int | None = None  # the capacity of the resize being planned (None outside a resize)

    def catch_up(self, record: RequestRecord) -> None:
        if not self.semantics.refused_keeps_stale:
            super().catch_up(record)

    def resize(self, request_id, capacity, history=None):
        if not self.semantics.stale_freed_on_growth:
            return super().resize(request_id, capacity, history)
        self._resizing = capacity
        try:
            return super().resize(request_id, capacity, history)
        finally:
            self._resizing = None

    def skips_unchanged_steps(self) -> bool:
        # what a step frees depends on whether it adds a block, not on the history alone: plan every step
        return not self.semantics.stale_freed_on_growth and super().skips_unchanged_steps()

    def release_points(self, record: RequestRecord, history: int) -> list[int]:
        """A life cycle the resize adds no block to keeps the point it last freed on."""
        points = super().release_points(record, history)
        if self._resizing is None:
            return points
        return [point if lifecycle.allocated_blocks(self._resizing, t) > lifecycle.allocated_blocks(record.capacity, t)
                else kept for point, kept, t in zip(points, record.evicted_on, self.block_sizes)]

    def released_on(self, record: RequestRecord, life_cycle: int) -> int:
        if self.semantics.stale_freed_on_growth:
            return record.evicted_on[life_cycle]
        return super().released_on(record, life_cycle)
