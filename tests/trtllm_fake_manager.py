"""A fake TensorRT-LLM KVCacheManagerV2, written here from upstream's documented behaviour (the facts in
../shared/facts/upstream.md §1.3 and §10; no upstream code), GPU tier only, for the ``trtllm-v2``
adapter's plumbing in CI where upstream sources are absent.

What it claims, each a documented behaviour:

- Layers with equal (window, sink tokens) share a life cycle; life cycles whose slot sizes (bytes of
  one block over their layers) match share a pool group.
- A pool group's slots are its share of the GPU quota (``initial_pool_ratio``) over its slot size,
  raised silently to the post-fix minimum (per SWA life cycle ``S + ceil((W - 1) / t) + 1``, full
  attention ``max(1, largest SWA floor)``, summed per pool group).
- ``resize(capacity, history)`` returns False when slots run out and leaves everything as it was;
  raises ValueError on misuse (history decreasing, capacity below history). Pages made stale by the
  same call are held until it returns; blocks past a smaller capacity are freed before allocating.
- A committed page out of the window is no longer the request's (its page index reads -1): it stays
  resident as evictable cache, dropped on demand when a pool runs out of free slots. A stale page
  whose tokens are not all committed stays held. ``close()`` leaves the request's committed full
  pages as evictable cache and frees the rest.
- ``suspend()`` with GPU memory only frees nothing (locks become holds).
- ``resume()`` refuses (False) when any pool group's use, evictable pages counted available, is above
  ``max_util_for_resume``.
- Statistics per pool group: ``total``, ``free``, ``evictable``.

- A host tier (``HostCacheTierConfig``) is accepted and holds nothing: the fake keeps every page on
  the GPU, which is what a lone request that never presses its pools sees (the progress properties).

Seeded bugs (``bugs=``), each a way an implementation could go wrong:
``stale-never-freed``: a committed stale page stays held (never evictable); ``pre-fix-minimum``: a
pool's minimum is 1 slot per life cycle (the seed's bug); ``no-rollback``: a failing resize keeps
its new capacity; ``resume-needs-a-free-slot``: resume refuses while any pool has no slot free or
evictable, gate or not (a request's own held pages counted against it); ``gate-counts-evictable``:
the resume gate counts evictable pages as used.
"""

from __future__ import annotations

import collections
import enum
import types
from typing import Any, Iterable

import attrs

BUGS = ("stale-never-freed", "pre-fix-minimum", "no-rollback", "resume-needs-a-free-slot", "gate-counts-evictable")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@attrs.frozen
class BufferConfig:
    role: str
    size: int


@attrs.frozen
class AttentionLayerConfig:
    layer_id: int
    buffers: list
    sliding_window_size: int | None = None
    num_sink_tokens: int | None = None


@attrs.frozen
class SsmLayerConfig:
    layer_id: int
    buffers: list


@attrs.frozen
class GpuCacheTierConfig:
    quota: int


@attrs.frozen
class HostCacheTierConfig:
    quota: int


@attrs.frozen
class KVCacheManagerConfig:
    tokens_per_block: int
    cache_tiers: list
    layers: list
    max_util_for_resume: float = 0.97
    initial_pool_ratio: list | None = None
    commit_min_snapshot: bool = False


class CacheStatus(enum.Enum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


@attrs.frozen
class PoolGroupStats:
    total: int
    free: int
    evictable: int


def stale_range(t: int, window: int | None, sink_blocks: int, h: int) -> range:
    """The documented stale blocks of an attention life cycle at history ``h`` (§1.2)."""
    start = min(cdiv(h, t), sink_blocks)
    if window is None:
        return range(start, start)
    return range(start, max(start, (h + 1 - window) // t))


def swa_floor(t: int, window: int, sink_blocks: int) -> int:
    return sink_blocks + cdiv(window - 1, t) + 1


class _Pool:
    """One pool group: slot ids, a free stack, evictable pages in the order they became evictable."""

    def __init__(self, total: int):
        self.total = total
        self.free = list(range(total - 1, -1, -1))
        self.evictable: collections.OrderedDict[int, None] = collections.OrderedDict()

    def available(self) -> int:
        return len(self.free) + len(self.evictable)

    def take(self) -> int:
        if self.free:
            return self.free.pop()
        slot, _ = self.evictable.popitem(last=False)  # the oldest cached page is dropped
        return slot

    def give_back(self, slot: int) -> None:
        self.free.append(slot)

    def cache(self, slot: int) -> None:
        self.evictable[slot] = None


class FakeKVCacheManager:
    def __init__(self, config: KVCacheManagerConfig, bugs: Iterable[str] = ()):
        self.bugs = frozenset(bugs)
        unknown = self.bugs - set(BUGS)
        if unknown:
            raise ValueError(f"FakeKVCacheManager.bugs: unknown {sorted(unknown)}")
        self.config = config
        t = config.tokens_per_block
        self.t = t
        keys: list[tuple] = []
        self.slot_size_of: list[int] = []
        for layer in config.layers:
            if isinstance(layer, SsmLayerConfig):
                raise ValueError("FakeKVCacheManager.layers: SSM layers are not modelled by the fake")
            sinks = cdiv(layer.num_sink_tokens or 0, t) if layer.sliding_window_size is not None else 0
            key = (layer.sliding_window_size, sinks)
            size = sum(b.size for b in layer.buffers)
            if key not in keys:
                keys.append(key)
                self.slot_size_of.append(0)
            self.slot_size_of[keys.index(key)] += size
        self.life_cycles = keys
        sizes: list[int] = []
        self.group_of: list[int] = []
        for size in self.slot_size_of:
            if size not in sizes:
                sizes.append(size)
            self.group_of.append(sizes.index(size))
        self.group_slot_size = sizes
        quota = sum(tier.quota for tier in config.cache_tiers[:1])
        ratio = config.initial_pool_ratio or [1 / len(sizes)] * len(sizes)
        if len(ratio) != len(sizes):
            raise ValueError(f"KVCacheManagerConfig.initial_pool_ratio: {len(ratio)} entries for {len(sizes)} pool groups")
        minimum = self._minimum()
        totals = [max(minimum[g], round(quota * ratio[g]) // sizes[g]) for g in range(len(sizes))]
        self.pools = [_Pool(n) for n in totals]
        self.caches: list[FakeKVCache] = []

    def _minimum(self) -> list[int]:
        floors = []
        swa = [swa_floor(self.t, w, s) for w, s in self.life_cycles if w is not None]
        for w, s in self.life_cycles:
            if "pre-fix-minimum" in self.bugs:
                floors.append(1)
            elif w is None:
                floors.append(max([1] + swa))
            else:
                floors.append(swa_floor(self.t, w, s))
        out = [0] * len(self.group_slot_size)
        for lc, f in enumerate(floors):
            out[self.group_of[lc]] += f
        return out

    def create_kv_cache(self, id: Any = None) -> "FakeKVCache":  # noqa: A002 - upstream's keyword
        cache = FakeKVCache(self, id)
        self.caches.append(cache)
        return cache

    def get_life_cycle_pool_group_indices(self) -> list[int]:
        return list(self.group_of)

    def get_storage_statistics(self) -> list[PoolGroupStats]:
        return [PoolGroupStats(p.total, len(p.free), len(p.evictable)) for p in self.pools]

    def utilization(self) -> list[float]:
        if "gate-counts-evictable" in self.bugs:
            return [(p.total - len(p.free)) / p.total if p.total else 0.0 for p in self.pools]  # BUG
        return [(p.total - p.available()) / p.total if p.total else 0.0 for p in self.pools]

    def shutdown(self) -> None:
        if any(c.status is not CacheStatus.CLOSED for c in self.caches):
            raise RuntimeError("shutdown: every cache must be closed first")


class FakeKVCache:
    def __init__(self, manager: FakeKVCacheManager, request_id: Any):
        self.manager = manager
        self.id = request_id
        self.status = CacheStatus.SUSPENDED
        self.capacity = 0
        self.history_length = 0
        self.committed = 0
        n = len(manager.life_cycles)
        self.pages: list[dict[int, int]] = [{} for _ in range(n)]  # live block -> slot
        self.held_stale: list[dict[int, int]] = [{} for _ in range(n)]  # stale, not all committed: still held

    # ------------------------------------------------------------------ helpers
    def _wanted(self, lc: int, capacity: int, history: int) -> set[int]:
        w, s = self.manager.life_cycles[lc]
        stale = stale_range(self.manager.t, w, s, history)
        return {b for b in range(cdiv(capacity, self.manager.t)) if b not in stale}

    def _committed_block(self, b: int) -> bool:
        return (b + 1) * self.manager.t <= self.committed

    def _retire_stale(self, lc: int, history: int) -> None:
        """Pages out of the window at ``history`` leave the request: committed ones as evictable cache,
        the rest held until committed."""
        w, s = self.manager.life_cycles[lc]
        pool = self.manager.pools[self.manager.group_of[lc]]
        for b in [b for b in self.pages[lc] if b in stale_range(self.manager.t, w, s, history)]:
            self.held_stale[lc][b] = self.pages[lc].pop(b)
        for b in [b for b in self.held_stale[lc] if self._committed_block(b)]:
            slot = self.held_stale[lc].pop(b)
            if "stale-never-freed" in self.manager.bugs:
                self.held_stale[lc][b] = slot  # BUG: kept held for good
                continue
            pool.cache(slot)

    def _allocate(self, capacity: int, history: int) -> bool:
        """Give every wanted block without a page one, all or nothing; blocks past ``capacity`` are
        freed first. Pages of blocks made stale here are still held while allocating."""
        manager = self.manager
        need = [0] * len(manager.pools)
        cut = [0] * len(manager.pools)
        for lc in range(len(manager.life_cycles)):
            g = manager.group_of[lc]
            wanted = self._wanted(lc, capacity, history)
            limit = cdiv(capacity, manager.t)
            cut[g] += sum(1 for b in self.pages[lc] if b >= limit) + sum(1 for b in self.held_stale[lc] if b >= limit)
            need[g] += len(wanted - set(self.pages[lc]) - set(self.held_stale[lc]))
        if any(n > pool.available() + c for n, pool, c in zip(need, manager.pools, cut)):
            return False
        for lc in range(len(manager.life_cycles)):
            pool = manager.pools[manager.group_of[lc]]
            limit = cdiv(capacity, manager.t)
            for held in (self.pages[lc], self.held_stale[lc]):
                for b in [b for b in held if b >= limit]:
                    pool.give_back(held.pop(b))
        for lc in range(len(manager.life_cycles)):
            pool = manager.pools[manager.group_of[lc]]
            for b in sorted(self._wanted(lc, capacity, history) - set(self.pages[lc]) - set(self.held_stale[lc])):
                self.pages[lc][b] = pool.take()
        return True

    # ------------------------------------------------------------------ upstream's API
    def resume(self, stream: Any = None) -> bool:
        if self.status is not CacheStatus.SUSPENDED:
            raise ValueError(f"resume: status is {self.status.name}")
        limit = self.manager.config.max_util_for_resume
        if any(u > limit for u in self.manager.utilization()):
            return False
        if "resume-needs-a-free-slot" in self.manager.bugs and any(p.available() == 0 for p in self.manager.pools):
            return False  # BUG: its own held pages counted against it
        if not self._allocate(self.capacity, self.history_length):
            return False
        self.status = CacheStatus.ACTIVE
        return True

    def resize(self, capacity: int, history_length: int | None = None) -> bool:
        if self.status is not CacheStatus.ACTIVE:
            raise ValueError(f"resize: status is {self.status.name}")
        history = self.history_length if history_length is None else history_length
        if history < self.history_length:
            raise ValueError(f"resize: history_length {history} below {self.history_length}")
        if capacity < history:
            raise ValueError(f"resize: capacity {capacity} below history_length {history}")
        if not self._allocate(capacity, history):
            if "no-rollback" in self.manager.bugs:
                self.capacity = capacity  # BUG: the failed call's capacity stands
            return False
        self.capacity, self.history_length = capacity, history
        for lc in range(len(self.manager.life_cycles)):
            self._retire_stale(lc, history)  # after the call: the same call's stale pages were held
        return True

    def commit(self, tokens: list) -> None:
        if self.status is not CacheStatus.ACTIVE:
            raise ValueError(f"commit: status is {self.status.name}")
        n = len(tokens)
        if self.history_length + n > self.capacity:
            raise ValueError(f"commit: {n} tokens past capacity {self.capacity} from history {self.history_length}")
        self.history_length += n
        self.committed = max(self.committed, self.history_length)
        for lc in range(len(self.manager.life_cycles)):
            self._retire_stale(lc, self.history_length)

    def suspend(self) -> None:
        if self.status is not CacheStatus.ACTIVE:
            raise ValueError(f"suspend: status is {self.status.name}")
        self.status = CacheStatus.SUSPENDED  # GPU memory only: nothing is freed

    def close(self) -> None:
        if self.status is CacheStatus.CLOSED:
            raise ValueError("close: already closed")
        for lc in range(len(self.manager.life_cycles)):
            pool = self.manager.pools[self.manager.group_of[lc]]
            for held in (self.pages[lc], self.held_stale[lc]):
                for b, slot in sorted(held.items()):
                    (pool.cache if self._committed_block(b) else pool.give_back)(slot)
                held.clear()
        self.status = CacheStatus.CLOSED

    def get_base_page_indices(self, life_cycle: int) -> list[int]:
        out = [-1] * cdiv(self.capacity, self.manager.t)
        for b, slot in self.pages[life_cycle].items():
            out[b] = slot
        return out


def module(bugs: Iterable[str] = ()) -> types.SimpleNamespace:
    """The fake as the namespace the adapter builds a manager from (upstream's package names)."""
    chosen = frozenset(bugs)
    return types.SimpleNamespace(
        BufferConfig=BufferConfig, AttentionLayerConfig=AttentionLayerConfig, SsmLayerConfig=SsmLayerConfig,
        GpuCacheTierConfig=GpuCacheTierConfig, HostCacheTierConfig=HostCacheTierConfig, KVCacheManagerConfig=KVCacheManagerConfig,
        KVCacheManager=lambda config: FakeKVCacheManager(config, chosen),
    )
