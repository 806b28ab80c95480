"""TensorRT-LLM KVCacheManagerV2's order of schedule, write and free, for the driven execution data plane
(``python -m swafloor.fuzz.engines.dataplane.driven trtllm-v2``; issue 34).

The driver calls a V2 manager (the ``trtllm-v2`` adapter's objects: upstream's sources from
``$SWAFLOOR_TRTLLM_SOURCE``, or any namespace of upstream's names, such as the tests' fake) as its
scheduler and worker use it (facts: ../shared/facts/upstream.md §1.3, §10):

- a step is *scheduled*: ``kv.resize(capacity, history_length)`` with the history the request has
  committed (V2 advances history by ``commit``; a step in flight is not committed yet, so the blocks its
  queries read are not stale); False is out of slots, rolled back;
- the step *executes*: the worker reads ``kv.get_base_page_indices(life_cycle)`` now (-1: a block that
  holds no page: stale, or never allocated) and writes and reads position ``p`` at slot
  ``page * t + p % t`` of the life cycle's pool group; then ``kv.commit(tokens)`` finalizes them;
- a dropped step is an abort (``close``): V2's ``suspend`` keeps every page (GPU memory only), so a
  recomputing preemption is not V2's.

Seeded bug (the driver's hook ``commit-at-schedule``): the scheduler commits a step's tokens when it
schedules it, before the worker has written them. It fires when that commit makes a block stale that
holds a position the oldest in-flight query's live window still reads.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable

import attrs

from swafloor.reference import AttentionLayer, Config, build_layout, lifecycle

from ...protocol import Unsupported
from .v2 import SEMANTICS, SOURCE_ENV, TrtllmV2Backend, _page_indices

__all__ = ["TrtllmOrder", "driver", "driver_on", "draw_config", "PREEMPTS", "HOOKS"]

HOOKS = ("commit-at-schedule",)
#: V2 drops a step by an abort only (its suspend keeps every page).
PREEMPTS = False


def draw_config(rng: random.Random) -> Config:
    """An SWA layer (sinks sometimes), full attention sometimes, V2's semantics with ``k`` tokens in
    flight, ample pools."""
    t = rng.choice((1, 2, 4))
    layers = [AttentionLayer(rng.randint(1, 8), t * rng.choice((0, 0, 1)))]
    if rng.random() < 0.4:
        layers.append(AttentionLayer())
    sem = attrs.evolve(SEMANTICS, in_flight_tokens=rng.randint(0, 3))
    minimum = build_layout(Config(t, layers, semantics=sem)).slots
    return Config(t, layers, slots=tuple(3 * n + 8 for n in minimum), semantics=sem)


class TrtllmOrder:
    """A V2 manager driven in its scheduler's and worker's order (see the module)."""

    def __init__(self, config: Config, v2: Any, stream: Any = 0, hooks: tuple[str, ...] = ()):
        unknown = [h for h in hooks if h not in HOOKS]
        if unknown:
            raise ValueError(f"hooks: unknown {unknown[0]!r} (TensorRT-LLM's: {', '.join(HOOKS)})")
        self.hooks = set(hooks)
        self.backend = TrtllmV2Backend(config, v2, stream)
        self.layout = self.backend.layout
        self.t = self.layout.tokens_per_block
        self.scheduled: dict[str, int] = {}  # tokens committed at schedule (the seeded bug only)

    def _pages(self, rid: str, lc: int) -> list[int]:
        return [int(p) for p in _page_indices(self.backend.manager, self.backend.caches[rid], lc)]

    # ------------------------------------------------------------------ the scheduler
    def open(self, rid: str) -> bool:
        self.backend.create(rid)
        self.scheduled[rid] = 0
        return bool(self.backend.resume(rid))

    def resume(self, rid: str) -> bool:
        return bool(self.backend.resume(rid))

    def schedule(self, rid: str, start: int, end: int, capacity: int, oldest: int,
                 fire: Callable[[str, int, set], None]) -> bool:
        committed = self.backend.committed[rid]
        if not self.backend.resize(rid, capacity, committed):
            return False
        if "commit-at-schedule" in self.hooks:
            before = [self._pages(rid, lc) for lc in range(len(self.layout.life_cycles))]
            self.backend.commit(rid, end - committed)
            self.scheduled[rid] = end
            for lc, was in enumerate(before):
                window = self.layout.life_cycles[lc].window
                if window is None:
                    continue
                now = self._pages(rid, lc)
                kept_by_spec = max(0, lifecycle.window_start(oldest, window))
                taken = {p for b, page in enumerate(was) if page >= 0 and (b >= len(now) or now[b] < 0)
                         for p in range(b * self.t, (b + 1) * self.t) if p >= kept_by_spec}
                if taken:
                    fire(f"commit at schedule to {end} (the oldest token in flight is {oldest}) made stale the "
                         f"blocks of positions {sorted(taken)} of {rid!r}", lc, taken)
        return True

    def executed(self, rid: str, start: int, end: int) -> None:
        """The step's tokens are final: ``commit`` (already done at schedule under the seeded bug)."""
        committed = self.backend.committed[rid]
        if end > committed:
            self.backend.commit(rid, end - committed)

    def drop(self, rid: str, how: str) -> None:
        if how != "abort":
            raise Unsupported("trtllm-v2: a step is dropped by an abort only (suspend keeps every page)")
        self.backend.close(rid)

    def dispose(self) -> None:
        self.backend.dispose()

    # ------------------------------------------------------------------ the worker
    def locate_positions(self, rid: str, lc: int, positions: list[int]) -> list[tuple[int | None, bool, str]]:
        """Where the worker reads or writes each position now: ``(location, held, how)``."""
        kv = self.backend.caches[rid]
        if getattr(getattr(kv, "status", None), "name", "") == "CLOSED":
            return [(None, False, f"no page table (request {rid!r} closed)") for _ in positions]
        pages = self._pages(rid, lc)
        out = []
        for p in positions:
            b = p // self.t
            page = pages[b] if b < len(pages) else -1
            how = f"get_base_page_indices({lc})[{b}] = {page}"
            if page < 0:
                out.append((None, False, how + " (no page)"))
            else:
                out.append((page * self.t + p % self.t, True, f"{how}, slot {page} offset {p % self.t}"))
        return out


def driver_on(v2: Any, stream: Any = 0) -> Callable[..., TrtllmOrder]:
    """A driver factory over ``v2``, a namespace of upstream's names (the tests' fake manager)."""

    def make(config: Config, hooks: tuple[str, ...] = ()) -> TrtllmOrder:
        return TrtllmOrder(config, v2, stream, hooks)

    return make


def driver(config: Config, hooks: tuple[str, ...] = ()) -> TrtllmOrder:
    """The driver over the real upstream from ``$SWAFLOOR_TRTLLM_SOURCE`` (Unsupported without it)."""
    path = os.environ.get(SOURCE_ENV)
    if not path:
        raise Unsupported(f"trtllm-v2: needs a source folder (${SOURCE_ENV})")
    from .loader import LoadError  # noqa: PLC0415
    from .v2 import _load_real  # noqa: PLC0415

    try:
        v2, stream = _load_real(path)
    except LoadError as exc:
        raise Unsupported(f"trtllm-v2: {exc}") from None
    return TrtllmOrder(config, v2, stream, hooks)
