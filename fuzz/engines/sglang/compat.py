"""What differs between SGLang releases, found by what the import finds: the ``sglang`` backends drive
every release whose allocator has the SWA pieces they call (``swafloor matrix sglang``).

Nothing here reads a version string to decide anything (the version is only quoted in messages).

- importing: SGLang's multimodal helpers import torchvision (a stand-in, see ``sglang.py``); older
  releases import ``sgl_kernel.kvcacheio`` (a CUDA extension) at load: where it is missing the adapter
  puts an empty stand-in module in ``sys.modules`` (nothing on the allocator path calls it; it is the
  adapter's, never observed). While SGLang imports, a model config name transformers already ships
  may be registered again (older releases register their own ``qwen3_asr``; vLLM's compat tolerates
  the same); where that transformers has no image processors (no torchvision), its
  ``AutoImageProcessor`` is a stand-in whose ``register`` does nothing. A module missing from this environment raises
  :class:`MissingModule` naming it.
- the pieces, each looked up where releases put it: ``SWATokenToKVPoolAllocator``
  (``mem_cache.allocator.swa``, else ``mem_cache.swa_memory_pool``, else ``mem_cache.allocator``),
  ``SWAKVPool`` (``mem_cache.swa_memory_pool``, else ``mem_cache.memory_pool``), ``ReqToTokenPool``
  and ``free_swa_out_of_window_slots`` (``mem_cache.common``). A release without one is
  :class:`Unsupported` naming it. Before the function existed (0.5.14) the eviction was the scheduler
  batch's ``ScheduleBatch._evict_swa`` (0.5.8-0.5.13) and, in 0.5.7, the chunk cache's
  ``SWAChunkCache.evict_swa``: each is called as the function is, the method SGLang's own, its ``self``
  the adapter's stand-in holding the chunk cache's window and page size, the row pool and the allocator
  (:func:`_older_eviction`); before 0.5.7 the chunk cache evicts only for chunked local attention, no
  sliding window (Unsupported).
- the capacity check before allocating: the allocator's ``new_pages_available`` (0.5.14 on), else the
  scheduler's ``check_decode_mem`` of those releases, ``available_size()`` (:func:`pages_available`); a
  paged config on an allocator without ``page_size`` (0.5.7: token slots only) is Unsupported.
- constructors are called with the arguments their signatures name (``enable_kvcache_transpose``
  appears and goes, for instance).
- the eviction call, by the parameters ``free_swa_out_of_window_slots`` has: no prefix sharing is said
  as ``supports_prefix_sharing=False``, ``is_chunk_cache=True`` or ``drop_page_margin=True`` (what the
  scheduler passes with its chunk cache, the cache without sharing); ``eviction_interval`` where it is
  a parameter. Where it is not, the interval is the scheduler's own: ``sglang-lazy`` re-enacts the
  scheduler's rule where it is the token gate (0.5.18-0.5.20) and drives the scheduler's own
  ``ScheduleBatch.maybe_evict_swa`` where it is a clock of steps (0.5.13.post1, 0.5.14-0.5.17), the step's
  counters fed by the backend (:mod:`.cadence`); ``sglang`` (every token) calls the function before each
  allocation.
- the request's fields the function reads: ``req.kv.*`` (newer) or the same fields on the request
  itself (older); the stand-in request has both, one store.
- the free of a finished request: ``free_kv_row_segments`` where it exists, else the allocator's own
  ``free`` of the row (what the chunk cache's ``cache_finished_req`` did then).
- paged allocation: where the paged sub-allocators have a CPU path (``use_triton_kernels``) SGLang's
  ``alloc_extend`` / ``alloc_decode`` run; where they are Triton kernels only, the adapter fills the
  request's last page slot by slot and takes whole new pages from the two sub-allocators with their own
  ``alloc`` (the pages the kernel would take: the head of each free list), then writes SGLang's
  full-to-SWA mapping with the allocator's own ``set_full_to_swa_mapping`` (or the mapping tensor).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import sys
import types
from typing import Any, Callable

from ...protocol import Unsupported
from ..common import MissingModule, arguments, brief, configs_registered_once, missing_module, parameters
from .facts import ChunkCacheFacts

__all__ = ["MissingModule", "ChunkCacheFacts", "load", "version", "build", "Evictor", "release_row", "pages_available", "paged_cpu",
           "alloc_pages"]


def version() -> str:
    """The installed SGLang's version, for messages only."""
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _kernel_absent(name: str) -> Callable[..., Any]:
    """A name imported from the stand-in ``sgl_kernel.kvcacheio`` (0.5.7 imports its kernels by name at
    load): a function that raises if anything calls it (nothing on the allocator path does)."""
    if name.startswith("__"):
        raise AttributeError(name)

    def absent(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"sgl_kernel.kvcacheio.{name}: a CUDA kernel, the adapter's stand-in (not on the allocator path)")

    absent.__name__ = name
    return absent


def _stand_in_kvcacheio() -> None:
    """An empty ``sgl_kernel.kvcacheio`` where the real one is missing (older releases import it at load);
    a name imported from it is :func:`_kernel_absent`'s."""
    try:
        importlib.import_module("sgl_kernel.kvcacheio")
        return
    except Exception:  # noqa: BLE001 - missing, or present but not loadable on a CPU
        pass
    for name in ("sgl_kernel", "sgl_kernel.kvcacheio"):
        if name in sys.modules and getattr(sys.modules[name], "__swafloor_stand_in__", False) is False:
            continue
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=name == "sgl_kernel")
        mod.__path__ = []  # type: ignore[attr-defined]
        mod.__swafloor_stand_in__ = True  # type: ignore[attr-defined]
        if name == "sgl_kernel.kvcacheio":
            mod.__getattr__ = _kernel_absent  # type: ignore[attr-defined]
        sys.modules[name] = mod
    sys.modules["sgl_kernel"].kvcacheio = sys.modules["sgl_kernel.kvcacheio"]  # type: ignore[attr-defined]


class _NoImageProcessors:
    """The adapter's stand-in for transformers' ``AutoImageProcessor`` where that is a placeholder (no
    torchvision): registering is a no-op, anything else raises."""

    @staticmethod
    def register(*args: Any, **kwargs: Any) -> None:
        return None

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("AutoImageProcessor: torchvision is not installed in the SGLang venv (a stand-in)")


def _image_processors_unregistered() -> None:
    """Where transformers' ``AutoImageProcessor`` is its placeholder for want of torchvision (older
    transformers pins), SGLang's multimodal configs, which register image processors at import, get
    :class:`_NoImageProcessors` (no allocator code uses it). SGLang's package ``__init__`` runs first
    (some releases put a fresh ``transformers`` in ``sys.modules`` there)."""
    import sglang  # noqa: F401

    transformers = sys.modules.get("transformers") or importlib.import_module("transformers")
    try:
        transformers.AutoImageProcessor.register  # noqa: B018
        return
    except ImportError:
        transformers.AutoImageProcessor = _NoImageProcessors


def _find(name: str, modules: tuple[str, ...]) -> Any:
    """``name`` from the first of ``modules`` that has it; Unsupported naming it when none does."""
    errors = []
    for module in modules:
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] not in ("sglang", "sgl_kernel"):
                raise MissingModule(exc.name.split(".")[0],
                                    f"SGLang {version()} needs the module {exc.name!r}, not installed here") from exc
            errors.append(f"no {module}")
            continue
        if hasattr(found, name):
            return getattr(found, name)
        errors.append(f"not in {module}")
    raise Unsupported(f"SGLang {version()} has no {name} ({'; '.join(errors)})")


_failed: list[Unsupported] = []


def load(stand_in_torchvision: Callable[[], None]) -> dict[str, Any]:
    """Import SGLang's pieces (see the module docstring)."""
    if _failed:
        raise _failed[0]
    try:
        stand_in_torchvision()
        _stand_in_kvcacheio()
        import torch

        with configs_registered_once():
            _image_processors_unregistered()
            parts = dict(
                torch=torch,
                Allocator=_find("SWATokenToKVPoolAllocator", (
                    "sglang.srt.mem_cache.allocator.swa", "sglang.srt.mem_cache.swa_memory_pool",
                    "sglang.srt.mem_cache.allocator")),
                SWAKVPool=_find("SWAKVPool", ("sglang.srt.mem_cache.swa_memory_pool", "sglang.srt.mem_cache.memory_pool")),
                ReqToTokenPool=_find("ReqToTokenPool", ("sglang.srt.mem_cache.memory_pool",)),
            )
            try:
                parts["free_swa_out_of_window_slots"] = _find("free_swa_out_of_window_slots", ("sglang.srt.mem_cache.common",))
            except MissingModule:
                raise
            except Unsupported as exc:
                parts["free_swa_out_of_window_slots"] = _older_eviction(str(exc))
                parts["eviction_path"] = parts["free_swa_out_of_window_slots"].path
            try:
                parts["free_kv_row_segments"] = _find("free_kv_row_segments", ("sglang.srt.mem_cache.common",))
            except Unsupported:
                parts["free_kv_row_segments"] = None
            try:
                parts["swa_component"] = _find("ComponentType", (
                    "sglang.srt.mem_cache.unified_cache.component_type",
                    "sglang.srt.mem_cache.unified_cache_components.tree_component")).SWA
            except Unsupported:
                parts["swa_component"] = "swa"
    except Unsupported as exc:
        _failed.append(exc)
        raise
    except ImportError as exc:
        _failed.append(missing_module(exc, "sglang", f"SGLang {version()}")
                       or Unsupported(f"SGLang {version()} does not import here: {brief(exc)}"))
        raise _failed[0] from exc
    except Exception as exc:  # noqa: BLE001 - a release that does not import on this path
        _failed.append(Unsupported(f"SGLang {version()} does not import here: {brief(exc)}"))
        raise _failed[0] from exc
    import sglang

    parts["version"] = getattr(sglang, "__version__", version())
    return parts


# ----------------------------------------------------------------------------- older eviction paths
class _MethodEviction:
    """An SGLang eviction method of the scheduler's batch or chunk cache called with the arguments
    ``free_swa_out_of_window_slots`` takes (``req``, ``pre_len``, the window, page, row pool and
    allocator): the method is SGLang's own, its ``self`` a :class:`ChunkCacheFacts`. ``path`` names it."""

    def __init__(self, method: Callable[..., Any], path: str):
        self.method, self.path = method, path

    def __call__(self, req: Any, pre_len: int, *, sliding_window_size: int, page_size: int, req_to_token_pool: Any,
                 token_to_kv_pool_allocator: Any) -> None:
        facts = ChunkCacheFacts(sliding_window_size, page_size, req_to_token_pool, token_to_kv_pool_allocator)
        self.method(facts, req, pre_len)


def _older_eviction(missing: str) -> _MethodEviction:
    """Where ``free_swa_out_of_window_slots`` is missing, the decode-time SWA eviction the release has:
    the scheduler batch's ``ScheduleBatch._evict_swa(req, pre_len)`` (0.5.8-0.5.13), else the chunk
    cache's ``SWAChunkCache.evict_swa(req, prelen)`` where that cache keeps a sliding window
    (``sliding_window_size`` in its source: 0.5.7); before, the chunk cache evicts only for chunked local
    attention (``attention_chunk_size``), no sliding-window eviction at all: Unsupported, naming it."""
    import inspect

    try:
        batch = importlib.import_module("sglang.srt.managers.schedule_batch").ScheduleBatch
    except (ImportError, AttributeError):
        batch = None
    method = getattr(batch, "_evict_swa", None)
    if callable(method) and {"req", "pre_len"} <= set(parameters(method)):
        return _MethodEviction(method, "ScheduleBatch._evict_swa")
    try:
        cache = importlib.import_module("sglang.srt.mem_cache.chunk_cache").SWAChunkCache
        source = inspect.getsource(cache.evict_swa)
    except (ImportError, AttributeError, OSError, TypeError):
        cache, source = None, ""
    if cache is not None and "sliding_window_size" in source and {"req", "prelen"} <= set(parameters(cache.evict_swa)):
        return _MethodEviction(cache.evict_swa, "SWAChunkCache.evict_swa")
    raise Unsupported(f"{missing}: no ScheduleBatch._evict_swa, and its SWAChunkCache evicts only for chunked local "
                      "attention (attention_chunk_size), no sliding-window eviction (the model's)")


# ----------------------------------------------------------------------------- calls, by signature
def build(fn: Callable[..., Any], known: dict[str, Any], what: str) -> Any:
    """Call ``fn`` with every parameter it has that ``known`` names; a required one ``known`` lacks is
    :class:`Unsupported` naming it."""
    return fn(**arguments(fn, known, f"SGLang {version()}'s {what}"))


class Evictor:
    """SGLang's ``free_swa_out_of_window_slots`` called as the scheduler calls it without prefix sharing."""

    def __init__(self, fn: Callable[..., Any], eviction_interval: int):
        params = parameters(fn)
        self.fn = fn
        self.flags: dict[str, Any] = {}
        if "supports_prefix_sharing" in params:
            self.flags["supports_prefix_sharing"] = False
        elif "is_chunk_cache" in params:
            self.flags["is_chunk_cache"] = True
        elif "drop_page_margin" in params:
            self.flags["drop_page_margin"] = True
        if "eviction_interval" in params:
            self.flags["eviction_interval"] = eviction_interval
        elif eviction_interval != 1:  # the interval is the scheduler's: its rule (the token gate re-enacted,
            from .cadence import gate  # else the scheduler's own method)

            self.fn = gate(fn, eviction_interval, version())
        self.clocked = hasattr(self.fn, "rule")  # the scheduler's own method: it reads the step's counters

    def __call__(self, req: Any, pre_len: int, clock: Any = None, **kwargs: Any) -> None:
        if self.clocked:
            kwargs["clock"] = clock
        self.fn(req, pre_len, **kwargs, **self.flags)


def release_row(parts: dict[str, Any], allocator: Any, indices: Any, swa_evicted: int) -> None:
    """Free a finished (or retracted) request's KV: ``free_kv_row_segments``, else the allocator's ``free``."""
    if parts["free_kv_row_segments"] is not None:
        parts["free_kv_row_segments"](allocator, [(indices, 0)], swa_evicted_seqlen=swa_evicted)
    else:
        allocator.free(indices)


def pages_available(allocator: Any, pages: int, page_size: int) -> bool:
    """SGLang's own capacity check for ``pages`` new pages in each pool: the allocator's
    ``new_pages_available(full, swa)`` where it has one (0.5.14 on), else the check the scheduler makes
    in the release (``ScheduleBatch.check_decode_mem``: the allocator's ``available_size()``, the smaller
    of its two pools, at least the tokens of the new pages; where the SWA allocator has no
    ``available_size`` (0.5.7's raises NotImplementedError) the scheduler's hybrid-SWA check,
    ``_is_available_size_sufficient``: ``full_available_size()`` and ``swa_available_size()``, each)."""
    check = getattr(allocator, "new_pages_available", None)
    if callable(check):
        return bool(check(pages, pages))
    tokens = pages * page_size
    try:
        return allocator.available_size() >= tokens
    except NotImplementedError:
        return allocator.full_available_size() >= tokens and allocator.swa_available_size() >= tokens


def paged_cpu(allocator: Any) -> bool:
    """Whether the paged sub-allocators run ``alloc_extend`` / ``alloc_decode`` on a CPU."""
    return hasattr(allocator.full_attn_allocator, "use_triton_kernels")


def alloc_pages(allocator: Any, torch: Any, row: Any, old: int, new: int, P: int) -> Any:
    """Slots for tokens ``[old, new)`` where the paged kernels are Triton only, as SGLang's
    ``alloc_extend`` places them: the rest of the last page (slot after slot, in the full pool and in the
    SWA pool after the SWA slot the last token maps to: ``translate_loc_from_full_to_swa``), then whole
    pages from both sub-allocators (``alloc``); the full-to-SWA mapping written for the allocated tokens
    only, as SGLang's ``alloc_extend`` writes it (not for a new page's slots past them)."""
    tail_full: list[int] = []
    tail_swa: list[int] = []
    if old % P:
        last = int(row[old - 1])
        k = min(P - old % P, new - old)
        tail_full = list(range(last + 1, last + 1 + k))
        swa_last = int(allocator.full_to_swa_index_mapping[last])
        tail_swa = list(range(swa_last + 1, swa_last + 1 + k))
    rest = new - old - len(tail_full)
    pages = -(-rest // P)
    if pages and not pages_available(allocator, pages, P):
        return None
    full_parts = [torch.tensor(tail_full, dtype=torch.int64)]
    swa_parts = [torch.tensor(tail_swa, dtype=torch.int64)]
    if pages:
        full = allocator.full_attn_allocator.alloc(pages * P)
        swa = allocator.swa_attn_allocator.alloc(pages * P)
        if full is None or swa is None:
            return None
        full_parts.append(full[:rest].to(torch.int64))
        swa_parts.append(swa[:rest].to(torch.int64))
    out_full, out_swa = torch.cat(full_parts), torch.cat(swa_parts)
    if out_full.numel():
        if hasattr(allocator, "set_full_to_swa_mapping"):
            allocator.set_full_to_swa_mapping(out_full, out_swa)
        else:
            allocator.full_to_swa_index_mapping[out_full] = out_swa.to(allocator.full_to_swa_index_mapping.dtype)
    return out_full
