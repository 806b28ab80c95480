"""What differs between transformers releases' continuous-batching paged caches, found by what the
import finds (never by a version string; the version is quoted in messages only). Three shapes
(docs/transformers.md has the facts, read from the wheels):

- ``ring-deque`` (4.57): ``continuous_batching/cache_manager.py``; each group's allocator takes
  blocks from the paged cache's ``deque`` of free block ids (``allocate_blocks(n, request_id,
  free_blocks)``), ``PagedAttentionCache.allocate_blocks(n, request_id)`` asks every group in turn;
  new tokens in a sliding window's read indices are ``-1``.
  (5.x names the write trash ``trash_index`` in 5.10, ``write_trash_index`` from 5.15: the adapter
  gives whichever the constructor takes.)
- ``ring-ledger`` (5.0 to 5.17): the same file with a ``BlockManager`` (free blocks, reference counts,
  hashes) shared by the groups; ``PagedAttentionCache.allocate_blocks(n, request_id, allocated_blocks)``
  checks ``will_allocation_be_successful`` first.
  In both, the scheduler's ``_allocate_blocks_if_needed(state, len_next_tokens)`` decides how many
  blocks a step asks for.
- ``sectors`` (5.18 on; 5.18 files its allocators under the package's attention-type constants, its
  allocator classes have no ``layer_type``): ``continuous_batching/cache_allocators/``; a ``CachePool`` of sectors handed
  to one allocator per attention type, each cutting its sectors into blocks;
  ``PagedAttentionCache.can_store_request_tokens(state, request_len)`` is the scheduler's check and
  allocation in one call.

The adapter never builds a ``PagedAttentionCache`` (it sizes itself from a model's memory): it calls
the class's own functions on a small object holding the attributes they read (:func:`engine_class`),
and the scheduler's own ``_allocate_blocks_if_needed`` the same way. A release without a piece the
adapter drives is :class:`Unsupported`, naming it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from ...protocol import Unsupported
from ..common import MissingModule, arguments, missing_module

__all__ = ["MissingModule", "version", "load", "engine_class", "build", "SHAPES"]

SHAPES = ("ring-deque", "ring-ledger", "sectors")
_PACKAGE = "transformers.generation.continuous_batching"


def version() -> str:
    """The installed transformers' version, for messages only."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = missing_module(exc, "transformers", f"transformers {version()}")
        if missing is not None:
            raise missing from None
        raise Unsupported(f"transformers {version()} has no module {name} ({type(exc).__name__}: {exc})") from None


def load() -> dict[str, Any]:
    """Import the release's continuous-batching cache pieces; ``shape`` names which of :data:`SHAPES`."""
    import torch

    cache = _import(f"{_PACKAGE}.cache")
    scheduler = _import(f"{_PACKAGE}.scheduler")
    parts: dict[str, Any] = {"torch": torch, "PagedAttentionCache": getattr(cache, "PagedAttentionCache", None),
                             "Scheduler": getattr(scheduler, "Scheduler", None)}
    if parts["PagedAttentionCache"] is None:
        raise Unsupported(f"transformers {version()}'s continuous batching has no PagedAttentionCache")
    try:
        allocators = importlib.import_module(f"{_PACKAGE}.cache_allocators")
    except ImportError:
        allocators = None
    if allocators is not None:
        parts.update(shape="sectors", Sliding=allocators.SlidingAttentionCacheAllocator,
                     Full=allocators.FullAttentionCacheAllocator, CachePool=allocators.CachePool)
        # the names the paged cache files its allocators under (``cache_allocators[name]``): the package's
        # attention-type constants (5.18 has no ``layer_type`` on its allocator classes; later releases
        # derive the constants from it)
        keys = (getattr(allocators, "SLIDING_ATTENTION", None), getattr(allocators, "FULL_ATTENTION", None))
        if None in keys:
            raise Unsupported(f"transformers {version()}'s cache_allocators names no SLIDING_ATTENTION / FULL_ATTENTION")
        parts["SlidingKey"], parts["FullKey"] = keys
        from transformers import PretrainedConfig

        parts["PretrainedConfig"] = PretrainedConfig
        return parts
    manager = _import(f"{_PACKAGE}.cache_manager")
    sliding = getattr(manager, "SlidingAttentionCacheAllocator", None)
    if sliding is None:
        raise Unsupported(f"transformers {version()} has no sliding-window cache allocator")
    parts.update(Sliding=sliding, Full=manager.FullAttentionCacheAllocator,
                 BlockManager=getattr(manager, "BlockManager", None))
    parts["shape"] = "ring-ledger" if parts["BlockManager"] is not None else "ring-deque"
    if parts["Scheduler"] is None or not hasattr(parts["Scheduler"], "_allocate_blocks_if_needed"):
        raise Unsupported(f"transformers {version()}'s scheduler has no _allocate_blocks_if_needed")
    return parts


def engine_class(cls: Any, names: tuple[str, ...], what: str) -> type:
    """A class whose methods are ``cls``'s own functions ``names`` (unwrapped from their tracing
    decorators where a release has them), for an object carrying only the attributes they read."""
    methods = {}
    for name in names:
        fn = None
        for klass in getattr(cls, "__mro__", (cls,)):
            if name in vars(klass):
                fn = vars(klass)[name]
                break
        if fn is None:
            raise Unsupported(f"transformers {version()}'s {cls.__name__} has no {name} ({what})")
        methods[name] = fn
    return type(f"{cls.__name__}Functions", (), methods)


def build(fn: Any, known: dict[str, Any], what: str) -> Any:
    """Call ``fn`` with every parameter it has that ``known`` names (a required one it lacks is
    :class:`Unsupported`, naming it)."""
    return fn(**arguments(fn, known, f"transformers {version()}'s {what}"))
