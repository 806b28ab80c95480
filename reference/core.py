"""The core manager, the rule: requests holding per-life-cycle block slots from per-pool-group pools.

A request is created suspended, activated by ``resume``, stepped by ``resize(capacity, history)``,
has history finalized by ``commit``, and is ``suspend``-ed (every slot freed, lengths kept) or
``close``-d. After every call an active request holds a slot for exactly its live blocks
(:meth:`CoreManager.required_ranges`: every allocated block ``[0, ceil(c / t))`` but the stale ones)
and nothing else. A resize frees the blocks it no longer needs before it allocates (release-first).
Running out of slots is an :class:`~.values.Outcome` naming each pool group that lacked slots, and
the state is exactly as before the call; misuse raises :class:`~.errors.RequestError`, changing
nothing. A request created with ``reused_history=k`` starts from ``k`` committed tokens; its first
resume copies a partial block (an SSM state) into a slot held for the call.

Engine behaviours are layers (:mod:`.release`, :mod:`.prefix_cache`, :mod:`.lookahead`) overriding
named hooks: those that are the rule are here, those that do nothing in the core in :mod:`.hooks`;
:class:`~.manager.Manager` is this core composed with every layer.
"""

from __future__ import annotations

import attrs

from . import lifecycle
from .config import Config, Layout, ReleaseOrder, build_layout
from .errors import ConfigError, RequestError, require_count, require_id
from .lifecycle import LifeCycleKind
from .hooks import Hooks
from .observe import Observing
from .pool import Pool
from .show import bounded
from .steps import UnchangedSteps
from .values import (OK, SSM_PAGE, Outcome, Plan, Ranges, RequestState, Shortfall, merged_ranges, range_blocks,
                     range_size, ranges_minus)

__all__ = ["CoreManager", "RequestRecord"]


@attrs.define
class RequestRecord:
    """A request as the manager keeps it (layers keep what else they need in records of their own)."""

    request_id: str
    state: RequestState
    capacity: int
    history: int
    released_to: int  # stale blocks are freed up to this history (below ``history`` only when freeing lazily)
    pending_copy: bool  # its first resume still copies what it reuses
    ranges: list[Ranges]  # per life cycle: the blocks it holds
    held: list[dict[int, int]]  # per life cycle: block index -> slot id
    evicted_on: list[int]  # per life cycle: the history its stale blocks were last freed on
    resumed: bool = False  # was it ever active
    snapshot: object = None  # the last RequestSnapshot, valid while ``snapshot_key`` is current
    snapshot_key: object = None
    # the no-change box of :class:`~.steps.UnchangedSteps`
    capacity_from: int = 0
    capacity_below: int = 0
    history_from: int = 0
    history_below: int | float = 0


class CoreManager(Hooks, Observing, UnchangedSteps):
    """The executable spec of a paged KV-cache manager with sliding-window attention, no engine's
    behaviour in it: tokens in flight 0, stale blocks freed at once, release-first, suspend frees
    every slot, no prefix cache."""

    def __init__(self, config: Config, release_order: ReleaseOrder | str | None = None):
        if not isinstance(config, Config):
            raise ConfigError("config", config, "must be a Config")
        chosen = config.semantics.release_order if release_order is None else release_order
        try:
            self.release_order = ReleaseOrder(chosen)
        except ValueError:
            choices = ", ".join(repr(o.value) for o in ReleaseOrder)
            raise ConfigError("release_order", release_order, f"must be one of {choices}") from None
        self.config = config
        self.layout: Layout = build_layout(config)
        self.semantics = config.semantics
        self.pool_group_of = self.layout.pool_group_of  # hook: life cycle -> pool group
        self._pools = [self.new_pool(n) for n in self.layout.slots]
        self.use_block_sizes(self.layout.block_sizes)
        self._requests: dict[str, RequestRecord] = {}
        self._windows = [i for i, lc in enumerate(self.layout.life_cycles) if lc.window is not None]
        self._points: list[int] = []  # the release points of the last plan
        self._planning: RequestRecord | None = None  # the request whose plan feasible() judges

    # ----------------------------------------------------------------- hooks that are the rule
    def stale_range(self, life_cycle: int, history: int) -> tuple[int, int]:
        """Hook: the stale blocks ``[start, end)`` of an SWA life cycle at ``history``."""
        lc = self.layout.life_cycles[life_cycle]
        return lifecycle.stale_range(history, self.block_sizes[life_cycle], lc.window, lc.sink_blocks)

    def required_ranges(self, life_cycle: int, history: int, capacity: int) -> Ranges:
        """Hook: the blocks a life cycle must hold at ``(history, capacity)``, as ranges: every allocated
        block ``[0, ceil(c / t))`` but the stale ones (:meth:`stale_range`)."""
        lc = self.layout.life_cycles[life_cycle]
        if lc.kind is LifeCycleKind.SSM:
            return SSM_PAGE
        allocated = lifecycle.allocated_blocks(capacity, self.block_sizes[life_cycle])
        if lc.window is None:
            return ((0, allocated),) if allocated > 0 else ()
        start, end = self.stale_range(life_cycle, history)
        return merged_ranges((0, min(start, allocated)), (end, allocated))

    def record_ranges(self, record: RequestRecord, life_cycle: int, history: int, capacity: int) -> Ranges:
        """Hook: the blocks ``record`` must hold of a life cycle at ``(history, capacity)``: the rule's
        :meth:`required_ranges` (a layer may add blocks a request keeps for reasons of its own)."""
        return self.required_ranges(life_cycle, history, capacity)

    def first_resume_copies(self, reused_history: int) -> list[int]:
        """Hook: the slots per pool group the first resume of a request created over ``reused_history``
        tokens (> 0) takes for the call only: one per attention life cycle whose reused history ends
        mid-block (the partial block is copied), one per SSM life cycle (its state snapshot)."""
        extra = [0] * self.layout.num_pool_groups
        for lc_index, lc in enumerate(self.layout.life_cycles):
            needs_copy = reused_history > 0 if lc.kind is LifeCycleKind.SSM else lifecycle.partial_block(
                reused_history, self.block_sizes[lc_index])
            extra[self.pool_group_of[lc_index]] += int(needs_copy)
        return extra

    def check(self) -> None:
        """Assert the invariants (O(everything)); raises AssertionError naming the first one broken."""
        owners: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
        for req in self._requests.values():
            holds = req.state is RequestState.ACTIVE or (
                req.state is RequestState.SUSPENDED and req.resumed and self.keeps_slots_suspended())
            for lc_index, held in enumerate(req.held):
                on = self.released_on(req, lc_index)
                expected = tuple(range_blocks(self.record_ranges(req, lc_index, on, req.capacity))) if holds else ()
                assert tuple(sorted(held)) == expected, (
                    f"request {req.request_id!r} life cycle {lc_index} holds blocks {sorted(held)}, "
                    f"must hold exactly {list(expected)} ({req.state.value}, h={req.history}, c={req.capacity})")
                assert tuple(range_blocks(req.ranges[lc_index])) == expected, (
                    f"request {req.request_id!r} life cycle {lc_index}: recorded ranges {req.ranges[lc_index]} "
                    f"disagree with the blocks it must hold exactly, {list(expected)}")
                for b, slot in held.items():
                    owners.setdefault((self.pool_group_of[lc_index], slot), []).append((lc_index, b, req.request_id))
        for (g, slot), who in owners.items():
            sharers = self._pools[g].sharers.get(slot, 0)
            if len(who) > 1:
                assert self.semantics.prefix_sharing, f"slot {slot} of pool group {g} owned twice: {who}"
                assert len({(lc, b) for lc, b, _ in who}) == 1 and len({r for _, _, r in who}) == len(who), (
                    f"slot {slot} of pool group {g} shared by other than one block of distinct requests: {who}")
            assert sharers == len(who) - 1, f"pool group {g} counts {sharers + 1} holders of slot {slot}, held by {len(who)}: {who}"
        for g, pool in enumerate(self._pools):
            pool.check(g, {slot for (group, slot) in owners if group == g})

    # ----------------------------------------------------------------- operations
    def create(self, request_id: str, *, reused_history: int = 0) -> None:
        """Add a suspended request whose first ``reused_history`` tokens are reused, committed ones."""
        require_id(request_id)
        if request_id in self._requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        require_count(request_id, "reused_history", reused_history)
        n = len(self.layout.life_cycles)
        self._requests[request_id] = RequestRecord(
            request_id, RequestState.SUSPENDED, capacity=reused_history, history=reused_history,
            released_to=reused_history, pending_copy=reused_history > 0, ranges=[()] * n,
            held=[{} for _ in range(n)], evicted_on=[reused_history] * n)

    def resume(self, request_id: str) -> Outcome:
        """Activate a suspended request: allocate its live blocks (plus any first-resume copy)."""
        req = self._get(request_id, RequestState.SUSPENDED)
        extra = list(self.first_resume_copies(req.history)) if req.pending_copy else [0] * len(self._pools)
        released = self.resume_released_on(req)
        plan = self.plan(req, released, req.capacity)
        points = self._points
        hits = self.resume_hits(req, plan)
        copies = list(extra)
        for lc_index, found in enumerate(hits or ()):
            pool = self.pool_of(lc_index)  # a hit on a held slot takes no slot; a cached free one takes it
            extra[self.pool_group_of[lc_index]] -= sum(1 for slot in found.values() if not pool.hit_takes(slot))
        self._planning = req
        outcome = self.feasible(plan, None, extra)
        if not outcome:
            return outcome
        after = self.copies_after_blocks()
        transient = [] if after else [[self._pools[g].take() for _ in range(n)] for g, n in enumerate(copies)]
        self.apply(req, plan, None, hits)
        if after:
            transient = [[self._pools[g].take() for _ in range(n)] for g, n in enumerate(copies)]
        for g, slots in enumerate(transient):
            self._pools[g].give_back(slots)
        req.evicted_on, req.released_to = points, released
        req.state, req.resumed, req.pending_copy = RequestState.ACTIVE, True, False
        self.stepped(req, req.history, req.capacity, "resumed")
        self._refresh(req)
        return OK

    def resize(self, request_id: str, capacity: int, history: int | None = None) -> Outcome:
        """Step an active request to ``capacity`` tokens with ``history`` of them computed (history
        unchanged when None). Out of slots leaves everything as it was (but what :meth:`catch_up` freed)."""
        req = self._active(request_id)
        history = req.history if history is None else history
        if type(capacity) is not int or type(history) is not int or capacity < 0 or history < 0:
            require_count(request_id, "capacity", capacity)
            require_count(request_id, "history", history)
        if history < req.history:
            raise RequestError(request_id, "history", history, f"goes backwards from {bounded(req.history)}")
        if capacity < history:
            raise RequestError(request_id, "capacity", capacity, f"is below history {bounded(history)}")
        if self._unchanged(req, history, capacity):  # no block changes: nothing to plan
            req.capacity, req.history, req.released_to = capacity, history, history
            self.stepped(req, history, capacity, "unchanged")
            return OK
        self.catch_up(req)
        plan = self.plan(req, history, capacity)
        points = self._points
        held_back = self.held_until_return(plan, history)
        self._planning = req
        outcome = self.feasible(plan, held_back, None)
        if not outcome:
            self.resize_refused(req, history, capacity, plan, outcome)
            return outcome
        self.stepped(req, history, capacity, "planned")
        self.apply(req, plan, held_back)
        req.evicted_on = points
        req.capacity, req.history, req.released_to = capacity, history, history
        self.stepped(req, history, capacity, "resized")
        self._refresh(req)
        return OK

    def commit(self, request_id: str, tokens: int) -> None:
        """Finalize ``tokens`` more tokens: history advances (within capacity); :meth:`committed` frees."""
        req = self._active(request_id)
        if type(tokens) is not int or tokens < 0:
            require_count(request_id, "tokens", tokens)
        if req.history + tokens > req.capacity:
            raise RequestError(request_id, "tokens", tokens,
                               f"history {bounded(req.history)} + tokens exceeds capacity {bounded(req.capacity)}")
        req.history += tokens
        self.committed(req)

    def suspend(self, request_id: str) -> None:
        """Deactivate a request: :meth:`suspend_release` frees (every slot), :meth:`suspend_forgets`
        whether its lengths go (not in the core)."""
        req = self._get(request_id, RequestState.ACTIVE)
        self.suspend_release(req)
        if self.suspend_forgets(req):
            req.capacity = req.history = req.released_to = 0
            req.evicted_on = [0] * len(req.evicted_on)
            req.pending_copy = False
        req.state = RequestState.SUSPENDED
        self._refresh(req)

    def close(self, request_id: str) -> None:
        """Release every slot; any later operation on the request raises :class:`RequestError`."""
        req = self._get(request_id)
        self.release_all(req)
        req.state = RequestState.CLOSED

    # ----------------------------------------------------------------- hooks: steps and slots
    def committed(self, record: RequestRecord) -> None:
        """Hook: after a commit advanced the history: free what became stale, now."""
        self._release_stale(record)

    def catch_up(self, record: RequestRecord) -> None:
        """Hook: before a resize plans: free what is stale at the current history (and that stands)."""
        if record.released_to < record.history:
            self._release_stale(record)

    def suspend_release(self, record: RequestRecord) -> None:
        """Hook: what a suspension frees: every slot."""
        self.release_all(record)

    def plan(self, record: RequestRecord, history: int, capacity: int) -> Plan:
        """Per life cycle: None when its blocks do not change, else (to allocate, to release, new ranges)."""
        plan: Plan = []
        points = self._points = self.release_points(record, history)
        for lc_index, old in enumerate(record.ranges):
            new = self.record_ranges(record, lc_index, points[lc_index], capacity)
            plan.append(None if new == old else (ranges_minus(new, old), ranges_minus(old, new), new))
        return plan

    def feasible(self, plan: Plan, held_back: list[Ranges | None] | None, extra: list[int] | None) -> Outcome:
        """Hook: whether every pool group has the slots the plan needs, given blocks ``held_back``
        (released only after allocating) and ``extra`` transient slots."""
        needed, available = self.slot_balance(plan, held_back, extra)
        if all(n <= a for n, a in zip(needed, available)):
            return OK
        return Outcome(False, tuple(Shortfall(g, n, a) for g, (n, a) in enumerate(zip(needed, available)) if n > a))

    def slot_balance(self, plan: Plan, held_back: list[Ranges | None] | None,
                     extra: list[int] | None) -> tuple[list[int], list[int]]:
        """Per pool group, the slots the plan needs and the slots it has (the free ones, those its
        release frees, less those held back), as :meth:`feasible` weighs them."""
        needed = list(extra) if extra is not None else [0] * len(self._pools)
        available = [p.free for p in self._pools]
        for lc_index, step in enumerate(plan):
            if step is None:
                continue
            g = self.pool_group_of[lc_index]
            needed[g] += range_size(step[0])
            available[g] += self._freed_by(lc_index, step[1])
            if held_back is not None and held_back[lc_index]:
                available[g] -= self._freed_by(lc_index, held_back[lc_index])
        return needed, available

    def _freed_by(self, lc_index: int, ranges: Ranges) -> int:
        """Slots freed when the planning request releases ``ranges``: only blocks whose slot has no other holder."""
        pool = self.pool_of(lc_index)
        if not pool.sharers or self._planning is None:
            return range_size(ranges)
        held = self._planning.held[lc_index]
        return sum(1 for b in range_blocks(ranges) if pool.frees(held[b]))

    def apply(self, record: RequestRecord, plan: Plan, held_back: list[Ranges | None] | None = None,
              hits: list[dict[int, int]] | None = None) -> None:
        """Carry out a feasible plan: free, allocate (``hits`` share their slot), then free what was held back."""
        for lc_index, step in enumerate(plan):
            if step is not None:
                kept = held_back[lc_index] if held_back is not None else None
                self.free_blocks(record, lc_index, ranges_minus(step[1], kept) if kept else step[1])
        for lc_index, found in enumerate(hits or ()):  # every hit first: a slot taken next must not evict one
            pool, held = self.pool_of(lc_index), record.held[lc_index]
            for b, slot in found.items():
                held[b] = slot
                pool.hold(slot)
        for lc_index, step in enumerate(plan):
            if step is not None:
                found, held = hits[lc_index] if hits is not None else (), record.held[lc_index]
                for b in range_blocks(step[0]):
                    if b not in found:
                        held[b] = self.take_slot(record, lc_index, b)
                record.ranges[lc_index] = step[2]
        for lc_index, kept in enumerate(held_back or ()):
            if kept:
                self.release_held_back(record, lc_index, kept)

    def take_slot(self, record: RequestRecord, life_cycle: int, block: int) -> int:
        """Hook: the slot a newly held block takes."""
        return self.pool_of(life_cycle).take()

    def free_blocks(self, record: RequestRecord, life_cycle: int, ranges: Ranges) -> None:
        """Hook: the request lets go of ``ranges`` of a life cycle, last block first, as one free."""
        held = record.held[life_cycle]
        self.pool_of(life_cycle).give_back([held.pop(b) for b in sorted(range_blocks(ranges), reverse=True)])

    def release_all(self, record: RequestRecord) -> None:
        """Hook: the request lets go of every slot."""
        for lc_index, held in enumerate(record.held):
            self.free_blocks(record, lc_index, merged_ranges(*((b, b + 1) for b in sorted(held))))
            record.ranges[lc_index] = ()

    def _release_stale(self, record: RequestRecord) -> None:
        if not self._unchanged(record, record.history, record.capacity):
            self.apply(record, self.plan(record, record.history, record.capacity))  # only releases
            record.evicted_on = self._points
            record.released_to = record.history
            self._refresh(record)
        record.released_to = record.history
