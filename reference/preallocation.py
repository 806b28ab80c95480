"""The pre-allocation layer: a step that needs a block takes more past it (``preallocate_tokens``).

Under ``preallocate_tokens = P`` a request keeps, per attention life cycle, a table of ``e`` blocks (its
extent, 0 for a request that holds nothing). A step (a resume or a resize) to capacity ``c`` needs
``n = ceil(c / t) - e`` blocks past its table (at a first resume, past the blocks its cache hit gives;
none when ``n <= 0``: it takes nothing, whatever it frees). Such a step is admitted exactly as the
spec admits it (its own blocks fit); it then takes :func:`preallocated_blocks` ``= min(n +
ceil(P / t), F)`` blocks, ``F`` the slots its pool group has once the step's release is counted and its
hits are taken, so its table spans ``ceil(c / t)`` and up to ``ceil(P / t)`` blocks more: held, holding
nothing yet. The stale blocks of a sliding window go as before (never one past the capacity); a life
cycle whose table ends past the capacity holds the blocks up to its end. Suspension and release drop
the table (``e = 0``). With several life cycles in one pool group each takes its blocks past its own
table in order, from what the ones before it left. No per-request cap is modelled (an engine's
``max_model_len`` bounds the table; the adapters set it far above every trace).

vLLM 0.8.3's ``KVCacheManager`` behaves so with ``num_preallocate_tokens = 64`` (``allocate_slots``:
``min(num_new_blocks + num_preallocate_blocks, free blocks, max_num_blocks_per_req - len(req_blocks))``
whenever ``num_new_blocks > 0``); vllm-project/vllm#16941 removed it in 0.8.5, as memory a request
holds for nothing.

What it costs against the dense model (the spec), theorems ``preallocation-within-free`` and
``preallocation-keeps-waiting``: a step never takes a slot the pool does not have, holds at most
``ceil(P / t)`` blocks more than the spec, and withholds :func:`withheld_blocks` ``= min(ceil(P / t),
F - n)`` slots from the pool: a waiting request of ``b`` blocks that the spec admits next (``n + b <=
F``) is kept waiting exactly when ``b > F - n - ceil(P / t)``.
"""

from __future__ import annotations

from typing import Any

from . import lifecycle
from .arith import cdiv, imax, imin, ite
from .core import CoreManager, RequestRecord
from .lifecycle import LifeCycleKind
from .values import Outcome, Plan, Ranges, RequestState, merged_ranges

__all__ = ["preallocation_blocks", "preallocated_blocks", "withheld_blocks", "Preallocation"]


def preallocation_blocks(tokens: Any, t: Any) -> Any:
    """The blocks of ``tokens`` pre-allocated tokens: ``ceil(P / t)`` (vLLM's ``num_preallocate_blocks``)."""
    return cdiv(tokens, t)


def preallocated_blocks(needed: Any, extra: Any, free: Any) -> Any:
    """The blocks a step that needs ``needed`` blocks past its table takes, ``extra`` pre-allocated
    blocks allowed and ``free`` slots in its pool: ``min(needed + extra, free)`` when ``needed > 0``
    (the step is admitted only when ``needed <= free``), else none."""
    return ite(needed > 0, imin(needed + extra, free), 0)


def withheld_blocks(needed: Any, extra: Any, free: Any) -> Any:
    """The slots a step that needs ``needed <= free`` blocks withholds from the pool beyond the spec's
    step: the pre-allocated blocks it takes, ``min(extra, free - needed)`` (never negative)."""
    return imax(preallocated_blocks(needed, extra, free) - imax(needed, 0), 0)


class Preallocation(CoreManager):
    """The core with steps taking blocks past what they need (the option off: the core's behaviour)."""

    _asked: int | None = None  # the capacity of the step being planned

    def _extents(self) -> dict[str, list[int]]:
        found = self.__dict__.get("_preallocated")
        if found is None:
            found = self.__dict__["_preallocated"] = {}
        return found

    def extent(self, record: RequestRecord, life_cycle: int) -> int:
        """The blocks a request's table of a life cycle spans past its capacity's, taken by its steps
        (0: none past it)."""
        got = self._extents().get(record.request_id)
        return got[life_cycle] if got else 0

    def table_blocks(self, record: Any, life_cycle: int) -> int:
        return max(super().table_blocks(record, life_cycle), self.extent(record, life_cycle))

    def record_ranges(self, record: RequestRecord, life_cycle: int, history: int, capacity: int) -> Ranges:
        extent = self.extent(record, life_cycle) if self.semantics.preallocate_tokens else 0
        t = self.block_sizes[life_cycle]
        if extent > lifecycle.allocated_blocks(capacity, t):  # held as if the capacity filled the table
            return super().record_ranges(record, life_cycle, history, extent * t)
        return super().record_ranges(record, life_cycle, history, capacity)

    def plan(self, record: RequestRecord, history: int, capacity: int) -> Plan:
        self._asked = capacity
        return super().plan(record, history, capacity)

    def feasible(self, plan: Plan, held_back: list[Ranges | None] | None, extra: list[int] | None) -> Outcome:
        """The spec's gate; an admitted step then takes its pre-allocated blocks (the plan grows by them)."""
        outcome = super().feasible(plan, held_back, extra)
        record, capacity = self._planning, self._asked
        if not outcome or not self.semantics.preallocate_tokens or record is None or capacity is None:
            return outcome
        needed, available = self.slot_balance(plan, held_back, extra)
        left = [a - n for n, a in zip(needed, available)]  # the free slots once the step's own are taken
        resuming = record.state is RequestState.SUSPENDED
        extents = [0] * len(plan) if resuming else list(self._extents().get(record.request_id) or [0] * len(plan))
        hit = self.resume_hit_tokens(record) if resuming else 0
        for lc_index, step in enumerate(plan):
            lc, t = self.layout.life_cycles[lc_index], self.block_sizes[lc_index]
            if lc.kind is LifeCycleKind.SSM:
                continue
            end = lifecycle.allocated_blocks(capacity, t)
            table = max(extents[lc_index], hit // t)  # the table before the step (at a resume: the hit's blocks)
            if step is None or end <= table:
                extents[lc_index] = max(extents[lc_index], end)
                continue
            g = self.pool_group_of[lc_index]
            more = withheld_blocks(end - table, preallocation_blocks(self.semantics.preallocate_tokens, t),
                                   end - table + left[g])
            if more > 0:
                left[g] -= more
                plan[lc_index] = (merged_ranges(*step[0], (end, end + more)), step[1],
                                  merged_ranges(*step[2], (end, end + more)))
            extents[lc_index] = end + more
        self._extents()[record.request_id] = extents
        return outcome

    def release_all(self, record: RequestRecord) -> None:
        super().release_all(record)
        self._extents().pop(record.request_id, None)
