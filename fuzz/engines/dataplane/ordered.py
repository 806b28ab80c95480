"""``dataplane:NAME`` in the wrapped engine's own order of events (issue 34).

A backend whose room declares an :class:`~swafloor.fuzz.protocol.EventOrder` (vLLM's prefix-caching
backends: :mod:`swafloor.fuzz.engines.vllm.order`) is wrapped here rather than by the torch wrapper,
which writes every token when it is allocated. Every operation goes to the wrapped backend first, in
the engine's order, and is compared with the reference as the wrapped backend is (its capabilities,
unchanged); beside it this plane does what the engine's worker does:

- *schedule*: a ``resize`` that allocates (the engine's scheduler: its allocation, and any hash
  registration, happen inside the wrapped backend's call) is a step of the tokens ``[history,
  capacity - drafts)`` and ``drafts`` lookahead slots after them; the worker appends the block ids
  the scheduler handed out (``handed_out``: vLLM's own returned blocks) to its own table of the
  request, never shrunk (:class:`~.tables.WorkerTable` semantics: a block index it was never sent is
  padding). A ``resume`` that allocates is a request newly scheduled: its table is the ids handed out,
  and the history its hit did not cover is loaded (a KV connector writes it) when the step executes;
- *execute*: when the request's history next advances (``commit``, or a ``resize`` to a later history:
  its output returned), every step scheduled up to the request's last executes, in scheduling order;
  also the oldest when more than ``steps_in_flight`` steps would be in flight. A step writes its tokens'
  KV (and its drafter the lookahead positions') through the worker's table into a ledger of who wrote
  each slot position (:class:`~.tables.Written`), then each of its queries reads its whole window through
  the worker's table, masked from the reference's live window
  (:func:`swafloor.reference.execution.mask_start`, through the ``mask_start`` hook of
  :class:`~swafloor.reference.hooks.ExecutionHooks`: a worker's seeded bug replaces it);
- *verify*: when the history returned covers draft positions of the request's last executed step (the
  drafts were accepted), the target model writes their KV and reads their windows in a step of their own,
  before the request's next schedule: vLLM counts a draft as computed only once a later step scheduled it
  as a spec token and verified it (the drafter's KV is never read as the target's);
- *drop*: a ``close`` (when the order's ``close_drops``) or a ``suspend`` (``suspend_drops``) of a request
  with steps in flight drops them (its first step since it started only when ``first_step_drops``; one
  that is not dropped executes first): they never execute, and the worker forgets the request.

A wrong write or read is a :class:`~swafloor.fuzz.protocol.BackendCheckFailed` at the operation it happens
in, its field naming what is wrong (so each is a divergence class of its own, :mod:`swafloor.fuzz.classes`):
``write-padding[request][life cycle][position]`` / ``write-stale-id[...]`` for a write through padding or
through an id the backend does not hold for that block, ``write-shared[...]`` for a drafter's write into a
block another request holds too (a hit's block, which that request reads); ``read-KIND[...]`` for a read ``outside-window``,
inside it but ``masked`` out, through ``padding`` or a ``stale-id``, of an ``unwritten`` slot position, or of
an ``other-token`` than the one at that position of the reader's content (a hit's tokens are its source's
content); the first that applies names it, the message lists all. The message
names the step, the slot, the reader and the writer. Nothing here is torch: the data is bookkeeping, so the
device does not enter (``--device`` is accepted and ignored).
"""

from __future__ import annotations

from typing import Any, Hashable

import attrs

from swafloor.reference import Config, LifeCycleKind, Outcome, build_layout, lifecycle
from swafloor.reference import execution
from swafloor.reference.hooks import ExecutionHooks

from ...protocol import BackendCheckFailed, BackendRecord, EventOrder, Part, Unsupported, parts_of, slots_of
from .tables import Written

__all__ = ["OrderedPlane", "wrap_ordered", "worker_hooks"]

#: The worker's hooks every new plane takes (the spec's formulas: a plant of the worker replaces this
#: module attribute by hooks with one behaviour replaced, tests/vllm_plants.py).
worker_hooks = ExecutionHooks()
#: The order every new plane follows instead of the one its engine declares (None: the declared one): a
#: plant of the engine's scheduling replaces it (tests/vllm_plants.py), never the declaration.
planted_order: EventOrder | None = None


@attrs.define
class _Step:
    number: int
    request: Hashable
    start: int
    end: int
    drafts: int
    loads: tuple[int, int] = (0, 0)  # positions a connector loads before the step runs
    droppable: bool = True  # whether a drop of its request drops it (else it executes first)
    first: bool = False  # its request's first step since it started


@attrs.define
class _Request:
    history: int = 0
    capacity: int = 0
    source: Hashable | None = None  # whose content its first `reused` tokens are
    reused: int = 0
    rows: list | None = None  # the worker's table: per life cycle, block index -> id (None: no id)
    scheduled: bool = False  # whether a step was scheduled since it (re)started (its next is not its first)
    drafted: tuple[int, int] = (0, 0)  # the draft positions of its last step that executed (none verified yet)


class OrderedPlane:
    """Wraps ``inner`` (see the module): its operations in ``order``, a worker beside it."""

    def __init__(self, inner: Any, config: Config, order: EventOrder, hooks: ExecutionHooks | None = None):
        layout = build_layout(config)
        if any(lc.kind is LifeCycleKind.SSM for lc in layout.life_cycles):
            raise Unsupported("ordered data plane: SSM life cycles are not modelled")
        if layout.mixed_block_sizes:
            raise Unsupported("ordered data plane: one block size (the config's t) only")
        self.inner = inner
        self.order = order
        self.hooks = worker_hooks if hooks is None else hooks
        self.t = layout.tokens_per_block
        self.life_cycles = layout.life_cycles
        self.requests: dict[Hashable, _Request] = {}
        self.queue: list[_Step] = []
        self.ledger: dict[tuple[int, int], list[Written | None]] = {}  # (life cycle, slot id) -> per offset
        self._others: dict = {}  # during a step's execution: (life cycle, id) -> the other requests holding it
        self.steps = 0
        self.ops = 0  # protocol operations called (the index of the current one is ops - 1)
        #: step number -> the index of the operation that scheduled it, and of the one it executed in
        self.scheduled_at: dict[int, int] = {}
        self.executed_at: dict[int, int] = {}
        #: (operation index, step number, whether its request's first step) of each step dropped
        self.dropped: list[tuple[int, int, bool]] = []

    # ------------------------------------------------------------------ protocol
    def create(self, request_id: Hashable, reused_history: int = 0, share_with: Hashable | None = None) -> None:
        self.ops += 1
        if share_with is None:
            self.inner.create(request_id, reused_history)
        else:
            self.inner.create(request_id, reused_history, share_with=share_with)
        self.requests[request_id] = _Request(reused_history, reused_history,
                                             share_with if reused_history else None, reused_history)

    def resume(self, request_id: Hashable) -> Outcome:
        self.ops += 1
        outcome = self.inner.resume(request_id)
        req = self.requests[request_id]
        handed = self.inner.handed_out(request_id)
        if outcome.ok and handed is not None:
            req.rows = [dict() for _ in self.life_cycles]
            self._append(req, handed)
            hit = getattr(self.inner, "hit_tokens", lambda rid: None)(request_id) or 0
            hit = min(hit, req.history)
            drafts = self.inner.step_drafts(request_id)
            self._schedule(request_id, req.history, req.capacity - drafts, drafts, loads=(hit, req.history))
        return outcome

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        self.ops += 1
        req = self.requests.get(request_id)
        if req is not None:
            # A request's next step is scheduled only after its last one ran (synchronous rounds), whether
            # or not that step advanced the history: a first step that only loads (a connector writing the
            # reused history past the hit) computes no token, yet runs before the schedule that frees what
            # it loaded and left the window.
            self._execute_through(request_id)
            if history > req.history:  # the request's output returned: drafts it covers were accepted
                self._verify(request_id, history)
        outcome = self.inner.resize(request_id, capacity, history)
        if req is None or not outcome.ok:
            return outcome
        req.history = max(req.history, history)
        req.capacity = capacity
        handed = self.inner.handed_out(request_id)
        if handed is not None and capacity > req.history:
            if req.rows is None:
                req.rows = [dict() for _ in self.life_cycles]
            self._append(req, handed)
            drafts = self.inner.step_drafts(request_id)
            self._schedule(request_id, req.history, capacity - drafts, drafts)
        return outcome

    def commit(self, request_id: Hashable, tokens: int) -> None:
        self.ops += 1
        self.inner.commit(request_id, tokens)
        req = self.requests.get(request_id)
        if req is not None and tokens > 0:
            req.history += tokens
            self._execute_through(request_id)
            self._verify(request_id, req.history)

    def suspend(self, request_id: Hashable) -> None:
        self.ops += 1
        self._stop(request_id, self.order.suspend_drops)
        self.inner.suspend(request_id)
        req = self.requests.get(request_id)
        if req is not None:  # a preemption recomputes from token 0 (the content stays its own)
            req.history = req.capacity = 0
            req.scheduled = False
            req.drafted = (0, 0)

    def close(self, request_id: Hashable) -> None:
        self.ops += 1
        self._stop(request_id, self.order.close_drops)
        self.inner.close(request_id)

    def observe(self):
        return self.inner.observe()

    def __getattr__(self, name: str) -> Any:  # the wrapped backend's other methods (hit_tokens, slots, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ------------------------------------------------------------------ events
    def _append(self, req: _Request, handed: tuple) -> None:
        """The worker appends the ids handed out to its table (one entry per block index, in order)."""
        for lc, ids in enumerate(handed):
            row = req.rows[lc]
            for i, block_id in enumerate(ids, start=len(row)):
                row[i] = block_id

    def _schedule(self, request_id: Hashable, start: int, end: int, drafts: int, loads: tuple[int, int] = (0, 0)) -> None:
        while len(self.queue) >= max(1, self.order.steps_in_flight):
            self._execute(self.queue.pop(0))
        req = self.requests[request_id]
        first = not req.scheduled  # a request's first step: newly scheduled
        req.scheduled = True
        self.queue.append(_Step(self.steps, request_id, start, max(start, end), drafts, loads,
                                not first or self.order.first_step_drops, first))
        self.scheduled_at[self.steps] = self.ops - 1
        self.steps += 1

    def _execute_through(self, request_id: Hashable) -> None:
        """Execute, in order, every step scheduled up to the request's last one."""
        last = max((i for i, s in enumerate(self.queue) if s.request == request_id), default=None)
        if last is None:
            return
        ready, self.queue = self.queue[: last + 1], self.queue[last + 1:]
        for step in ready:
            self._execute(step)

    def _verify(self, request_id: Hashable, history: int) -> None:
        """The request's output returned with history at ``history``: draft positions of its last executed
        step that history now covers were accepted. In vLLM a draft becomes a computed token only when a
        later step schedules it as a spec token and the target model writes its KV while verifying it
        (``allocate_slots`` then frees nothing those queries read: they lie past the last history it freed
        on). That verification runs here, before the request's next schedule: a step of the accepted
        positions, no drafts, written and read through the worker's table like any other."""
        req = self.requests.get(request_id)
        if req is None or req.rows is None:
            return
        lo, hi = req.drafted
        end = min(history, hi)
        if end <= lo:
            return
        step = _Step(self.steps, request_id, lo, end, 0, droppable=False)
        self.scheduled_at[self.steps] = self.ops - 1
        self.steps += 1
        self._execute(step)
        req.drafted = (end, hi)  # the drafts past it wait for a later commit (or the next step's writes)

    def _stop(self, request_id: Hashable, drops: bool) -> None:
        """A close or suspension: the request's droppable steps in flight never execute (when ``drops``);
        every step before its last one that stays executes first, in order."""
        if drops:
            self.dropped += [(self.ops - 1, s.number, s.first) for s in self.queue if s.request == request_id and s.droppable]
            self.queue = [s for s in self.queue if s.request != request_id or not s.droppable]
        self._execute_through(request_id)
        req = self.requests.get(request_id)
        if req is not None:
            req.rows = None  # the worker forgets it

    # ------------------------------------------------------------------ the worker
    def _owner(self, request_id: Hashable, position: int) -> Hashable:
        req = self.requests[request_id]
        while req.source is not None and position < req.reused:
            request_id = req.source
            req = self.requests[request_id]
        return request_id

    def _held(self, request_id: Hashable) -> tuple[tuple, dict]:
        """The slot ids the backend holds for the request (per life cycle, block -> id) and, per (life
        cycle, id) another request holds, its holders."""
        view = slots_of(self.inner, self.inner.observe())
        if view is None:
            tables = parts_of(self.inner.observe()).get(Part.TABLES, {})
            raise Unsupported(f"ordered data plane: the backend shows no slot ids ({len(tables)} tables)")
        others: dict[tuple[int, Any], list[str]] = {}
        for rid, tables in view.held.items():
            if rid != request_id:
                for lc, table in enumerate(tables):
                    for b, s in table.items():
                        others.setdefault((lc, s), []).append(f"{rid!r} block {b}")
        return view.held.get(request_id, tuple({} for _ in self.life_cycles)), others

    def _holders(self, lc: int, slot: Any) -> list[str]:
        view = slots_of(self.inner, self.inner.observe())
        return [f"{rid!r} block {b}" for rid, tables in view.held.items() if lc < len(tables)
                for b, s in tables[lc].items() if s == slot]

    def _execute(self, step: _Step) -> None:
        self.executed_at[step.number] = self.ops - 1
        req = self.requests[step.request]
        req.drafted = (step.end, step.end + step.drafts)
        if req.rows is None:  # (never: a drop removes its steps) a step of a request the worker forgot
            raise BackendCheckFailed(f"write[{step.request}]", f"step {step.number} of {step.request!r} executes "
                                     "for a request the worker no longer has")
        held, self._others = self._held(step.request)
        for lc in range(len(self.life_cycles)):
            for p in range(*step.loads):  # a connector loads the blocks it was handed (null ones are skipped)
                if self._slot(step, lc, p // self.t)[1]:
                    self._write(step, lc, held, p, Written(str(step.request), p, "load", str(self._owner(step.request, p))))
            for p in range(step.start, step.end):
                self._write(step, lc, held, p, Written(str(step.request), p, step.number, str(self._owner(step.request, p))))
            for p in range(step.end, step.end + step.drafts):
                self._write(step, lc, held, p, Written(str(step.request), p, step.number, str(step.request), draft=True))
            for q in range(step.start, step.end):
                self._read(step, lc, held, q)

    def _slot(self, step: _Step, lc: int, b: int) -> tuple[Any, bool]:
        row = self.requests[step.request].rows[lc]
        slot = row.get(b)
        return slot, slot is not None

    def _write(self, step: _Step, lc: int, held: tuple, p: int, entry: Written) -> None:
        b = p // self.t
        slot, sent = self._slot(step, lc, b)
        mine = held[lc].get(b)
        if sent and mine == slot and entry.draft and (lc, slot) in self._others:
            # a block two requests hold is a prefix-cache hit's, which the other reads: a drafter writes only
            # into lookahead blocks of its own (its request's filling step may write a block a hit already
            # took, and another token's KV there is seen where it is read)
            there = self.ledger.get((lc, slot), [None] * self.t)[p % self.t]
            raise BackendCheckFailed(
                f"write-shared[{step.request}][{lc}][{p}]",
                f"step {step.number} of {step.request!r} writes {'draft ' if entry.draft else ''}position {p} (block {b}) "
                f"through slot {slot}, which {', '.join(self._others[(lc, slot)])} also holds (and reads); the slot "
                f"position holds {there.describe() if there else 'nothing written'}")
        if sent and mine == slot:
            self.ledger.setdefault((lc, slot), [None] * self.t)[p % self.t] = entry
            return
        how = "no id: the worker was sent none for it" if not sent else "an id the backend does not hold for it"
        owned = "holds no slot for it" if mine is None else f"holds it in slot {mine}"
        there = self.ledger.get((lc, slot), [None] * self.t)[p % self.t] if sent else None
        raise BackendCheckFailed(
            f"write-{'stale-id' if sent else 'padding'}[{step.request}][{lc}][{p}]",
            f"step {step.number} of {step.request!r} writes {'draft ' if entry.draft else ''}position {p} (block {b}) "
            f"through {'slot ' + str(slot) if sent else 'padding'} ({how}); the backend {owned}; "
            f"{'slot ' + str(slot) + ' is held by ' + str(self._holders(lc, slot) or 'no request') + ' and holds there ' + (there.describe() if there else 'nothing written') if sent else ''}")

    def _read(self, step: _Step, lc: int, held: tuple, q: int) -> None:
        life_cycle, t = self.life_cycles[lc], self.t
        sinks = set(range(0, min(life_cycle.sink_blocks * t, q + 1)))
        if life_cycle.window is None:
            spec = worker = set(range(q + 1))
        else:
            mask = self.hooks.mask_start or execution.mask_start
            spec = sinks | set(range(max(0, lifecycle.window_start(q, life_cycle.window)), q + 1))
            worker = sinks | set(range(max(0, mask(q, life_cycle.window)), q + 1))
        rid = step.request
        reader = f"query {q} of {rid!r} (step {step.number}, life cycle {lc})"
        for p in sorted(worker | spec):
            b = p // t
            slot, sent = self._slot(step, lc, b)
            there = self.ledger.get((lc, slot), [None] * t)[p % t] if sent else None
            problems = []  # (kind, words): the first kind names the divergence's field
            if p not in spec:
                problems.append(("outside-window", "outside the live window"))
            if p not in worker:
                problems.append(("masked", "inside the live window but masked out"))
            mine = held[lc].get(b)
            if not sent:
                problems.append(("padding", "through padding (no id sent for the block)"))
            elif mine != slot:
                problems.append(("stale-id", f"through id {slot}, which the backend "
                                 f"{'no longer holds' if mine is None else f'holds in slot {mine}'} for block {b} "
                                 f"(now held by {self._holders(lc, slot) or 'no request'})"))
            owner = str(self._owner(rid, p))
            if there is None:
                problems.append(("unwritten", "of an unwritten slot position"))
            elif there.draft or there.owner != owner or there.position != p:
                problems.append(("other-token", f"of another token than token {p} of {owner!r}"))
            if problems:
                raise BackendCheckFailed(
                    f"read-{problems[0][0]}[{rid}][{lc}][{p}]",
                    f"{reader} reads position {p} (block {b}, {'slot ' + str(slot) if sent else 'padding'}): "
                    f"{'; '.join(words for _, words in problems)}; the slot position holds "
                    f"{there.describe() if there else 'nothing written'}")


def wrap_ordered(inner: BackendRecord, label: str, device: str) -> BackendRecord:
    """The record of ``inner`` wrapped by :class:`OrderedPlane` in the order it declares: compared as
    ``inner`` is, its capabilities' notes saying so."""
    order = inner.event_order
    caps = attrs.evolve(inner.capabilities, notes=inner.capabilities.notes + (
        f"data plane in the engine's own order (schedule, execute when the output returns, up to "
        f"{order.steps_in_flight} steps in flight{', a close drops the steps in flight' if order.close_drops else ''}): "
        "every read checked against the writes of the ledger",))

    def make(config: Config):
        return OrderedPlane(inner.factory(config), config, planted_order or order)

    return BackendRecord(label, make, caps, inner.prepare, inner.limits, label, order, device=device, inner=inner)
