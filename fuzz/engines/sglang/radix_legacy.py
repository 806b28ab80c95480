"""``sglang-radix`` on releases whose SWA radix cache has SGLang's older prefix-cache API (issue 33):
``match_prefix`` (through the request's ``init_next_round_input``), ``inc_lock_ref`` / ``dec_lock_ref``,
``cache_unfinished_req`` after each prefilled chunk, ``cache_finished_req`` at release (``is_insert``
false on a retraction), and the sliding-window free ``free_swa_out_of_window_slots`` called with
prefix sharing on; where the release has no such function (0.5.8-0.5.13), the scheduler batch's own
``ScheduleBatch._evict_swa`` on the backend's tree (:class:`BatchEviction`). A release without either
(0.5.7: its allocation evicts only for ``SWAChunkCache``) has no sliding-window free of a running
request on its radix path: nothing is called at a slide (:class:`NoWindowFree`), as its scheduler calls
nothing, and what that costs shows as a divergence class with its upstream verdict
(``tests/regressions/sglang-0.5.7-radix-no-window-free.json``: fixed by sgl-project/sglang PR #17220 in
0.5.8).

0.5.7's other older shapes, each found by inspection: no registry (its scheduler builds the tree: read
from ``managers/scheduler.py``'s file), a tree constructor taking the window itself, ``inc_lock_ref``
returning the SWA lock id and ``dec_lock_ref`` taking it, a ``ReqToTokenPool`` of indices
(``alloc(need_size)``, ``free(index)``) whose row ``cache_finished_req`` gives back itself, prompt ids in a
list, and a request module importing CUDA kernels by name from ``sgl_kernel`` (the adapter's stand-in
answers them: :func:`_kernels_named_absent`).

Which tree: the class the release's own registry (``mem_cache.registry``) builds for a hybrid SWA model,
found by inspecting its source: ``SWARadixCache`` where it builds one, else ``UnifiedRadixCache`` with
FULL and SWA components. Nothing reads the release's number. A release whose tree lacks one of the
methods driven here is :class:`Unsupported` naming them.

Everything else is :mod:`.radix`'s: the same operations in the scheduler's order, the same checks after
every operation (page accounting, tree locks, the full-to-SWA mapping, the radix cut, the data read back),
the same observations and comparison. What differs per API is a hook of
:class:`~.radix.SglangRadixBackend` (``_build_tree``, ``_match``, ``_unmatch``, ``_slide``, ``_publish``,
``_release``, ``_kv``, ``_radix_cut``, ``_dead_lo``), overridden here:

- the request's KV fields: ``req.kv`` where the release has it, else on the request itself;
- the radix cut (the bound the ``tables`` check states), by the parameters the release's
  ``free_swa_out_of_window_slots`` has: with ``drop_page_margin`` (the older one), or the batch's
  ``_evict_swa`` keeping its page margin, the radix path cuts at ``floor_P(h - w - P)``; with ``is_chunk_cache`` at ``floor_P(h - max(w, P))``; never past the
  tree-owned prefix (``cache_protected_len``, or ``swa_dead_lo`` where the request has it).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from swafloor.reference import RequestState

from ...protocol import Unsupported
from ..common import parameters
from .backend import _loaded

__all__ = ["OlderTreeApi", "SplitReleaseApi", "import_legacy", "LEGACY_API", "SPLIT_RELEASE_API"]

#: The tree methods driven here.
LEGACY_API = ("match_prefix", "inc_lock_ref", "dec_lock_ref", "cache_unfinished_req", "cache_finished_req",
              "evict", "full_evictable_size", "swa_evictable_size", "full_protected_size", "swa_protected_size")
#: The tree methods driven on a tree whose release is split into steps (no ``cache_finished_req``: the
#: scheduler's ``release_kv_cache`` calls ``insert_req``, ``free_kv_row``, ``unpin`` and ``on_release``
#: itself, and slides a window with the tree's ``evict_sliding_windows``), read from 0.5.21's tree and
#: ``mem_cache.common.release_kv_cache``: :class:`SplitReleaseApi`.
SPLIT_RELEASE_API = tuple(m for m in LEGACY_API if m != "cache_finished_req") + (
    "insert_req", "free_kv_row", "unpin", "on_release", "evict_sliding_windows")


def _registry_builds_swa_radix_cache() -> bool:
    """Whether the release's registry builds ``SWARadixCache`` for a hybrid SWA model (its source); where
    the release has no registry (0.5.7), whether its scheduler does (``Scheduler.init_cache_with_memory_pool``:
    ``elif self.is_hybrid_swa: ... SWARadixCache(params=params, sliding_window_size=...)``), read from the
    module's file without importing it."""
    try:
        registry = importlib.import_module("sglang.srt.mem_cache.registry")
        return "SWARadixCache(params" in inspect.getsource(registry).replace("PureSWARadixCache(params", "")
    except ImportError:
        pass
    except (OSError, TypeError):
        return False
    return "SWARadixCache(" in _module_text("sglang.srt.managers.scheduler").replace("PureSWARadixCache(", "")


def _module_text(name: str) -> str:
    """The source file of module ``name`` of the imported release, read without importing it ('' if none)."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return ""
    return Path(spec.origin).read_text(encoding="utf-8", errors="replace")


def _kernels_named_absent(exc: ImportError) -> bool:
    """Where the request's module imports a CUDA kernel by name from the adapter's stand-in ``sgl_kernel``
    (0.5.7's ``schedule_batch`` reaches ``from sgl_kernel import silu_and_mul``; no kernel is on the
    allocator and tree path): the stand-in answers every such name with a function that raises if called
    (as its ``kvcacheio`` does), and True (import again); False for any other import error."""
    import sys

    from .compat import _kernel_absent

    stand_in = sys.modules.get("sgl_kernel")
    if not (getattr(stand_in, "__swafloor_stand_in__", False) and "from 'sgl_kernel'" in str(exc)):
        return False
    if getattr(stand_in, "__getattr__", None) is _kernel_absent:
        return False
    stand_in.__getattr__ = _kernel_absent  # type: ignore[union-attr]
    for name in [m for m in sys.modules if m.startswith("sglang.srt.managers.schedule_batch")]:
        del sys.modules[name]  # its failed import, made again
    return True


class _BatchFacts:
    """What ``ScheduleBatch._evict_swa`` reads of its batch: the tree cache (SGLang's own tree, built by
    the backend), the row pool and the allocator. The adapter's stand-in ``self``, never observed."""

    def __init__(self, tree_cache: Any, req_to_token_pool: Any, token_to_kv_pool_allocator: Any):
        self.tree_cache = tree_cache
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool_allocator = token_to_kv_pool_allocator


class BatchEviction:
    """The radix path's sliding-window free of releases before ``free_swa_out_of_window_slots`` (0.5.8-0.5.13):
    the scheduler batch's ``ScheduleBatch._evict_swa(req, pre_len)``, SGLang's own method, called on a
    :class:`_BatchFacts` holding the backend's tree. ``page_margin``: its cut keeps one page more
    (``pre_len - sliding_window_size - page_size``, page-floored) unless the release's
    ``SGLANG_OPT_SWA_EVICT_DROP_PAGE_MARGIN`` is on (read from the method's source and the environment)."""

    path = "ScheduleBatch._evict_swa"

    def __init__(self, method: Any, page_margin: bool):
        self.method, self.page_margin = method, page_margin

    def __call__(self, req: Any, pre_len: int, *, tree_cache: Any, req_to_token_pool: Any,
                 token_to_kv_pool_allocator: Any) -> None:
        self.method(_BatchFacts(tree_cache, req_to_token_pool, token_to_kv_pool_allocator), req, pre_len)


class NoWindowFree:
    """The radix path of a release with no sliding-window free of a running request (0.5.7: its
    ``alloc_for_extend`` / ``alloc_for_decode`` call ``evict_swa`` only for ``SWAChunkCache``, and
    ``SWARadixCache`` holds a running request's SWA KV until ``cache_unfinished_req`` (after a prefill
    chunk) or ``cache_finished_req`` puts it in the tree, where only tree eviction under pressure
    tombstones unlocked nodes): the scheduler calls nothing at a slide, so neither does the adapter.
    Upstream added the free in 0.5.8 (sgl-project/sglang#17220, "Evict swa kv cache during decoding":
    "out of window tokens can't be evicted during decoding"). The release states no radix cut
    (:meth:`OlderTreeApi._radix_cut`: 0, nothing to check)."""

    path = "none (the radix path frees no sliding window of a running request)"
    page_margin = False

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


def _batch_eviction(version: str) -> BatchEviction | NoWindowFree:
    """``ScheduleBatch._evict_swa`` where the release has it with ``(req, pre_len)`` (0.5.8-0.5.13), else
    :class:`NoWindowFree`: before 0.5.8 (0.5.7) the radix path has no sliding-window free of a running
    request at all (the scheduler's allocation evicts only for ``SWAChunkCache``; ``SWARadixCache`` frees
    SWA KV only by tombstoning unlocked tree nodes under pressure)."""
    try:
        batch = importlib.import_module("sglang.srt.managers.schedule_batch").ScheduleBatch
    except (ImportError, AttributeError):
        batch = None
    method = getattr(batch, "_evict_swa", None)
    if not (callable(method) and {"req", "pre_len"} <= set(parameters(method))):
        return NoWindowFree()
    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):
        source = ""
    margin = "- self.tree_cache.page_size" in source
    if margin and "SGLANG_OPT_SWA_EVICT_DROP_PAGE_MARGIN" in source:
        envs = getattr(importlib.import_module("sglang.srt.environ"), "envs", None)
        flag = getattr(envs, "SGLANG_OPT_SWA_EVICT_DROP_PAGE_MARGIN", None)
        margin = not (flag is not None and flag.get())
    return BatchEviction(method, margin)


def import_legacy(s: dict[str, Any], why: str) -> dict[str, Any]:
    """The older API's parts into ``s`` (SGLang's loaded parts), or :class:`Unsupported` naming what the
    release lacks; ``why``: why the newer tree API is not there (for the message)."""
    version = s.get("version", "?")
    try:
        common = importlib.import_module("sglang.srt.mem_cache.common")
    except ImportError:
        common = None
    radix_free: Any = getattr(common, "free_swa_out_of_window_slots", None)
    if common is not None and not callable(radix_free):
        radix_free = _batch_eviction(version)
    if _registry_builds_swa_radix_cache():
        module, name = "sglang.srt.mem_cache.swa_radix_cache", "SWARadixCache"
    else:
        module, name = "sglang.srt.mem_cache.unified_radix_cache", "UnifiedRadixCache"
    try:
        tree = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise Unsupported(f"SGLang {version}: {why}, and no {name} in {module}") from None
    missing = [m for m in LEGACY_API if not callable(getattr(tree, m, None))]
    split = [m for m in SPLIT_RELEASE_API if not callable(getattr(tree, m, None))]
    if missing and split:
        raise Unsupported(f"SGLang {version}: {why}; its {name} has no {', '.join(missing)} (neither the tree API "
                          f"of 0.5.22 on, nor the older prefix-cache API, nor the split release: no "
                          f"{', '.join(split)})")
    try:
        try:
            from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
        except ImportError as exc:
            if not _kernels_named_absent(exc):
                raise
            from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.common import evict_from_tree_cache
        from sglang.srt.sampling.sampling_params import SamplingParams
    except ImportError as exc:
        raise Unsupported(f"SGLang {version}'s radix cache path is not importable here ({exc})") from exc
    import sglang.srt.managers.schedule_batch as schedule_batch

    parts: dict[str, Any] = dict(
        ReqKvInfo=getattr(schedule_batch, "ReqKvInfo", None),
        radix_api="legacy" if not missing else "split",
        Tree=tree, tree_name=name, CacheInitParams=CacheInitParams, Req=Req,
        FINISH_LENGTH=FINISH_LENGTH, SamplingParams=SamplingParams, evict_from_tree_cache=evict_from_tree_cache,
        radix_free=radix_free,
    )
    for component_module in ("sglang.srt.mem_cache.unified_cache.components",
                             "sglang.srt.mem_cache.unified_cache_components"):
        try:
            parts["ComponentType"] = importlib.import_module(component_module).ComponentType
            break
        except (ImportError, AttributeError):
            continue
    _server_args_defaults()
    for params_module in ("sglang.srt.mem_cache.base_prefix_cache",):
        found = importlib.import_module(params_module)
        parts["DecLockRefParams"] = getattr(found, "DecLockRefParams", None)
    s.update(parts)
    return s


class _Fields:
    """A request's KV fields wherever its release keeps each: on ``req.kv`` where that record has the
    field, else on the request itself (older releases keep them all there)."""

    def __init__(self, req: Any):
        object.__setattr__(self, "_req", req)

    def _home(self, name: str) -> Any:
        kv = getattr(self._req, "kv", None)
        return kv if kv is not None and hasattr(kv, name) else self._req

    def __getattr__(self, name: str) -> Any:
        return getattr(self._home(name), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._home(name), name, value)


def _server_args_defaults() -> None:
    """Where the release's request reads SGLang's global server args (set by its scheduler at start-up)
    and none are set: a ``ServerArgs`` published with the release's own scheduler publish
    (``set_global_server_args_for_scheduler``). Whether one is set is asked of the release's runtime
    context (``runtime_context.get_server_args``, 0.5.19 on: from 0.5.20 ``get_global_server_args`` is
    retired and raises) or of ``get_global_server_args``. Where publishing resolves the record
    (``ServerArgs.resolve_once``, 0.5.19 on), it is made by its own constructor with SGLang's model path
    ``"dummy"``, the short circuit that resolves no model (0.5.20's record is a ``msgspec`` struct
    that only its constructor makes); before, holding each field's default, made without its start-up
    checks (they need a model). The adapter's, never observed."""
    import dataclasses

    try:
        server_args = importlib.import_module("sglang.srt.server_args")
    except ImportError:
        return
    setter = getattr(server_args, "set_global_server_args_for_scheduler", None)
    try:
        getter = importlib.import_module("sglang.srt.runtime_context").get_server_args
    except (ImportError, AttributeError):
        getter = getattr(server_args, "get_global_server_args", None)
    if getter is None or setter is None:
        return
    try:
        getter()
        return
    except ValueError:  # not set yet
        pass
    cls = server_args.ServerArgs
    if hasattr(cls, "resolve_once"):
        setter(cls(model_path="dummy"))
        return
    args = object.__new__(cls)
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            value = field.default
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            value = field.default_factory()  # type: ignore[misc]
        else:
            value = None
        object.__setattr__(args, field.name, value)
    setter(args)


def _call(fn: Any, *args: Any, **known: Any) -> Any:
    """``fn(*args, **what of known its signature names)``."""
    names = parameters(fn)
    return fn(*args, **{k: v for k, v in known.items() if k in names})


class OlderTreeApi:
    """The hooks of :class:`~.radix.SglangRadixBackend` on the older prefix-cache API (see the module
    docstring), mixed in before it: :class:`~.radix.SglangLegacyRadixBackend`."""

    # ------------------------------------------------------------------ building
    def _build_tree(self, rows: Any, allocator: Any, P: int, w: int) -> Any:
        s = _loaded
        known: dict[str, Any] = dict(disable=False, req_to_token_pool=rows, token_to_kv_pool_allocator=allocator,
                                     page_size=P, sliding_window_size=w)
        if "ComponentType" in s:
            known["tree_components"] = (s["ComponentType"].FULL, s["ComponentType"].SWA)
        params = _call(s["CacheInitParams"], **known)
        return _call(s["Tree"], params, sliding_window_size=w)  # 0.5.7's constructor takes the window itself

    # ------------------------------------------------------------------ the request's fields
    @staticmethod
    def _kv(r: Any) -> Any:
        return _Fields(r)

    @staticmethod
    def _ensure_kv(r: Any, length: int) -> None:
        """Where the release's request keeps part of its KV fields in a ``ReqKvInfo`` made at its first
        allocation (``alloc_for_extend``), that record, made as the scheduler makes it."""
        info = _loaded.get("ReqKvInfo")
        if info is not None and getattr(r, "kv", "absent") is None:
            r.kv = _call(info, kv_allocated_len=length, swa_evicted_seqlen=0)
            _loaded["kv_made_at_allocation"] = True

    def _radix_cut(self, h: int, w: int) -> int:
        P = self.t
        if isinstance(_loaded["radix_free"], NoWindowFree):
            return 0  # no cut: the release frees no window of a running request
        names = parameters(_loaded["radix_free"])
        if "drop_page_margin" in names or getattr(_loaded["radix_free"], "page_margin", False):
            return (h - w - P) // P * P
        return (h - max(w, P)) // P * P

    def _dead_lo(self, r: Any) -> int:
        kv = self._kv(r)
        if hasattr(kv, "swa_dead_lo"):
            return kv.swa_dead_lo(self.t)
        return kv.cache_protected_len

    # ------------------------------------------------------------------ the older API's steps
    @staticmethod
    def _root(unit: Any) -> Any:
        """The tree's root as its locks take it: a node handle where the tree hands out handles
        (``root_node_handle``), else the root node."""
        handle = getattr(unit.tree, "root_node_handle", None)
        return handle() if callable(handle) else unit.tree.root_node

    def _lock(self, unit: Any, r: Any) -> None:
        """The scheduler's lock on the request's last node (``inc_lock_ref``), what it returns kept where
        the release's request keeps it: the whole release receipt (``lock_receipt``, the result's
        ``to_dec_params()``: 0.5.20 on) or its SWA lock id (``swa_uuid_for_lock``)."""
        result = unit.tree.inc_lock_ref(r.last_node)
        if hasattr(r, "lock_receipt") and callable(getattr(result, "to_dec_params", None)):
            r.lock_receipt = result.to_dec_params()
        elif hasattr(r, "swa_uuid_for_lock"):  # a result record, or the id itself (0.5.7)
            r.swa_uuid_for_lock = result if result is None or isinstance(result, int) else getattr(
                result, "swa_uuid_for_lock", None)
        r.lock = r.last_node

    def _unlock(self, unit: Any, r: Any) -> None:
        params = _loaded.get("DecLockRefParams")
        if hasattr(r, "lock_receipt") and params is not None and isinstance(r.lock_receipt, params):
            unit.tree.dec_lock_ref(r.last_node, r.lock_receipt)
        elif params is not None and "params" in parameters(unit.tree.dec_lock_ref):
            unit.tree.dec_lock_ref(r.last_node, params(swa_uuid_for_lock=getattr(r, "swa_uuid_for_lock", None)))
        elif "swa_uuid_for_lock" in parameters(unit.tree.dec_lock_ref):  # the id itself (0.5.7)
            unit.tree.dec_lock_ref(r.last_node, getattr(r, "swa_uuid_for_lock", None))
        else:
            unit.tree.dec_lock_ref(r.last_node)
        r.lock = None

    def _match(self, unit: Any, r: Any) -> int:
        r.init_next_round_input(unit.tree)  # match_prefix on its prompt, at most h - 1 tokens
        prefix = len(r.prefix_indices)
        kv = self._kv(r)
        assert kv.cache_protected_len == prefix, (kv.cache_protected_len, prefix)
        self._lock(unit, r)
        if prefix:  # the hit's KV indices go into the row (alloc_for_extend's prefix)
            unit.rows.req_to_token[kv.req_pool_idx, :prefix] = r.prefix_indices.to(unit.rows.req_to_token.dtype)
        return prefix

    def _unmatch(self, unit: Any, r: Any) -> None:
        if r.lock is not None:
            self._unlock(unit, r)
        self._free_row(unit, r)
        self._kv(r).cache_protected_len = 0

    # ------------------------------------------------------------------ the request's row
    @staticmethod
    def _alloc_row(unit: Any, r: Any) -> bool:
        """A row: ``alloc([req])`` where the pool takes requests (it sets their index), else (0.5.7:
        ``alloc(need_size)``, the scheduler's ``alloc_req_slots`` setting ``req.req_pool_idx``) one index,
        set on the request as the scheduler sets it."""
        if "reqs" in parameters(unit.rows.alloc):
            return unit.rows.alloc([r]) is not None
        got = unit.rows.alloc(1)
        if not got:
            return False
        r.req_pool_idx = got[0]
        # the request's tree-owned prefix is what it holds of the tree (init_next_round_input's rule, which a
        # resume that looks nothing up does not run; 0.5.7's reset_for_retract empties prefix_indices only)
        r.cache_protected_len = len(r.prefix_indices)
        return True

    @staticmethod
    def _free_row(unit: Any, r: Any) -> None:
        """The row given back: ``free(req)`` where the pool takes requests, else ``free(index)`` (0.5.7)."""
        if "reqs" in parameters(unit.rows.alloc):
            unit.rows.free(r)
        else:
            unit.rows.free(r.req_pool_idx)

    def _slide(self, unit: Any, r: Any, pre_len: int) -> None:
        self._ensure_kv(r, pre_len)
        kv = self._kv(r)
        kv.kv_committed_len = pre_len
        flags: dict[str, Any] = dict(drop_page_margin=False, is_chunk_cache=False, supports_prefix_sharing=True,
                                     eviction_interval=1)
        _call(_loaded["radix_free"], r, pre_len, sliding_window_size=unit.window - 1, page_size=self.t,
              req_to_token_pool=unit.rows, token_to_kv_pool_allocator=unit.allocator, tree_cache=unit.tree, **flags)

    def _fill(self, r: Any, upto: int) -> None:
        """The request's fill ids cover its first ``upto`` tokens (what a prefill chunk computes): its
        ``fill_len``, or its extend range (from its tree-owned prefix), or its ``fill_ids``, whichever the
        release's request has."""
        refresh = getattr(r, "_refresh_fill_ids", None) or getattr(r, "refresh_fill_ids", None)
        if refresh is not None:
            refresh()
        if hasattr(r, "set_extend_range"):
            r.set_extend_range(min(self._kv(r).cache_protected_len, upto), upto)
        elif hasattr(r, "fill_len"):
            r.fill_len = upto
        else:
            r.fill_ids = (list(r.origin_input_ids) + list(r.output_ids))[:upto]

    def _publish(self, unit: Any, r: Any, edge: int) -> None:
        self._ensure_kv(r, edge)
        kv = self._kv(r)
        kv.kv_committed_len = edge
        kv.kv_allocated_len = edge
        if getattr(r, "last_node", None) is None:  # no match was made (nothing to look up): the root
            r.last_node = self._root(unit)
            self._lock(unit, r)
        self._fill(r, edge)
        _call(unit.tree.cache_unfinished_req, r, chunked=True)  # the chunk's KV into the tree, the lock moved on
        r.lock = r.last_node

    def _release(self, unit: Any, req: Any, r: Any, finished: bool) -> None:
        """``release_kv_cache``'s steps on the older API: ``cache_finished_req`` (inserting when finished,
        freeing the request's own KV when retracted; unlocking), then the tail past the committed tokens
        freed and the row given back."""
        P = self.t
        self._ensure_kv(r, req.allocated)
        kv = self._kv(r)
        h, allocated = req.history, kv.kv_allocated_len
        kv.kv_committed_len = h
        if finished:
            r.finished_reason = _loaded["FINISH_LENGTH"](length=len(r.output_ids))
        self._fill(r, h)
        if getattr(r, "last_node", None) is None:
            r.last_node = self._root(unit)
            self._lock(unit, r)
        rows_free = unit.rows.available_size()
        _call(unit.tree.cache_finished_req, r, is_insert=finished, kv_len_to_handle=h)
        r.lock = None
        tail = -(-h // P) * P
        if tail < allocated:
            unit.allocator.free(unit.rows.req_to_token[kv.req_pool_idx, tail:allocated].to(_loaded["torch"].int64))
        if unit.rows.available_size() == rows_free:  # 0.5.7's cache_finished_req gives the row back itself
            self._free_row(unit, r)
        kv = getattr(r, "kv", None)
        if callable(getattr(kv, "mark_kv_released", None)) and not _loaded.get("kv_made_at_allocation"):
            kv.mark_kv_released()  # a record the request keeps for life (0.5.19 on): marked released, as there
        elif _loaded.get("ReqKvInfo") is not None and kv is not None:
            r.kv = None  # released with the row, as release_kv_cache does where the record is made at allocation

    def commit(self, request_id: Any, tokens: int) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        req.history += tokens
        for r in req.reqs:
            self._kv(r).kv_committed_len = req.history


class SplitReleaseApi(OlderTreeApi):
    """The older API's match, lock and publication (``match_prefix``, ``inc_lock_ref`` with its receipt,
    ``cache_unfinished_req``) on a tree without ``cache_finished_req`` (0.5.21's ``UnifiedRadixCache``):
    a window slides with the tree's own ``evict_sliding_windows`` (what the scheduler's ``_evict_swa``
    calls), and a release is ``release_kv_cache``'s steps, called one by one as the newer tree API's are
    (that function asserts nothing is allocated past the committed tokens, which a protocol close with
    capacity above history breaks): ``insert_req`` up to the committed tokens when finished, the row's own
    KV past the tree-owned prefix freed (``free_kv_row``), the lock released (``unpin``, with the receipt
    ``inc_lock_ref`` gave), the tail past the committed tokens' last page freed, ``on_release``, the row
    given back and the KV record marked released."""

    def _slide(self, unit: Any, r: Any, pre_len: int) -> None:
        kv = self._kv(r)
        kv.kv_committed_len = pre_len
        unit.tree.evict_sliding_windows(r, pre_len)

    def _release(self, unit: Any, req: Any, r: Any, finished: bool) -> None:
        P, tree = self.t, unit.tree
        kv = self._kv(r)
        h, allocated = req.history, kv.kv_allocated_len
        kv.kv_committed_len = h
        if getattr(r, "last_node", None) is None:  # nothing was matched or published: the root, as _publish
            r.last_node = self._root(unit)
            self._lock(unit, r)
        if finished:
            r.finished_reason = _loaded["FINISH_LENGTH"](length=len(r.output_ids))
            self._fill(r, h)
            tree.insert_req(r, up_to=h)
        if kv.cache_protected_len < h:
            tree.free_kv_row(kv, [(kv.cache_protected_len, h)])
        tree.unpin(r)
        r.lock = None
        tail = -(-h // P) * P
        if tail < allocated:
            tree.free_kv_row(kv, [(tail, allocated)])
        _call(tree.on_release, r, inserted=finished, checkpointed=finished)
        unit.rows.free(r)
        kv.mark_kv_released()
