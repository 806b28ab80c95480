"""The protocol's request operations on TensorRT-LLM's per-request ``_KVCache`` objects, shared by the
``trtllm`` (GPU) and ``trtllm-v2`` (whole manager) adapters: each call forwarded to the request's
cache, the outcome read from what upstream returns, committed tokens given ids of their own."""

from __future__ import annotations

from typing import Any, Hashable

from swafloor.reference import Outcome

from ...protocol import Unsupported

__all__ = ["KvCacheOperations"]


class KvCacheOperations:
    """Mixin: needs ``self.manager`` (with ``create_kv_cache``), ``self.stream``, ``self.caches`` and
    ``self.committed`` (request -> tokens committed), and ``NAME`` for messages."""

    NAME = "trtllm"
    manager: Any
    stream: Any
    caches: dict[Hashable, Any]
    committed: dict[Hashable, int]

    def create(self, request_id: Hashable, reused_history: int = 0) -> None:
        if reused_history:
            raise Unsupported(f"{self.NAME}: reused history needs prefix matching (not driven)")
        self.caches[request_id] = self.manager.create_kv_cache(id=request_id)
        self.committed[request_id] = 0

    def resume(self, request_id: Hashable) -> Outcome:
        return Outcome(bool(self.caches[request_id].resume(self.stream)))

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        return Outcome(bool(self.caches[request_id].resize(capacity, history)))

    def commit(self, request_id: Hashable, tokens: int) -> None:
        start = self.committed[request_id]
        self.caches[request_id].commit(self._token_ids(tokens))
        self.committed[request_id] = start + tokens

    def _token_ids(self, n: int) -> list[int]:
        """``n`` token ids never committed before by this backend: upstream keys committed blocks by
        their tokens and shares a block whose tokens another request already committed (it frees its
        own copy), which the reference does not model (no reuse is driven), so no two committed
        blocks may hold the same tokens."""
        first = getattr(self, "_next_token_id", 1000)
        self._next_token_id = first + n
        return list(range(first, first + n))

    def suspend(self, request_id: Hashable) -> None:
        self.caches[request_id].suspend()

    def close(self, request_id: Hashable) -> None:
        self.caches[request_id].close()
