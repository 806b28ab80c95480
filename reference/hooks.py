"""The named extension points of :class:`~.core.CoreManager` whose core behaviour is to do nothing
special (a base class of the core): each layer (:mod:`.release`, :mod:`.prefix_cache`,
:mod:`.lookahead`) and each seeded bug changes the manager by overriding these, or the hooks that
are the rule itself (in :mod:`.core`: ``stale_range``, ``required_ranges``, ``record_ranges``, ``first_resume_copies``,
``feasible``, ``take_slot``, ``free_blocks``, ``release_all``, ``committed``, ``catch_up``,
``suspend_release``), never a private method. ``record`` is the core's
:class:`~.core.RequestRecord`; a plan is :data:`~.values.Plan`."""

from __future__ import annotations

from typing import Any, Callable

import attrs

from . import lifecycle
from .pool import Pool
from .values import Outcome, Plan, Ranges

__all__ = ["Hooks", "ExecutionHooks"]


class Hooks:
    """The extension points with their core defaults."""

    def use_block_sizes(self, sizes: tuple[int, ...]) -> None:
        """Hook: the tokens per block each life cycle counts its blocks in."""
        self.block_sizes = tuple(sizes)
        self._sizes = tuple(sorted(set(sizes)))  # the distinct block sizes

    def new_pool(self, total: int) -> Pool:
        """Hook: the pool of a pool group of ``total`` slots."""
        return Pool(total)

    def release_points(self, record: Any, history: int) -> list[int]:
        """Hook: per life cycle, the history a step to ``history`` frees stale blocks on."""
        return [history] * len(record.ranges)

    def held_until_return(self, plan: Plan, history: int) -> list[Ranges | None] | None:
        """Hook: per life cycle, the released blocks a resize keeps until it returns (None: none)."""
        return None

    def copies_after_blocks(self) -> bool:
        """Hook: whether a first resume takes its copy slots after its blocks (a caching pool: so they
        evict no hit) rather than before."""
        return False

    def resume_released_on(self, record: Any) -> int:
        """Hook: the history a resume's plan frees stale blocks on (the rule: the request's history)."""
        return record.history

    def resume_hit_tokens(self, record: Any) -> int:
        """Hook: the tokens of its reused history a first resume finds computed in a cache (a hit) rather
        than loads (the rule: none)."""
        return 0

    def resume_hits(self, record: Any, plan: Plan) -> list[dict[int, int]] | None:
        """Hook: per life cycle, the blocks a resume takes in slots that already hold them (None: none)."""
        return None

    def released_on(self, record: Any, life_cycle: int) -> int:
        """Hook: the history whose stale blocks the life cycle has freed (what :meth:`check` expects)."""
        return record.released_to

    def keeps_slots_suspended(self) -> bool:
        """Hook: whether a suspended request that was active keeps its slots."""
        return False

    def stepped(self, record: Any, history: int, capacity: int, how: str) -> None:
        """Hook: a step to ``(history, capacity)``: ``planned`` (feasible, about to apply), ``resized``,
        ``unchanged`` (no block changed) or ``resumed``."""

    def resize_refused(self, record: Any, history: int, capacity: int, plan: Plan, outcome: Outcome) -> None:
        """Hook: a resize to ``(history, capacity)`` ran out of slots (it changes nothing)."""

    def suspend_forgets(self, record: Any) -> bool:
        """Hook: whether a suspension drops the request's lengths."""
        return False

    def table_blocks(self, record: Any, life_cycle: int) -> int:
        """Hook: the entries of a request's table of a life cycle (attention: the blocks its capacity
        spans, ``ceil(c / t)``; :mod:`.preallocation` spans the blocks taken past it)."""
        return lifecycle.allocated_blocks(record.capacity, self.block_sizes[life_cycle])

    def release_held_back(self, record: Any, life_cycle: int, ranges: Ranges) -> None:
        """Hook: a resize frees the blocks it held until it returned."""
        self.free_blocks(record, life_cycle, ranges)



@attrs.frozen
class ExecutionHooks:
    """The named extension points of :class:`~.execution.Execution` (scheduling and execution as
    separate events). Each is None for the spec's formula in :mod:`.execution`, looked up at call time
    (so a patch of that formula reaches the layer), or a function of the same arguments that replaces
    it (a seeded bug's behaviour, never a subclass):

    - ``hit_blocks(named_end, written, t)``: the whole blocks of a request's content a lookup takes;
    - ``names_after_drop(named_end, written, t)``: the whole blocks still named after a drop;
    - ``step_capacity(end, drafts)``: the capacity a step asks for (its tokens and its draft slots);
    - ``mask_start(h, window)``: the first token a worker's mask lets the query at ``h`` read.
    """

    hit_blocks: Callable[[Any, Any, Any], Any] | None = None
    names_after_drop: Callable[[Any, Any, Any], Any] | None = None
    step_capacity: Callable[[Any, Any], Any] | None = None
    mask_start: Callable[[Any, Any], Any] | None = None
