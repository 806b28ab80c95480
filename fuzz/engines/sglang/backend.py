"""The ``sglang`` and ``sglang-lazy`` backends: SGLang's own SWA KV allocator
(``SWATokenToKVPoolAllocator`` over an ``SWAKVPool``, a ``ReqToTokenPool`` row per request, and
``free_swa_out_of_window_slots``), driven on a CPU through the protocol.

SGLang is never a dependency of swafloor: it runs in its own pinned venv (``scripts/sglang-venv``)
and is imported only when a backend is built (:func:`import_sglang`). Its scheduler
(``managers.schedule_batch``) is not importable on a CPU; the adapter gives
``free_swa_out_of_window_slots`` a small stand-in for a request's KV bookkeeping (its row, the
eviction cursor, no tree-protected prefix) and calls SGLang's functions in the scheduler's order.

What is built, per SWA life cycle of the config: one ``SWATokenToKVPoolAllocator`` (page size
``P = t``) whose SWA pool is the life cycle's pool group (``slots * P`` tokens) and whose full pool is
the config's full-attention pool group when there is one (the first SWA life cycle pairs with it),
else sized so that it never runs short (SGLang has no SWA-only allocator; that size is the adapter's
and is not compared). A config with only full attention pairs it with an SWA side that never runs
short either. SGLang's ``sliding_window_size`` is the model's window minus 1 (exclusive).

- ``create(r)``: a ``ReqToTokenPool`` row. No reused history (SGLang's reuse is its radix cache).
- ``resize(r, c, h)``: the scheduler's step: first ``free_swa_out_of_window_slots(pre_len=h,
  sliding_window_size=W-1, page_size=P, supports_prefix_sharing=False, eviction_interval=e)`` for each
  SWA life cycle (that free stands when the allocation then fails), then the capacity check the engine
  makes before allocating (``new_pages_available`` on every allocator: out of pages is an outcome,
  nothing allocated), then ``alloc_decode`` (one new token, ``P > 1``), ``alloc_extend`` (more, ``P >
  1``) or ``alloc`` (``P = 1``) for the tokens ``[allocated, c)``, written into the request's row.
- ``commit(r, n)``: the KV of ``n`` more tokens is computed: history advances; nothing is freed.
- ``suspend(r)``: retraction: the row's KV is freed (SGLang's ``free_kv_row_segments``: full side
  only below the eviction cursor) and the request recomputes from token 0.
- ``close(r)``: the request finishes: the same free, and the row is returned.

``sglang`` evicts every token (``SGLANG_SWA_EVICTION_INTERVAL=1``); ``sglang-lazy`` at SGLang's
default interval, 128 tokens. The first-decode skip of SGLang's overlap scheduler is not driven, except
where the release's own ``ScheduleBatch.maybe_evict_swa`` decides (``sglang-lazy`` on 0.5.13.post1 and
0.5.14-0.5.17, :mod:`.cadence`): there a step asking one token past a computed history is a decode, any
other an extend, and the backend counts each request's decodes and its own forwards (resizes that
succeed and raise the capacity; one asking nothing new runs no batch: no eviction, nothing counted) to
feed the method's counters.

Observations are read from SGLang's objects: per pool group the pages in use (the sub-allocator's
``available_size``), tables from the request's row and ``full_to_swa_index_mapping`` (an SWA page is
held while its first token maps to an SWA slot), slots (``slots``) from the page ids in the row, the
mapping and the sub-allocators' free lists. Lengths and pool totals are the adapter's.
"""

from __future__ import annotations

import functools
import sys
import time
import types
import weakref
from typing import Any, Hashable

from swafloor.reference import Config, LifeCycleKind, Outcome, RequestError, RequestState, Semantics, SlotMap, build_layout

from ...protocol import Capabilities, Part, Unsupported, factory
from ..common import engine_table_capabilities, open_request, parameters

__all__ = ["SglangBackend", "sglang", "sglang_lazy", "import_sglang", "capabilities", "semantics",
           "DEFAULT_EVICTION_INTERVAL"]

#: SGLang's default ``SGLANG_SWA_EVICTION_INTERVAL`` (tokens).
DEFAULT_EVICTION_INTERVAL = 128
#: The longest row a request may have (tokens): above any capacity the ci profile generates (2,112 seen on
#: seed 0 by the matrix's sglang-radix cells; the row was 2,048 tokens until then).
MAX_CONTEXT = 4096
#: A row holds at least this many pages: with pages of 256 tokens (the ``pages`` profile) windows reach
#: about 1,000 tokens and one prefill chunk about 1,800 (``strategies.horizon``), so a few chunks pass
#: 4,096; a row of 64 pages (16,384 tokens at 256) holds them. Pages of 64 and below keep MAX_CONTEXT.
ROW_PAGES = 64
#: Requests a backend may hold at once (ReqToTokenPool rows).
MAX_REQUESTS = 32

_loaded: dict[str, Any] = {}
#: Built allocators by (size_full, size_swa, page size): each an [allocator, row pool, owner] list, the
#: owner a weak reference to the backend using it. A backend takes one no live backend owns and
#: resets it with SGLang's own ``clear()`` (what SGLang runs on a cache flush: every page free, the
#: full-to-SWA mapping zeroed), so a campaign builds SGLang's pools once per size, not once per example.
_BUILT: dict[tuple[int, int, int], list[list[Any]]] = {}


class _Absent:
    """What a name of the torchvision stand-in is: anything SGLang's module-level code asks of it
    (an attribute, a subscript) is another absent thing; calling one raises."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> "_Absent":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self._name}: torchvision is not installed in the SGLang venv (a stand-in)")


def _absent_attribute(module: str, attr: str) -> _Absent:
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Absent(f"{module}.{attr}")


def _stand_in_torchvision() -> None:
    """SGLang's multimodal config helpers import torchvision at module load; it is not installed
    (it pulls a CUDA torch) and nothing on the allocator path uses it. transformers is imported
    first, so it has already found torchvision absent when the stand-in appears."""
    if "torchvision" in sys.modules:
        return
    try:
        import torchvision  # noqa: F401

        return
    except ImportError:
        pass
    import importlib.machinery

    import transformers  # noqa: F401  (before the stand-in: it records torchvision as absent)

    for name in ("torchvision", "torchvision.transforms", "torchvision.transforms.functional",
                 "torchvision.transforms.v2", "torchvision.transforms.v2.functional", "torchvision.io",
                 "torchvision.ops"):
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        mod.__path__ = []
        mod.__getattr__ = functools.partial(_absent_attribute, name)  # type: ignore[attr-defined]
        sys.modules[name] = mod
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], leaf, mod)
    sys.modules["torchvision"].__version__ = "0.0.0+swafloor-stand-in"  # type: ignore[attr-defined]


def import_sglang() -> dict[str, Any]:
    """Import the parts of SGLang the backend uses (once), where this release puts them
    (:mod:`.compat`)."""
    if not _loaded:
        import importlib.util

        from . import compat

        started = time.perf_counter()
        try:
            found = importlib.util.find_spec("sglang")
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise Unsupported(
                "SGLang is not importable here (no module named 'sglang'); run the SGLang backends in the venv made by "
                "scripts/sglang-venv"
            )
        parts = compat.load(_stand_in_torchvision)
        # The adapter's tensors are a few pages long: one intra-op thread. More only wait on each other
        # (measured: a ci campaign ran twice as fast with one thread on a shared 2-core machine).
        parts["torch"].set_num_threads(1)
        _loaded.update(parts, seconds=time.perf_counter() - started)
    return _loaded


def _prepare_lazy() -> dict[str, Any]:
    """``sglang-lazy``'s preparation: SGLang imported, and its eviction function takes an interval."""
    from . import compat

    parts = import_sglang()
    compat.Evictor(parts["free_swa_out_of_window_slots"], DEFAULT_EVICTION_INTERVAL)
    return parts


def semantics(eviction_interval: int) -> Semantics:
    """The reference semantics SGLang's SWA allocator has, evicting every ``eviction_interval`` tokens."""
    return Semantics(
        free_stale="at-allocate",  # freed before each allocation (free_swa_out_of_window_slots)
        suspend="recompute",  # retraction frees the row and recomputes from token 0
        first_resume_copy=False,
        eviction_interval=eviction_interval,
    )


def capabilities(eviction_interval: int) -> Capabilities:
    """What the backend supports and how each part is compared (see
    :func:`~swafloor.fuzz.engines.common.engine_table_capabilities`): SGLang keeps no sink tokens; its
    allocator serves any size (start-up's own check is not the allocator's); ``pre_len`` is the KV
    already computed; it never shrinks a request's row."""
    return engine_table_capabilities(
        shared_pool_groups=False,  # an SWA pool and a full pool, each its own
        reused_history=False,  # reuse is the radix cache (sglang-radix, not built)
        semantics=semantics(eviction_interval),
    )


def allocator_pairs(layout: Any) -> list[tuple[int | None, int | None]]:
    """The SWA allocators a layout takes, each (its SWA life cycle or None, its full attention life
    cycle or None): one per SWA life cycle, the first also serving the full attention one; a full
    attention one alone when there is no SWA. Raises :class:`Unsupported` for what SGLang's SWA
    allocator cannot serve (SSM state, sink tokens, pools shared between life cycles)."""
    lcs = layout.life_cycles
    if any(lc.kind is LifeCycleKind.SSM for lc in lcs):
        raise Unsupported("SGLang's SWA allocator has no SSM state")
    if any(lc.sink_blocks for lc in lcs):
        raise Unsupported("SGLang keeps no sink tokens")
    if len(set(layout.pool_group_of)) != len(lcs):
        raise Unsupported("SGLang gives each pool (SWA, full) its own pages")
    swa = [i for i, lc in enumerate(lcs) if lc.kind is LifeCycleKind.SWA]
    full = [i for i, lc in enumerate(lcs) if lc.kind is LifeCycleKind.FULL]
    pairs: list[tuple[int | None, int | None]] = [(i, full[0] if (k == 0 and full) else None) for k, i in enumerate(swa)]
    if not swa:
        pairs.append((None, full[0]))
    return pairs


def row_tokens(page_size: int) -> int:
    """The adapter's row length (tokens) at a page size: :data:`MAX_CONTEXT`, or :data:`ROW_PAGES`
    pages where that is longer."""
    return max(MAX_CONTEXT, ROW_PAGES * page_size)


def start_step(req: Any, capacity: int, history: int, row: int = MAX_CONTEXT) -> Any:
    """A step's start on a request's bookkeeping ``req``: its history advanced to ``history`` (never
    taken back), a capacity past the adapter's row (``row`` tokens) refused. Returns ``req``."""
    if history > req.history:
        req.history = history
    if capacity > row:
        raise Unsupported(f"capacity {capacity} above the adapter's row length {row}")
    return req


def pool_tokens(layout: Any, life_cycle: int | None, absent: int) -> int:
    """The tokens an allocator's side holds: its life cycle's pool group's slots times the page size,
    or ``absent`` (a side that never runs short) where the allocator has no such life cycle."""
    return layout.slots[layout.pool_group_of[life_cycle]] * layout.tokens_per_block if life_cycle is not None else absent


class _Kv:
    """The few fields of a request's KV bookkeeping ``free_swa_out_of_window_slots`` reads: its row,
    the eviction cursor, and nothing protected by a tree (no prefix sharing)."""

    def __init__(self, row: int):
        self.req_pool_idx: int | None = row
        self.cache_protected_len = 0
        self.swa_evict_floor = 0
        self.component_evicted_seqlens: dict[Any, int] = {}

    @property
    def swa_evicted_seqlen(self) -> int:  # what releases before the component map read and write
        return self.component_evicted_seqlens.get(_loaded["swa_component"], 0)

    @swa_evicted_seqlen.setter
    def swa_evicted_seqlen(self, length: int) -> None:
        self.component_evicted_seqlens[_loaded["swa_component"]] = length

    @property
    def holds_kv(self) -> bool:
        return self.req_pool_idx is not None

    def swa_dead_lo(self, page_size: int) -> int:
        return 0

    def get_evicted_seqlen(self, component_type: Any) -> int:
        return self.component_evicted_seqlens.get(component_type, 0)

    def set_evicted_seqlen(self, component_type: Any, length: int) -> None:
        self.component_evicted_seqlens[component_type] = length


class _Req:
    """A request as the adapter drives it: per SWA allocator a ``_Kv`` (its own cursor), one row
    per allocator, the allocated token count, history and state."""

    def __init__(self, n_alloc: int, rows: list[int]):
        self.kvs = [_Kv(row) for row in rows]
        self.allocated = 0
        self.history = 0
        self.state = RequestState.SUSPENDED
        self.decodes = 0  # decodes since it was last resumed (SGLang's decode_batch_idx)
        self.seen = 0  # the backend's forward number of its last step (its batch's forward_iter)

    class _Shim:
        """The request ``free_swa_out_of_window_slots`` is given: ``kv`` (newer releases), and the same
        fields on the request itself (older ones), one store."""

        swa_evict_floor = 0

        def __init__(self, kv: _Kv):
            self.kv = kv

        @property
        def req_pool_idx(self) -> int | None:
            return self.kv.req_pool_idx

        @property
        def cache_protected_len(self) -> int:
            return self.kv.cache_protected_len

        @property
        def swa_evicted_seqlen(self) -> int:
            return self.kv.swa_evicted_seqlen

        @swa_evicted_seqlen.setter
        def swa_evicted_seqlen(self, length: int) -> None:
            self.kv.swa_evicted_seqlen = length

        # 0.5.7's chunk cache names the same cursor evicted_seqlen_local (SWAChunkCache.evict_swa).
        evicted_seqlen_local = swa_evicted_seqlen


class SglangBackend:
    """SGLang's SWA allocator behind the protocol (see the module docstring)."""

    def __init__(self, config: Config, eviction_interval: int = 1, precheck: bool = True):
        from . import compat

        s = import_sglang()
        self._evictor = compat.Evictor(s["free_swa_out_of_window_slots"], eviction_interval)
        layout = build_layout(config)
        self.t = P = layout.tokens_per_block
        self.e = eviction_interval
        self.precheck = precheck
        self.layout = layout
        lcs = layout.life_cycles
        pairs = allocator_pairs(layout)
        self.row = row_tokens(P)
        big = self.row * MAX_REQUESTS  # a side that never runs short (never compared)
        self.pairs = pairs
        self.allocators = []
        self.windows: list[int | None] = []
        self.rows = []  # one row table per allocator (each has its own full-side index space)
        for swa_lc, full_lc in pairs:
            size_full, size_swa = pool_tokens(layout, full_lc, big), pool_tokens(layout, swa_lc, big)
            allocator, rows = self._take((size_full, size_swa, P))
            self.allocators.append(allocator)
            self.rows.append(rows)
            self.windows.append(lcs[swa_lc].window if swa_lc is not None else None)
        self.requests: dict[Hashable, _Req] = {}
        self._free_rows = list(range(1, MAX_REQUESTS + 1))
        self.forwards = 0  # resizes that succeeded (the scheduler's forward_ct, for a clocked eviction)

    # ------------------------------------------------------------------ helpers
    def _take(self, key: tuple[int, int, int]) -> tuple[Any, Any]:
        """An allocator of these sizes that no live backend owns, reset by SGLang's ``clear()``, and
        its row pool (rows are written before they are read), built when there is none."""
        s = _loaded
        entries = _BUILT.setdefault(key, [])
        for entry in entries:
            if entry[2]() is None:
                break
        else:
            from .compat import build

            size_full, size_swa, P = key
            row = row_tokens(P)
            torch = s["torch"]
            if P > 1 and "page_size" not in parameters(s["Allocator"]):
                raise Unsupported(f"SGLang {s['version']}'s SWATokenToKVPoolAllocator has no page_size (token "
                                  f"slots only): a page of {P} tokens")
            common = dict(size=size_full, size_swa=size_swa, page_size=P, dtype=torch.float16, device="cpu")
            pool = build(s["SWAKVPool"], dict(common, head_num=1, head_dim=1, swa_attention_layer_ids=[0],
                                              full_attention_layer_ids=[1], enable_kvcache_transpose=False), "SWAKVPool")
            allocator = build(s["Allocator"], dict(common, kvcache=pool, need_sort=False), "SWATokenToKVPoolAllocator")
            rows = build(s["ReqToTokenPool"], dict(size=MAX_REQUESTS, max_context_len=row, device="cpu",
                                                   enable_memory_saver=False), "ReqToTokenPool")
            if rows.req_to_token.shape[0] <= MAX_REQUESTS:  # no padding row 0 (0.5.7): one row more, row 0 unused
                rows = build(s["ReqToTokenPool"], dict(size=MAX_REQUESTS + 1, max_context_len=row, device="cpu",
                                                       enable_memory_saver=False), "ReqToTokenPool")
            entry = [allocator, rows, None]
            entries.append(entry)
        entry[2] = weakref.ref(self)
        entry[0].clear()
        return entry[0], entry[1]

    def _get(self, request_id: Hashable, *states: RequestState) -> _Req:
        return open_request(self.requests, request_id, states)

    def _row(self, a: int, req: _Req) -> Any:
        return self.rows[a].req_to_token[req.kvs[a].req_pool_idx]

    def _evict(self, req: _Req, pre_len: int, decode: bool = False) -> None:
        from .cadence import Clock

        clock = Clock(decode, req.decodes, req.seen)
        for a, window in enumerate(self.windows):
            if window is None:
                continue
            self._evictor(
                _Req._Shim(req.kvs[a]), pre_len, clock, sliding_window_size=window - 1, page_size=self.t,
                req_to_token_pool=self.rows[a], token_to_kv_pool_allocator=self.allocators[a],
            )

    def _forward(self, req: _Req, decode: bool) -> None:
        """A step of ``req`` succeeded: one forward of a batch of it (the counters a clocked eviction reads)."""
        self.forwards += 1
        req.seen, req.decodes = self.forwards, req.decodes + decode

    def _evicted(self, a: int, req: _Req) -> int:
        return req.kvs[a].swa_evicted_seqlen

    def _pages(self, old: int, new: int) -> int:
        P = self.t
        return -(-new // P) - (-(-old // P))

    def _allocate(self, req: _Req, capacity: int) -> bool:
        from .compat import alloc_pages, paged_cpu, pages_available

        torch = _loaded["torch"]
        old, P = req.allocated, self.t
        pages = self._pages(old, capacity)
        for alloc in self.allocators if self.precheck else ():  # the engine's check, before allocating
            if P == 1:
                if not (capacity - old <= alloc.full_available_size() and capacity - old <= alloc.swa_available_size()):
                    return False
            elif not pages_available(alloc, pages, P):
                return False
        n = capacity - old

        for a, alloc in enumerate(self.allocators):
            row = self._row(a, req)
            if P == 1:
                out = alloc.alloc(n)
            elif not paged_cpu(alloc):  # this release's paged allocation is a Triton kernel only
                out = alloc_pages(alloc, torch, row, old, capacity, P)
            else:
                last = torch.tensor([int(row[old - 1]) if old > 0 else -1], dtype=torch.int64)
                if n == 1:
                    seq = torch.tensor([capacity], dtype=torch.int64)
                    out = alloc.alloc_decode(seq, seq, last)
                else:
                    pre = torch.tensor([old], dtype=torch.int64)
                    seq = torch.tensor([capacity], dtype=torch.int64)
                    out = alloc.alloc_extend(pre, pre, seq, seq, last, n)
            if out is None:
                if self.precheck:  # the check above said it fits: SGLang disagreeing is a finding
                    raise AssertionError(f"SGLang allocator {a} returned None after new_pages_available said yes")
                return False  # a caller that does not check first: whatever SGLang took stays taken
            row[old:capacity] = out.to(row.dtype)
        req.allocated = capacity
        return True

    def _free_row(self, req: _Req) -> None:
        for a, alloc in enumerate(self.allocators):
            if req.allocated:
                from .compat import release_row

                indices = self._row(a, req)[: req.allocated].to(_loaded["torch"].int64)
                release_row(_loaded, alloc, indices, self._evicted(a, req) if self.windows[a] else 0)
            req.kvs[a].component_evicted_seqlens.clear()
        req.allocated = 0

    def _check_mapping(self) -> None:
        """SGLang's full-to-SWA mapping under identity after an operation (:mod:`.mapping`): no full slot
        mapped to a freed SWA slot, no SWA slot mapped twice; a ``BackendCheckFailed`` on ``mapping``."""
        from .mapping import check_mapping

        torch = _loaded["torch"]
        for a, alloc in enumerate(self.allocators):
            rows = [(rid, self._row(a, req)[: req.allocated]) for rid, req in self.requests.items()
                    if req.state is RequestState.ACTIVE and req.allocated]
            check_mapping(torch, alloc, rows, self.t, f"allocator {a}" if len(self.allocators) > 1 else "")

    # ------------------------------------------------------------------ operations
    def create(self, request_id: Hashable, reused_history: int = 0) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        if reused_history:
            raise Unsupported("SGLang's reuse is its radix cache (not driven by this backend)")
        if not self._free_rows:
            raise Unsupported(f"more than {MAX_REQUESTS} requests")
        row = self._free_rows.pop()
        self.requests[request_id] = _Req(len(self.allocators), [row] * len(self.allocators))

    def resume(self, request_id: Hashable) -> Outcome:
        req = self._get(request_id, RequestState.SUSPENDED)
        req.state = RequestState.ACTIVE  # history and allocation are 0: nothing to allocate
        return Outcome(True)

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        req = start_step(self._get(request_id, RequestState.ACTIVE), capacity, history, self.row)
        decode = capacity == req.history + 1 and req.history >= 1  # else an extend (reference.cadence.is_decode)
        forward = capacity > req.allocated  # new tokens: a batch runs (else nothing is asked of the engine)
        if forward or not self._evictor.clocked:
            self._evict(req, req.history, decode)
        ok = capacity <= req.allocated or self._allocate(req, capacity)
        if ok and forward:
            self._forward(req, decode)
        self._check_mapping()
        return Outcome(ok)

    def commit(self, request_id: Hashable, tokens: int) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        req.history += tokens

    def suspend(self, request_id: Hashable) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        self._free_row(req)
        req.history = 0
        req.decodes = 0  # a retracted request's decode_batch_idx starts again
        req.state = RequestState.SUSPENDED
        self._check_mapping()

    def close(self, request_id: Hashable) -> None:
        req = self._get(request_id)
        self._free_row(req)
        req.state = RequestState.CLOSED
        self._free_rows.append(req.kvs[0].req_pool_idx)
        for kv in req.kvs:
            kv.req_pool_idx = None
        self._check_mapping()

    # ------------------------------------------------------------------ observation
    def _held(self, req: _Req) -> list[dict[int, int]]:
        """Per life cycle ``{block: page id}`` from SGLang's row and mapping."""
        P = self.t
        out: list[dict[int, int]] = [{} for _ in self.layout.life_cycles]
        if req.state is not RequestState.ACTIVE or not req.allocated:
            return out
        torch = _loaded["torch"]
        for a, (swa_lc, full_lc) in enumerate(self.pairs):
            firsts = self._row(a, req)[: req.allocated : P].to(torch.int64)  # each page's first token
            if full_lc is not None:
                out[full_lc] = dict(enumerate((firsts // P).tolist()))
            if swa_lc is not None:
                swa = self.allocators[a].full_to_swa_index_mapping[firsts].tolist()
                out[swa_lc] = {b: i // P for b, i in enumerate(swa) if i > 0}
        return out

    @staticmethod
    def _free_pages(sub: Any, P: int) -> list[int]:
        pages = [int(x) for x in sub.free_pages.tolist()]
        for staged in getattr(sub, "staged_pages", []) or []:
            pages += [int(x) for x in staged.tolist()]
        release = getattr(sub, "release_pages", None)
        if release is not None:
            pages += [int(x) for x in release.tolist()]
        return pages

    def slots(self, held: dict[Hashable, tuple[dict[int, int], ...]] | None = None) -> SlotMap:
        """Physical identity; ``held``: each open request's :meth:`_held`, when already read."""
        if held is None:
            held = {rid: tuple(self._held(req)) for rid, req in self.requests.items()
                    if req.state is not RequestState.CLOSED}
        free: list[tuple[tuple[int, int], ...]] = [()] * self.layout.num_pool_groups
        for a, (swa_lc, full_lc) in enumerate(self.pairs):
            alloc = self.allocators[a]
            for lc, sub in ((swa_lc, alloc.swa_attn_allocator), (full_lc, alloc.full_attn_allocator)):
                if lc is not None:
                    ids = self._free_pages(sub, self.t)
                    free[self.layout.pool_group_of[lc]] = tuple((i, i + 1) for i in ids)
        return SlotMap(held, tuple(free))

    def observe(self) -> dict[Part, Any]:
        P = self.t
        g_of = self.layout.pool_group_of
        totals = [0] * self.layout.num_pool_groups
        used = [0] * self.layout.num_pool_groups
        for a, (swa_lc, full_lc) in enumerate(self.pairs):
            alloc = self.allocators[a]
            for lc, sub in ((swa_lc, alloc.swa_attn_allocator), (full_lc, alloc.full_attn_allocator)):
                if lc is not None:
                    total = self.layout.slots[g_of[lc]]
                    totals[g_of[lc]] = total
                    used[g_of[lc]] = total - sub.available_size() // P
        lengths: dict[Hashable, tuple[Any, int, int]] = {}
        tables: dict[Hashable, tuple[tuple[int | None, ...], ...]] = {}
        all_held: dict[Hashable, tuple[dict[int, int], ...]] = {}
        for rid, req in self.requests.items():
            if req.state is RequestState.CLOSED:
                continue
            lengths[rid] = (req.state, req.allocated, req.history)
            held = all_held[rid] = tuple(self._held(req))
            blocks = -(-req.allocated // P)
            tables[rid] = tuple(tuple(b if b in h else None for b in range(blocks)) for h in held)
        return {
            Part.POOL_TOTALS: tuple(totals),
            Part.POOL_USED: tuple(used),
            Part.LENGTHS: lengths,
            Part.TABLES: tables,
            Part.SLOTS: self.slots(all_held),  # read from the same rows, once
        }


@factory(capabilities(1), name="sglang", prepare=import_sglang)
def sglang(config: Config) -> SglangBackend:
    """SGLang's SWA allocator, evicting out-of-window SWA pages before every allocation."""
    return SglangBackend(config, eviction_interval=1)


@factory(capabilities(DEFAULT_EVICTION_INTERVAL), name="sglang-lazy", prepare=_prepare_lazy)
def sglang_lazy(config: Config) -> SglangBackend:
    """SGLang's SWA allocator at its default eviction interval (128 tokens)."""
    return SglangBackend(config, eviction_interval=DEFAULT_EVICTION_INTERVAL)


@factory(capabilities(1), name="sglang-unchecked", prepare=import_sglang)
def sglang_unchecked(config: Config) -> SglangBackend:
    """Not registered: SGLang's allocator driven by a caller that does NOT check capacity first (it
    relies on ``alloc_decode`` / ``alloc_extend`` returning None). Used to show what ``alloc_decode``'s
    non-atomicity costs such a caller (tests/test_sglang.py; docs/backends.md, SGLang)."""
    return SglangBackend(config, eviction_interval=1, precheck=False)
