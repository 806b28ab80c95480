"""swafloor.reference: the executable spec of a paged KV-cache manager with sliding-window attention.

Every formula is written once, against the small arithmetic kernel in :mod:`.arith`, so that it
evaluates on Python ints (the manager) and on Z3 integer terms (the proofs) alike. This package
imports nothing else of swafloor's and never imports z3 at import time.
"""

from .arith import cdiv, fdiv, fmod, imax, imin, ite
from . import admission
from .errors import ConfigError, RequestError, SwafloorError
from .config import (
    AttentionLayer,
    Config,
    BelowMinimum,
    FreeStale,
    HitRule,
    Layout,
    Semantics,
    SuspendMode,
    SsmLayer,
    build_layout,
)
from .floors import (
    FloorRule,
    eviction_cursor,
    eviction_due,
    eviction_floor,
    first_floor_history,
    full_attention_floor,
    full_attention_max_capacity,
    in_flight_floor,
    legacy_floor,
    life_cycle_min_slots,
    step_floor,
    swa_floor,
    window_blocks,
    worst_case_history,
)
from .lifecycle import (
    LifeCycle,
    LifeCycleKind,
    allocated_blocks,
    live_blocks,
    blocks_touched,
    first_resume_peak,
    live_block_indices,
    partial_block,
    scratch_range,
    sink_blocks_for,
    stale_count,
    stale_range,
    range_overlap,
    resize_peak,
    transition_peak,
    window_span_blocks,
)
from .peers import (
    trtllm_cpp_blocks,
    upstream_swa_floor,
    upstream_window_term,
    vllm_blocks_per_request,
)
from .core import CoreManager
from .manager import (
    BlockTable,
    Manager,
    Outcome,
    ranges_minus,
    ranges_of,
    PoolSnapshot,
    ReleaseOrder,
    RequestSnapshot,
    SlotMap,
    RequestState,
    Shortfall,
    Snapshot,
)

__all__ = [name for name in dir() if not name.startswith("_")]
