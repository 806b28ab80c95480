"""The execution data plane on a real engine, in that engine's own order of schedule, write and free
(issue 34): ``dataplane:sglang``, ``dataplane:sglang-lazy`` and ``dataplane:trtllm-v2``, as backends and
as campaigns of their own.

:class:`DrivenPlane` runs the reference's execution layer (:class:`~swafloor.reference.execution.Execution`
on a :class:`~swafloor.reference.Manager` configured to the engine's semantics and ``k`` tokens in flight)
in lockstep with an engine *driver*, an object of the engine's own room that calls the engine as its
scheduler and its worker do (the drivers: ``swafloor.fuzz.engines.sglang.driver``,
``swafloor.fuzz.engines.trtllm.driver``; this room names them only as strings, :data:`DRIVERS`):

- ``schedule``: the reference schedules the step (its blocks allocated, nothing written); the driver
  does what the engine's scheduler does at that point (SGLang: evict out-of-window SWA slots, then
  allocate into the request's ``req_to_token`` row; TensorRT-LLM V2: ``resize``). Both must succeed or
  both refuse (the pools are ample: a disagreement is an ``outcome@schedule`` divergence);
- ``execute``: the oldest step in flight runs: the driver translates each position through the tables
  the engine's worker reads *now* (:meth:`locate`), the step's KV is written there into a ledger
  (each location records who wrote it: request, position, step), then every query of the step reads
  its whole window through the same tables, from the worker's mask start
  (:meth:`~swafloor.reference.execution.Execution.mask_of`); then the driver finishes the step as
  the engine does (TensorRT-LLM V2: ``commit``);
- ``drop``: the request's steps in flight never run (preempt or abort, as the engine allows).

A divergence (:class:`~.execution.ExecutionDivergence`, at the event and step) is a write through a
location the engine does not hold for the writer, or a read outside the reference's live window
(:func:`~swafloor.reference.lifecycle.window_start`), of a position in the window the mask leaves out,
through padding or a location the engine no longer holds for the reader (freed, stale), of a location
never written, or of another token than the one the spec says; each message names the location (the
slot), the reader and the writer. Nothing the driver sets itself (pool sizes, token ids) is compared.

As a backend (:class:`DrivenBackend`, the record :func:`wrap_driven` makes; ``dataplane:NAME`` resolves
to it for NAME in :data:`DRIVERS`, through :func:`swafloor.fuzz.engines.dataplane.wrap`), the protocol's
operations, as the fuzz machine and a replay drive them, are the plane's events: a first ``resume`` is
``open``, a later one ``resume``; a ``resize`` past what the request has scheduled is ``schedule`` of the
rest (when the request already has more than ``k`` tokens in flight its oldest steps ``execute`` first); a
history that advances (``commit``, or a ``resize`` to a later history: the output returned) runs
(``execute``) every step of the request in flight and every step scheduled before them; ``suspend`` and ``close`` are
``drop`` (``preempt``, ``abort``); the backend's ``dispose`` is the engine's shutdown. The outcome is
compared with the reference at least (the layer's manager takes a step's first token as its history),
the engine's with the layer's exactly at each schedule where the engine refuses; every divergence of
the plane is a ``BackendCheckFailed`` at the operation, its message naming the plane's event and step,
and is saved and replayed as any backend's. ``k`` is the config's (NAME's claim: 0; :func:`wrap_driven`
can draw another). A seeded bug is planted in every backend built while the module attribute
:data:`planted` names it.

The seeded bugs (:data:`BUGS`) are named hooks: the layer's (:class:`~swafloor.reference.hooks.ExecutionHooks`,
the worker's mask) and each driver's own (its ``hooks`` argument, a name the driver declares). A bug
counts as caught when the plane diverges at an event where it fired (a read whose location it freed,
a mask that reads one token early). ``python -m swafloor.fuzz.engines.dataplane.driven ENGINE``
runs the spec and each seeded bug of the engine.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random
import sys
import time
from typing import Any, Callable, Iterator

import attrs

from swafloor.reference import Config, Manager, Outcome, lifecycle
from swafloor.reference.execution import Execution, Step
from swafloor.reference.hooks import ExecutionHooks

from ...protocol import BackendRecord, Comparison, Operation, Part, Unsupported
from .execution import ExecutionDivergence, print_results
from .tables import Written

__all__ = ["DrivenPlane", "DrivenBackend", "DRIVERS", "ENGINE_OF", "BUGS", "Bug", "campaign", "DrivenResult",
           "wrap_driven", "main"]

#: The engines' drivers, by the backend name whose engine they drive (``dataplane:NAME`` is that
#: driver's plane; their rooms, named as strings).
DRIVERS = {
    "sglang": "swafloor.fuzz.engines.sglang.driver:driver",
    "sglang-lazy": "swafloor.fuzz.engines.sglang.driver:driver_lazy",
    "trtllm-v2": "swafloor.fuzz.engines.trtllm.driver:driver",
}
#: The engine of each driven backend: whose seeded bugs (:data:`BUGS`) a plant of it takes.
ENGINE_OF = {"sglang": "sglang", "sglang-lazy": "sglang", "trtllm-v2": "trtllm-v2"}


@attrs.frozen
class Bug:
    """A seeded bug of one engine's plane: the layer's hooks and the driver's hook names it turns on."""

    engine: str
    layer: ExecutionHooks = ExecutionHooks()
    driver: tuple[str, ...] = ()
    what: str = ""


def _mask_one_early(h: Any, window: Any) -> Any:
    return lifecycle.window_start(h, window) - 1


#: Per engine, its seeded bugs.
BUGS: dict[str, dict[str, Bug]] = {
    "sglang": {
        "sglang-evicts-in-flight-window": Bug(
            "sglang", driver=("evict-from-step-start",),
            what="the scheduler evicts SWA slots from the new step's start, not from the oldest token still in "
                 "flight (SGLang's overlap guard dropped): a step in flight then reads through a mapping zeroed"),
        "sglang-mask-one-early": Bug(
            "sglang", layer=ExecutionHooks(mask_start=_mask_one_early),
            what="the worker's mask starts one token before the live window: it reads through req_to_token a "
                 "position whose SWA slot SGLang freed (its full-to-SWA mapping now 0, the padding slot)"),
    },
    "trtllm-v2": {
        "trtllm-commits-at-schedule": Bug(
            "trtllm-v2", driver=("commit-at-schedule",),
            what="the scheduler commits a step's tokens when it schedules it, before the worker writes them: "
                 "history runs ahead, blocks a step in flight still reads go stale (page index -1)"),
        "trtllm-mask-one-early": Bug(
            "trtllm-v2", layer=ExecutionHooks(mask_start=_mask_one_early),
            what="the worker's mask starts one token before the live window: it reads a block V2 made stale"),
    },
}


def load_driver(engine: str) -> Callable[..., Any]:
    """The driver factory of ``engine`` (imported by its name: this room imports no other room)."""
    target = DRIVERS.get(engine)
    if target is None:
        raise Unsupported(f"no driven data plane for {engine!r} (engines: {', '.join(DRIVERS)})")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class DrivenPlane:
    """The spec's execution layer beside an engine driver, with a ledger of who wrote each location."""

    def __init__(self, config: Config, driver: Any, hooks: ExecutionHooks = ExecutionHooks(), at_least: bool = False):
        self.driver = driver
        #: Whether the engine may succeed at a schedule the layer refuses (the backend path, pools near the
        #: floor: the layer's manager keeps the window of its ``k`` tokens in flight whether or not a step is,
        #: the engine from the oldest token it has in flight): no step is scheduled in the layer then, and
        #: every read stays checked. The other way round (the engine refusing) is always a divergence.
        self.at_least = at_least
        self.engine_ok = True  # the engine's answer to the last schedule
        self.manager = Manager(config)
        self.ex = Execution(self.manager, hooks)
        self.t = config.tokens_per_block
        self.life_cycles = driver.layout.life_cycles
        self.group_of = tuple(driver.layout.pool_group_of)
        self.ledger: dict[tuple[int, int], Written] = {}  # (pool group, location) -> last writer
        self.event = 0
        self.trace: list[str] = []
        #: (event, step or None, what) each time a seeded bug's hook had an effect the spec's would not
        self.fired: list[tuple[int, int | None, str]] = []
        #: (request, life cycle) -> positions a driver's seeded bug took from a live window the spec keeps
        self.broken: dict[tuple[str, int | None], set[int]] = {}
        self.finished = False

    # ------------------------------------------------------------------ events
    def open(self, request_id: str) -> bool:
        self._begin(f"open({request_id!r})")
        self.ex.create(request_id)
        ref = bool(self.ex.resume(request_id))
        got = self._engine("open", self.driver.open, request_id)
        self._outcome("open", request_id, ref, got)
        self.trace[-1] += f" -> {'ok' if got else 'refused'}"
        return got

    def schedule(self, request_id: str, tokens: int) -> Step | None:
        self._begin(f"schedule({request_id!r}, tokens={tokens})")
        run = self.ex.runs[request_id]
        oldest, start = run.written, run.scheduled  # the first token not yet executed; the step's first
        got = self.ex.schedule(request_id, tokens)
        ref = isinstance(got, Step)
        capacity = got.capacity if ref else max([self.ex.capacity_of(start + tokens, 0)]
                                                 + [s.capacity for s in self.ex.in_flight(request_id)])
        ok = self._engine("schedule", self.driver.schedule, request_id, start, start + tokens, capacity, oldest,
                                  lambda what, lc, positions: self._fire(what, None, request_id, lc, positions))
        self.engine_ok = bool(ok)
        if ok and not ref and self.at_least:  # the engine holds fewer blocks than the layer's bound (see __init__)
            self.trace[-1] += " -> out of slots in the layer; the engine allocated (at least: no step)"
            return None
        self._outcome("schedule", request_id, ref, ok)
        self.trace[-1] += f" -> step {got.number} [{got.start}, {got.end})" if ref else " -> out of slots"
        return got if ref else None

    def execute(self) -> Step | None:
        self._begin("execute()")
        step = self.ex.execute(self._kernel)
        if step is None:
            self.trace[-1] += " -> nothing in flight"
        else:
            self._engine("execute", self.driver.executed, step.request, step.start, step.end)
        return step

    def drop(self, request_id: str, how: str) -> list[Step]:
        self._begin(f"drop({request_id!r}, {how!r})")
        dropped = self.ex.drop(request_id, how)
        self._engine("drop", self.driver.drop, request_id, how)
        self.trace[-1] += f" -> dropped steps {[s.number for s in dropped]}"
        return dropped

    def resume(self, request_id: str) -> bool:
        self._begin(f"resume({request_id!r})")
        ref = bool(self.ex.resume(request_id))
        got = self._engine("resume", self.driver.resume, request_id)
        self._outcome("resume", request_id, ref, got)
        self.trace[-1] += f" -> {'ok' if got else 'refused'}"
        return got

    def finish(self) -> None:
        """The example's end: the engine closes every request still open and shuts down (an exception
        there is a divergence too)."""
        self._begin("finish()")
        self.finished = True
        self._engine("finish", self.driver.dispose)

    # ------------------------------------------------------------------ the worker
    def _kernel(self, step: Step) -> None:
        """The step's forward: write its tokens' KV through the worker's tables, then read each query's
        window through them."""
        self.trace[-1] += f" -> step {step.number} of {step.request!r} [{step.start}, {step.end})"
        rid = step.request
        for lc in range(len(self.life_cycles)):
            g = self.group_of[lc]
            positions = list(range(step.start, step.end))
            for p, (loc, held, how) in zip(positions, self._engine("execute", self.driver.locate_positions, rid, lc, positions)):
                if loc is None or not held:
                    there = self.ledger.get((g, loc)) if loc is not None else None
                    raise ExecutionDivergence(
                        f"write[{rid}][{lc}][{p}]",
                        f"step {step.number} of {rid!r} writes position {p} (block {p // self.t}) through {how}, "
                        f"which the engine does not hold for it; the location holds "
                        f"{there.describe() if there else 'nothing written'}", self.event, step.number)
                self.ledger[(g, loc)] = Written(rid, p, step.number, self.ex.owner(rid, p))
            for q in range(step.start, step.end):
                self._read(step, lc, q)

    def _read(self, step: Step, lc: int, q: int) -> None:
        life_cycle = self.life_cycles[lc]
        rid, g = step.request, self.group_of[lc]
        if life_cycle.window is None:
            spec = worker = set(range(q + 1))
        else:
            sinks = set(range(0, min(life_cycle.sink_blocks * self.t, q + 1)))
            spec = sinks | set(range(max(0, lifecycle.window_start(q, life_cycle.window)), q + 1))
            worker = sinks | set(range(max(0, self.ex.mask_of(q, life_cycle.window)), q + 1))
            if worker != spec:
                self._fire(f"step {step.number}: the mask of query {q} reads {sorted(worker ^ spec)} against the "
                           f"window", step.number)
        read = sorted(worker | spec)
        located = self._engine("execute", self.driver.locate_positions, rid, lc, read)
        reader = f"query {q} of {rid!r} (step {step.number}, life cycle {lc})"
        for p, (loc, held, how) in zip(read, located):
            there = self.ledger.get((g, loc)) if loc is not None else None
            problems = []
            if p not in spec:
                problems.append("outside the live window")
            if p not in worker:
                problems.append("inside the live window but masked out")
            if loc is None or not held:
                problems.append(f"a location the engine does not hold for {rid!r}")
            owner = self.ex.owner(rid, p)
            if loc is None:
                pass  # no location: nothing is read there
            elif there is None:
                problems.append("of a location never written")
            elif there.draft or there.owner != owner or there.position != p:
                problems.append(f"of another token than token {p} of {owner!r}")
            if problems:
                found = ExecutionDivergence(
                    f"read[{rid}][{lc}][{q}]",
                    f"{reader} reads position {p} (block {p // self.t}) through {how} (pool group {g}): "
                    f"{'; '.join(problems)}; the location holds "
                    f"{there.describe() if there else 'nothing written' if loc is not None else 'nothing (there is none)'}",
                    self.event, step.number)
                # where a seeded bug fired: this read is one of its mask's (this event), or of a position
                # its driver hook took from the window
                found.at_firing = (worker != spec and p in worker ^ spec) or p in self.broken.get((rid, lc), ())
                raise found

    # ------------------------------------------------------------------ bookkeeping
    def _begin(self, text: str) -> None:
        self.event += 1
        self.trace.append(f"{self.event}: {text}")

    def _fire(self, what: str, step: int | None = None, request: str | None = None, lc: int | None = None,
              positions: Any = ()) -> None:
        """A seeded bug's hook had an effect the spec's would not: at this event (and step), and, for a
        driver's hook, the positions of ``request``'s life cycle ``lc`` it took from the live window."""
        self.fired.append((self.event, step, what))
        if request is not None:
            self.broken.setdefault((request, lc), set()).update(positions)

    def _engine(self, op: str, call: Callable[..., Any], *args: Any) -> Any:
        """A call into the engine: an exception raised inside it is a divergence at this event, with its
        input (the trace), never swallowed and never a crash of the campaign."""
        try:
            return call(*args)
        except Unsupported:
            raise
        except Exception as exc:  # the engine's own failure
            raise ExecutionDivergence(f"raised@{op}", f"{op} {args[:2]!r}: the engine raised {type(exc).__name__}: "
                                      f"{str(exc)[:300]}", self.event, -1) from exc

    def _outcome(self, op: str, request_id: str, ref: bool, got: bool) -> None:
        if ref != got:
            raise ExecutionDivergence(
                f"outcome@{op}", f"{op} of {request_id!r}: the reference {'succeeds' if ref else 'refuses'}, the engine "
                f"{'succeeds' if got else 'refuses'}", self.event, -1)


# ----------------------------------------------------------------------------- the campaign
def _run_example(rng: random.Random, engine_module: Any, make: Callable[..., Any], hooks: ExecutionHooks,
                 driver_hooks: tuple[str, ...], events: int) -> tuple[DrivenPlane, ExecutionDivergence | None]:
    config = engine_module.draw_config(rng)
    driver = make(config, driver_hooks)
    plane = DrivenPlane(config, driver, hooks)
    k = plane.ex.k
    active: list[str] = []
    suspended: list[str] = []
    made = 0
    preempts = engine_module.PREEMPTS
    try:
        for _ in range(events):
            roll = rng.random()
            if (roll < 0.12 or not active) and made < 4:
                rid = f"r{made}"
                made += 1
                if plane.open(rid):
                    active.append(rid)
            elif roll < 0.6 and active:
                rid = rng.choice(active)
                run = plane.ex.runs[rid]
                if run.scheduled - run.written > k:
                    plane.execute()
                else:
                    plane.schedule(rid, rng.choice((1, 1, 1, 2, 3)))
            elif roll < 0.9:
                plane.execute()
            elif roll < 0.95 and active:
                rid = rng.choice(active)
                how = rng.choice(("preempt", "abort")) if preempts else "abort"
                plane.drop(rid, how)
                active.remove(rid)
                if how == "preempt":
                    suspended.append(rid)
            elif suspended:
                rid = suspended.pop(0)
                if plane.resume(rid):
                    active.append(rid)
        while plane.ex.queue:
            plane.execute()
        plane.finish()
    except ExecutionDivergence as found:
        if not plane.finished:
            try:
                driver.dispose()
            except Exception as exc:  # after the divergence reported: said in its trace, not hidden
                plane.trace.append(f"(after the divergence) the engine's shutdown raised {type(exc).__name__}: {str(exc)[:200]}")
        return plane, found
    return plane, None


@attrs.frozen
class DrivenResult:
    """A campaign's first divergence (None: none), its example, the plane's trace and the firings."""

    engine: str
    name: str
    examples: int
    seconds: float
    divergence: ExecutionDivergence | None = None
    example: int | None = None
    trace: tuple[str, ...] = ()
    fired: tuple[tuple[int, int | None, str], ...] = ()

    def caught_where_fired(self) -> bool:
        """The divergence is a read the seeded bug broke: a position its mask reads against the window (at
        that event), or one its driver hook took from a live window the spec keeps (fired earlier, at the
        schedule that freed it, and read at the first step that reads it)."""
        return self.divergence is not None and getattr(self.divergence, "at_firing", False)

    def to_json(self) -> dict:
        d = self.divergence
        return {"engine": self.engine, "name": self.name, "examples": self.examples, "seconds": round(self.seconds, 3),
                "caught": None if d is None else {"example": self.example, "event": d.event, "step": d.step,
                                                  "field": d.field, "message": d.message},
                "at_firing": self.caught_where_fired(),
                "first_fired": self.fired[0] if self.fired else None, "trace": list(self.trace) if d else []}


def campaign(engine: str, name: str | None = None, examples: int = 100, seed: int = 0, events: int = 50,
             make: Callable[..., Any] | None = None) -> DrivenResult:
    """Seeded random examples of ``engine``'s driven plane with the seeded bug ``name`` (None: the
    spec), stopping at the first divergence. ``make(config, hooks)`` builds the driver (default: the
    engine's registered ``driver``; a test passes one over a fake engine)."""
    make = make or load_driver(engine)
    module = importlib.import_module(DRIVERS[engine].partition(":")[0])
    bug = BUGS[engine][name] if name is not None else Bug(engine)
    start = time.perf_counter()
    for i in range(examples):
        plane, found = _run_example(random.Random(f"{engine}:{seed}:{i}"), module, make, bug.layer, bug.driver, events)
        if found is not None:
            return DrivenResult(engine, name or "spec", i + 1, time.perf_counter() - start, found, i,
                                 tuple(plane.trace), tuple(plane.fired))
    return DrivenResult(engine, name or "spec", examples, time.perf_counter() - start)


# ----------------------------------------------------------------------------- the backend
#: The seeded bug every new driven backend is built with (None: the spec's hooks): a plant sets this
#: module attribute (tests/test_dataplane_driven.py), never the engine's driver or the record.
planted: Bug | None = None


class DrivenBackend:
    """``dataplane:NAME`` as a backend: the protocol's operations, as the fuzz machine and a replay
    drive them, onto the events of a :class:`DrivenPlane` (see the module). ``history`` is the
    protocol's history per request (what its output returned so far)."""

    def __init__(self, plane: DrivenPlane, preempts: bool):
        self.plane = plane
        self.preempts = preempts
        self.history: dict[str, int] = {}
        self.opened: set[str] = set()

    # ------------------------------------------------------------------ protocol
    def create(self, request_id: str, reused_history: int = 0, share_with: str | None = None) -> None:
        if reused_history or share_with is not None:
            raise Unsupported("driven data plane: no reused history (the engine's prefix cache is not driven)")
        self.history[request_id] = 0  # the engine sees it at its first resume (open: create and resume)

    def resume(self, request_id: str) -> Outcome:
        with self._events():
            if request_id in self.opened:
                return Outcome(self.plane.resume(request_id))
            self.opened.add(request_id)
            return Outcome(self.plane.open(request_id))

    def resize(self, request_id: str, capacity: int, history: int) -> Outcome:
        with self._events():
            self._returned(request_id, history)
            ex = self.plane.ex
            run = ex.runs[request_id]
            if capacity <= run.scheduled:  # within what is scheduled: nothing is asked of the engine
                return Outcome(True)
            while run.scheduled - run.written > ex.k:  # no more in flight: the oldest steps run first
                self.plane.execute()
            self.plane.schedule(request_id, capacity - run.scheduled)
            return Outcome(self.plane.engine_ok)

    def commit(self, request_id: str, tokens: int) -> None:
        with self._events():
            self._returned(request_id, self.history[request_id] + tokens)

    def suspend(self, request_id: str) -> None:
        if not self.preempts:  # never drawn: the record's operations leave suspend out
            raise Unsupported("driven data plane: the engine drops a step by an abort only")
        with self._events():
            self.plane.drop(request_id, "preempt")
        self.history[request_id] = 0  # a preemption recomputes from token 0

    def close(self, request_id: str) -> None:
        if request_id in self.opened:  # one never resumed never reached the engine
            with self._events():
                self.plane.drop(request_id, "abort")

    def observe(self) -> dict:
        return {}  # compared: the outcome only (the plane checks every read and write itself)

    def dispose(self) -> None:
        """The example's end: the engine shuts down (steps still in flight never run)."""
        if not self.plane.finished:
            with self._events():
                self.plane.finish()

    # ------------------------------------------------------------------ internals
    def _returned(self, request_id: str, history: int) -> None:
        """The request's history advanced to ``history``: its output returned, so every step of it in
        flight has run (with every step scheduled before them, in order)."""
        if history <= self.history[request_id]:
            return
        self.history[request_id] = history
        while self.plane.ex.in_flight(request_id):
            self.plane.execute()

    @contextlib.contextmanager
    def _events(self) -> Iterator[None]:
        """A divergence of the plane during one operation, its message naming the plane's events that
        operation ran (the last one is where it happened) and the step."""
        first = self.plane.event + 1
        try:
            yield
        except ExecutionDivergence as found:
            events = "; ".join(self.plane.trace[first - 1:])
            fired = self.plane.fired
            bug = (f"; a read the seeded bug broke (its hook first fired at event {fired[0][0]})"
                   if getattr(found, "at_firing", False) and fired else "")
            raised = ExecutionDivergence(found.field, f"{found.message} [plane event {found.event}, step {found.step}"
                                         f"{bug}; this operation's events: {events}]", found.event, found.step)
            raised.at_firing = getattr(found, "at_firing", False)
            raise raised from found


def wrap_driven(inner: BackendRecord, label: str, device: str | None = None,
                make: Callable[..., Any] | None = None, engine: str | None = None,
                in_flight_tokens: int | None = None) -> BackendRecord:
    """The record of ``dataplane:NAME`` for a driven backend ``inner`` (NAME in :data:`DRIVERS`): its
    driver's plane beside the reference's execution layer, compared with the reference on the outcome
    (``at-least``: the layer's manager counts a step's first token as computed, so it holds no more
    than the reference does at the protocol's history). ``make(config, hooks)`` builds the driver
    (default: the registered one; a test passes one over a fake engine); ``engine`` names whose seeded
    bugs a plant takes (default: NAME's); ``in_flight_tokens``: the ``k`` its configs are drawn with
    (default: NAME's claim, 0 for every driven engine; 1 draws SGLang's overlap scheduler, a step of the
    request in flight when its next is scheduled, which the tests' plant of its eviction needs: its
    retired share at the floor is above the harness's limit, see docs/fuzzing-engines.md)."""
    name = inner.name
    engine = engine or ENGINE_OF[name]
    target = DRIVERS.get(name, DRIVERS[engine])
    module = importlib.import_module(target.partition(":")[0])
    preempts = bool(module.PREEMPTS)
    ops = inner.capabilities.operations - (set() if preempts else {Operation.SUSPEND})
    claimed = inner.capabilities.semantics
    semantics = claimed if in_flight_tokens is None else attrs.evolve(claimed, in_flight_tokens=in_flight_tokens)
    caps = attrs.evolve(
        inner.capabilities, operations=ops, observations={Part.OUTCOME: Comparison.AT_LEAST}, reused_history=False,
        semantics=semantics, capacity_cuts=False,  # the layer's steps are executed or dropped, never cut
        all_semantics=False, mixed_block_sizes=False, full_attention_block_multiples=(), needs_gpu=False,
        adapter_set=(), notes=inner.capabilities.notes + (
            f"data plane in the engine's own order ({target.partition(':')[0]}): a resize past what is scheduled "
            "schedules the rest as one step (the engine's scheduler: eviction, allocation); the step executes when "
            "the request's history next advances, every read checked against the writes of the ledger; the outcome "
            "is compared at least, the engine's against the execution layer's exactly at each schedule",
            "no capacity cuts (a step scheduled is executed or dropped); a resize within what is scheduled asks "
            "nothing of the engine (ok); a history short of what executed (drafts rejected) keeps its KV (the same "
            "tokens of the same content)"
            + ("" if preempts else "; no suspend (the engine drops a step by an abort only)")))

    def build(config: Config) -> DrivenBackend:
        bug = planted if planted is not None and planted.engine == engine else Bug(engine)
        driver = (make or load_driver(name))(config, bug.driver)
        return DrivenBackend(DrivenPlane(config, driver, bug.layer, at_least=True), preempts)

    return BackendRecord(label, build, caps, inner.prepare, inner.limits, label, None, device=device, inner=inner)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.engines.dataplane.driven",
                                     description="An engine's driven execution data plane: the spec and each seeded bug.")
    parser.add_argument("engine", help=f"one of {', '.join(BUGS)}")
    parser.add_argument("names", nargs="*", help="seeded bugs (default: the spec and every one of the engine)")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.engine not in BUGS:
        print(f"driven: engine: unknown {args.engine!r} (engines: {', '.join(BUGS)})", file=sys.stderr)
        return 2
    bugs = BUGS[args.engine]
    unknown = [n for n in args.names if n not in bugs and n != "spec"]
    if unknown or args.examples < 1:
        print(f"driven: {'names: unknown seeded bug ' + repr(unknown[0]) if unknown else '--examples: must be >= 1, got ' + str(args.examples)}"
              f" (seeded bugs: {', '.join(bugs)})", file=sys.stderr)
        return 2
    try:
        results = [campaign(args.engine, None if n == "spec" else n, args.examples, args.seed)
                   for n in (args.names or ["spec", *bugs])]
    except Unsupported as exc:
        print(f"driven: {args.engine}: {exc}", file=sys.stderr)
        return 2
    failed = any((r.divergence is None) if r.name != "spec" else (r.divergence is not None) for r in results)
    failed = failed or any(r.name != "spec" and not r.caught_where_fired() for r in results)
    print_results(results, args.json)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
