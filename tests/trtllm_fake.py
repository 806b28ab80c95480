"""A tiny stand-in for TensorRT-LLM's kv_cache_manager_v2 folder, written for swafloor's tests.

Our own code with the same module names and the names ``swafloor check trtllm`` reads, so the
loader and the comparisons can be tested without upstream sources. ``write_fake`` writes it under a
folder; knobs plant a bug or choose the floor rule.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

COMMON = '''
import enum
from tensorrt_llm import envs
NDEBUG = envs.get_env("TLLM_KV_CACHE_MANAGER_V2_DEBUG")
GPU_LEVEL = 0
class CacheTier(enum.IntEnum):
    GPU_MEM = 0
'''

CONFIG = '''
from dataclasses import dataclass, field
@dataclass
class BufferConfig:
    role: str
    size: int
@dataclass
class AttentionLayerConfig:
    layer_id: int
    buffers: list
    sliding_window_size: int | None = None
    num_sink_tokens: int | None = None
@dataclass
class SsmLayerConfig:
    layer_id: int
    buffers: list
@dataclass(frozen=True)
class KVCacheDesc:
    capacity: int
    history_length: int
@dataclass(frozen=True)
class BatchDesc:
    kv_caches: list
    system_prompt_length: int = 0
@dataclass
class SwaScratchReuseConfig:
    max_rewind_len: int = 0
'''

EXCEPTIONS = '''
class OutOfPagesError(Exception):
    pass
'''

UTILS = '''
def ceil_div(a, b):
    return -(-a // b)
'''

REGISTRY = '''
from typing import NamedTuple
from ._config import SsmLayerConfig
from ._utils import ceil_div

class AttnLifeCycle(NamedTuple):
    window_size: int | None
    num_sink_blocks: int

    @staticmethod
    def make(window, sink_tokens, t):
        return AttnLifeCycle(window, ceil_div(sink_tokens or 0, t))

    def get_stale_range(self, h, t):
        lo = min(ceil_div(h, t), self.num_sink_blocks)
        if self.window_size is None:
            return (lo, lo)
        return (lo, max(lo, (h + INFLIGHT - self.window_size) // t))

class SsmLifeCycle(NamedTuple):
    pass

def make_life_cycle(layer, t):
    if isinstance(layer, SsmLayerConfig):
        return SsmLifeCycle()
    return AttnLifeCycle.make(layer.sliding_window_size, layer.num_sink_tokens, t)

class LifeCycleRegistry:
    def __init__(self, config):
        self._ids = {}
        for layer in config.layers:
            self._ids.setdefault(make_life_cycle(layer, config.tokens_per_block), len(self._ids))

    def get_id(self, lc):
        return self._ids[lc]

    def get(self):
        return list(self._ids)

def compute_scratch_range(lc, h, c, t, rewind):
    if not isinstance(lc, AttnLifeCycle) or lc.window_size is None:
        return (0, 0)
    lo, hi = lc.get_stale_range(max(0, c - rewind), t)
    return (max(lo, ceil_div(h, t)), min(hi, ceil_div(c, t)))
'''

STORAGE_MANAGER = '''
import math
from ._common import GPU_LEVEL
from ._exceptions import OutOfPagesError
from ._life_cycle_registry import AttnLifeCycle, SsmLifeCycle
from ._utils import ceil_div
from ._gpu_only import NeverCalled

class Stats:
    def __init__(self, total, free, evictable):
        self.total, self.free, self.evictable = total, free, evictable

class CacheLevelManager:
    pass

class StorageManager:
    def _compute_min_slots_from_constraints(self, constraints, t, reuse):
        out = [0] * len(self._slot_desc_list)
        lcs = self._life_cycles.get()
        def floor(lc):
            return lc.num_sink_blocks + ceil_div(lc.window_size - 1, t) + 1
        largest = max([floor(lc) for lc in lcs if isinstance(lc, AttnLifeCycle) and lc.window_size], default=1)
        for i, lc in enumerate(lcs):
            if not POST_FIX or isinstance(lc, SsmLifeCycle):
                share = 1
            elif lc.window_size is None:
                share = largest
            else:
                share = floor(lc)
            out[self._life_cycle_grouping[i]] += share
        for batch in constraints:
            need = self._compute_slots_for_batch(batch, t, reuse)
            out = [max(a, b) for a, b in zip(out, need)]
        return out

    def _compute_slots_for_batch(self, batch, t, reuse):
        out = [0] * len(self._slot_desc_list)
        sys_blocks = batch.system_prompt_length // t
        for i, lc in enumerate(self._life_cycles.get()):
            g = self._life_cycle_grouping[i]
            if isinstance(lc, SsmLifeCycle):
                out[g] += len(batch.kv_caches)
                continue
            shared = set()
            for kv in batch.kv_caches:
                lo, hi = lc.get_stale_range(kv.history_length, t)
                live = [b for b in range(ceil_div(kv.capacity, t)) if not lo <= b < hi]
                shared.update(b for b in live if b < sys_blocks)
                own = sum(1 for b in live if b >= sys_blocks)
                if reuse is not None and lc.window_size is not None:
                    from ._life_cycle_registry import compute_scratch_range
                    slo, shi = compute_scratch_range(lc, kv.history_length, kv.capacity, t, reuse.max_rewind_len)
                    n = max(0, shi - slo)
                    own += -n + math.ceil(n * self._slot_util_frac_max[i])
                out[g] += own
            out[g] += len(shared)
        return out

    def new_gpu_slots(self, counts):
        storage = self._levels[GPU_LEVEL].storage
        per_group = [0] * storage.num_pool_groups
        for i, n in enumerate(counts):
            per_group[self._life_cycle_grouping[i]] += n
        if any(n > storage.get_num_free_slots(g) for g, n in enumerate(per_group)):
            raise OutOfPagesError("out of slots")
        return [storage.allocate_multiple(self._life_cycle_grouping[i], n) for i, n in enumerate(counts)]

    def release_slot(self, lc, level, slot):
        self._levels[level].storage.release(self._life_cycle_grouping[lc], slot)

    def get_statistics(self, level=GPU_LEVEL):
        lvl = self._levels[level]
        return [Stats(pg.num_slots, pg.num_free_slots, lvl.controller.num_evictable_pages(g))
                for g, pg in enumerate(lvl.storage._pool_groups)]
'''

RAWREF = '''
class ref:
    def __init__(self, obj=None):
        self._obj = obj
        self.is_valid = obj is not None
    def __call__(self):
        return self._obj
    def __class_getitem__(cls, item):
        return cls
NULL = ref()
'''


def write_fake(root: Path, *, inflight: int = 1, post_fix: bool = True, omit: tuple[str, ...] = ()) -> Path:
    """Write the fake package as a checkout under ``root``; returns ``root``. ``inflight=0`` drops the
    in-flight token from the stale range (a deliberate bug); ``omit`` leaves files out."""
    folder = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True, exist_ok=True)
    files = {
        "_common.py": COMMON,
        "_config.py": CONFIG,
        "_exceptions.py": EXCEPTIONS,
        "_utils.py": UTILS,
        "_life_cycle_registry.py": REGISTRY.replace("INFLIGHT", str(inflight)),
        "_storage_manager.py": STORAGE_MANAGER.replace("POST_FIX", str(post_fix)),
        "rawref/__init__.py": RAWREF,
    }
    for name, text in files.items():
        if name not in omit:
            (folder / name).write_text(textwrap.dedent(text).lstrip())
    return root
