"""The reference manager: requests holding per-life-cycle block slots from per-pool-group pools.

A request is created suspended, activated by ``resume``, stepped by ``resize(capacity, history)``,
has history finalized by ``commit``, and is ``suspend``-ed (releasing every slot) or ``close``-d.
After every call an active request holds a slot for exactly its live blocks
(:func:`~.lifecycle.live_block_indices`) and nothing else, and a suspended or closed one holds none.

Running out of slots is an :class:`Outcome`, not an exception: it names each pool group that lacked
slots, and the manager's state is exactly as before the call. Misuse (history going backwards,
capacity below history, an operation on a closed request) raises :class:`RequestError` and changes
nothing either.

Two release orders exist. ``RELEASE_FIRST`` (the spec) frees blocks a resize no longer needs before
allocating. ``HOLD_UNTIL_RETURN`` (as TensorRT-LLM does) keeps blocks made stale by the same call held
until it returns; blocks cut off by a smaller capacity are freed first in both orders. The manager
records each pool group's peak use so transient peaks can be observed.

A request created with ``reused_history=k`` starts from ``k`` reused committed tokens. When the block
of token ``k`` is partially filled (``k % t != 0``) its first resume copies that block into a private
slot while the source page is still held: one extra slot per attention life cycle for the duration
of the call (SSM: one extra when ``k > 0``, the state snapshot).
"""

from __future__ import annotations

import enum
import heapq
from typing import Any, Hashable

import attrs

from .config import Config, Layout, build_layout
from .lifecycle import LifeCycleKind, allocated_blocks, partial_block, stale_range

__all__ = [
    "SwafloorError",
    "RequestError",
    "ReleaseOrder",
    "RequestState",
    "Shortfall",
    "Outcome",
    "PoolSnapshot",
    "RequestSnapshot",
    "Snapshot",
    "Manager",
]


class SwafloorError(Exception):
    """Base of swafloor's typed errors other than :class:`~.config.ConfigError`."""


class RequestError(SwafloorError, ValueError):
    """A request operation was misused. ``field`` names the offending input, ``value`` holds it."""

    def __init__(self, request_id: Any, field: str, value: Any, reason: str):
        self.request_id = request_id
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"request {request_id!r}: {field}={value!r}: {reason}")


class ReleaseOrder(str, enum.Enum):
    """When a resize frees the blocks it made stale."""

    RELEASE_FIRST = "release-first"
    HOLD_UNTIL_RETURN = "hold-until-return"


class RequestState(str, enum.Enum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


@attrs.frozen
class Shortfall:
    """A pool group that lacked slots: the call needed ``needed`` and ``available`` were free."""

    pool_group: int
    needed: int
    available: int

    @property
    def lacking(self) -> int:
        return self.needed - self.available


@attrs.frozen
class Outcome:
    """The result of a call that allocates: ok, or out of slots in the listed pool groups."""

    ok: bool
    shortfalls: tuple[Shortfall, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def describe(self) -> str:
        if self.ok:
            return "ok"
        return "out of slots: " + ", ".join(
            f"pool group {s.pool_group} lacks {s.lacking} (needed {s.needed}, {s.available} free)"
            for s in self.shortfalls
        )


OK = Outcome(True)


@attrs.frozen
class PoolSnapshot:
    total: int
    free: int


@attrs.frozen
class RequestSnapshot:
    """A request's lengths and, per life cycle, its block table: the block index where the block
    holds a slot, None where it holds none. Tables cover blocks ``[0, ceil(c / t))``; SSM has one."""

    request_id: Hashable
    state: RequestState
    capacity: int
    history: int
    tables: tuple[tuple[int | None, ...], ...]


@attrs.frozen
class Snapshot:
    """A backend-independent picture of a manager: comparable with ``==`` across backends.
    Requests appear in creation order; closed requests do not appear."""

    pools: tuple[PoolSnapshot, ...]
    requests: tuple[RequestSnapshot, ...]


@attrs.define
class _Request:
    request_id: Hashable
    state: RequestState
    capacity: int
    history: int
    pending_copy: bool
    held: list[dict[int, int]]  # per life cycle: block index -> slot id


@attrs.define
class _Pool:
    total: int
    free: list[int]  # free slot ids as a heap, so the lowest is taken first
    peak_used: int = 0

    @property
    def used(self) -> int:
        return self.total - len(self.free)

    def take(self) -> int:
        slot = heapq.heappop(self.free)
        self.peak_used = max(self.peak_used, self.used)
        return slot

    def give(self, slot: int) -> None:
        heapq.heappush(self.free, slot)


def _require_count(request_id: Any, field: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RequestError(request_id, field, value, "must be an integer")
    if value < 0:
        raise RequestError(request_id, field, value, "must be >= 0")


class Manager:
    """The executable spec of a paged KV-cache manager with sliding-window attention."""

    def __init__(self, config: Config, release_order: ReleaseOrder | str = ReleaseOrder.RELEASE_FIRST):
        self.config = config
        self.layout: Layout = build_layout(config)
        self.release_order = ReleaseOrder(release_order)
        self._pools = [_Pool(n, list(range(n))) for n in self.layout.slots]
        self._requests: dict[Hashable, _Request] = {}

    # ----------------------------------------------------------------- observation
    @property
    def tokens_per_block(self) -> int:
        return self.layout.tokens_per_block

    def required_blocks(self, life_cycle: int, history: int, capacity: int) -> tuple[int, ...]:
        """The blocks a life cycle must hold at ``(history, capacity)``."""
        return self.layout.life_cycles[life_cycle].live_indices(history, capacity, self.tokens_per_block)

    def request_ids(self) -> tuple[Hashable, ...]:
        return tuple(self._requests)

    def state_of(self, request_id: Hashable) -> RequestState:
        return self._get(request_id, allow_closed=True).state

    def history_of(self, request_id: Hashable) -> int:
        return self._get(request_id, allow_closed=True).history

    def capacity_of(self, request_id: Hashable) -> int:
        return self._get(request_id, allow_closed=True).capacity

    def peak_used(self, pool_group: int) -> int:
        """The most slots of ``pool_group`` in use at any moment since the last :meth:`reset_peaks`."""
        return self._pools[pool_group].peak_used

    def reset_peaks(self) -> None:
        for pool in self._pools:
            pool.peak_used = pool.used

    def snapshot(self) -> Snapshot:
        t = self.tokens_per_block
        requests = []
        for req in self._requests.values():
            if req.state is RequestState.CLOSED:
                continue  # gone, as in any backend; its id stays taken
            tables = []
            for lc, held in zip(self.layout.life_cycles, req.held):
                length = 1 if lc.kind is LifeCycleKind.SSM else allocated_blocks(req.capacity, t)
                tables.append(tuple(b if b in held else None for b in range(length)))
            requests.append(RequestSnapshot(req.request_id, req.state, req.capacity, req.history, tuple(tables)))
        pools = tuple(PoolSnapshot(p.total, len(p.free)) for p in self._pools)
        return Snapshot(pools, tuple(requests))

    def check(self) -> None:
        """Assert the invariants; raises AssertionError naming the first one broken."""
        owners: dict[tuple[int, int], Hashable] = {}
        for req in self._requests.values():
            for lc_index, held in enumerate(req.held):
                g = self.layout.pool_group_of[lc_index]
                expected = (
                    self.required_blocks(lc_index, req.history, req.capacity)
                    if req.state is RequestState.ACTIVE
                    else ()
                )
                assert tuple(sorted(held)) == expected, (
                    f"request {req.request_id!r} life cycle {lc_index} holds blocks {sorted(held)}, "
                    f"must hold exactly {list(expected)} ({req.state.value}, h={req.history}, c={req.capacity})"
                )
                for slot in held.values():
                    assert (g, slot) not in owners, f"slot {slot} of pool group {g} owned twice"
                    owners[(g, slot)] = req.request_id
        for g, pool in enumerate(self._pools):
            free = set(pool.free)
            assert len(free) == len(pool.free), f"pool group {g} lists a free slot twice"
            used = {slot for (group, slot) in owners if group == g}
            assert not free & used, f"pool group {g}: slots {sorted(free & used)} both free and owned"
            assert len(free) + len(used) == pool.total, (
                f"pool group {g}: free {len(free)} + used {len(used)} != total {pool.total}"
            )
            assert all(0 <= s < pool.total for s in free | used), f"pool group {g}: slot id out of range"

    def __repr__(self) -> str:
        lines = [f"Manager(t={self.tokens_per_block}, release_order={self.release_order.value})"]
        for g, pool in enumerate(self._pools):
            lcs = ", ".join(self.layout.life_cycles[i].describe() for i in self.layout.life_cycles_of(g))
            lines.append(f"  pool group {g} [{lcs}]: {len(pool.free)}/{pool.total} free")
        for req in self._requests.values():
            lines.append(
                f"  request {req.request_id!r}: {req.state.value}, capacity={req.capacity}, history={req.history}"
            )
            for lc_index, held in enumerate(req.held):
                blocks = " ".join(f"{b}:{s}" for b, s in sorted(held.items())) or "-"
                lines.append(f"    life cycle {lc_index} (block:slot) {blocks}")
        return "\n".join(lines)

    # ----------------------------------------------------------------- operations
    def create(self, request_id: Hashable, *, reused_history: int = 0) -> None:
        """Add a suspended request whose first ``reused_history`` tokens are reused, committed ones."""
        if request_id in self._requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        _require_count(request_id, "reused_history", reused_history)
        self._requests[request_id] = _Request(
            request_id,
            RequestState.SUSPENDED,
            capacity=reused_history,
            history=reused_history,
            pending_copy=reused_history > 0,
            held=[{} for _ in self.layout.life_cycles],
        )

    def resume(self, request_id: Hashable) -> Outcome:
        """Activate a suspended request: allocate its live blocks (plus any first-resume copy)."""
        req = self._get(request_id, RequestState.SUSPENDED)
        extra = [0] * self.layout.num_pool_groups
        if req.pending_copy:
            for lc_index, lc in enumerate(self.layout.life_cycles):
                needs_copy = req.history > 0 if lc.kind is LifeCycleKind.SSM else partial_block(
                    req.history, self.tokens_per_block
                )
                extra[self.layout.pool_group_of[lc_index]] += int(needs_copy)
        plan = self._plan(req, req.history, req.capacity)
        outcome = self._feasible(plan, held_back=[0] * len(extra), extra=extra)
        if not outcome:
            return outcome
        transient = [[self._pools[g].take() for _ in range(n)] for g, n in enumerate(extra)]
        self._apply(req, plan, hold_stale=False)
        for g, slots in enumerate(transient):
            for slot in slots:
                self._pools[g].give(slot)
        req.state = RequestState.ACTIVE
        req.pending_copy = False
        return OK

    def resize(self, request_id: Hashable, capacity: int, history: int | None = None) -> Outcome:
        """Step an active request to ``capacity`` tokens with ``history`` of them computed
        (history unchanged when None). Out of slots leaves everything as it was."""
        req = self._get(request_id, RequestState.ACTIVE)
        history = req.history if history is None else history
        _require_count(request_id, "capacity", capacity)
        _require_count(request_id, "history", history)
        if history < req.history:
            raise RequestError(request_id, "history", history, f"goes backwards from {req.history}")
        if capacity < history:
            raise RequestError(request_id, "capacity", capacity, f"is below history {history}")
        plan = self._plan(req, history, capacity)
        hold = self.release_order is ReleaseOrder.HOLD_UNTIL_RETURN
        held_back = [0] * self.layout.num_pool_groups
        if hold:
            for lc_index, (_, release) in enumerate(plan):
                held_back[self.layout.pool_group_of[lc_index]] += len(
                    self._stale_among(lc_index, history, release)
                )
        outcome = self._feasible(plan, held_back=held_back, extra=[0] * len(held_back))
        if not outcome:
            return outcome
        self._apply(req, plan, hold_stale=hold, history=history)
        req.capacity, req.history = capacity, history
        return OK

    def commit(self, request_id: Hashable, tokens: int) -> None:
        """Finalize ``tokens`` more tokens: history advances (within capacity); stale blocks are freed."""
        req = self._get(request_id, RequestState.ACTIVE)
        _require_count(request_id, "tokens", tokens)
        if req.history + tokens > req.capacity:
            raise RequestError(
                request_id, "tokens", tokens, f"history {req.history} + tokens exceeds capacity {req.capacity}"
            )
        plan = self._plan(req, req.history + tokens, req.capacity)
        self._apply(req, plan, hold_stale=False)  # only releases: the blocks' range shrinks from below
        req.history += tokens

    def suspend(self, request_id: Hashable) -> None:
        """Release every slot of an active request; it keeps its lengths."""
        req = self._get(request_id, RequestState.ACTIVE)
        self._release_all(req)
        req.state = RequestState.SUSPENDED

    def close(self, request_id: Hashable) -> None:
        """Release every slot; any later operation on the request raises :class:`RequestError`."""
        req = self._get(request_id)
        self._release_all(req)
        req.state = RequestState.CLOSED

    # ----------------------------------------------------------------- internals
    def _get(
        self, request_id: Hashable, state: RequestState | None = None, allow_closed: bool = False
    ) -> _Request:
        req = self._requests.get(request_id)
        if req is None:
            raise RequestError(request_id, "request_id", request_id, "unknown request")
        if req.state is RequestState.CLOSED and not allow_closed:
            raise RequestError(request_id, "state", req.state.value, "request is closed")
        if state is not None and req.state is not state:
            raise RequestError(request_id, "state", req.state.value, f"must be {state.value}")
        return req

    def _plan(self, req: _Request, history: int, capacity: int) -> list[tuple[list[int], list[int]]]:
        """Per life cycle: (blocks to allocate, blocks to release) to reach ``(history, capacity)``."""
        plan = []
        for lc_index, held in enumerate(req.held):
            required = self.required_blocks(lc_index, history, capacity)
            required_set = set(required)
            plan.append(([b for b in required if b not in held], sorted(b for b in held if b not in required_set)))
        return plan

    def _stale_among(self, lc_index: int, history: int, blocks: list[int]) -> list[int]:
        """The blocks of ``blocks`` that are stale at ``history`` (rather than cut off by capacity)."""
        lc = self.layout.life_cycles[lc_index]
        if lc.kind is LifeCycleKind.SSM:
            return []
        start, end = stale_range(history, self.tokens_per_block, lc.window, lc.sink_blocks)
        return [b for b in blocks if start <= b < end]

    def _feasible(self, plan, held_back: list[int], extra: list[int]) -> Outcome:
        """Whether every pool group has the slots the plan needs, given ``held_back`` blocks that are
        released only after allocating and ``extra`` transient slots."""
        needed = list(extra)
        available = [len(p.free) - h for p, h in zip(self._pools, held_back)]
        for lc_index, (allocate, release) in enumerate(plan):
            g = self.layout.pool_group_of[lc_index]
            needed[g] += len(allocate)
            available[g] += len(release)
        shortfalls = tuple(
            Shortfall(g, n, a) for g, (n, a) in enumerate(zip(needed, available)) if n > a
        )
        return Outcome(False, shortfalls) if shortfalls else OK

    def _apply(self, req: _Request, plan, hold_stale: bool, history: int = 0) -> None:
        """Carry out a feasible plan in the chosen order."""
        deferred: list[tuple[int, int]] = []
        for lc_index, (_, release) in enumerate(plan):
            kept = set(self._stale_among(lc_index, history, release)) if hold_stale else set()
            for b in release:
                if b in kept:
                    deferred.append((lc_index, b))
                else:
                    self._free_block(req, lc_index, b)
        for lc_index, (allocate, _) in enumerate(plan):
            pool = self._pools[self.layout.pool_group_of[lc_index]]
            for b in allocate:
                req.held[lc_index][b] = pool.take()
        for lc_index, b in deferred:
            self._free_block(req, lc_index, b)

    def _free_block(self, req: _Request, lc_index: int, block: int) -> None:
        self._pools[self.layout.pool_group_of[lc_index]].give(req.held[lc_index].pop(block))

    def _release_all(self, req: _Request) -> None:
        for lc_index, held in enumerate(req.held):
            for b in sorted(held):
                self._free_block(req, lc_index, b)
