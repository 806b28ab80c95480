"""How peer systems size a sliding-window life cycle, written on the arithmetic kernel.

These are the published sizing rules of other KV-cache managers (see the project's upstream facts),
kept here so that proofs compare them with :func:`~.floors.swa_floor` on ints and on Z3 terms alike.
``t`` is tokens per block, ``window`` the window ``W`` in tokens.
"""

from __future__ import annotations

from typing import Any

from .arith import cdiv, fdiv, imin, ite

__all__ = [
    "upstream_window_term",
    "upstream_swa_floor",
    "vllm_blocks_per_request",
    "trtllm_cpp_blocks",
    "sglang_request_pages",
    "vllm_admission_blocks",
]


def upstream_window_term(t: Any, window: Any) -> Any:
    """The window term of TensorRT-LLM's post-fix floor as upstream writes it: ``(W + t - 2) // t``."""
    return fdiv(window + t - 2, t)


def upstream_swa_floor(t: Any, window: Any, sink_blocks: Any) -> Any:
    """TensorRT-LLM's post-fix SWA floor in upstream's spelling: ``S + (W + t - 2) // t + 1``."""
    return sink_blocks + upstream_window_term(t, window) + 1


def vllm_blocks_per_request(t: Any, window: Any, max_tokens: Any, max_model_len: Any = None) -> Any:
    """vLLM v1's per-request blocks for a sliding window: ``ceil(min(W - 1 + T, max_model_len) / t) + 1``
    where ``T`` is the most tokens one step batches (no sink term; no cap when ``max_model_len`` is None)."""
    span = window - 1 + max_tokens
    if max_model_len is not None:
        span = imin(span, max_model_len)
    return cdiv(span, t) + 1


def trtllm_cpp_blocks(t: Any, window: Any) -> Any:
    """The older TensorRT-LLM C++ manager's blocks per sequence past the window: ``ceil(W / t) + 1``
    (it allocates the next block before detaching the one leaving the window; it rejects sinks)."""
    return cdiv(window, t) + 1


def sglang_request_pages(t: Any, window: Any, request_tokens: Any) -> Any:
    """SGLang's per-request SWA budget in pages: ``min(input + max_new, W)`` tokens plus one page,
    ``ceil(min(L, W) / t) + 1`` for a request of ``L`` tokens. Its SWA pool itself is a user-set ratio
    of the full pool, with no window-derived floor."""
    return cdiv(imin(request_tokens, window), t) + 1


def vllm_admission_blocks(t: Any, window: Any, prompt: Any, lookahead: Any, max_batched: Any, max_model_len: Any,
                          capped: Any) -> Any:
    """vLLM v1's admission gate for a sliding-window group of a new request (``allocate_slots`` with
    ``full_sequence_must_fit``): the blocks of the full sequence, ``cdiv(P + k, t)``; where the
    release has the recycling-aware cap (``max_admission_blocks_per_request``), at most
    :func:`vllm_blocks_per_request` with ``T = max_batched`` (``max_num_batched_tokens``)."""
    charged = cdiv(prompt + lookahead, t)
    return ite(capped, imin(charged, vllm_blocks_per_request(t, window, max_batched, max_model_len)), charged)
