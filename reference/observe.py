"""What a manager shows: its :class:`~.values.Snapshot`, its :class:`~.values.SlotMap` and its
``repr``, built from the core's records and pools (a mixin of :class:`~.core.CoreManager`; it
changes nothing)."""

from __future__ import annotations

from typing import Any

from .errors import RequestError, require_id
from .lifecycle import LifeCycleKind, allocated_blocks
from .pool import Pool
from .values import BlockTable, range_blocks, PoolSnapshot, RequestSnapshot, RequestState, SlotMap, Snapshot

__all__ = ["Observing"]


class Observing:
    """Lengths, snapshots, slot maps and the ``repr`` of a manager (reads ``_requests``, ``_pools``,
    ``layout``, ``block_sizes`` and ``pool_group_of``)."""
    @property
    def tokens_per_block(self) -> int:
        """The config's tokens per block (a life cycle with a block size of its own uses that)."""
        return self.layout.tokens_per_block

    def block_size(self, life_cycle: int) -> int:
        return self.block_sizes[life_cycle]

    def required_blocks(self, life_cycle: int, history: int, capacity: int) -> tuple[int, ...]:
        return tuple(range_blocks(self.required_ranges(life_cycle, history, capacity)))

    def request_ids(self) -> tuple[str, ...]:
        return tuple(self._requests)

    def state_of(self, request_id: str) -> RequestState:
        return self._get(request_id, allow_closed=True).state

    def history_of(self, request_id: str) -> int:
        return self._get(request_id, allow_closed=True).history

    def capacity_of(self, request_id: str) -> int:
        return self._get(request_id, allow_closed=True).capacity

    def record_of(self, request_id: str) -> Any:
        """The request's :class:`~.core.RequestRecord` itself, not a copy: for hooks, and for tests
        that corrupt it on purpose to show :meth:`check` sees the corruption."""
        return self._get(request_id, allow_closed=True)

    def pool_of(self, life_cycle: int) -> Pool:
        """The pool a life cycle's blocks take their slots from."""
        return self._pools[self.pool_group_of[life_cycle]]

    def free_slots(self, pool_group: int) -> int:
        return self._pools[pool_group].free

    def peak_used(self, pool_group: int) -> int:
        """The most slots of ``pool_group`` in use at any moment since the last :meth:`reset_peaks`."""
        return self._pools[pool_group].peak_used

    def reset_peaks(self) -> None:
        for pool in self._pools:
            pool.peak_used = pool.used


    def _get(self, request_id: str, state: RequestState | None = None, allow_closed: bool = False):
        require_id(request_id)
        req = self._requests.get(request_id)
        if req is None:
            raise RequestError(request_id, "request_id", request_id, "unknown request")
        if req.state is RequestState.CLOSED and not allow_closed:
            raise RequestError(request_id, "state", req.state.value, "request is closed")
        if state is not None and req.state is not state:
            raise RequestError(request_id, "state", req.state.value, f"must be {state.value}")
        return req

    def _active(self, request_id: str):
        """The active request ``request_id`` (the common case first), else :meth:`_get`'s error."""
        req = self._requests.get(request_id) if type(request_id) is str else None
        if req is None or req.state is not RequestState.ACTIVE:
            req = self._get(request_id, RequestState.ACTIVE)
        return req

    def snapshot(self) -> Snapshot:
        requests = tuple(
            self._request_snapshot(req) for req in self._requests.values() if req.state is not RequestState.CLOSED
        )  # a closed request is gone, as in any backend; its id stays taken
        pools = tuple(PoolSnapshot(p.total, p.free) for p in self._pools)
        cached = tuple(sorted((key[0], key[2], key[1]) for p in self._pools for key in p.cached_content().values()))
        return Snapshot(pools, requests, self._sharing() if any(p.sharers for p in self._pools) else (), cached)

    def _sharing(self) -> tuple[tuple[int, int, tuple[str, ...]], ...]:
        """Each shared slot as (life cycle, block, holders in creation order): O(held blocks)."""
        holders: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
        for req in self._requests.values():
            for lc_index, held in enumerate(req.held):
                g = self.pool_group_of[lc_index]
                sharers = self._pools[g].sharers
                for b, slot in held.items():
                    if slot in sharers:
                        holders.setdefault((g, slot), []).append((lc_index, b, req.request_id))
        return tuple(sorted((who[0][0], who[0][1], tuple(r for _, _, r in who)) for who in holders.values()))

    def slots(self) -> SlotMap:
        """Which slot each held block is in and which slots are free: O(held blocks + freed slots)."""
        held = {
            req.request_id: tuple(dict(h) for h in req.held)
            for req in self._requests.values()
            if req.state is not RequestState.CLOSED
        }
        fresh = [((p.fresh, p.total),) if p.fresh < p.total else () for p in self._pools]
        if not any(p.cache for p in self._pools):
            freed = [tuple((s, s + 1) for s in p.freed()) for p in self._pools]
            return SlotMap(held, tuple(f + n for f, n in zip(freed, fresh)))
        free = tuple(
            tuple((s, s + 1) for s in reversed(p.front)) + n + tuple((s, s + 1) for s in p.queue)
            for p, n in zip(self._pools, fresh)
        )  # the queue's order: what keeps nothing, the never-used ids, then the cached slots
        cached = tuple({s: (key[0], key[2], key[1]) for s, key in p.cached_content().items()} for p in self._pools)
        return SlotMap(held, free, cached=cached)

    def _request_snapshot(self, req) -> RequestSnapshot:
        """A request's snapshot, rebuilt only when its state, lengths or blocks changed (a harness
        snapshots after every step; most steps change one request). O(held ranges)."""
        key = (req.state, req.capacity, req.history, tuple(req.ranges))
        if req.snapshot_key != key:
            tables = self._tables(req, req.capacity)
            req.snapshot = RequestSnapshot(req.request_id, req.state, req.capacity, req.history, tables)
            req.snapshot_key = key
        return req.snapshot

    def _tables(self, req, capacity: int) -> tuple[BlockTable, ...]:
        """Per life cycle, the ranges of the blocks held among the blocks ``capacity`` spans in its
        own block size (SSM: its one page)."""
        return tuple(
            BlockTable(1 if lc.kind is LifeCycleKind.SSM else (
                allocated_blocks(capacity, t) if capacity != req.capacity else self.table_blocks(req, i)), ranges)
            for i, (lc, t, ranges) in enumerate(zip(self.layout.life_cycles, self.block_sizes, req.ranges))
        )

    def __repr__(self) -> str:
        sizes = "" if not self.layout.mixed_block_sizes else f", block sizes={list(self.block_sizes)}"
        lines = [f"Manager(t={self.tokens_per_block}{sizes}, release_order={self.release_order.value})"]
        for g, pool in enumerate(self._pools):
            lcs = ", ".join(self.layout.life_cycles[i].describe() for i in self.layout.life_cycles_of(g))
            lines.append(f"  pool group {g} [{lcs}]: {pool.free}/{pool.total} free")
        for req in self._requests.values():
            lines.append(
                f"  request {req.request_id!r}: {req.state.value}, capacity={req.capacity}, history={req.history}"
            )
            for lc_index, held in enumerate(req.held):
                blocks = " ".join(f"{b}:{s}" for b, s in sorted(held.items())) or "-"
                lines.append(f"    life cycle {lc_index} (block:slot) {blocks}")
        return "\n".join(lines)
