"""The data-plane backend: a wrapped backend's operations, then what an engine does with its tables.

After each operation that succeeds, the wrapper reads the slot tables (:mod:`.tables`), poisons slots
no request holds any more, writes the tokens the operation computed into the slots their blocks hold,
and computes the in-flight tokens of every active request through the tables, comparing them with
the same computation on dense copies (:mod:`.engine`). When a token is computed:

- ``resume``: blocks the resume newly holds are filled with the history they cover (an engine loads
  or recomputes them; blocks kept across the suspension keep their data), an SSM page gets the state
  after the history; then the in-flight tokens ``[h, c)`` are written;
- ``resize(c1, h1)`` from ``(c0, h0)``: tokens ``[min(h1, c0), c1)`` are written (in flight, and any
  history past the old capacity, computed in this step); the SSM state advances over ``[h0, h1)``;
- under prefix sharing, a request created on another's first ``k`` tokens has that request's data
  at those positions; a block its first resume finds in a slot another request holds (a cache hit)
  is read, never written, so a shared slot overwritten by a third request shows in the data;
- ``commit(k)``: nothing is written (those tokens were written while in flight); the SSM state
  advances over the ``k`` tokens, read from and stored to its slot.

A mismatch raises :class:`~swafloor.fuzz.compare.BackendCheckFailed`, a divergence on the field
``data[request][life cycle][token]`` whose message names the position read, its block, its slot, and
the request that last wrote that slot.
"""

from __future__ import annotations

from typing import Any

import attrs

from swafloor.reference import Config, LifeCycleKind, Outcome, RequestState, SuspendMode, build_layout

from ...protocol import BackendCheckFailed
from .engine import Engine, Row, Writer, request_seed
from .tables import SlotSource

__all__ = ["DataPlaneBackend"]


@attrs.define
class _Request:
    rseed: Any  # its data seed (segments of seeds for a request on another's prefix: see Engine.series)
    state: RequestState
    capacity: int
    history: int
    tables: list = attrs.Factory(list)  # per life cycle {block: slot}, as last read
    prefix: int = 0  # tokens of another request's prefix it was created on (prefix sharing)


class DataPlaneBackend:
    """Wraps ``inner``; ``engine`` holds the device tensors, ``slots`` reads the slot tables."""

    def __init__(self, inner: Any, config: Config, engine: Engine, slots: SlotSource, seed: int = 0):
        self.inner = inner
        self.engine = engine
        self.slots = slots
        self.seed = seed
        layout = build_layout(config)
        self.life_cycles = layout.life_cycles
        self.group_of = tuple(layout.pool_group_of)
        self.recompute = config.semantics.suspend is SuspendMode.RECOMPUTE
        self.requests: dict[str, _Request] = {}
        self.checks = 0  # batched checks run (one gather, one attention call each)
        self._passed: dict[str, tuple] = {}  # request id -> (capacity, history, tables) at its last check

    # ------------------------------------------------------------------ protocol
    def create(self, request_id: str, reused_history: int = 0, share_with: str | None = None) -> None:
        if share_with is None:
            self.inner.create(request_id, reused_history)
        else:
            self.inner.create(request_id, reused_history, share_with=share_with)
        n = len(self.life_cycles)
        own = request_seed(self.seed, request_id)
        rseed: Any = own
        if share_with is not None and reused_history > 0:
            # the first reused_history tokens are the source's: so is their data
            source = self.requests[share_with].rseed
            segments = source if isinstance(source, tuple) else ((None, source),)
            clipped = []
            for end, seed in segments:
                clipped.append((reused_history if end is None else min(end, reused_history), seed))
                if end is None or end >= reused_history:
                    break
            rseed = (*clipped, (None, own))
        self.requests[request_id] = _Request(rseed, RequestState.SUSPENDED, reused_history, reused_history, [{}] * n,
                                             prefix=reused_history if share_with is not None else 0)

    def resume(self, request_id: str) -> Outcome:
        outcome = self.inner.resume(request_id)
        if outcome.ok:
            req = self.requests[request_id]
            req.state = RequestState.ACTIVE
            before = req.tables
            self._sync()
            others = {(self.group_of[lc], s) for rid, other in self.requests.items() if rid != request_id
                      for lc, table in enumerate(other.tables) for s in table.values()}
            t = self.engine.t
            for lc, table in enumerate(req.tables):
                # a whole block of its shared prefix in a slot another request holds is a cache hit: its
                # data is read, never written (any other block is written, shared or not)
                new = {b for b, s in table.items() if before[lc].get(b) != s
                       and not ((b + 1) * t <= req.prefix and (self.group_of[lc], s) in others)}
                if not new:
                    continue
                if self.life_cycles[lc].kind is LifeCycleKind.SSM:
                    self.engine.store_state(request_id, req.rseed, lc, table.get(0), req.history, "loaded")
                else:
                    self.engine.write(request_id, req.rseed, lc, table, 0, req.history, "loaded", blocks=new)
            self._write(request_id, req.history, req.capacity)
            self._check()
        return outcome

    def resize(self, request_id: str, capacity: int, history: int) -> Outcome:
        req = self.requests.get(request_id)
        c0, h0 = (req.capacity, req.history) if req is not None else (0, 0)
        outcome = self.inner.resize(request_id, capacity, history)
        if outcome.ok:
            req.capacity, req.history = capacity, history
            self._sync()
            self._advance_states(request_id, h0, history)
            self._write(request_id, min(history, c0), capacity)
            self._check()
        return outcome

    def commit(self, request_id: str, tokens: int) -> None:
        self.inner.commit(request_id, tokens)
        req = self.requests[request_id]
        h0 = req.history
        req.history += tokens
        self._sync()
        self._advance_states(request_id, h0, req.history)  # read at the next resize's check

    def suspend(self, request_id: str) -> None:
        self.inner.suspend(request_id)
        req = self.requests[request_id]
        req.state = RequestState.SUSPENDED
        if self.recompute:
            req.capacity = req.history = 0
        self._sync()

    def close(self, request_id: str) -> None:
        self.inner.close(request_id)
        self.requests[request_id].state = RequestState.CLOSED
        self._sync()

    def observe(self):
        return self.inner.observe()

    def slot_tables(self) -> dict:
        """The wrapped backend's slot tables (so a data plane can wrap a data plane)."""
        return {rid: [dict(t) for t in r.tables] for rid, r in self.requests.items() if r.state is not RequestState.CLOSED}

    # ------------------------------------------------------------------ internals
    def _sync(self) -> None:
        """Read every request's slot tables; check slot ids; poison slots no request holds any more."""
        shown = self.slots.read()
        before: dict[tuple[int, int], Writer] = {}  # slot -> who held it until now
        for rid, req in self.requests.items():
            for lc, table in enumerate(req.tables):
                for b, s in table.items():
                    before.setdefault((self.group_of[lc], s), Writer(rid, lc, b, "released"))
        held: set[tuple[int, int]] = set()
        n = len(self.life_cycles)
        for rid, req in self.requests.items():
            tables = shown.get(rid) if req.state is not RequestState.CLOSED else None
            req.tables = [dict(t) for t in tables] if tables is not None else [{} for _ in range(n)]
            for lc, table in enumerate(req.tables):
                g = self.group_of[lc]
                for b, s in table.items():
                    if not isinstance(s, int) or not 0 <= s < self.engine.totals[g]:
                        raise BackendCheckFailed(
                            f"slot_tables[{rid}][{lc}][{b}]",
                            f"request {rid!r}, life cycle {lc}: block {b} holds slot {s!r}, outside pool group "
                            f"{g}'s {self.engine.totals[g]} slots",
                        )
                    held.add((g, s))
        freed = sorted(set(before) - held)
        if freed:
            self.engine.poison(freed, [before[key] for key in freed])

    def _write(self, request_id: str, lo: int, hi: int) -> None:
        req = self.requests[request_id]
        for lc, table in enumerate(req.tables):
            if self.life_cycles[lc].kind is not LifeCycleKind.SSM:
                self.engine.write(request_id, req.rseed, lc, table, lo, hi, "wrote")

    def _advance_states(self, request_id: str, h0: int, h1: int) -> None:
        if h1 <= h0:
            return
        req = self.requests[request_id]
        for lc, table in enumerate(req.tables):
            if self.life_cycles[lc].kind is LifeCycleKind.SSM:
                self.engine.advance_state(request_id, lc, req.rseed, table.get(0), h0, h1)

    def _check(self) -> None:
        """Check every active request with tokens in flight, except one whose lengths, tables and
        slots are all as they were when it last passed (its outputs would be the same)."""
        touched = self.engine.touched
        if touched:  # a request holding a slot written or poisoned since then must be checked again
            for rid, req in self.requests.items():
                if rid in self._passed and any(
                    (self.group_of[lc], s) in touched for lc, table in enumerate(req.tables) for s in table.values()
                ):
                    del self._passed[rid]
        rows, passed = [], {}
        for rid, req in self.requests.items():
            if req.state is not RequestState.ACTIVE or req.capacity <= req.history:
                continue
            state = (req.capacity, req.history, req.tables)
            if self._passed.get(rid) == state:
                continue
            passed[rid] = (req.capacity, req.history, [dict(t) for t in req.tables])
            rows += [Row(rid, req.rseed, lc, table, req.history, req.capacity) for lc, table in enumerate(req.tables)]
        if not rows:
            touched.clear()
            return
        self.checks += 1
        found = self.engine.check(rows)
        if found is not None:
            raise BackendCheckFailed(found.field, found.message)
        self._passed.update(passed)
        touched.clear()
