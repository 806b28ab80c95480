"""A tiny stand-in for TensorRT-LLM's kv_cache_manager_v2 folder, written for swafloor's tests.

Our own code, written from upstream's documented behaviour (/work/shared/facts/upstream.md, §1: the
floor as upstream writes it, ``S + (W + t - 2) // t + 1``; the stale range
``[min(div_up(h, t), S), max(start, (h + 1 - W) // t))``; scratch blocks
``stale(max(0, c - rewind)) ∩ [div_up(h, t), div_up(c, t))``, left unclamped; a request's live blocks
``div_up(c, t) - |stale(h)|``, a shared system prompt's blocks held once per batch), with the module,
class and function names ``swafloor check trtllm`` loads. It imports nothing of swafloor: its
arithmetic is interval arithmetic, not the reference's block-by-block rules, so the check is not
tested against itself.

``write_fake(root, bugs=...)`` writes it as a checkout under ``root``; each name in :data:`BUGS`
plants one upstream bug; ``post_fix=False`` gives the pre-fix rule (1 slot per life cycle), which is
self-consistent, not a bug.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

#: Planted upstream bugs: name -> what it does.
BUGS = {
    "floor_without_plus_one": "SWA floor S + ceil((W-1)/t), the +1 the fix added missing",
    "ssm_floor_zero": "SSM life cycles get 0 slots in the floor",
    "full_at_one": "full attention gets 1 slot instead of the largest SWA floor",
    "sinks_ignored": "the SWA floor leaves out the sink blocks",
    "stale_one_token_early": "the stale range ends one token early: (h + 2 - W) // t",
    "stale_one_token_late": "the stale range forgets the in-flight token: (h - W) // t",
    "stale_end_off_by_one_block": "the stale range ends one block late: (h + 1 - W) // t + 1",
    "floor_division_floor": "the SWA floor uses floor division: S + (W - 1) // t + 1",
    "loose_floor": "the SWA floor is the looser S + ceil(W/t) + 1 (upstream's own tests cannot tell)",
    "system_prompt_per_request": "batch sizing counts the shared system-prompt blocks once per request",
    "scratch_includes_history": "scratch blocks are not cut at the history: computed blocks lose their pages",
    "assert_in_upstream": "an assert inside _compute_slots_for_batch fails for batches of 3 requests",
    "no_out_of_slots_check": "new_gpu_slots allocates without checking free slots (the stand-in storage refuses)",
    "release_leaks": "release_slot does not return the slot to the pool",
    "inconsistent_source": "_life_cycle_registry.py reads layer.cache_domain; _config.py defines none",
    "stand_in_called_wrongly": "new_gpu_slots calls the storage's allocate_multiple without its pool group",
}

COMMON = '''
import enum
from tensorrt_llm import envs
NDEBUG = envs.get_env("TLLM_KV_CACHE_MANAGER_V2_DEBUG")
GPU_LEVEL = 0
class CacheTier(enum.IntEnum):
    GPU_MEM = 0
'''

CONFIG = '''
from dataclasses import dataclass
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
    CACHE_DOMAIN_FIELD
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
def div_up(x, y):
    return (x + y - 1) // y
'''

REGISTRY = '''
from typing import NamedTuple
from ._config import SsmLayerConfig
from ._utils import div_up

class AttnLifeCycle(NamedTuple):
    window_size: int | None
    num_sink_blocks: int
    cache_domain: int = 0

    @staticmethod
    def make(window, sink_tokens, t, cache_domain=0):
        return AttnLifeCycle(window, div_up(sink_tokens or 0, t), cache_domain)

    def get_stale_range(self, h, t):
        start = min(div_up(h, t), self.num_sink_blocks)
        if self.window_size is None:
            return (start, start)
        return (start, max(start, STALE_END))

class SsmLifeCycle(NamedTuple):
    pass

def make_life_cycle(layer, t):
    if isinstance(layer, SsmLayerConfig):
        return SsmLifeCycle()
    return AttnLifeCycle.make(layer.sliding_window_size, layer.num_sink_tokens, t, layer.cache_domain)

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
    return (SCRATCH_START, min(hi, div_up(c, t)))
'''

STORAGE_MANAGER = '''
from ._common import GPU_LEVEL
from ._exceptions import OutOfPagesError
from ._life_cycle_registry import AttnLifeCycle, SsmLifeCycle, compute_scratch_range
from ._utils import div_up
from ._gpu_only import NeverCalled

class Stats:
    def __init__(self, total, free, evictable):
        self.total, self.free, self.evictable = total, free, evictable

class CacheLevelManager:
    pass

class StorageManager:
    def _compute_min_slots_from_constraints(self, constraints, t, reuse):
        lcs = self._life_cycles.get()
        def swa_floor(lc):
            W, S = lc.window_size, SINKS
            return SWA_FLOOR
        windowed = [swa_floor(lc) for lc in lcs if isinstance(lc, AttnLifeCycle) and lc.window_size is not None]
        out = [0] * len(self._slot_desc_list)
        for i, lc in enumerate(lcs):
            if not POST_FIX:
                share = 1
            elif isinstance(lc, SsmLifeCycle):
                share = SSM_FLOOR
            elif lc.window_size is None:
                share = FULL_FLOOR
            else:
                share = swa_floor(lc)
            out[self._life_cycle_grouping[i]] += share
        for batch in constraints:
            out = [max(a, b) for a, b in zip(out, self._compute_slots_for_batch(batch, t, reuse))]
        return out

    def _compute_slots_for_batch(self, batch, t, reuse):
        ASSERT_BATCH
        out = [0] * len(self._slot_desc_list)
        prefix = batch.system_prompt_length // t  # whole blocks of the shared system prompt
        for i, lc in enumerate(self._life_cycles.get()):
            g = self._life_cycle_grouping[i]
            if isinstance(lc, SsmLifeCycle):
                out[g] += len(batch.kv_caches)  # one state page per request
                continue
            common_lo, common_hi = 0, prefix  # prefix blocks stale for every request
            for kv in batch.kv_caches:
                lo, hi = lc.get_stale_range(kv.history_length, t)
                stale = max(0, hi - lo)
                stale_in_prefix = max(0, min(hi, prefix) - lo)
                own = div_up(kv.capacity, t) - stale - (prefix - stale_in_prefix)
                if reuse is not None and lc.window_size is not None:
                    slo, shi = compute_scratch_range(lc, kv.history_length, kv.capacity, t, reuse.max_rewind_len)
                    n = max(0, shi - slo)
                    frac = self._slot_util_frac_max[i]
                    own += -n + -(-n * frac.numerator // frac.denominator)
                out[g] += own
                common_lo, common_hi = max(common_lo, lo), min(common_hi, hi)
                PER_REQUEST_PREFIX
            SHARED_PREFIX
        return out

    def new_gpu_slots(self, counts):
        storage = self._levels[GPU_LEVEL].storage
        per_group = [0] * storage.num_pool_groups
        for i, n in enumerate(counts):
            per_group[self._life_cycle_grouping[i]] += n
        if CHECK_FREE and any(n > storage.get_num_free_slots(g) for g, n in enumerate(per_group)):
            raise OutOfPagesError("out of slots")
        return [storage.allocate_multiple(ALLOCATE_ARGS) for i, n in enumerate(counts)]

    def release_slot(self, lc, level, slot):
        if RELEASES:
            self._levels[level].storage.release(self._life_cycle_grouping[lc], slot)

    def get_statistics(self, level=GPU_LEVEL):
        lvl = self._levels[level]
        return [Stats(lvl.storage.num_slots(g), lvl.storage.get_num_free_slots(g), lvl.controller.num_evictable_pages(g))
                for g in range(lvl.storage.num_pool_groups)]
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


def _knobs(bugs: set[str], post_fix: bool) -> dict[str, str]:
    swa = "S + (W + t - 2) // t + 1"  # upstream's spelling of S + div_up(W - 1, t) + 1
    if "floor_without_plus_one" in bugs:
        swa = "S + (W + t - 2) // t"
    if "floor_division_floor" in bugs:
        swa = "S + (W - 1) // t + 1"
    if "loose_floor" in bugs:
        swa = "S + div_up(W, t) + 1"
    stale_end = "(h + 1 - self.window_size) // t"
    if "stale_one_token_early" in bugs:
        stale_end = "(h + 2 - self.window_size) // t"
    if "stale_one_token_late" in bugs:
        stale_end = "(h - self.window_size) // t"
    if "stale_end_off_by_one_block" in bugs:
        stale_end = "(h + 1 - self.window_size) // t + 1"
    per_request = "own += prefix - max(0, min(hi, prefix) - lo)" if "system_prompt_per_request" in bugs else "pass"
    shared = "pass" if "system_prompt_per_request" in bugs else "out[g] += prefix - max(0, common_hi - common_lo)"
    return {
        "CACHE_DOMAIN_FIELD": "pass" if "inconsistent_source" in bugs else "cache_domain: int = 0",
        "STALE_END": stale_end,
        "SCRATCH_START": "lo" if "scratch_includes_history" in bugs else "max(lo, div_up(h, t))",
        "SWA_FLOOR": swa,
        "SINKS": "0" if "sinks_ignored" in bugs else "lc.num_sink_blocks",
        "SSM_FLOOR": "0" if "ssm_floor_zero" in bugs else "1",
        "FULL_FLOOR": "1" if "full_at_one" in bugs else "max([1] + windowed)",
        "POST_FIX": str(post_fix),
        "ASSERT_BATCH": ('assert len(batch.kv_caches) <= 2, "at most two requests per described batch"'
                         if "assert_in_upstream" in bugs else "pass"),
        "PER_REQUEST_PREFIX": per_request,
        "SHARED_PREFIX": shared,
        "CHECK_FREE": "False" if "no_out_of_slots_check" in bugs else "True",
        "RELEASES": "False" if "release_leaks" in bugs else "True",
        "ALLOCATE_ARGS": "n" if "stand_in_called_wrongly" in bugs else "self._life_cycle_grouping[i], n",
    }


def write_fake(root: Path, *, bugs: tuple[str, ...] = (), post_fix: bool = True, omit: tuple[str, ...] = ()) -> Path:
    """Write the fake package as a checkout under ``root``; returns ``root``. ``bugs``: names from
    :data:`BUGS`; ``omit`` leaves files out."""
    unknown = set(bugs) - set(BUGS)
    if unknown:
        raise ValueError(f"unknown planted bugs {sorted(unknown)}")
    knobs = _knobs(set(bugs), post_fix)
    folder = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True, exist_ok=True)
    files = {
        "_common.py": COMMON,
        "_config.py": CONFIG,
        "_exceptions.py": EXCEPTIONS,
        "_utils.py": UTILS,
        "_life_cycle_registry.py": REGISTRY,
        "_storage_manager.py": STORAGE_MANAGER,
        "rawref/__init__.py": RAWREF,
    }
    for name, text in files.items():
        for knob, value in knobs.items():
            text = text.replace(knob, value)
        if name not in omit:
            (folder / name).write_text(textwrap.dedent(text).lstrip())
    return root
