"""Seeded bugs in the reference itself: the spec with exactly one semantic behaviour changed.

The oracle campaign (``swafloor fuzz --backend oracle``) is what keeps the spec honest, so it must
catch every one of these when the mutant stands in for the reference (``swafloor fuzz
--mutate-reference NAME``, or the backend name ``reference-mutant:NAME``). Each mutant is a subclass
of :class:`~swafloor.reference.Manager` overriding one of its named hooks (listed in
:mod:`swafloor.reference.core`), replacing one of its public attributes or semantics, or a manager
built while one function of the reference is swapped inside a context manager (restored before the
call returns): no file of the spec is edited, and the reference never imports this module, so a mutant cannot leak
into the real spec.

They cover every semantics option (tokens in flight, lazy freeing, the three suspend modes, the
first-resume copy), both release orders, the pool-group mapping, the sizing rules and the failure
paths (what a resize that runs out of slots leaves behind, and the shortfall it reports).
Measuring them (the oracle campaign, their shrunk traces, the score) is :mod:`swafloor.fuzz.reference_mutants`.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import attrs

from swafloor.reference import (
    Config,
    FloorRule,
    FreeStale,
    HitRule,
    LifeCycleKind,
    Manager,
    Outcome,
    ReleaseOrder,
    RequestState,
    Shortfall,
    SuspendMode,
    fdiv,
    lifecycle,
)
from swafloor.reference import cache_hit
from swafloor.reference import config as reference_config
from swafloor.reference.pool import Pool
from swafloor.reference.values import range_blocks, range_size

from swafloor.reference.prefix_cache import PrefixCache
from swafloor.reference.core import CoreManager
from swafloor.reference.release import ReleasePolicy
from swafloor.reference.seeded_bugs import ORACLE, SEEDED_BUGS

from ..adapter import ManagerBackend
from .mutants import _SharedFreedEarly
from ..protocol import (ALL_SEMANTICS, ALL_SEMANTICS_EAGLE, ALL_SEMANTICS_LOAD, ALL_SEMANTICS_MIXED, ALL_SEMANTICS_SHARING,
                        BackendRecord,
                        RADIX_TREE, REFUSAL_KEEPS_STALE, STALE_FREED_ON_GROWTH, WINDOW_RING, UnknownBackend,
                        factory)

__all__ = ["PREFIX", "REFERENCE_MUTANTS", "ReferenceMutant", "names", "resolve_mutant"]

PREFIX = "reference-mutant:"


@attrs.frozen
class ReferenceMutant:
    """A named seeded bug of the reference: ``make(config)`` builds the mutated manager."""

    name: str
    covers: str  # what part of the spec it breaks: a semantics option, release order, mapping, ...
    description: str
    make: Callable[[Config], Manager] = attrs.field(eq=False)
    backend: str = "oracle"  # the oracle campaign that must kill it (oracle-sharing for prefix sharing,
    # oracle-eviction for the eviction interval)


# ----------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def _swapped(module: Any, name: str, replacement: Any) -> Iterator[None]:
    """``module.name`` replaced by ``replacement`` for the duration of the block, then restored."""
    original = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


def _sized(share: Callable[..., int]) -> Callable[[Config], Manager]:
    """A manager whose layout is computed with ``share(original, life_cycle, t, rule, all, k)`` in
    place of the reference's per-life-cycle minimum (only while it is constructed)."""
    original = reference_config.life_cycle_min_slots

    def mutated(lc, t, rule, all_life_cycles, in_flight=0, lookahead=0, **more):
        # ``lookahead`` (draft slots) and ``more`` (the eviction interval): the original gets them as
        # given; a share sees the five-argument form.
        base = functools.partial(original, lookahead=lookahead, **more)
        return share(base, lc, t, rule, tuple(all_life_cycles), in_flight)

    def make(config: Config) -> Manager:
        with _swapped(reference_config, "life_cycle_min_slots", mutated):
            return Manager(config)

    return make


# ----------------------------------------------------------------------------- tokens in flight
class _ReleasedOnHistory(Manager):
    """Releases on ``h`` instead of ``h - k``: the tokens in flight are ignored."""

    def stale_range(self, life_cycle: int, history: int) -> tuple[int, int]:
        lc = self.layout.life_cycles[life_cycle]
        return lifecycle.stale_range(history, self.block_size(life_cycle), lc.window, lc.sink_blocks)


class _ReleasedOneEarly(Manager):
    """Releases on ``max(0, h - k) + 1``: the block the token in flight reads first may go."""

    def stale_range(self, life_cycle: int, history: int) -> tuple[int, int]:
        lc = self.layout.life_cycles[life_cycle]
        released_on = lifecycle.released_history(history, self.semantics.in_flight_tokens) + 1
        return lifecycle.stale_range(released_on, self.block_size(life_cycle), lc.window, lc.sink_blocks)


class _SinksReleased(Manager):
    """Releases sink blocks like any other (the sizing still counts them)."""

    def stale_range(self, life_cycle: int, history: int) -> tuple[int, int]:
        lc = self.layout.life_cycles[life_cycle]
        released_on = lifecycle.released_history(history, self.semantics.in_flight_tokens)
        return lifecycle.stale_range(released_on, self.block_size(life_cycle), lc.window, 0)


# ----------------------------------------------------------------------------- eviction interval
class _IntervalIgnored(Manager):
    """Every window frees what is stale at each step, whatever the eviction interval (the sizing
    still uses the interval's floor)."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        self.eviction_interval = 1


class _EvictionOneLate(Manager):
    """An eviction interval above 1 is due one token late (``e + 1`` tokens past the cursor)."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        if self.eviction_interval > 1:
            self.eviction_interval += 1


# ----------------------------------------------------------------------------- draft slots, the prefix cache
def _with_semantics(config: Config, **changes: Any) -> Config:
    return attrs.evolve(config, semantics=attrs.evolve(config.semantics, **changes))


class _LookaheadIgnored(Manager):
    """Pools sized as if there were no draft slots (``lookahead_tokens`` read as 0)."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(_with_semantics(config, lookahead_tokens=0), release_order)


class _CacheFreedIgnored(Manager):
    """Freed blocks keep nothing: no cached content, no hit on a freed block (``cache_freed`` read as off)."""

    def __init__(self, config: Config, release_order: Any = None):
        if config.semantics.cache_freed:
            config = _with_semantics(config, cache_freed=False, hit_rule=HitRule.PER_BLOCK, cache_scheduled=False)
        super().__init__(config, release_order)


class _HitRuleSwapped(Manager):
    """The other hit rule: one hit length for every life cycle where each should have its own, and back."""

    def __init__(self, config: Config, release_order: Any = None):
        if config.semantics.cache_freed:
            other = HitRule.COMMON_PREFIX if config.semantics.hit_rule is HitRule.PER_BLOCK else HitRule.PER_BLOCK
            config = _with_semantics(config, hit_rule=other)
        super().__init__(config, release_order)


def _cache_option_swapped(option: str) -> Callable[[Config], Manager]:
    """A maker: the reference with the boolean prefix-cache option ``option`` read as its opposite
    wherever freed blocks are cached (with them not cached the option means nothing)."""

    def make(config: Config) -> Manager:
        if config.semantics.cache_freed:
            config = _with_semantics(config, **{option: not getattr(config.semantics, option)})
        return Manager(config)

    return make


#: Every freed block cached where only those an aligned hit reads should be, and back.
_CacheAlignedSwapped = _cache_option_swapped("cache_aligned")
#: The block a prompt ends inside named by the prompt's whole hash blocks where it should not be, and back.
_PromptTailSwapped = _cache_option_swapped("cache_prompt_tail")
#: A block's content counts as computed when scheduled where it should be when committed, and back.
_CacheScheduledSwapped = _cache_option_swapped("cache_scheduled")
#: A freed block that keeps nothing joins the free queue's end where it should go to its front, and back.
_UncachedToTailSwapped = _cache_option_swapped("uncached_to_tail")


class _ReleaseTailForWindows(Manager):
    """Under ``release_uncached_to_tail`` every life cycle's release puts the freed blocks that keep nothing
    at the free queue's end, a sliding window's too (the hook ``release_to_tail``)."""

    def release_to_tail(self, life_cycle: int) -> bool:
        return self.semantics.release_uncached_to_tail


def _load_holds_prefix_swapped(config: Config) -> Manager:
    """The reference with ``load_holds_prefix`` read as its opposite."""
    return Manager(_with_semantics(config, load_holds_prefix=not config.semantics.load_holds_prefix))


class _LoadIgnoresHit(Manager):
    """Under ``load_holds_prefix`` a first resume frees on history 0 even past a cache hit: it holds
    every block of its reused history, the hit's out-of-window ones (as hits) too."""

    def resume_released_on(self, record: Any) -> int:
        if self.semantics.load_holds_prefix and record.pending_copy:
            return 0
        return super().resume_released_on(record)


def _run_hit_pops_first(r0: Any, r1: Any, t: Any, window: Any, a: Any, eagle: Any, M: Any) -> Any:
    """The bug in :func:`~swafloor.reference.cache_hit.run_hit`: the EAGLE pop gives back the run's
    first block, not its last (the hit keeps the block the drafter recomputes)."""
    kept = max(min(r1, M // t), 0)
    L = t * (a * (kept // a))
    return L if L > 0 and cache_hit.hit_first_needed(L, t, window) >= r0 + eagle else 0


class _EaglePopsFirstBlock(Manager):
    """The EAGLE hit computed with the pop taken from the matched window's first block."""

    def eagle_hit(self, record: Any, found: Any) -> int:
        with _swapped(cache_hit, "run_hit", _run_hit_pops_first):
            return super().eagle_hit(record, found)


def _run_hit_aligned_before_pop(r0: Any, r1: Any, t: Any, window: Any, a: Any, eagle: Any, M: Any) -> Any:
    """The bug in :func:`~swafloor.reference.cache_hit.run_hit`: the matched prefix is aligned first and
    the EAGLE pop taken after (the hit is no multiple of the alignment when ``a > 1``)."""
    L = t * max(a * (min(r1, M // t) // a) - eagle, 0)
    return L if L > 0 and cache_hit.hit_first_needed(L, t, window) >= r0 else 0


class _AlignBeforePop(Manager):
    """The EAGLE hit aligned before the pop instead of after it."""

    def eagle_hit(self, record: Any, found: Any) -> int:
        with _swapped(cache_hit, "run_hit", _run_hit_aligned_before_pop):
            return super().eagle_hit(record, found)


class _EagleIgnored(Manager):
    """``eagle`` read as off: the plain common-prefix hit, no block given back to the drafter."""

    def __init__(self, config: Config, release_order: Any = None):
        if config.semantics.eagle:
            config = _with_semantics(config, eagle=False)
        super().__init__(config, release_order)


class _DraftSlotsNamed(Manager):
    """A step's draft slots counted as scheduled tokens: their blocks become findable content."""

    def scheduled_end(self, history: int, capacity: int, resuming: bool = False) -> int | None:
        return capacity


class _NullFreePool(Pool):
    """A pool counting the shared null block among its free blocks."""

    __slots__ = ()

    @property
    def free(self) -> int:
        return self.total + 1 - self.used


class _NullCountedFree(Manager):
    """The pools' shared null block counted as free: one slot more than the pool has seems free."""

    def new_pool(self, total: int) -> Pool:
        return _NullFreePool(total, cache=self.semantics.cache_freed)


# ----------------------------------------------------------------------------- lazy freeing
class _LazyFreesAtCommit(Manager):
    """``at-allocate`` frees at commit anyway."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        self.semantics = attrs.evolve(self.semantics, free_stale=FreeStale.AT_COMMIT)


class _AtCommitFreesLazily(Manager):
    """``at-commit`` frees nothing at commit: it frees at the next resize, as ``at-allocate`` does."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        self.semantics = attrs.evolve(self.semantics, free_stale=FreeStale.AT_ALLOCATE)


class _LazyReleaseUndone(Manager):
    """Lazy freeing whose release does not stand when the allocation fails: the blocks stale at the
    current history are released within the resize's own plan, all or nothing."""

    def catch_up(self, record: Any) -> None:
        record.released_to = record.history  # no catch-up: the plan releases them instead


class _RefusedStepFreesStale(Manager):
    """``refused_keeps_stale`` ignored: the release policy's catch-up (free what is stale at the current
    history, for good) runs before the gate anyway, the refusal layer's hook skipped."""

    def catch_up(self, record: Any) -> None:
        ReleasePolicy.catch_up(self, record)


class _StaleFreedWithoutGrowth(Manager):
    """``stale_freed_on_growth`` ignored: every resize frees at its own history, the refusal layer's
    release-point hook skipped."""

    def release_points(self, record: Any, history: int) -> list[int]:
        return ReleasePolicy.release_points(self, record, history)

    def released_on(self, record: Any, life_cycle: int) -> int:
        return ReleasePolicy.released_on(self, record, life_cycle)


# ----------------------------------------------------------------------------- radix tree (SGLang)
# Each changes one named hook of the radix layer (reference/radix.py): ``lock_prompt`` (the prompt whose
# last window a request keeps locked), ``names_now`` (whether content is named now), ``publish`` (what a
# close publishes), ``first_resume_copies`` (the slots a first resume holds for the call).
class _PromptLockNeverTaken(Manager):
    """``prompt_lock`` ignored: no request holds a tree lock (the pools are still sized for it)."""

    def lock_prompt(self, record: Any) -> int | None:
        return None


class _PromptLockKeptAfterRelease(Manager):
    """The tree lock outlives a suspension that frees the request's blocks: an active request keeps the
    last window of the prompt it first locked, also after a retraction (recomputing from token 0)."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        self.first_locked: dict[str, int] = {}  # request -> the prompt its first resume locked

    def lock_prompt(self, record: Any) -> int | None:
        prompt = super().lock_prompt(record)
        if prompt is not None:
            self.first_locked.setdefault(record.request_id, prompt)
            return prompt
        return self.first_locked.get(record.request_id) if record.state is RequestState.ACTIVE else None


class _PublishedAtCommit(Manager):
    """``publish_on_release`` ignored for naming: content is named as it is computed, at every commit and
    step (the recomputed last block's slots, the other half of the option, still held)."""

    def names_now(self, record: Any) -> bool:
        return True


class _ClosePublishesNothing(Manager):
    """A close publishes nothing: under ``publish_on_release`` only the prompts published by their first
    resume are ever found."""

    def publish(self, record: Any) -> None:
        return None


class _RecomputedLastBlockUncharged(Manager):
    """A first resume under ``publish_on_release`` holds no slot for the call: the prefix cache's copies
    (none without ``first_resume_copy``) instead of the radix layer's."""

    def first_resume_copies(self, reused_history: int) -> list[int]:
        return PrefixCache.first_resume_copies(self, reused_history)
class _RingNeverWraps(Manager):
    """``window_ring`` whose window never wraps: past ``W`` tokens it takes a new block every ``t``
    tokens (the rule's allocated blocks, nothing stale) instead of reusing its ring's first blocks."""

    def required_ranges(self, life_cycle: int, history: int, capacity: int) -> Any:
        return CoreManager.required_ranges(self, life_cycle, history, capacity)


# ----------------------------------------------------------------------------- suspension
class _RecomputeKeepsSlots(Manager):
    """A recompute suspend forgets the request's lengths and blocks but gives none of their slots
    back: they stay in use, in no table (so its own snapshot stays valid and the bug shows where it
    is, in ``pool_used``, at the suspend)."""

    def suspend_release(self, record: Any) -> None:
        if self.semantics.suspend is not SuspendMode.RECOMPUTE:
            return super().suspend_release(record)
        for lc_index, held in enumerate(record.held):
            held.clear()  # out of the table; the slot is never given back to its pool
            record.ranges[lc_index] = ()
        self.prefix_of(record).named = []


class _RecomputeKeepsLengths(Manager):
    def suspend_forgets(self, record: Any) -> bool:
        return False


class _ReleaseForgetsLengths(Manager):
    def suspend_forgets(self, record: Any) -> bool:
        return self.semantics.suspend is not SuspendMode.KEEP


class _KeepFrees(Manager):
    def suspend_release(self, record: Any) -> None:
        self.release_all(record)


class _KeptResumeChargesAll(Manager):
    """Resuming a request that kept its slots checks room for all its blocks, as if it held none."""

    def resume(self, request_id: str) -> Outcome:
        if self.state_of(request_id) is RequestState.SUSPENDED:
            tables = next(r.tables for r in self.snapshot().requests if r.request_id == request_id)
            if any(table.held for table in tables):
                h, c = self.history_of(request_id), self.capacity_of(request_id)
                fresh = [None if not new else (new, (), new)
                         for new in (self.required_ranges(i, h, c) for i in range(len(tables)))]
                outcome = self.feasible(fresh, None, None)
                if not outcome:
                    return outcome
        return super().resume(request_id)


# ----------------------------------------------------------------------------- first-resume copy
# Each overrides the spec's named hook Manager.first_resume_copies (the slots a first resume takes to
# copy what it reuses); Manager.resume itself (hits, the cache, the copy's order) is the reference's.
class _CopyPerLayer(Manager):
    """The copy slot charged once per layer rather than once per life cycle."""

    def first_resume_copies(self, reused_history: int) -> list[int]:
        extra = [0] * self.layout.num_pool_groups
        if self.semantics.first_resume_copy:
            for lc_index in self.layout.layer_life_cycle:
                lc = self.layout.life_cycles[lc_index]
                needs = reused_history > 0 if lc.kind is LifeCycleKind.SSM else lifecycle.partial_block(
                    reused_history, self.block_size(lc_index)
                )
                extra[self.layout.pool_group_of[lc_index]] += int(needs)
        return extra


class _CopyWhenAligned(Manager):
    """The copy slot charged for any reused history above 0, block-aligned or not."""

    def first_resume_copies(self, reused_history: int) -> list[int]:
        extra = [0] * self.layout.num_pool_groups
        if self.semantics.first_resume_copy and reused_history > 0:
            for lc_index in range(len(self.layout.life_cycles)):
                extra[self.layout.pool_group_of[lc_index]] += 1
        return extra


class _NoSsmSnapshotCopy(Manager):
    """No slot for the SSM state snapshot's copy."""

    def first_resume_copies(self, reused_history: int) -> list[int]:
        extra = super().first_resume_copies(reused_history)
        if self.semantics.first_resume_copy and reused_history > 0:
            for lc_index, lc in enumerate(self.layout.life_cycles):
                if lc.kind is LifeCycleKind.SSM:
                    extra[self.layout.pool_group_of[lc_index]] -= 1
        return extra


class _CopySwitchIgnored(Manager):
    """The copy slot charged whether ``first_resume_copy`` is on or off."""

    def first_resume_copies(self, reused_history: int) -> list[int]:
        semantics = self.semantics
        self.semantics = attrs.evolve(semantics, first_resume_copy=True)
        try:
            return super().first_resume_copies(reused_history)
        finally:
            self.semantics = semantics


class _CopyNever(Manager):
    """No copy slot even with ``first_resume_copy`` on."""

    def first_resume_copies(self, reused_history: int) -> list[int]:
        return [0] * self.layout.num_pool_groups


# ----------------------------------------------------------------------------- release orders
class _HoldUncharged(Manager):
    """Hold-until-return whose feasibility check counts the held-back blocks as free."""

    def feasible(self, plan, held_back, extra):
        return super().feasible(plan, None, extra)


class _HoldLeaks(Manager):
    """Hold-until-return that never gives back the slots of the blocks it held until the call
    returned: they leave the request's table but stay in use. (Also holding the blocks a capacity
    cut frees would be no bug one can see: a resize that cuts capacity allocates nothing.)"""

    _leaked: list = []  # per resize: (life cycle, slots) it gave back and takes again once it returns

    def release_held_back(self, record: Any, life_cycle: int, ranges: Any) -> None:
        super().release_held_back(record, life_cycle, ranges)
        self._leaked = [*self._leaked, (life_cycle, range_size(ranges))]

    def stepped(self, record: Any, history: int, capacity: int, how: str) -> None:
        leaked, self._leaked = self._leaked, []
        for life_cycle, n in leaked:
            for _ in range(n):
                self.pool_of(life_cycle).take()
        super().stepped(record, history, capacity, how)


def _order_swapped(config: Config) -> Manager:
    """Each release order behaves as the other."""
    order = config.semantics.release_order
    other = ReleaseOrder.RELEASE_FIRST if order is ReleaseOrder.HOLD_UNTIL_RETURN else ReleaseOrder.HOLD_UNTIL_RETURN
    return Manager(config, release_order=other)


# ----------------------------------------------------------------------------- pool groups
class _InterleavedPoolGroups(Manager):
    """Life cycle ``i`` served from pool group ``i mod G`` whatever the map says."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        groups = self.layout.num_pool_groups
        self.pool_group_of = tuple(i % groups for i in range(len(self.layout.life_cycles)))


class _SortedPoolGroups(Manager):
    """The pool-group map taken as monotone: life cycles served in sorted group order."""

    def __init__(self, config: Config, release_order: Any = None):
        super().__init__(config, release_order)
        self.pool_group_of = tuple(sorted(self.pool_group_of))


# ----------------------------------------------------------------------------- failure paths
class _FailedResizeKeepsPartial(Manager):
    """A resize that runs out of slots keeps the slots it would allocate in the pool groups that had
    room (it is not all or nothing): they stay in use, in no table, so its own snapshot stays valid
    and the bug shows where it is, in ``pool_used``, at the failed resize."""

    def resize_refused(self, record: Any, history: int, capacity: int, plan: Any, outcome: Outcome) -> None:
        short = {s.pool_group for s in outcome.shortfalls}
        for lc_index, step in enumerate(plan):
            if step is None or self.pool_group_of[lc_index] in short or not step[0]:
                continue
            for _ in range_blocks(step[0]):
                self.pool_of(lc_index).take()


class _FailedResizeKeepsHistory(Manager):
    """A resize that runs out of slots still moves history to the new value."""

    def resize_refused(self, record: Any, history: int, capacity: int, plan: Any, outcome: Outcome) -> None:
        if history <= record.capacity:
            record.history = history


class _ShortfallWithoutReleased(Manager):
    """Out of slots, the shortfall reports as available only the free slots, not the blocks the
    step would release."""

    def feasible(self, plan, held_back, extra):
        outcome = super().feasible(plan, held_back, extra)
        if outcome:
            return outcome
        free = [self.free_slots(g) for g in range(self.layout.num_pool_groups)]
        return Outcome(False, tuple(Shortfall(s.pool_group, s.needed, free[s.pool_group]) for s in outcome.shortfalls))


# ----------------------------------------------------------------------------- sizing
def _floor_division(original, lc, t, rule, all_lcs, k):
    if rule is FloorRule.FIXED and lc.kind is LifeCycleKind.SWA:
        return lc.sink_blocks + fdiv(lc.window - 1 + k, t) + 1
    return original(lc, t, rule, all_lcs, k)


def _in_flight_unsized(original, lc, t, rule, all_lcs, k):
    return original(lc, t, rule, all_lcs, 0)


def _full_share_one(original, lc, t, rule, all_lcs, k):
    return 1 if lc.kind is LifeCycleKind.FULL else original(lc, t, rule, all_lcs, k)


def _full_share_same_size_only(original, lc, t, rule, all_lcs, k):
    if lc.kind is LifeCycleKind.FULL:  # only the SWA life cycles of full attention's own block size count
        t_full = lc.block_size(t)
        return original(lc, t, rule, tuple(x for x in all_lcs if x.block_size(t) == t_full), k)
    return original(lc, t, rule, all_lcs, k)


# ----------------------------------------------------------------------------- block sizes per life cycle
class _OneBlockSize(Manager):
    """Every life cycle counts its blocks (allocated, stale, copied, named, hit) in the config's block
    size; the pools are sized as the reference sizes them."""

    def use_block_sizes(self, sizes: tuple[int, ...]) -> None:
        super().use_block_sizes((self.layout.tokens_per_block,) * len(sizes))


class _HitAlignedToT(Manager):
    """A common-prefix hit aligned to the config's block size instead of the lcm of the life cycles'."""

    def hit_alignment(self) -> int:
        return self.tokens_per_block


#: How each seeded bug of the reference list (campaign ORACLE in swafloor.reference.seeded_bugs) is
#: built: the mutated manager from a config. Its name, what it covers and what it changes are the list's.
_MAKERS: dict[str, Callable[[Config], Manager]] = {
    "released-on-history": _ReleasedOnHistory,
    "released-one-early": _ReleasedOneEarly,
    "sinks-released": _SinksReleased,
    "interval-ignored": _IntervalIgnored,
    "eviction-one-late": _EvictionOneLate,
    "in-flight-floor-ignores-k": _sized(_in_flight_unsized),
    "lazy-frees-at-commit": _LazyFreesAtCommit,
    "at-commit-frees-lazily": _AtCommitFreesLazily,
    "lazy-release-undone": _LazyReleaseUndone,
    "refused-step-frees-stale": _RefusedStepFreesStale,
    "stale-freed-without-growth": _StaleFreedWithoutGrowth,
    "prompt-lock-never-taken": _PromptLockNeverTaken,
    "prompt-lock-kept-after-release": _PromptLockKeptAfterRelease,
    "published-at-commit": _PublishedAtCommit,
    "close-publishes-nothing": _ClosePublishesNothing,
    "recomputed-last-block-uncharged": _RecomputedLastBlockUncharged,
    "ring-never-wraps": _RingNeverWraps,
    "recompute-keeps-slots": _RecomputeKeepsSlots,
    "recompute-keeps-lengths": _RecomputeKeepsLengths,
    "release-forgets-lengths": _ReleaseForgetsLengths,
    "keep-frees": _KeepFrees,
    "kept-resume-charges-all": _KeptResumeChargesAll,
    "copy-per-layer": _CopyPerLayer,
    "copy-when-aligned": _CopyWhenAligned,
    "no-ssm-snapshot-copy": _NoSsmSnapshotCopy,
    "copy-switch-ignored": _CopySwitchIgnored,
    "copy-never": _CopyNever,
    "hold-uncharged": _HoldUncharged,
    "hold-leaks": _HoldLeaks,
    "release-order-swapped": _order_swapped,
    "interleaved-pool-groups": _InterleavedPoolGroups,
    "sorted-pool-groups": _SortedPoolGroups,
    "failed-resize-keeps-partial": _FailedResizeKeepsPartial,
    "failed-resize-keeps-history": _FailedResizeKeepsHistory,
    "shortfall-without-released": _ShortfallWithoutReleased,
    "floor-division": _sized(_floor_division),
    "full-attention-floor-one": _sized(_full_share_one),
    "shared-freed-when-stale-for-one": _SharedFreedEarly,
    "lookahead-ignored": _LookaheadIgnored,
    "cache-freed-ignored": _CacheFreedIgnored,
    "one-block-size": _OneBlockSize,
    "full-share-same-size-only": _sized(_full_share_same_size_only),
    "hit-aligned-to-t": _HitAlignedToT,
    "cache-aligned-swapped": _CacheAlignedSwapped,
    "prompt-tail-swapped": _PromptTailSwapped,
    "hit-rule-swapped": _HitRuleSwapped,
    "cache-scheduled-swapped": _CacheScheduledSwapped,
    "uncached-to-tail-swapped": _UncachedToTailSwapped,
    "release-tail-for-windows": _ReleaseTailForWindows,
    "load-holds-prefix-swapped": _load_holds_prefix_swapped,
    "load-ignores-hit": _LoadIgnoresHit,
    "eagle-pops-first-block": _EaglePopsFirstBlock,
    "eagle-ignored": _EagleIgnored,
    "align-before-pop": _AlignBeforePop,
    "draft-slots-named": _DraftSlotsNamed,
    "null-counted-free": _NullCountedFree,
}
#: The oracle that must catch a seeded bug of the reference, where it is not the plain one.
_BACKEND = {
    "shared-freed-when-stale-for-one": "oracle-sharing",
    "interval-ignored": "oracle-eviction",
    "eviction-one-late": "oracle-eviction",
    "lookahead-ignored": "oracle-eviction",
    "cache-freed-ignored": "oracle-sharing",
    "hit-rule-swapped": "oracle-sharing",
    "cache-scheduled-swapped": "oracle-sharing",
    "uncached-to-tail-swapped": "oracle-sharing",
    "release-tail-for-windows": "oracle-sharing",
    "load-holds-prefix-swapped": "oracle-load",
    "load-ignores-hit": "oracle-load",
    "eagle-pops-first-block": "oracle-eagle",
    "eagle-ignored": "oracle-eagle",
    "align-before-pop": "oracle-eagle",
    "draft-slots-named": "oracle-eagle",
    "one-block-size": "oracle-mixed",
    "full-share-same-size-only": "oracle-mixed",
    "hit-aligned-to-t": "oracle-mixed",
    "cache-aligned-swapped": "oracle-mixed",
    "prompt-tail-swapped": "oracle-mixed",
    "refused-step-frees-stale": "oracle-refusal",
    "stale-freed-without-growth": "oracle-growth",
    "prompt-lock-never-taken": "oracle-radix",
    "prompt-lock-kept-after-release": "oracle-radix",
    "published-at-commit": "oracle-radix",
    "close-publishes-nothing": "oracle-radix",
    "recomputed-last-block-uncharged": "oracle-radix",
    "ring-never-wraps": "oracle-ring",
}
#: The capabilities a mutant's backend declares: those of the oracle campaign that must kill it.
_CAPABILITIES = {"oracle-sharing": ALL_SEMANTICS_SHARING, "oracle-eagle": ALL_SEMANTICS_EAGLE,
                 "oracle-mixed": ALL_SEMANTICS_MIXED, "oracle-refusal": REFUSAL_KEEPS_STALE,
                 "oracle-growth": STALE_FREED_ON_GROWTH,
                 "oracle-radix": RADIX_TREE, "oracle-ring": WINDOW_RING, "oracle-load": ALL_SEMANTICS_LOAD}

_MUTANTS = tuple(
    ReferenceMutant(bug.name, bug.covers, bug.description, _MAKERS[bug.name], backend=_BACKEND.get(bug.name, "oracle"))
    for bug in SEEDED_BUGS if ORACLE in bug.campaigns
)

#: Mutant name (without the prefix) -> mutant.
REFERENCE_MUTANTS = {m.name: m for m in _MUTANTS}


def names() -> tuple[str, ...]:
    """Every reference mutant's backend name (``reference-mutant:NAME``)."""
    return tuple(PREFIX + name for name in REFERENCE_MUTANTS)


def _factory(mutant: ReferenceMutant):
    @factory(_CAPABILITIES.get(mutant.backend, ALL_SEMANTICS), name=PREFIX + mutant.name)
    def make(config: Config) -> ManagerBackend:
        return ManagerBackend(mutant.make(config))

    make.__doc__ = f"The reference with a seeded bug: {mutant.description}."
    return make


def resolve_mutant(spec: str, field: str = "against"):
    """The :class:`~swafloor.fuzz.protocol.BackendRecord` of ``reference-mutant:NAME``."""
    name = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    mutant = REFERENCE_MUTANTS.get(name)
    if mutant is None:
        raise UnknownBackend(field, spec, f"not a reference mutant ({', '.join(REFERENCE_MUTANTS)})")
    made = _factory(mutant)
    return BackendRecord(PREFIX + name, made)


