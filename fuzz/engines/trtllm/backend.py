"""TensorRT-LLM KVCacheManagerV2, the whole manager, as a fuzz backend (``--backend trtllm``).

NOT YET RUN ON A GPU. Written against the manager's API as its sources document it (the package's
``__init__.pyi`` and ``_core/_kv_cache.py``): ``KVCacheManager(KVCacheManagerConfig(...))``,
``create_kv_cache(id=...)``, ``resume(cuda_stream) -> bool``, ``resize(capacity, history_length) ->
bool``, ``commit(tokens)``, ``suspend()``, ``close()``, ``get_base_page_indices(layer_group_id)``
(-1 where a block holds no page), ``get_storage_statistics()`` and
``get_life_cycle_pool_group_indices()``. Until a run on a GPU machine with TensorRT-LLM installed
says otherwise, treat every divergence it reports as possibly the adapter's.

How it is set up: the layers, buffers and pool groups come from
:func:`swafloor.fuzz.engines.trtllm.mapping.to_trtllm`; the GPU quota is the reference's slots times each
pool group's slot size, each pool rounded up to 2 MiB (upstream's pool granularity below 1 GiB), split
by ``initial_pool_ratio``; so upstream's pools hold at least the reference's slots and pool totals are
compared AT_LEAST. ``max_util_for_resume=1.0`` (upstream refuses a resume above it; the reference has
no such gate). Outcomes are plain booleans, so no shortfalls are shown. Tables and slots in use are
compared AT_LEAST: upstream keeps committed stale pages droppable rather than free, and an
uncommitted stale page held. Create takes no reused history (prefix reuse needs token matching), and
suspend is left out (with GPU memory only, upstream's suspend turns locks into holds and frees
nothing). Beam search is not supported by V2.

Its factory raises :class:`~swafloor.fuzz.protocol.Unsupported` with the reason where tensorrt_llm
is not importable or no CUDA device is visible, so the harness reports why and runs nothing.
"""

from __future__ import annotations

from typing import Any, Hashable

from swafloor.reference import BlockTable, Config, RequestState, build_layout

from .kv_ops import KvCacheOperations
from ...protocol import Capabilities, Part, Unsupported, factory

__all__ = ["trtllm", "TrtllmBackend", "CAPABILITIES", "require_runtime"]

CAPABILITIES = Capabilities(
    operations={"create", "resume", "resize", "commit", "close"},
    observations={
        "outcome": "exact",
        "pool_totals": "at-least",
        "pool_used": "at-least",
        "lengths": "exact",
        "tables": "at-least",
    },
    reused_history=False,
    needs_gpu=True,
)

_STATE = {s.name: s for s in RequestState}  # TensorRT-LLM's status names are the reference's


def require_runtime() -> Any:
    """The installed ``tensorrt_llm.runtime.kv_cache_manager_v2`` and a CUDA stream; raises
    :class:`Unsupported` naming what is missing."""
    try:
        import tensorrt_llm.runtime.kv_cache_manager_v2 as v2  # noqa: PLC0415 (heavy, GPU-bound)
    except Exception as exc:  # ImportError, or the package failing to initialize without CUDA
        raise Unsupported(f"trtllm backend: tensorrt_llm is not importable ({type(exc).__name__}: {str(exc)[:160]})") from None
    try:
        import cuda.bindings.runtime as cudart  # noqa: PLC0415
    except Exception as exc:
        raise Unsupported(f"trtllm backend: cuda-bindings is not importable ({type(exc).__name__})") from None
    err, count = cudart.cudaGetDeviceCount()
    if int(err) != 0 or count < 1:
        raise Unsupported("trtllm backend: no CUDA device (KVCacheManagerV2 needs one even in its Python backend)")
    err, stream = cudart.cudaStreamCreate()
    if int(err) != 0:
        raise Unsupported(f"trtllm backend: cannot create a CUDA stream ({err})")
    return v2, int(stream)


class TrtllmBackend(KvCacheOperations):
    """One KVCacheManagerV2 driven through the fuzz protocol."""

    NAME = "trtllm backend"

    def __init__(self, config: Config, v2: Any, stream: int):
        from .mapping import layer_configs, to_trtllm

        self.v2 = v2
        self.stream = stream
        self.layout = build_layout(config)
        self.tl = to_trtllm(config)
        slots = self.layout.slots
        manager_config = v2.KVCacheManagerConfig(
            tokens_per_block=config.tokens_per_block,
            cache_tiers=[v2.GpuCacheTierConfig(quota=self.tl.quota_bytes(slots))],
            layers=layer_configs(self.tl, v2),
            max_util_for_resume=1.0,
            initial_pool_ratio=list(self.tl.byte_ratio(slots)),
            commit_min_snapshot=self.tl.has_ssm,
        )
        self.manager = v2.KVCacheManager(manager_config)
        upstream_groups = list(self.manager.get_life_cycle_pool_group_indices())
        self.group_map: dict[int, int] = {}  # upstream pool group -> swafloor pool group
        for lc, ours in enumerate(self.tl.pool_group_of):
            theirs = int(upstream_groups[lc])
            if self.group_map.setdefault(theirs, ours) != ours:
                raise AssertionError(f"trtllm backend: upstream pool groups {upstream_groups} do not match {self.tl.pool_group_of}")
        self.caches: dict[Hashable, Any] = {}
        self.committed: dict[Hashable, int] = {}

    # ------------------------------------------------------------------ operations
    # ------------------------------------------------------------------ observation
    def observe(self) -> dict:
        stats = list(self.manager.get_storage_statistics())
        totals = [0] * self.layout.num_pool_groups
        used = [0] * self.layout.num_pool_groups
        for theirs, s in enumerate(stats):
            ours = self.group_map.get(theirs)
            if ours is not None:
                totals[ours] += int(s.total)
                used[ours] += int(s.total) - int(s.free)
        lengths, tables = {}, {}
        for rid, kv in self.caches.items():
            state = _STATE.get(getattr(kv.status, "name", str(kv.status)), str(kv.status))
            lengths[rid] = (state, int(kv.capacity), int(kv.history_length))
            if state == RequestState.ACTIVE:
                tables[rid] = tuple(_table(kv.get_base_page_indices(lc)) for lc in range(len(self.tl.life_cycles)))
            else:
                tables[rid] = tuple(BlockTable(0) for _ in self.tl.life_cycles)
        return {
            Part.POOL_TOTALS: tuple(totals),
            Part.POOL_USED: tuple(used),
            Part.LENGTHS: lengths,
            Part.TABLES: tables,
        }


def _table(pages: Any) -> BlockTable:
    """TensorRT-LLM's base page indices of one life cycle as a table: an entry per block, held where
    the page is not -1."""
    pages = list(pages)
    return BlockTable.from_blocks(len(pages), (b for b, p in enumerate(pages) if int(p) != -1))


@factory(CAPABILITIES, name="trtllm")
def trtllm(config: Config) -> TrtllmBackend:
    """Build the backend; raises :class:`Unsupported` with the reason without tensorrt_llm or CUDA."""
    v2, stream = require_runtime()
    return TrtllmBackend(config, v2, stream)
