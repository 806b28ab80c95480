"""The adapter's stand-in ``self`` for SGLang's eviction methods (the chunk cache's or the scheduler batch's),
shared by :mod:`.compat` and :mod:`.cadence`: what those methods read, set by the adapter, never observed."""

from __future__ import annotations

from typing import Any

__all__ = ["ChunkCacheFacts"]


class ChunkCacheFacts:
    """What SGLang's eviction method reads of the scheduler's cache and batch: the chunk cache's
    window and page size (``supports_swa``, ``is_chunk_cache``: the cache without prefix sharing) and the
    row pool and allocator. The adapter's stand-in ``self`` for a method of SGLang's, never observed."""

    def __init__(self, sliding_window_size: int, page_size: int, req_to_token_pool: Any, token_to_kv_pool_allocator: Any):
        self.sliding_window_size = sliding_window_size
        self.page_size = page_size
        self.attention_chunk_size = None
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool_allocator = token_to_kv_pool_allocator
        self.tree_cache = self

    @staticmethod
    def supports_swa() -> bool:
        return True

    @staticmethod
    def is_chunk_cache() -> bool:
        return True
