"""TensorRT-LLM KVCacheManagerV2 as installed, on a CUDA GPU (``--backend trtllm``).

The installed ``tensorrt_llm.runtime.kv_cache_manager_v2`` with the real CUDA driver, driven by the
same adapter as ``trtllm-v2`` (:class:`~swafloor.fuzz.engines.trtllm.v2.TrtllmV2Backend`) and compared
as exactly: outcome, pool totals, pool use (``total - free - evictable``), lengths and tables, under the
semantics that adapter declares (commit before allocate, hold-until-return, suspend keeps its pages).
Nothing is compared at-least: the quota is whole slots of 2 MiB each, so upstream's pool granularity
leaves no slack (a pool of another size is a ``pool_totals`` divergence at the first step).

NOT YET RUN ON A GPU: treat a divergence it reports as possibly the adapter's until one run says
otherwise. Its factory raises :class:`~swafloor.fuzz.protocol.Unsupported` with the reason where
tensorrt_llm is not importable or no CUDA device is visible, so the harness reports why and runs
nothing.
"""

from __future__ import annotations

from typing import Any

import attrs

from swafloor.reference import Config

from .v2 import CAPABILITIES as V2_CAPABILITIES, TrtllmV2Backend
from ...protocol import Unsupported, factory

__all__ = ["trtllm", "CAPABILITIES", "require_runtime"]

#: What ``trtllm-v2`` compares, exactly, plus the GPU it needs.
CAPABILITIES = attrs.evolve(V2_CAPABILITIES, needs_gpu=True)


def require_runtime() -> tuple[Any, int]:
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


@factory(CAPABILITIES, name="trtllm")
def trtllm(config: Config) -> TrtllmV2Backend:
    """Build the backend; raises :class:`Unsupported` with the reason without tensorrt_llm or CUDA."""
    v2, stream = require_runtime()
    return TrtllmV2Backend(config, v2, stream)
