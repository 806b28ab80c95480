"""Seeded bugs: the reference manager with exactly one behaviour changed. The harness must catch each.

- ``mutant:legacy-floor``: sizes pools with the pre-fix minimum (one slot per life cycle).
- ``mutant:no-inflight-token``: keeps the live window ``[h - W, h - 1]`` (the in-flight-token ``+ 1`` dropped): it
  releases one token late and so holds an extra block whenever ``h + 1 - W`` starts a block.
- ``mutant:floor-division``: sizes SWA pools with ``S + floor((W - 1) / t) + 1`` (floor, not ceiling).
- ``mutant:ignore-sinks``: treats ``S`` as 0 when sizing and when releasing (sink blocks are dropped).
- ``mutant:allocate-before-release``: keeps blocks made stale by a resize held until it returns
  (the reference's hold-until-return order), so the transient peak can exceed the pool.
- ``mutant:release-inflight-block``: frees the block of the token in flight (position ``h``) when no
  other needed position keeps it, as if the window ended at ``h - 1``.
- ``mutant:shared-slot``: a block a request takes while another active request holds a slot of the
  same pool group is handed that request's lowest slot (the free slot it took is kept aside), so one
  slot serves two requests. Slot counts and block tables match the reference's: only the data plane
  (``dataplane:mutant:shared-slot``) can see it.
- ``mutant:shared-freed-when-stale-for-one``, ``mutant:shared-counted-per-holder``: the
  prefix-sharing bugs, run under ``prefix_sharing`` (a block freed while another request holds it;
  a shared block counted once per holder). The third, a cache hit that holds its null blocks, is
  seeded in the formulas only: a hit here shares blocks its source still holds, which lie inside the
  new request's window or sinks, so the manager has no null block to hold (it would need a cache
  of freed blocks, which it does not model).

Each is a row of the one list of seeded bugs (:mod:`swafloor.reference.seeded_bugs`: what it
changes, the theorems it flips, the campaigns that catch it); the registry names it ``mutant:NAME``.

Bugs in sizing are built by handing the reference a config whose slot counts are the mutant's own
minimum (under the legacy rule, whose minimum of one slot per life cycle never rejects them).
"""

from __future__ import annotations

from typing import Callable

import attrs

from swafloor.reference import (
    BelowMinimum,
    Config,
    ConfigError,
    FloorRule,
    LifeCycle,
    LifeCycleKind,
    Manager,
    ReleaseOrder,
    RequestState,
    Semantics,
    build_layout,
    fdiv,
    full_attention_floor,
    live_block_indices,
    ranges_of,
    swa_floor,
)

from swafloor.reference.pool import Pool
from swafloor.reference.prefix_cache import content_key
from swafloor.reference.values import range_blocks

from ..protocol import EXACT_WITH_IDENTITY, Capabilities, Comparison, Part, factory
from .reference import ManagerBackend

__all__ = ["MUTANTS", "mutant_minimum"]


def mutant_minimum(config: Config, swa_share: Callable[[int, LifeCycle], int]) -> tuple[int, ...]:
    """Per pool group minimum slots when an SWA life cycle's share is ``swa_share(t, lc)``; full
    attention keeps the reference's rule (the largest SWA share), SSM one slot."""
    layout = build_layout(config)
    t = layout.tokens_per_block
    swa = [swa_share(t, lc) for lc in layout.life_cycles if lc.kind is LifeCycleKind.SWA]
    minimum = [0] * layout.num_pool_groups
    for lc, g in zip(layout.life_cycles, layout.pool_group_of):
        if lc.kind is LifeCycleKind.SWA:
            minimum[g] += swa_share(t, lc)
        elif lc.kind is LifeCycleKind.FULL:
            minimum[g] += full_attention_floor(max(swa, default=0))
        else:
            minimum[g] += 1
    return tuple(minimum)


def _resized(config: Config, minimum: tuple[int, ...]) -> Config:
    """The config with slots resolved against ``minimum`` instead of the reference's."""
    if config.slots is None:
        slots = minimum
    else:
        slots = []
        for g, (given, least) in enumerate(zip(config.slots, minimum)):
            if given < least and config.below_minimum is BelowMinimum.RAISE:
                raise ConfigError(f"slots[{g}]", given, f"below the pool group's minimum of {least}")
            slots.append(max(given, least))
    return attrs.evolve(
        config, slots=tuple(slots), floor_rule=FloorRule.LEGACY, below_minimum=BelowMinimum.RAISE
    )


def _sized_manager(
    config: Config, swa_share: Callable[[int, LifeCycle], int], manager_class: type[Manager] = Manager
) -> Manager:
    if config.floor_rule is FloorRule.LEGACY:  # the reference already uses one slot per life cycle
        return manager_class(config)
    return manager_class(_resized(config, mutant_minimum(config, swa_share)))


class _RequiredRangesChanged(Manager):
    """A manager whose :meth:`required_ranges` is its own: every step is planned (the no-change box
    assumes the spec's dependence on the history)."""

    def skips_unchanged_steps(self) -> bool:
        return False


class _NoInflightToken(_RequiredRangesChanged):
    """Live window ``[h - W, h - 1]``: the window of history ``h - 1``."""

    def required_ranges(self, life_cycle: int, history: int, capacity: int):
        lc = self.layout.life_cycles[life_cycle]
        if lc.kind is LifeCycleKind.SWA:
            history = max(0, history - 1)
        return super().required_ranges(life_cycle, history, capacity)


class _IgnoreSinks(_RequiredRangesChanged):
    """Releases sink blocks like any other block (S taken as 0)."""

    def required_ranges(self, life_cycle: int, history: int, capacity: int):
        lc = self.layout.life_cycles[life_cycle]
        if lc.kind is LifeCycleKind.SWA:
            return ranges_of(live_block_indices(history, capacity, self.tokens_per_block, lc.window, 0))
        return super().required_ranges(life_cycle, history, capacity)


class _ReleaseInflightBlock(_RequiredRangesChanged):
    """Drops the block of position ``h`` unless a sink or another needed position keeps it."""

    def required_ranges(self, life_cycle: int, history: int, capacity: int):
        ranges = super().required_ranges(life_cycle, history, capacity)
        lc = self.layout.life_cycles[life_cycle]
        if lc.kind is not LifeCycleKind.SWA or capacity <= history:
            return ranges
        t = self.tokens_per_block
        block = history // t
        others = [p for p in range(block * t, block * t + t) if p != history and history + 1 - lc.window <= p < capacity]
        if block < lc.sink_blocks or others:
            return ranges
        blocks = [b for lo, hi in ranges for b in range(lo, hi)]  # not required_blocks: it calls this method
        return ranges_of(tuple(b for b in blocks if b != block))


class _SharedSlot(Manager):
    """Hands one slot to two requests (see the module docstring)."""

    def take_slot(self, record, life_cycle: int, block: int) -> int:
        slot = super().take_slot(record, life_cycle, block)  # stays taken: counts are unchanged
        g = self.pool_group_of[life_cycle]
        held = self.slots().held
        others = [
            theirs
            for rid, tables in held.items()
            if rid != record.request_id and self.state_of(rid) is RequestState.ACTIVE
            for i, table in enumerate(tables)
            if self.pool_group_of[i] == g
            for theirs in table.values()
        ]
        return min(others) if others else slot


def _mutant(capabilities: Capabilities, name: str, manager_class: type) -> Callable[[Config], ManagerBackend]:
    """The factory of ``mutant:NAME``: the reference manager class the mutant is, behind its backend."""

    @factory(capabilities, name=f"mutant:{name}")
    def make(config: Config) -> ManagerBackend:
        return ManagerBackend(manager_class(config))

    make.__name__ = make.__qualname__ = name.replace("-", "_")
    return make


@factory(EXACT_WITH_IDENTITY, name="mutant:legacy-floor")
def legacy_floor(config: Config) -> ManagerBackend:
    return ManagerBackend(Manager(attrs.evolve(config, floor_rule=FloorRule.LEGACY)))


no_inflight_token = _mutant(EXACT_WITH_IDENTITY, "no-inflight-token", _NoInflightToken)


@factory(EXACT_WITH_IDENTITY, name="mutant:floor-division")
def floor_division(config: Config) -> ManagerBackend:
    return ManagerBackend(
        _sized_manager(config, lambda t, lc: lc.sink_blocks + fdiv(lc.window - 1, t) + 1)
    )


@factory(EXACT_WITH_IDENTITY, name="mutant:ignore-sinks")
def ignore_sinks(config: Config) -> ManagerBackend:
    return ManagerBackend(_sized_manager(config, lambda t, lc: swa_floor(t, lc.window, 0), _IgnoreSinks))


@factory(EXACT_WITH_IDENTITY, name="mutant:allocate-before-release")
def allocate_before_release(config: Config) -> ManagerBackend:
    return ManagerBackend(Manager(config, release_order=ReleaseOrder.HOLD_UNTIL_RETURN))


release_inflight_block = _mutant(EXACT_WITH_IDENTITY, "release-inflight-block", _ReleaseInflightBlock)


shared_slot = _mutant(EXACT_WITH_IDENTITY, "shared-slot", _SharedSlot)


#: Mutant name -> factory.
MUTANTS = {
    f.declaration.label: f  # type: ignore[attr-defined]
    for f in (
        legacy_floor,
        no_inflight_token,
        floor_division,
        ignore_sinks,
        allocate_before_release,
        release_inflight_block,
        shared_slot,
    )
}


#: The sharing mutants: everything compared exactly, under prefix sharing.
SHARING_IDENTITY = Capabilities(
    observations={p: Comparison.EXACT for p in Part}, semantics=Semantics(prefix_sharing=True), prefix_sharing=True
)


class _SharedFreedEarly(Manager):
    """Frees a shared slot when one holder lets go of it: the other holders' count is forgotten."""

    def free_blocks(self, record, life_cycle: int, ranges) -> None:
        pool, held = self.pool_of(life_cycle), record.held[life_cycle]
        for b in range_blocks(ranges):
            slot = held.pop(b)
            pool.sharers.pop(slot, None)
            pool.give(slot)


class _CountingPool(Pool):
    """A pool whose use counts a shared slot once per holder."""

    def share(self, slot: int) -> None:
        super().share(slot)
        self.used += 1

    def give(self, slot: int) -> None:
        if slot in self.sharers:
            self.used -= 1
        super().give(slot)


class _SharedCountedPerHolder(Manager):
    """Counts a cache hit as a slot in use (once per holder) and frees that count with the holder."""

    def new_pool(self, total: int) -> Pool:
        return _CountingPool(total)


#: The cache mutants: everything compared exactly, under prefix sharing with freed blocks cached.
SHARING_CACHE_IDENTITY = Capabilities(
    observations={p: Comparison.EXACT for p in Part}, semantics=Semantics(prefix_sharing=True, cache_freed=True),
    prefix_sharing=True,
)


class _HitHoldsNullBlocks(Manager):
    """A first resume also takes, as hits, the prefix blocks outside its windows whose content a slot
    another request holds keeps (its null entries): it holds slots no attention reads, and keeps them
    in use after their other holders let go. (Only held slots: a cached free one would be taken past
    what the resume checked room for, and the mutant would crash rather than show its bug.)"""

    def cache_hits(self, record, plan):
        hits = super().cache_hits(record, plan)
        for lc_index, lc in enumerate(self.layout.life_cycles):
            if lc.kind is not LifeCycleKind.SWA:
                continue
            pool = self.pool_of(lc_index)
            wanted = set(range_blocks(plan[lc_index][0])) if plan[lc_index] is not None else set()
            for b in range(self.prefix_of(record).prefix_blocks):
                if b not in wanted and b not in hits[lc_index]:
                    slot = pool.first(content_key(self, record, lc_index, b))
                    if slot is not None and slot not in pool.queue:
                        hits[lc_index][b] = slot
        return hits


hit_holds_null_blocks = _mutant(SHARING_CACHE_IDENTITY, "hit-holds-null-blocks", _HitHoldsNullBlocks)


shared_freed_when_stale_for_one = _mutant(SHARING_IDENTITY, "shared-freed-when-stale-for-one", _SharedFreedEarly)


shared_counted_per_holder = _mutant(SHARING_IDENTITY, "shared-counted-per-holder", _SharedCountedPerHolder)


MUTANTS.update({
    f.declaration.label: f  # type: ignore[attr-defined]
    for f in (shared_freed_when_stale_for_one, shared_counted_per_holder, hit_holds_null_blocks)
})
