"""SGLang's order of schedule, write and free, for the driven execution data plane
(``python -m swafloor.fuzz.engines.dataplane.driven sglang``; issue 34).

The driver calls SGLang's own SWA allocator (the ``sglang`` backend's objects: a
``SWATokenToKVPoolAllocator`` per SWA life cycle, the request's ``ReqToTokenPool`` row) as SGLang's
scheduler and worker use it:

- a batch is *scheduled*: ``free_swa_out_of_window_slots`` first (eviction every token; ``sglang-lazy``: the
  release's interval rule, with the step's counters where that is the scheduler's clock, :mod:`.cadence`), from the first
  token of the request not yet computed: the oldest token of a step still in flight (what SGLang's
  overlap scheduler keeps: it evicts nothing while the previous batch runs, and an extend batch scheduled
  behind a running chunk evicts from ``pre_len - chunked_prefill_size``), then ``alloc_extend`` /
  ``alloc_decode`` (or ``alloc``) for the new tokens, written into the request's ``req_to_token`` row;
- the batch's *forward* (the plane's execute) translates each position as SGLang's attention backends do
  at that time: ``req_to_token[row][p]`` gives the full pool's token index, and, for an SWA layer,
  ``full_to_swa_index_mapping`` of that index the SWA pool's (0: SGLang's padding slot). A location is
  held when its page is not free in its sub-allocator (and, for SWA, the mapping is not 0);
- a retraction frees the row (preempt: recompute from token 0); an abort finishes the request.

Seeded bug (the driver's hook ``evict-from-step-start``): eviction from the new step's first token,
not the oldest one in flight (the overlap guard dropped). It fires when that eviction frees an SWA slot
holding a position the oldest in-flight query's live window still reads.

Runs in the SGLang venv (``scripts/sglang-venv``); SGLang is imported when a driver is built.
"""

from __future__ import annotations

import random
from typing import Callable

import attrs

from swafloor.reference import AttentionLayer, Config, Semantics, build_layout, lifecycle

from ...protocol import Unsupported
from .backend import DEFAULT_EVICTION_INTERVAL, MAX_CONTEXT, SglangBackend, semantics

__all__ = ["SglangOrder", "driver", "driver_lazy", "draw_config", "PREEMPTS", "HOOKS"]

#: The driver's seeded-bug hooks.
HOOKS = ("evict-from-step-start",)
#: SGLang retracts (preempts, recomputing) as well as aborts.
PREEMPTS = True


def draw_config(rng: random.Random) -> Config:
    """An SWA layer (SGLang keeps no sinks), full attention sometimes, SGLang's semantics with ``k``
    tokens in flight, ample pools (slots are still reused: requests finish and are retracted)."""
    t = rng.choice((1, 2, 4))
    layers = [AttentionLayer(rng.randint(2, 8))]
    if rng.random() < 0.4:
        layers.append(AttentionLayer())
    sem: Semantics = attrs.evolve(semantics(1), in_flight_tokens=rng.randint(0, 3))
    minimum = build_layout(Config(t, layers, semantics=sem)).slots
    return Config(t, layers, slots=tuple(3 * n + 8 for n in minimum), semantics=sem)


class SglangOrder:
    """SGLang's allocator driven in its scheduler's and worker's order (see the module)."""

    def __init__(self, config: Config, hooks: tuple[str, ...] = (), eviction_interval: int = 1):
        unknown = [h for h in hooks if h not in HOOKS]
        if unknown:
            raise ValueError(f"hooks: unknown {unknown[0]!r} (SGLang's: {', '.join(HOOKS)})")
        self.hooks = set(hooks)
        self.backend = SglangBackend(config, eviction_interval=eviction_interval)
        self.layout = self.backend.layout
        self.t = self.layout.tokens_per_block
        self.side: dict[int, tuple[int, str]] = {}  # life cycle -> (allocator, "swa" or "full")
        for a, (swa_lc, full_lc) in enumerate(self.backend.pairs):
            if swa_lc is not None:
                self.side[swa_lc] = (a, "swa")
            if full_lc is not None:
                self.side[full_lc] = (a, "full")

    # ------------------------------------------------------------------ the scheduler
    def open(self, rid: str) -> bool:
        self.backend.create(rid)
        return bool(self.backend.resume(rid))

    def resume(self, rid: str) -> bool:
        return bool(self.backend.resume(rid))

    def schedule(self, rid: str, start: int, end: int, capacity: int, oldest: int,
                 fire: Callable[[str, int, set], None]) -> bool:
        req = self.backend.requests[rid]
        pre_len = start if "evict-from-step-start" in self.hooks else oldest
        before = {lc: self._swa_held(rid, lc) for lc, (_, side) in self.side.items() if side == "swa"}
        decode = capacity == start + 1 and start >= 1  # one token past a computed history (reference.cadence)
        forward = capacity > req.allocated  # new tokens: a batch runs
        if forward or not self.backend._evictor.clocked:
            self.backend._evict(req, pre_len, decode)
        if pre_len != oldest:
            for lc, was in before.items():
                window = self.layout.life_cycles[lc].window
                kept_by_spec = max(0, lifecycle.window_start(oldest, window))
                taken = {p for p in was - self._swa_held(rid, lc) if p >= kept_by_spec}
                if taken:
                    fire(f"eviction from {pre_len} (the oldest token in flight is {oldest}) freed the SWA slots of "
                         f"positions {sorted(taken)} of {rid!r}", lc, taken)
        if capacity > MAX_CONTEXT:  # as the sglang backend: past the adapter's row, not SGLang's refusal
            raise Unsupported(f"capacity {capacity} above the adapter's row length {MAX_CONTEXT}")
        ok = capacity <= req.allocated or bool(self.backend._allocate(req, capacity))
        if ok and forward:
            self.backend._forward(req, decode)
        return ok

    def executed(self, rid: str, start: int, end: int) -> None:
        """Nothing: SGLang's row already says where the KV went."""

    def drop(self, rid: str, how: str) -> None:
        if how == "preempt":
            self.backend.suspend(rid)
        else:
            self.backend.close(rid)

    def dispose(self) -> None:
        """Nothing to release: the allocators are reset by the next driver that takes them."""

    # ------------------------------------------------------------------ the worker
    def _swa_held(self, rid: str, lc: int) -> set[int]:
        req = self.backend.requests[rid]
        a, _ = self.side[lc]
        if not req.allocated:
            return set()
        row = self.backend._row(a, req)[: req.allocated]
        swa = self.backend.allocators[a].full_to_swa_index_mapping[row.long()].tolist()
        return {p for p, i in enumerate(swa) if i > 0}

    def locate_positions(self, rid: str, lc: int, positions: list[int]) -> list[tuple[int | None, bool, str]]:
        """Where the worker reads or writes each position now: ``(location, held, how)``."""
        req = self.backend.requests[rid]
        a, side = self.side[lc]
        P = self.t
        if req.kvs[a].req_pool_idx is None:
            return [(None, False, f"no req_to_token row (request {rid!r} finished)") for _ in positions]
        row_id = req.kvs[a].req_pool_idx
        row = self.backend._row(a, req)
        alloc = self.backend.allocators[a]
        sub = alloc.swa_attn_allocator if side == "swa" else alloc.full_attn_allocator
        free = set(self.backend._free_pages(sub, P))
        mapping = alloc.full_to_swa_index_mapping
        out = []
        for p in positions:
            full = int(row[p])
            how = f"req_to_token[{row_id}][{p}] = {full}"
            past = p >= req.allocated
            if past:
                how += f" (past the {req.allocated} tokens allocated)"
            if side == "full":
                out.append((full, not past and full > 0 and full // P not in free, f"{how}, full pool token {full}"))
                continue
            swa = int(mapping[full]) if 0 <= full < len(mapping) else 0
            how += f" -> full_to_swa_index_mapping[{full}] = {swa}" + (" (the padding slot)" if swa == 0 else "")
            out.append((swa, not past and swa > 0 and swa // P not in free, f"{how}, SWA pool token {swa}"))
        return out


def driver(config: Config, hooks: tuple[str, ...] = ()) -> SglangOrder:
    """The driver the plane builds for one example (``sglang``: eviction every token)."""
    return SglangOrder(config, hooks)


def driver_lazy(config: Config, hooks: tuple[str, ...] = ()) -> SglangOrder:
    """``sglang-lazy``'s driver: eviction at SGLang's default interval (``dataplane:sglang-lazy``)."""
    return SglangOrder(config, hooks, DEFAULT_EVICTION_INTERVAL)
