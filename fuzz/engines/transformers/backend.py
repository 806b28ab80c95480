"""The ``transformers-cb`` backend: Hugging Face transformers' continuous-batching paged cache (its
full-attention and sliding-window cache allocators, its block pool and its scheduler's allocation
step), driven on a CPU through the protocol, with the read and write indices it hands the attention
checked token by token against the reference's live window.

transformers' continuous batching is never a dependency of swafloor: it runs in its own pinned venv
(``scripts/transformers-venv``) and is imported only when the backend is built
(:func:`import_transformers`). No model is built: the adapter makes the allocators and the pool of
the paged cache for the config and calls the cache's and the scheduler's own functions
(:mod:`.compat`), as ``PagedAttentionCache`` and the scheduler call them.

**Domain** (stated in the capabilities and at the top of docs/transformers.md): at most one sliding
window life cycle (transformers takes one ``sliding_window`` per model) and at most one full
attention life cycle, no sink tokens, no SSM state, one pool for every life cycle (the paged cache
has one); no reused history (transformers' prefix sharing is off whenever a model has a sliding
window); blocks of the config's ``t`` tokens.

**What differs from the spec, and how it is compared.** transformers' sliding-window allocator is a
*ring*: a request holds the blocks of its first ``min(c, W)`` tokens and the token at position ``p``
lives in ring slot ``p % W``; nothing is freed as the window slides, a new token overwrites the one
that just left the window. The reference models it (``Semantics.window_ring``, reference/ring.py;
theorem ``ring-window-floor``: at most the floor, one block less unless ``(W-1) % t == 0``), so the
outcome, the pool use and the tables are compared exactly (ring block ``i`` is the ``i``-th entry of
the allocator's block table, the reference's block ``i``; full attention's likewise). Slot ids are
not compared with the reference's; what makes each step sound is also checked on the engine's own
structures after every operation:

- ``reads``: the read indices the allocator hands the attention for a forward pass (``commit``) of
  ``n`` tokens from history ``h`` name, in order, the cached tokens of the reference's live window
  ``[max(0, h + 1 - W), h - 1]`` (sliding window: read before the step writes, then ``n``
  sentinels) or ``[0, h + n)`` (full attention: read after it writes), each in a block the request
  holds, holding that token of that request (a shadow of every write the engine's own write indices
  made). A read outside the window, of a freed block or of a token overwritten is a divergence at
  its step.
- ``writes``: every write index lies in a block the request holds (the write trash only for the
  tokens of a step longer than the window that the ring cannot keep).
- ``slots``: physical identity: no block in two tables, none both held and free, every block held or
  free (none lost), a closed or suspended request holds none; a refused step changes no table and
  no free list.

Plants and bugs change the engine's behaviour through the named hooks :meth:`TransformersCbBackend.reads_of`,
:meth:`~TransformersCbBackend.writes_of` and :meth:`~TransformersCbBackend.release`.
"""

from __future__ import annotations

import math
import time
from typing import Any, Hashable

from swafloor.reference import Config, LifeCycleKind, Outcome, RequestError, RequestState, Semantics, build_layout

from ...protocol import BackendCheckFailed, Capabilities, Operation, Part, Unsupported, factory
from ..common import open_request
from . import compat

__all__ = ["TransformersCbBackend", "transformers_cb", "import_transformers", "capabilities", "semantics",
           "HEAD_DIM"]

_loaded: dict[str, Any] = {}
#: The head size of the adapter's one KV head: with float16 a page of ``t`` tokens is ``128 * t`` bytes,
#: so the sectors of the ``sectors`` shape hold exactly one block of either allocator.
HEAD_DIM = 32


def import_transformers() -> dict[str, Any]:
    """Import the release's continuous-batching cache pieces (once)."""
    if not _loaded:
        import importlib.util

        started = time.perf_counter()
        try:
            found = importlib.util.find_spec("transformers")
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise Unsupported("transformers is not importable here; run transformers-cb in the venv made by "
                              "scripts/transformers-venv")
        parts = compat.load()
        parts["torch"].set_num_threads(1)
        # The engine warns when a request that never allocated is freed (as its scheduler frees every
        # finished request): its logger says only errors here.
        import logging

        logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)
        _loaded.update(parts, seconds=time.perf_counter() - started)
    return _loaded


def semantics() -> Semantics:
    """The reference semantics the engine has: a sliding window kept as a ring of the blocks of its
    first ``min(c, W)`` tokens (``window_ring``: nothing freed as the window slides), the tokens a step
    computed committed before the next step allocates (``at-allocate``), an offloaded request
    recomputing from token 0, no first-resume copy."""
    return Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, window_ring=True)


def capabilities() -> Capabilities:
    return Capabilities(
        operations=[Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.COMMIT, Operation.SUSPEND,
                    Operation.CLOSE],
        observations={Part.OUTCOME: "exact", Part.POOL_USED: "exact", Part.TABLES: "exact"},
        layer_kinds=[LifeCycleKind.SWA, LifeCycleKind.FULL],
        sinks=False,
        shared_pool_groups=True,
        one_pool_group=True,
        one_window=True,  # transformers takes one sliding_window per model
        reused_history=False,
        legacy_floor=True,
        commit_before_allocate=True,
        capacity_cuts=False,
        semantics=semantics(),
        notes=("sliding windows as a ring of min(c, W) tokens (window_ring: nothing freed as the window slides), "
               "compared exactly: outcome, pool use and tables (ring block i of the engine's table is the "
               "reference's block i); slot ids not compared with the reference's; reads checked against its live "
               "window, writes and physical identity against the engine's own tables and free blocks after every step",
               "domain: one sliding window and one full attention life cycle at most, one pool"),
    )


class _State:
    """The fields of transformers' ``RequestState`` the cache and the scheduler read."""

    def __init__(self, request_id: str):
        self.request_id = request_id
        self.allocated_blocks = 0
        self.past = 0

    def current_len(self) -> int:
        return self.past


class _Request:
    def __init__(self, request_id: str):
        self.state = RequestState.SUSPENDED
        self.engine = _State(request_id)
        self.history = 0
        self.capacity = 0


class TransformersCbBackend:
    """transformers' continuous-batching paged cache behind the protocol (see the module docstring)."""

    def __init__(self, config: Config):
        s = import_transformers()
        self.shape = s["shape"]
        layout = build_layout(config)
        lcs = layout.life_cycles
        if any(lc.kind is LifeCycleKind.SSM for lc in lcs):
            raise Unsupported("transformers' paged cache has no SSM state")
        if any(lc.sink_blocks for lc in lcs):
            raise Unsupported("transformers keeps no sink tokens")
        kinds = [lc.kind for lc in lcs]
        if kinds.count(LifeCycleKind.SWA) > 1 or kinds.count(LifeCycleKind.FULL) > 1:
            raise Unsupported("transformers takes one sliding window per model: one allocator per attention type")
        if layout.num_pool_groups != 1:
            raise Unsupported("transformers' paged cache has one pool")
        self.layout = layout
        self.t = t = layout.tokens_per_block
        self.slots = slots = layout.slots[0]
        self.windows = [lc.window if lc.kind is LifeCycleKind.SWA else None for lc in lcs]
        self.requests: dict[Hashable, _Request] = {}
        self.shadow: list[dict[tuple[int, int], tuple[str, int]]] = [{} for _ in lcs]
        torch = s["torch"]
        if self.shape == "sectors":
            window = next((w for w in self.windows if w is not None), None)
            cfg = s["PretrainedConfig"](sliding_window=window, head_dim=HEAD_DIM, num_attention_heads=1,
                                        num_key_value_heads=1, hidden_size=HEAD_DIM)
            self.allocators = []
            for i, w in enumerate(self.windows):
                cls = s["Sliding"] if w is not None else s["Full"]
                self.allocators.append(compat.build(cls, dict(
                    index=i, config=cfg, num_key_value_heads=1, cache_dtype=torch.float16, page_size=t,
                    layer_indices=[i], allow_block_sharing=False), cls.__name__))
            per_sector = math.lcm(*(a.bytes_per_block for a in self.allocators), 128)
            non_trash = slots * per_sector
            tensor = torch.zeros(non_trash + 2 * per_sector, dtype=torch.uint8)
            self.pool = s["CachePool"](slots, len(self.allocators))
            for a in self.allocators:
                a.register_cache_tensor(per_sector, non_trash, tensor, self.pool)
                if a.blocks_per_sector != 1:
                    raise Unsupported(f"a sector holds {a.blocks_per_sector} blocks of allocator {a.index} (the adapter "
                                      "sizes pages so that it holds one)")
            self.all_blocks = frozenset(range(self.pool.num_reserved_sectors, self.pool.num_reserved_sectors + slots))
            functions = compat.engine_class(s["PagedAttentionCache"], (
                "can_store_request_tokens", "free_blocks"), "the paged cache's allocation")
            self.cache = functions()
            self.cache.cache_allocators = {s["SlidingKey"] if w is not None else s["FullKey"]: a
                                           for w, a in zip(self.windows, self.allocators)}
            self.cache.pool = self.pool
            self.strides = [a.block_physical_stride for a in self.allocators]
        else:
            sentinel, trash = slots * t, (slots + 1) * t  # the read and write trash blocks past the last block
            self.allocators = []
            for i, w in enumerate(self.windows):
                cls = s["Sliding"] if w is not None else s["Full"]
                self.allocators.append(compat.build(cls, dict(
                    index=i, block_size=t, sliding_window=w, allow_block_sharing=False, sentinel_index=sentinel,
                    write_trash_index=trash, trash_index=trash), cls.__name__))
            names = ["allocate_blocks", "free_blocks"] + [
                n for n in ("blocks_needed", "will_allocation_be_successful", "get_num_free_blocks")
                if any(n in vars(k) for k in s["PagedAttentionCache"].__mro__)]
            self.cache = compat.engine_class(s["PagedAttentionCache"], tuple(names), "the paged cache's allocation")()
            c = self.cache
            c.group_cache_managers = self.allocators
            c.block_size = t
            c.num_full_attention_groups = sum(w is None for w in self.windows)
            c.num_sliding_attention_groups = sum(w is not None for w in self.windows)
            c.max_sliding_window_blocks_per_request = max(
                (a._max_blocks_per_request for a, w in zip(self.allocators, self.windows) if w is not None), default=0)
            if self.shape == "ring-ledger":
                c._block_manager = compat.build(s["BlockManager"], dict(num_blocks=slots, block_size=t, tp_on=False),
                                                "BlockManager")
            else:
                import collections

                c._free_blocks = collections.deque(range(slots))
            self.scheduler = compat.engine_class(s["Scheduler"], ("_allocate_blocks_if_needed",),
                                                 "the scheduler's allocation step")()
            self.scheduler.cache = c
            self.scheduler.active_requests = {}
            self.scheduler.starved_requests = []
            self.all_blocks = frozenset(range(slots))
            self.strides = [t] * len(self.allocators)

    # ------------------------------------------------------------------ the engine, through named hooks
    def table(self, g: int, request_id: str) -> list[int]:
        a = self.allocators[g]
        tables = a.block_table if hasattr(a, "block_table") else a._block_table
        return list(tables.get(request_id, ()))

    def free_ids(self) -> list[int]:
        """Every block id the pool holds free, as the engine keeps them (with repeats, if it has any)."""
        if self.shape == "sectors":
            ids = list(self.pool.free_sectors)
            for trees in self.pool._free_blocks:
                for leaves in trees.trees.values():
                    ids.extend(leaves)
            return ids
        if self.shape == "ring-ledger":
            bm = self.cache._block_manager
            return list(bm._uninit_block_ids) + list(bm._init_block_ids)
        return list(self.cache._free_blocks)

    def allocate(self, req: _Request, n: int) -> bool:
        """Hook: the engine's allocation for a step of ``n`` new tokens (True: it fits, allocated)."""
        if self.shape == "sectors":
            return bool(self.cache.can_store_request_tokens(req.engine, n))
        return bool(self.scheduler._allocate_blocks_if_needed(req.engine, n))

    def release(self, request_id: str) -> None:
        """Hook: the engine frees every block of a request (its paged cache's ``free_blocks``)."""
        self.cache.free_blocks(request_id)

    def reads_of(self, g: int, request_id: str, past: int, n: int) -> list[int]:
        """Hook: the read indices group ``g``'s allocator hands the attention."""
        return list(self.allocators[g].get_read_indices(request_id, past, n))

    def writes_of(self, g: int, request_id: str, past: int, n: int) -> list[int]:
        """Hook: the write indices group ``g``'s allocator hands the attention."""
        return list(self.allocators[g].get_write_indices(request_id, past, n))

    # ------------------------------------------------------------------ checks
    def _sentinel(self, g: int) -> int:
        return getattr(self.allocators[g], "sentinel_index", -1)

    def _trash(self, g: int) -> int:
        a = self.allocators[g]  # write_trash_index (5.15 on), trash_index (5.10), -1 (4.57)
        return getattr(a, "write_trash_index", getattr(a, "trash_index", -1))

    def _where(self, g: int, index: int) -> tuple[int, int] | None:
        """The (block, offset in its page) a physical index of group ``g`` names; None outside any page."""
        if index < 0:
            return None
        block, offset = divmod(index, self.strides[g])
        return (block, offset) if offset < self.t and block in self.all_blocks else None

    def _check_reads(self, g: int, rid: str, positions: range, reads: list[int], tail: int, when: str) -> None:
        cached = reads[: len(reads) - tail] if tail else reads
        if len(reads) != len(positions) + tail:
            raise BackendCheckFailed("reads", f"{rid}: life cycle {g} {when}: {len(reads)} read indices for the "
                                     f"{len(positions)} tokens [{positions.start}, {positions.stop}) of the window "
                                     f"and {tail} new ones")
        held = set(self.table(g, rid))
        for pos, index in zip(positions, cached):
            where = self._where(g, index)
            if where is None or where[0] not in held:
                raise BackendCheckFailed("reads", f"{rid}: life cycle {g} {when}: token {pos} of the window read at "
                                         f"index {index}, " + ("in no page" if where is None else
                                                               f"block {where[0]}, which the request does not hold"))
            found = self.shadow[g].get(where)
            if found != (rid, pos):
                got = "nothing written" if found is None else f"token {found[1]} of {found[0]}"
                raise BackendCheckFailed("reads", f"{rid}: life cycle {g} {when}: token {pos} of the window read at "
                                         f"index {index} (block {where[0]}, offset {where[1]}), which holds {got}")
        for index in reads[len(reads) - tail:] if tail else ():
            if index != self._sentinel(g):
                raise BackendCheckFailed("reads", f"{rid}: life cycle {g} {when}: a new token's read index is {index}, "
                                         f"not the sentinel {self._sentinel(g)}")

    def _write(self, g: int, rid: str, past: int, n: int, when: str) -> None:
        writes = self.writes_of(g, rid, past, n)
        if len(writes) != n:
            raise BackendCheckFailed("writes", f"{rid}: life cycle {g} {when}: {len(writes)} write indices for {n} tokens")
        held = set(self.table(g, rid))
        window = self.windows[g]
        for j, index in enumerate(writes):
            pos = past + j
            if index == self._trash(g) and window is not None and j < n - window:
                continue  # a token of a step longer than the window, which the ring does not keep
            where = self._where(g, index)
            if where is None or where[0] not in held:
                raise BackendCheckFailed("writes", f"{rid}: life cycle {g} {when}: token {pos} written at index {index}, "
                                         + ("in no page" if where is None else
                                            f"block {where[0]}, which the request does not hold"))
            self.shadow[g][where] = (rid, pos)

    def _check_slots(self, when: str) -> None:
        free = self.free_ids()
        seen: dict[int, str] = {}
        for b in free:
            if b in seen:
                raise BackendCheckFailed("slots", f"{when}: block {b} is free twice")
            seen[b] = "free"
        for g in range(len(self.allocators)):
            a = self.allocators[g]
            tables = a.block_table if hasattr(a, "block_table") else a._block_table
            for rid, blocks in tables.items():
                req = self.requests.get(rid)
                if blocks and (req is None or req.state is not RequestState.ACTIVE):
                    raise BackendCheckFailed("slots", f"{when}: {rid}, not active, still holds blocks {list(blocks)} "
                                             f"of life cycle {g}")
                for b in blocks:
                    if b in seen:
                        raise BackendCheckFailed("slots", f"{when}: block {b} of {rid} (life cycle {g}) is also "
                                                 f"{seen[b]}")
                    seen[b] = f"held by {rid} (life cycle {g})"
        lost = sorted(self.all_blocks - set(seen))
        if lost:
            raise BackendCheckFailed("slots", f"{when}: blocks {lost[:8]} are neither held nor free (lost)")
        stray = sorted(set(seen) - self.all_blocks)
        if stray:
            raise BackendCheckFailed("slots", f"{when}: block ids {stray[:8]} are outside the pool")

    def _snapshot(self) -> tuple:
        return (tuple(tuple(sorted((str(k), tuple(v)) for k, v in
                                   (a.block_table if hasattr(a, "block_table") else a._block_table).items()))
                      for a in self.allocators), sorted(self.free_ids()))

    # ------------------------------------------------------------------ operations
    def _get(self, request_id: Hashable, *states: RequestState) -> _Request:
        return open_request(self.requests, request_id, states)

    def create(self, request_id: Hashable, reused_history: int = 0) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        if reused_history:
            raise Unsupported("transformers' prefix sharing is off with a sliding window (no reused history)")
        self.requests[request_id] = _Request(str(request_id))

    def resume(self, request_id: Hashable) -> Outcome:
        req = self._get(request_id, RequestState.SUSPENDED)
        req.state = RequestState.ACTIVE  # history and allocation are 0 (recompute): nothing to allocate
        return Outcome(True)

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        req = self._get(request_id, RequestState.ACTIVE)
        rid = req.engine.request_id
        req.history = max(req.history, history)
        h, n = req.history, capacity - req.history
        when = f"step from history {h} with {n} new tokens"
        if n <= 0:
            req.capacity = max(req.capacity, capacity)
            return Outcome(True)
        req.engine.past = h
        before = self._snapshot()
        if not self.allocate(req, n):
            if self._snapshot() != before:
                raise BackendCheckFailed("slots", f"{rid}: {when}: refused, but the engine's tables or free blocks "
                                         "changed (a partial allocation)")
            self._check_slots(f"{rid}: {when} (refused)")
            return Outcome(False)
        self._check_slots(f"{rid}: {when}")
        req.capacity = capacity
        return Outcome(True)

    def commit(self, request_id: Hashable, tokens: int) -> None:
        """The step's forward pass computes ``tokens`` tokens from the history: the attention reads
        and writes through the indices the allocators hand it (checked), then history advances."""
        req = self._get(request_id, RequestState.ACTIVE)
        rid, h, n = req.engine.request_id, req.history, tokens
        when = f"forward pass of {n} tokens from history {h}"
        if n <= 0:
            return  # no token to compute: the scheduler schedules no forward pass
        for g, window in enumerate(self.windows):
            if window is not None:  # read the cached part of the window, then write
                first = max(0, h + 1 - window)
                self._check_reads(g, rid, range(first, h), self.reads_of(g, rid, h, n), n, when)
                self._write(g, rid, h, n, when)
            else:  # write, then read everything
                self._write(g, rid, h, n, when)
                self._check_reads(g, rid, range(0, h + n), self.reads_of(g, rid, h, n), 0, when)
        req.history += tokens

    def _free(self, req: _Request, when: str) -> None:
        self.release(req.engine.request_id)
        req.engine.allocated_blocks = 0
        req.engine.past = 0
        req.history = req.capacity = 0

    def suspend(self, request_id: Hashable) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        self._free(req, "suspend")
        req.state = RequestState.SUSPENDED
        self._check_slots(f"{request_id}: suspend")

    def close(self, request_id: Hashable) -> None:
        req = self._get(request_id)
        self._free(req, "close")
        req.state = RequestState.CLOSED
        self._check_slots(f"{request_id}: close")

    def observe(self) -> dict[Part, Any]:
        """Pool use (the pool's blocks less those the engine keeps free) and, per open request, each life
        cycle's table as the engine holds it: ring block ``i`` (or full attention's block ``i``) is the
        ``i``-th entry of the allocator's block table; the table spans the blocks its capacity spans, or
        the engine's table if that is longer."""
        used = len(self.all_blocks) - len(set(self.free_ids()))
        tables = {}
        for rid, req in self.requests.items():
            if req.state is RequestState.CLOSED:
                continue
            per = []
            for g in range(len(self.allocators)):
                held = len(self.table(g, req.engine.request_id)) if req.state is RequestState.ACTIVE else 0
                span = max(-(-req.capacity // self.t), held)
                per.append(tuple(b if b < held else None for b in range(span)))
            tables[rid] = tuple(per)
        return {Part.POOL_USED: (used,), Part.TABLES: tables}


@factory(capabilities(), name="transformers-cb", prepare=import_transformers)
def transformers_cb(config: Config) -> TransformersCbBackend:
    """transformers' continuous-batching paged cache with its sliding-window (ring) allocator."""
    return TransformersCbBackend(config)
