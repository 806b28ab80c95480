"""The ``vllm`` and ``vllm-async`` backends: vLLM v1's own block manager (``KVCacheManager``),
driven on a CPU through the protocol.

vLLM's block bookkeeping is pure Python; only the KV data would live on a GPU, so nothing here needs
one. vLLM is never a dependency of swafloor: it runs in its own pinned venv (``scripts/vllm-venv``)
and is imported only when a backend is built (:func:`load`).

What is built: one ``KVCacheManager`` with prefix caching off (vLLM then uses its no-prefix-cache
coordinator), one ``KVCacheGroupSpec`` per life cycle (``SlidingWindowSpec(block_size=t,
sliding_window=W)`` or ``FullAttentionSpec``), every group served from one ``BlockPool`` of
``slots + 1`` blocks (block 0 is vLLM's null block). The protocol's operations map onto vLLM's own
calls, in vLLM's own order, nothing emulated:

- ``create(r, h)``: a waiting ``Request``; ``h`` reused tokens are held by a KV connector.
- ``resume(r)``: the connector load path, ``allocate_slots(request, c - h,
  num_external_computed_tokens=h)`` with ``num_computed_tokens = 0``, then ``num_computed_tokens =
  h`` (as the scheduler does once the load is in). Nothing to load and nothing to allocate
  (``c == h == 0``, the case after a preemption) allocates nothing.
- ``resize(r, c, h)``: a scheduled step, ``allocate_slots(request, c - h)``, which first frees the
  blocks skipped at ``max(0, h - in_flight)`` (that free stands even when the allocation then fails)
  and returns None when the new blocks do not fit. A step with no new token (``c == h``) cannot be
  scheduled; only the free runs (``remove_skipped_blocks``). ``h`` above the request's history is the
  step's output returning first (``num_computed_tokens`` advances), as vLLM orders it; the harness
  sends that only to backends without ``commit_before_allocate``.
- ``commit(r, n)``: the step's output returns: ``num_computed_tokens += n``. vLLM frees nothing here
  (its scheduler frees lazily, at the request's next ``allocate_slots``).
- ``suspend(r)``: preemption: every block freed, ``num_computed_tokens = 0`` (recompute on resume).
- ``close(r)``: the request finishes: every block freed.

``vllm-async`` is asynchronous scheduling with one token in flight: before each allocation the
request's ``num_in_flight_tokens`` is ``min(1, history)`` (the step scheduled before the previous
one's output returned), so vLLM frees on ``history - 1``. It creates no request with reused
history: right after a connector load nothing is in flight (vLLM frees on the loaded history),
while the model's ``k`` applies to every history.

Every release whose v1 manager has a sliding-window manager (0.8.3 on) is driven, adapted by inspection
(:mod:`.compat`: imports, constructor and call signatures, the connector load path); a release
lacking a piece the backend needs raises :class:`Unsupported` saying which. ``vllm-no-reuse`` is
``vllm`` without reused history (the matrix compares everything else on releases whose connector load
differs).

Observations are read from vLLM's objects: pool totals and use from the ``BlockPool``, tables from
the manager's per-group block lists (a null entry holds no slot), states from ``Request.status`` and
history from ``Request.num_computed_tokens``. The capacity is the token count the last step asked
slots for (vLLM keeps no such number; its table length is ``ceil(capacity / t)``).
"""

from __future__ import annotations

import time
from typing import Any, Hashable

from swafloor.reference import (
    BlockTable, Config, LifeCycleKind, Outcome, RequestError, RequestState, Semantics, SlotMap, build_layout,
)

from ...protocol import Capabilities, Part, Unsupported, factory
from ..common import engine_table_capabilities
from .compat import check_in_flight, import_vllm, release_of

__all__ = ["VllmBackend", "vllm", "vllm_async", "vllm_no_reuse", "load", "load_async", "capabilities", "semantics", "import_seconds"]

#: The longest sequence the manager is told of: far above any generated history.
MAX_MODEL_LEN = 1 << 30

_loaded: dict[str, Any] = {}
_import_seconds: list[float] = []


def load() -> dict[str, Any]:
    """Import the parts of vLLM the backend uses (once; 10 to 25 s the first time).

    Any vLLM release whose v1 KV-cache manager has a sliding-window manager (0.8.3 on) is driven:
    what differs between releases is found by inspection (:mod:`.compat`), never by version
    string. A release that cannot serve the backend raises :class:`Unsupported` with one line why."""
    if not _loaded:
        started = time.perf_counter()
        _loaded.update(import_vllm())
        _import_seconds.append(time.perf_counter() - started)
    return _loaded


def load_async() -> dict[str, Any]:
    """:func:`load`, then check that this release's manager can be told of tokens in flight."""
    v = load()
    check_in_flight(v)
    return v


def import_seconds() -> float | None:
    """How long importing vLLM took in this process (None: not imported yet)."""
    return _import_seconds[0] if _import_seconds else None


def semantics(in_flight: int) -> Semantics:
    """The reference semantics vLLM's v1 manager has, with ``in_flight`` tokens in flight."""
    return Semantics(
        in_flight_tokens=in_flight,
        free_stale="at-allocate",  # the scheduler frees stale blocks at the request's next allocate_slots
        suspend="recompute",  # preemption frees everything and recomputes from token 0
        first_resume_copy=False,  # the connector loads a reused prefix into fresh blocks: no copy slot
    )


def capabilities(in_flight: int, reuse: bool = True) -> Capabilities:
    """What the backend supports and how each part is compared (everything it shows, exactly: see
    :func:`~swafloor.fuzz.engines.common.engine_table_capabilities`; the adapter sets the request
    status and computed-token count as the scheduler would). vLLM's SSM manager is another design, not
    driven here; SlidingWindowSpec has no sink tokens; vLLM has no floor of its own; the computed
    tokens (num_computed_tokens) advance before the next allocate_slots; it never shrinks a block
    table. ``reuse=False``: no request is created with reused history."""
    return engine_table_capabilities(
        shared_pool_groups=True,
        one_pool_group=True,  # every KV-cache group draws from one BlockPool
        reused_history=reuse and in_flight == 0,  # see the module docstring
        semantics=semantics(in_flight),
    )


class _Request:
    __slots__ = ("request", "capacity", "closed")

    def __init__(self, request: Any, capacity: int):
        self.request = request
        self.capacity = capacity
        self.closed = False


class VllmBackend:
    """vLLM's ``KVCacheManager`` behind the protocol (see the module docstring)."""

    caching = False  # prefix caching (vllm-prefix turns it on)
    eagle = False  # use_eagle (vllm-prefix-eagle turns it on)

    def __init__(self, config: Config, in_flight: int = 0):
        v = load()
        layout = build_layout(config)
        self.t = t = layout.tokens_per_block
        self.in_flight = in_flight
        if layout.num_pool_groups != 1:
            raise Unsupported(f"vLLM serves every life cycle from one pool; config has {layout.num_pool_groups}")
        windows: list[int | None] = []
        for lc in layout.life_cycles:
            if lc.kind is LifeCycleKind.SWA:
                if lc.sink_blocks:
                    raise Unsupported("vLLM's sliding-window manager has no sink tokens")
                windows.append(lc.window)
            elif lc.kind is LifeCycleKind.FULL:
                windows.append(None)
            else:
                raise Unsupported("vLLM's SSM (Mamba) manager is not driven by this backend")
        self.pool_slots = layout.slots[0]
        if in_flight:
            check_in_flight(v)
        # The release's constructors and calls, adapted by inspection (see compat.Release).
        self.vllm = release = release_of(v)
        # a block size per life cycle (only where the layout has them: vllm-prefix-mixed)
        sizes = {"block_sizes": list(layout.block_sizes)} if layout.mixed_block_sizes else {}
        self.manager = release.manager(t, windows, self.pool_slots + 1, max_model_len=MAX_MODEL_LEN, in_flight=in_flight,
                                       caching=self.caching, **({"eagle": True} if self.eagle else {}), **sizes)
        self.pool = self.manager.block_pool
        self.status = v["RequestStatus"]
        self.requests: dict[Hashable, _Request] = {}
        #: request -> what its last schedule handed the worker (vLLM's own block lists, read only by
        #: handed_out) and its lookahead slots
        self.handed: dict[Hashable, Any] = {}
        self.drafted: dict[Hashable, int] = {}

    # ------------------------------------------------------------------ helpers
    def _get(self, request_id: Hashable, *statuses: Any) -> _Request:
        entry = self.requests.get(request_id)
        if entry is None:
            raise RequestError(request_id, "request_id", request_id, "unknown request")
        if entry.closed:
            raise RequestError(request_id, "state", RequestState.CLOSED.value, "request is closed")
        if statuses and entry.request.status not in statuses:
            raise RequestError(request_id, "state", self._state(entry).value, "not allowed in this state")
        return entry

    def _state(self, entry: _Request) -> RequestState:
        if entry.closed:
            return RequestState.CLOSED
        return RequestState.ACTIVE if entry.request.status == self.status.RUNNING else RequestState.SUSPENDED

    def _drafts(self, history: int, capacity: int) -> int:
        """The lookahead (draft) slots of a step (none here; vllm-prefix-eagle has some)."""
        return 0

    def _set_in_flight(self, request: Any) -> None:
        request.num_in_flight_tokens = min(self.in_flight, request.num_computed_tokens)

    # ------------------------------------------------------------------ operations
    def create(self, request_id: Hashable, reused_history: int = 0) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        request = self.vllm.request(str(request_id), max(1, reused_history), MAX_MODEL_LEN)
        request.num_computed_tokens = reused_history  # held by the connector until loaded
        self.requests[request_id] = _Request(request, reused_history)

    def resume(self, request_id: Hashable) -> Outcome:
        entry = self._get(request_id, self.status.WAITING, self.status.PREEMPTED)
        request = entry.request
        h, c = request.num_computed_tokens, entry.capacity
        if c > h or h > 0:
            request.num_computed_tokens = 0
            request.num_in_flight_tokens = 0
            blocks = self.vllm.load(self.manager, request, c - h, h)
            return self._admitted(request, h, blocks)
        request.status = self.status.RUNNING
        return Outcome(True)

    def _admitted(self, request: Any, history: int, blocks: Any, drafts: int = 0) -> Outcome:
        """After a resume's allocation: the computed tokens back at ``history``; out of slots where vLLM
        gave no blocks, else the request running."""
        request.num_computed_tokens = history
        if blocks is None:
            return Outcome(False)
        # a newly scheduled request: vLLM's scheduler hands the worker every block it holds (get_blocks)
        self.handed[request.request_id] = "all"
        self.drafted[request.request_id] = drafts
        request.status = self.status.RUNNING
        return Outcome(True)

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        entry = self._get(request_id, self.status.RUNNING)
        request = entry.request
        if history > request.num_computed_tokens:  # the previous step's output returns first
            request.num_computed_tokens = history
        h = request.num_computed_tokens
        self._set_in_flight(request)
        if capacity > h:
            drafts = self._drafts(h, capacity)
            blocks = self.vllm.allocate(self.manager, request, capacity - h, drafts)
            if blocks is None:
                return Outcome(False)
            # a running request: the scheduler hands the worker the blocks allocate_slots returned
            self.handed[request.request_id] = blocks
            self.drafted[request.request_id] = drafts
        else:  # nothing to schedule: only the free that precedes every allocation
            # (a release that cannot be told of tokens in flight frees on the history, as its allocate_slots does)
            processed = max(0, h - request.num_in_flight_tokens) if self.vllm.in_flight else h
            self.vllm.remove_skipped(self.manager, request, processed)
        entry.capacity = capacity
        return Outcome(True)

    def commit(self, request_id: Hashable, tokens: int) -> None:
        entry = self._get(request_id, self.status.RUNNING)
        entry.request.num_computed_tokens += tokens

    def suspend(self, request_id: Hashable) -> None:
        entry = self._get(request_id, self.status.RUNNING)
        request = entry.request
        self.manager.free(request)
        request.status = self.status.PREEMPTED
        request.num_computed_tokens = 0
        request.num_in_flight_tokens = 0
        entry.capacity = 0

    def close(self, request_id: Hashable) -> None:
        entry = self._get(request_id)
        self.manager.free(entry.request)
        entry.request.status = self.status.FINISHED_ABORTED
        entry.closed = True

    # ------------------------------------------------------------------ the worker's side (EventOrder)
    @staticmethod
    def _ids(groups: Any) -> tuple[list[int | None], ...]:
        """Per group, the ids of vLLM's blocks (None for the null block)."""
        return tuple([None if block.is_null else block.block_id for block in group] for group in groups)

    def handed_out(self, request_id: Hashable) -> tuple[list[int | None], ...] | None:
        """Per group, the block ids vLLM's scheduler hands the worker for the request's last schedule
        (taken once: None when nothing was scheduled since): all its blocks when it was newly scheduled
        (a resume), else the new blocks ``allocate_slots`` returned, as vLLM's scheduler output carries
        them."""
        got = self.handed.pop(str(request_id), None)
        if got is None:
            return None
        if isinstance(got, str):  # newly scheduled: every block the request holds
            return self._ids(self.manager.coordinator.get_blocks(str(request_id)))
        # KVCacheBlocks: one list per group; a release of one group (0.8.x) returns that group's list
        return self._ids(got.blocks if hasattr(got, "blocks") else (got,))

    def step_drafts(self, request_id: Hashable) -> int:
        """The lookahead (draft) slots the request's last schedule asked for."""
        return self.drafted.get(str(request_id), 0)

    # ------------------------------------------------------------------ observation
    @staticmethod
    def _table(blocks: list[Any]) -> BlockTable:
        """vLLM's own block list for a group as a table: its entries, the non-null ones held (a null
        entry is a freed out-of-window position); nothing added for capacity vLLM keeps no number of."""
        return BlockTable.from_blocks(len(blocks), (i for i, block in enumerate(blocks) if not block.is_null))

    def _free_ids(self) -> list[int]:
        """The block ids in vLLM's free queue, walked through its links (not its counter), at most one
        pass over the pool plus one: a block queued twice (a corrupt list) shows as an id listed twice."""
        queue = self.pool.free_block_queue
        limit = self.pool.num_gpu_blocks + 1
        head = getattr(queue, "fake_free_list_head", None)
        if head is not None:
            node, tail = head.next_free_block, getattr(queue, "fake_free_list_tail", None)
        else:  # releases whose queue has no sentinels
            node, tail = getattr(queue, "free_list_head", None), None
        ids: list[int] = []
        while node is not None and node is not tail and len(ids) <= limit:
            ids.append(node.block_id)
            node = node.next_free_block
        return ids

    def slots(self) -> SlotMap:
        """Physical identity from vLLM's own objects: every non-null block a request holds (its
        ``block_id`` and ``ref_cnt``) and the ids in the free queue. The null block is no slot."""
        held: dict[Hashable, tuple[dict[int, int], ...]] = {}
        counts: dict[int, int] = {}
        for rid, entry in self.requests.items():
            if entry.closed:
                continue
            per_group = []
            for blocks in self.manager.coordinator.get_blocks(entry.request.request_id):
                table = {}
                for i, block in enumerate(blocks):
                    if not block.is_null:
                        table[i] = block.block_id
                        counts[block.block_id] = block.ref_cnt
                per_group.append(table)
            held[rid] = tuple(per_group)
        free = self._free_ids()
        for block_id in free:
            counts.setdefault(block_id, self.pool.blocks[block_id].ref_cnt)
        return SlotMap(held, (tuple((i, i + 1) for i in free),), (counts,))

    def observe(self) -> dict[Part, Any]:
        total = self.pool.num_gpu_blocks - 1  # block 0 is the null block
        lengths: dict[Hashable, tuple[str, int, int]] = {}
        tables: dict[Hashable, tuple[BlockTable, ...]] = {}
        for rid, entry in self.requests.items():
            if entry.closed:
                continue
            request = entry.request
            lengths[rid] = (self._state(entry), entry.capacity, request.num_computed_tokens)
            groups = self.manager.coordinator.get_blocks(request.request_id)
            tables[rid] = tuple(self._table(blocks) for blocks in groups)
        return {
            Part.POOL_TOTALS: (total,),  # adapter-set: the size it built the pool with
            Part.POOL_USED: (total - self.pool.get_num_free_blocks(),),
            Part.LENGTHS: lengths,  # adapter-set (see capabilities)
            Part.TABLES: tables,
            Part.SLOTS: self.slots(),
        }


@factory(capabilities(0), name="vllm", prepare=load)
def vllm(config: Config) -> VllmBackend:
    """vLLM's v1 block manager, synchronous scheduling (nothing in flight when a step is allocated)."""
    return VllmBackend(config, in_flight=0)


@factory(capabilities(1), name="vllm-async", prepare=load_async)
def vllm_async(config: Config) -> VllmBackend:
    """vLLM's v1 block manager, asynchronous scheduling with one token in flight."""
    return VllmBackend(config, in_flight=1)


@factory(capabilities(0, reuse=False), name="vllm-no-reuse", prepare=load)
def vllm_no_reuse(config: Config) -> VllmBackend:
    """vLLM's v1 block manager, synchronous scheduling, no request with reused history (the matrix runs it
    on releases whose KV-connector load differs, to compare everything else)."""
    return VllmBackend(config, in_flight=0)
