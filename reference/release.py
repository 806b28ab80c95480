"""The release-policy layer: when and what a manager frees, as engines differ.

- Tokens in flight (``in_flight_tokens``, k): blocks are released on history ``max(0, h - k)`` (an
  engine that schedules a step before the last one's tokens are computed).
- Hold-until-return (``release_order``, TensorRT-LLM): blocks a resize made stale stay held until the
  call returns (those cut off by a smaller capacity are freed first in both orders).
- Lazy freeing (``free_stale = at-allocate``, vLLM): commit frees nothing; the next resize frees what
  is stale at the current history first, and that release stands even when the allocation fails.
- Eviction interval (``eviction_interval`` e, SGLang's ``SGLANG_SWA_EVICTION_INTERVAL``): a window
  frees its stale blocks only when its eviction is due (:func:`~.floors.eviction_due`).
- Suspension (``suspend``): ``recompute`` (vLLM's preemption) drops the computed tokens, ``keep``
  (TensorRT-LLM V2 with GPU memory only) frees nothing.
- No first-resume copy (``first_resume_copy`` off): engines that load a reused prefix in place.
- A load holding every loaded token (``load_holds_prefix``, vLLM before 0.14.1): a first resume over
  reused history frees on its cache hit (:meth:`~.hooks.Hooks.resume_hit_tokens`; 0 without one), so it
  holds the hit's live blocks and every block past the hit up to its capacity; the next release frees
  what is stale.
"""

from __future__ import annotations

from . import floors, lifecycle
from .config import FreeStale, ReleaseOrder, SuspendMode
from .core import CoreManager, RequestRecord
from .lifecycle import LifeCycleKind
from .values import Plan, Ranges, merged_ranges, ranges_minus

__all__ = ["ReleasePolicy"]


class ReleasePolicy(CoreManager):
    """The core with the semantics' release policy (each option off: the core's behaviour)."""

    def __init__(self, config, release_order=None):
        super().__init__(config, release_order)
        self.eviction_interval = config.semantics.eviction_interval  # hook: replaced by seeded bugs

    def stale_range(self, life_cycle: int, history: int) -> tuple[int, int]:
        return super().stale_range(life_cycle, lifecycle.released_history(history, self.semantics.in_flight_tokens))

    def skips_unchanged_steps(self) -> bool:
        # under an eviction interval above 1 what is freed depends on each window's cursor, not on the history alone
        return self.eviction_interval == 1 and super().skips_unchanged_steps()

    def release_points(self, record: RequestRecord, history: int) -> list[int]:
        """Under an eviction interval above 1 a window whose eviction is not due keeps the history it
        last freed on."""
        if self.eviction_interval == 1:
            return super().release_points(record, history)
        k, e = self.semantics.in_flight_tokens, self.eviction_interval
        points = []
        for lc_index, lc in enumerate(self.layout.life_cycles):
            r, t = record.evicted_on[lc_index], self.block_sizes[lc_index]
            if lc.window is None or r >= history or floors.eviction_due(history, r, t, lc.window, lc.sink_blocks, k, e):
                points.append(history)
            else:
                points.append(r)
        return points

    def released_on(self, record: RequestRecord, life_cycle: int) -> int:
        return record.evicted_on[life_cycle] if self.eviction_interval != 1 else super().released_on(record, life_cycle)

    def held_until_return(self, plan: Plan, history: int) -> list[Ranges | None] | None:
        """Hold-until-return: per life cycle, the released blocks that are stale at ``history`` (rather
        than cut off by a smaller capacity)."""
        if self.release_order is not ReleaseOrder.HOLD_UNTIL_RETURN:
            return super().held_until_return(plan, history)
        kept: list[Ranges | None] = []
        released_on = lifecycle.released_history(history, self.semantics.in_flight_tokens)
        for lc_index, step in enumerate(plan):
            lc = self.layout.life_cycles[lc_index]
            if step is None or lc.kind is LifeCycleKind.SSM or lc.window is None:
                kept.append(None)
                continue
            start, end = lifecycle.stale_range(released_on, self.block_sizes[lc_index], lc.window, lc.sink_blocks)
            kept.append(ranges_minus(step[1], ranges_minus(step[1], merged_ranges((start, end)))))
        return kept

    def committed(self, record: RequestRecord) -> None:
        if self.semantics.free_stale is FreeStale.AT_COMMIT:
            super().committed(record)

    def suspend_release(self, record: RequestRecord) -> None:
        if self.semantics.suspend is not SuspendMode.KEEP:
            super().suspend_release(record)

    def suspend_forgets(self, record: RequestRecord) -> bool:
        return self.semantics.suspend is SuspendMode.RECOMPUTE

    def keeps_slots_suspended(self) -> bool:
        return self.semantics.suspend is SuspendMode.KEEP

    def resume_released_on(self, record: RequestRecord) -> int:
        if self.semantics.load_holds_prefix and record.pending_copy:
            # the loaded tokens are new tokens of a request with nothing computed past its cache hit
            return self.resume_hit_tokens(record)
        return super().resume_released_on(record)

    def first_resume_copies(self, reused_history: int) -> list[int]:
        if not self.semantics.first_resume_copy:
            return [0] * self.layout.num_pool_groups
        return super().first_resume_copies(reused_history)
