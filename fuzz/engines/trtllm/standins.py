"""Stand-ins that let upstream's storage manager count slots on a CPU (our own code).

:class:`SlotStore` replaces a cache level's storage: per pool group a number of slots and a free
list, no memory behind them. :class:`NothingToEvict` replaces the eviction controller: nothing is
ever evictable, as with GPU memory only and every page held. :func:`storage_manager` builds an
upstream ``StorageManager`` around them without running its constructor (which sizes real pools):
the fields the slot-accounting and sizing methods read are set from a :class:`~.mapping.TrtllmLayout`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .mapping import TrtllmLayout

__all__ = ["StandInMisuse", "StandInSlot", "SlotStore", "NothingToEvict", "storage_manager"]


class StandInMisuse(RuntimeError):
    """Upstream asked a stand-in for something its real counterpart could not do either (more slots
    than are free, a slot it never handed out, an eviction with nothing evictable). Raised inside an
    upstream call, it is upstream's failure, with its input."""


class StandInSlot:
    __slots__ = ("slot_id", "pool_group")

    def __init__(self, slot_id: int, pool_group: int):
        self.slot_id = slot_id
        self.pool_group = pool_group

    def __repr__(self) -> str:
        return f"slot(g{self.pool_group}#{self.slot_id})"


class _PoolGroup:
    def __init__(self, index: int, num_slots: int, slot_size: Sequence[int]):
        self.index = index
        self.num_slots = num_slots
        self.slot_size = list(slot_size)
        self.num_pools = len(slot_size)
        self._free = list(range(num_slots - 1, -1, -1))
        self._out: set[int] = set()

    @property
    def num_free_slots(self) -> int:
        return len(self._free)

    def allocate_multiple(self, n: int) -> list[StandInSlot]:
        if n > len(self._free):
            raise StandInMisuse(f"stand-in storage: {n} slots asked of pool group {self.index}, {len(self._free)} free")
        out = [self._free.pop() for _ in range(n)]
        self._out.update(out)
        return [StandInSlot(s, self.index) for s in out]

    def release(self, slot: StandInSlot) -> None:
        if slot.pool_group != self.index or slot.slot_id not in self._out:
            raise StandInMisuse(f"stand-in storage: {slot!r} released to pool group {self.index} that did not hand it out")
        self._out.remove(slot.slot_id)
        self._free.append(slot.slot_id)


class SlotStore:
    """A cache level's storage with counts only."""

    def __init__(self, slots: Sequence[int], slot_sizes: Sequence[Sequence[int]], cache_tier: Any):
        self._pool_groups = [_PoolGroup(g, n, s) for g, (n, s) in enumerate(zip(slots, slot_sizes))]
        self.cache_tier = cache_tier

    @property
    def num_pool_groups(self) -> int:
        return len(self._pool_groups)

    def get_num_free_slots(self, pg: int) -> int:
        return self._pool_groups[pg].num_free_slots

    def num_slots(self, pg: int) -> int:
        return self._pool_groups[pg].num_slots

    def allocate_multiple(self, pg: int, n: int) -> list[StandInSlot]:
        return self._pool_groups[pg].allocate_multiple(n)

    def release(self, pg: int, slot: StandInSlot) -> None:
        self._pool_groups[pg].release(slot)

    def destroy(self) -> None:
        pass


class NothingToEvict:
    """An eviction controller with no evictable page."""

    def __init__(self, num_pool_groups: int):
        self.num_pool_groups = num_pool_groups

    def num_evictable_pages(self, pg: int) -> int:
        return 0

    def evict(self, counts: Sequence[int]) -> list[list[Any]]:
        if any(counts):
            raise StandInMisuse(f"stand-in controller: asked to evict {list(counts)} with nothing evictable")
        return [[] for _ in range(self.num_pool_groups)]

    def page_iterator(self, pg: int):
        return iter(())

    def schedule_for_eviction(self, page: Any) -> None:
        raise StandInMisuse("stand-in controller: no page is ever scheduled for eviction on this path")


def storage_manager(upstream: Any, layout: TrtllmLayout, registry: Any, slots: Sequence[int] | None = None) -> Any:
    """An upstream ``StorageManager`` for ``layout`` (life cycle ``i`` of ``registry`` in swafloor's pool
    group ``layout.pool_group_of[i]``), one GPU level of ``slots`` slots per pool group (none when
    None: enough for the sizing methods)."""
    sm_module = upstream["_storage_manager"]
    common = upstream["_common"]
    sm = object.__new__(sm_module.StorageManager)
    setattr(sm, "__rawref__", upstream["rawref"].NULL)
    sm._event_manager = None
    sm._life_cycles = registry
    sm._life_cycle_grouping = list(layout.pool_group_of)
    sm._slot_desc_list = [_SlotDesc((size,)) for size in layout.slot_sizes]
    sm._slot_util_frac_max = list(layout.scratch_fraction)
    sm._layer_to_life_cycle_ids = {spec.layer_id: lc for spec, lc in zip(layout.layers, layout.life_cycle_of_layer)}
    sm._slot_to_page_indices = []
    sm._buffer_attr = {}
    sm._layer_attributes = {}
    sm._min_slots = [1] * layout.num_pool_groups
    counts = list(slots) if slots is not None else [0] * layout.num_pool_groups
    level = object.__new__(sm_module.CacheLevelManager)
    level.cache_level = common.GPU_LEVEL
    level.storage = SlotStore(counts, [(s,) for s in layout.slot_sizes], common.CacheTier.GPU_MEM)
    level.controller = NothingToEvict(layout.num_pool_groups)
    sm._levels = [level]
    return sm


class _SlotDesc:
    __slots__ = ("slot_size_list",)

    def __init__(self, slot_size_list: tuple[int, ...]):
        self.slot_size_list = slot_size_list
