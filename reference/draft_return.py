"""The draft-return layer: a commit gives back the slots past the committed tokens
(``drafts_returned_at_commit``, SGLang's EAGLE worker v1).

A decode step with draft slots asks capacity ``h + 1 + k`` (``lookahead_tokens``) as under
:mod:`.lookahead`; its commit of ``d`` tokens then shrinks the request's capacity to
:func:`returned_capacity`, its history ``h + d``: the blocks past the committed tokens (the draft slots
the verify rejected, and any slot the step did not commit) are freed at the commit, not kept until the
next step. Stale blocks are freed as ``free_stale`` says (at the commit under ``at-commit``; at the next
resize under ``at-allocate``, SGLang's), so the plan that gives the drafts back frees only blocks past
the committed tokens: each life cycle's blocks at its last release point (:meth:`~.hooks.Hooks.released_on`)
and the smaller capacity.

What it changes against ``lookahead_tokens`` alone is the theorem ``drafts-returned-at-commit``: the
step's peak is the same (:func:`~.floors.lookahead_floor`); after the commit the request holds exactly
:func:`returned_blocks` blocks fewer than with its drafts kept (the ones past its committed tokens), and
under ``at-commit`` never more than the in-flight floor without drafts.
"""

from __future__ import annotations

from typing import Any

from .arith import cdiv
from .core import CoreManager, RequestRecord
from .values import ranges_minus

__all__ = ["DraftReturn", "returned_capacity", "returned_blocks"]


def returned_capacity(history: Any, capacity: Any) -> Any:
    """The capacity a request keeps after a commit that brought its history to ``history`` (its
    capacity was ``capacity``): its committed tokens, ``history``."""
    return history


def returned_blocks(t: Any, history: Any, capacity: Any) -> Any:
    """The blocks a commit to ``history`` gives back of a capacity ``capacity``: those past the committed
    tokens, ``ceil(c / t) - ceil(h / t)`` (none of them stale: they lie past the history), at most
    ``ceil((c - h) / t)``."""
    return cdiv(capacity, t) - cdiv(history, t)


class DraftReturn(CoreManager):
    """The core with the slots past the committed tokens given back at each commit (the option off: the
    core's behaviour)."""

    def committed(self, record: RequestRecord) -> None:
        if self.semantics.drafts_returned_at_commit:
            self.return_drafts(record)
        super().committed(record)

    def return_drafts(self, record: RequestRecord) -> None:
        """Hook: shrink the request to :func:`returned_capacity`, freeing the blocks past it (each life
        cycle at the release point it last freed stale blocks on: nothing stale is freed here)."""
        kept = returned_capacity(record.history, record.capacity)
        if kept >= record.capacity:
            return
        plan = []
        for lc_index, old in enumerate(record.ranges):
            new = self.record_ranges(record, lc_index, self.released_on(record, lc_index), kept)
            if ranges_minus(new, old):
                raise AssertionError(f"returning drafts of {record.request_id!r} would allocate {ranges_minus(new, old)}")
            plan.append(None if new == old else ((), ranges_minus(old, new), new))
        self.apply(record, plan)
        record.capacity = kept
        self._refresh(record)
