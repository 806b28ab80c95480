"""The reference manager: the core manager (:mod:`.core`, the rule) composed with the engine
behaviours the config's :class:`~.config.Semantics` names, one layer each:

- :mod:`.release`: tokens in flight, hold-until-return, lazy freeing, the eviction interval, the
  suspend modes, no first-resume copy;
- :mod:`.prefix_cache` and :mod:`.hits`: prefix sharing, freed blocks cached, hit rules, EAGLE, the
  alignment, the prompt tail;
- :mod:`.lookahead`: draft slots of speculative decoding;
- :mod:`.execution` (composed over a ``Manager``, not mixed into it): scheduling and execution as
  separate events, names revoked on a drop, lookups only on written KV.
- :mod:`.radix`: a radix tree's prompt lock and publication (SGLang's radix cache);
- :mod:`.refusal`: a refused resize keeping the blocks that left the window (LMDeploy);
- :mod:`.cadence`: when a window's eviction runs, by a clock of steps (SGLang's schedulers before 0.5.18);
- :mod:`.ring`: a sliding window kept as a fixed ring of blocks (transformers' continuous batching);
- :mod:`.preallocation`: a step that needs a block takes more past it (vLLM 0.8.3's pre-allocation);
- :mod:`.free_order`: where a request's release puts the freed blocks that keep nothing (vLLM 0.23.0);
- :mod:`.draft_return`: a commit giving back the slots past the committed tokens (SGLang's EAGLE worker v1).

Each layer does nothing while its options are off, so under the default semantics ``Manager`` is
the core. Values and observations (:class:`Outcome`, :class:`Snapshot`, :class:`SlotMap`, ranges)
live in :mod:`.values`. A seeded bug changes a behaviour through a named hook of the core (listed
in :mod:`.core`'s docstring) or a layer's (``cache_hits``, ``eagle_hit``, ``hit_alignment``,
``scheduled_end``, ``eviction_interval``, ``release_to_tail``, ``return_drafts``, ``clock_due``; the radix tree's ``lock_prompt``, ``names_now``, ``publish``).

Costs: a pool is a counter and a heap of returned slot ids (memory O(slots in use)); a step is planned
from the endpoints of block ranges (O(blocks that change), independent of ``W / t``), and a step that
changes no block is recognised from a per-request box without planning (:mod:`.steps`). ``check()``
recomputes everything from the formulas.
"""

from __future__ import annotations

from .cadence import ClockPolicy
from .config import ReleaseOrder
from .draft_return import DraftReturn
from .free_order import FreeOrder
from .lookahead import Lookahead
from .preallocation import Preallocation
from .radix import RadixTree
from .refusal import RefusalPolicy
from .ring import RingWindow
from .values import (BlockTable, Outcome, PoolSnapshot, RequestSnapshot, RequestState, Shortfall, SlotMap, Snapshot,
                     ranges_minus, ranges_of)

__all__ = [
    "ReleaseOrder",
    "RequestState",
    "Shortfall",
    "Outcome",
    "PoolSnapshot",
    "BlockTable",
    "RequestSnapshot",
    "Snapshot",
    "SlotMap",
    "Manager",
    "ranges_of",
    "ranges_minus",
]


class Manager(DraftReturn, RadixTree, Lookahead, RefusalPolicy, ClockPolicy, Preallocation, RingWindow, FreeOrder):
    """The executable spec of a paged KV-cache manager with sliding-window attention: the core with
    every layer, each following the config's semantics (``release_order`` overrides the semantics')."""
