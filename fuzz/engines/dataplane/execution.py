"""The execution data plane (issue 34): scheduling and execution as separate events, every slot
position carrying its writer, the worker reading through tables of its own.

:class:`ExecutionPlane` drives the reference's execution layer (:class:`~swafloor.reference.execution.Execution`
on a :class:`~swafloor.reference.Manager` with prefix sharing) and does what a worker does with it:

- at schedule, the scheduler sends the ids of the blocks the manager now holds for the request; the
  worker appends them to its own table per request and life cycle (:class:`~.tables.WorkerTable`:
  never shrunk, padded with slot 0);
- at execute, the step writes its tokens' KV (and its drafter the draft positions' KV) through the
  worker's table into the :class:`~.tables.SlotLedger`, each position recording who wrote it (request,
  position, step) and whose token it is; then each query of the step reads its whole window through the
  worker's table, masked from the layer's mask start (:meth:`~swafloor.reference.execution.Execution.mask_of`);
- a resumed request created on another's content loads the reused blocks that are not hits.

A divergence (:class:`ExecutionDivergence`, at the event and step it happens) is raised for a write
through a block the request does not hold (``write[...]``), and for a read (``read[...]``) outside the
live window (the reference's :func:`~swafloor.reference.lifecycle.window_start`, sinks included), through
an id the manager does not hold for that block, of an unwritten slot position, or of another token than
the one at that position of the reader's content. Each message names the slot, the reader and the writer.
Nothing here is timed; the data is bookkeeping, not tensors (no torch).

The seeded bugs of the campaign :data:`~swafloor.reference.seeded_bugs.EXECUTION` are hooks
(:data:`BUG_HOOKS`); :func:`campaign` runs seeded random examples (``random.Random``, no Hypothesis)
and reports, per bug, the example, event and step that caught it and the event its hook first fired.
``python -m swafloor.fuzz.engines.dataplane.execution`` prints that per bug and for the spec.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any, Sequence

import attrs

from swafloor.reference import AttentionLayer, Config, LifeCycleKind, Manager, Semantics, SuspendMode, build_layout
from swafloor.reference import execution, lifecycle
from swafloor.reference.execution import Execution, Step
from swafloor.reference.hooks import ExecutionHooks

from ...protocol import BackendCheckFailed, Unsupported
from .tables import SlotLedger, WorkerTable, Written

__all__ = ["ExecutionPlane", "ExecutionDivergence", "BUG_HOOKS", "campaign", "CampaignResult", "draw_config", "main", "print_results"]


def _named_only(named_end: Any, written: Any, t: Any) -> Any:
    return execution.named_blocks(named_end, t)


#: The seeded bugs of the execution campaign, each the layer's hooks with one behaviour replaced.
BUG_HOOKS: dict[str, ExecutionHooks] = {
    "names-trusted-before-execution": ExecutionHooks(hit_blocks=_named_only, names_after_drop=_named_only),
    "draft-write-without-block": ExecutionHooks(step_capacity=lambda end, drafts: end),
    "worker-mask-one-late": ExecutionHooks(mask_start=lambda h, window: lifecycle.window_start(h, window) - 1),
}


class ExecutionDivergence(BackendCheckFailed):
    """A wrong read or write of the data plane, at ``event`` (the plane's operation count) in ``step``."""

    def __init__(self, field: str, message: str, event: int, step: int):
        super().__init__(field, message)
        self.event = event
        self.step = step


class ExecutionPlane:
    """The reference's execution layer with a worker's tables and a slot ledger (see the module)."""

    def __init__(self, config: Config, hooks: ExecutionHooks = ExecutionHooks()):
        layout = build_layout(config)
        if any(lc.kind is LifeCycleKind.SSM for lc in layout.life_cycles):
            raise Unsupported("execution data plane: SSM life cycles are not modelled")
        if layout.mixed_block_sizes:
            raise Unsupported("execution data plane: one block size (the config's t) only")
        self.manager = Manager(config)
        self.ex = Execution(self.manager, hooks)
        self.t = layout.tokens_per_block
        self.life_cycles = layout.life_cycles
        self.group_of = tuple(layout.pool_group_of)
        self.ledger = SlotLedger(tuple(layout.slots), self.t)
        self.worker: dict[str, list[WorkerTable]] = {}
        self.event = 0
        self.trace: list[str] = []
        #: (event, step or None, what) each time a hook's result had an effect the spec's formula would not
        #: have had (the firing of a seeded bug)
        self.fired: list[tuple[int, int | None, str]] = []

    # ------------------------------------------------------------------ events
    def create(self, request_id: str, share_with: str | None = None) -> int:
        self._begin(f"create({request_id!r}, share_with={share_with!r})")
        spec = self._spec_hit(share_with) if share_with is not None else 0
        hit = self.ex.create(request_id, share_with)
        if hit != spec:
            self._fire(f"lookup on {share_with!r}: hit {hit} tokens, the spec's {spec}")
        self.trace[-1] += f" -> hit {hit}"
        return hit

    def resume(self, request_id: str) -> Any:
        self._begin(f"resume({request_id!r})")
        outcome = self.ex.resume(request_id)
        if outcome:
            self.worker[request_id] = [WorkerTable() for _ in self.life_cycles]
            self._send(request_id)
            self._load(request_id)
        self.trace[-1] += f" -> {'ok' if outcome else 'out of slots'}"
        return outcome

    def schedule(self, request_id: str, tokens: int, drafts: int = 0) -> Any:
        self._begin(f"schedule({request_id!r}, tokens={tokens}, drafts={drafts})")
        start = self.ex.runs[request_id].scheduled
        in_flight = [s.capacity for s in self.ex.in_flight(request_id)]
        got = self.ex.schedule(request_id, tokens, drafts)
        if isinstance(got, Step):
            self._send(request_id)
            spec = max([execution.step_capacity(got.end, drafts)] + in_flight)
            if lifecycle.allocated_blocks(got.capacity, self.t) != lifecycle.allocated_blocks(spec, self.t):
                self._fire(f"step {got.number}: capacity {got.capacity}, the spec's {spec}", got.number)
            self.trace[-1] += f" -> step {got.number} [{start}, {got.end}) capacity {got.capacity}"
        else:
            self.trace[-1] += " -> out of slots"
        return got

    def execute(self) -> Step | None:
        self._begin("execute()")
        step = self.ex.execute(self._kernel)
        if step is None:
            self.trace[-1] += " -> nothing in flight"
        return step

    def _kernel(self, step: Step) -> None:
        """What the worker does with a step: write its KV (and its drafts') through its table, then read
        each query's window through it."""
        self.trace[-1] += f" -> step {step.number} of {step.request!r} [{step.start}, {step.end}) + {step.drafts} drafts"
        held = self._held(step.request)
        for lc in range(len(self.life_cycles)):
            for p in range(step.start, step.end):
                self._write(step, lc, held, p, Written(step.request, p, step.number, self.ex.owner(step.request, p)))
            for p in range(step.end, step.end + step.drafts):
                self._write(step, lc, held, p, Written(step.request, p, step.number, step.request, draft=True))
            for q in range(step.start, step.end):
                self._read(step, lc, held, q)

    def drop(self, request_id: str, how: str = "preempt") -> list[Step]:
        self._begin(f"drop({request_id!r}, {how!r})")
        run = self.ex.runs[request_id]
        spec = min(run.named, execution.names_after_drop(run.named, run.written, self.t) * self.t)
        dropped = self.ex.drop(request_id, how)
        if how == "abort" and run.named != spec:  # a preemption drops every name with the lengths
            self._fire(f"drop of {request_id!r}: names kept to token {run.named}, the spec's {spec}")
        self.worker.pop(request_id, None)  # the worker forgets a preempted or aborted request
        self.trace[-1] += f" -> dropped steps {[s.number for s in dropped]}"
        return dropped

    # ------------------------------------------------------------------ the worker
    def _begin(self, text: str) -> None:
        self.event += 1
        self.trace.append(f"{self.event}: {text}")

    def _fire(self, what: str, step: int | None = None) -> None:
        self.fired.append((self.event, step, what))

    def _held(self, request_id: str) -> tuple:
        return self.manager.slots().held.get(request_id, tuple({} for _ in self.life_cycles))

    def _holders(self, group: int, slot: int) -> list[str]:
        return [f"{rid!r} block {b}" for rid, tables in self.manager.slots().held.items()
                for lc, table in enumerate(tables) if self.group_of[lc] == group
                for b, s in table.items() if s == slot]

    def _spec_hit(self, source: str) -> int:
        run = self.ex.runs[source]
        shareable = self.manager.record_of(source).history // self.t
        return min(execution.hit_blocks(run.named, run.written, self.t), shareable) * self.t

    def _send(self, request_id: str) -> None:
        for lc, table in enumerate(self._held(request_id)):
            self.worker[request_id][lc].extend(dict(table))

    def _load(self, request_id: str) -> None:
        """A request created on another's content: the reused blocks it holds that are not the source's
        slots (no hit) are loaded (recomputed) on resume; a hit's slots are read as they are."""
        run = self.ex.runs[request_id]
        if not run.hit:
            return
        held = self._held(request_id)
        source = self.manager.slots().held.get(run.source)
        for lc, table in enumerate(held):
            theirs = source[lc] if source is not None else {}
            for b, slot in table.items():
                if b * self.t >= run.hit or theirs.get(b) == slot:
                    continue
                for p in range(b * self.t, min((b + 1) * self.t, run.hit)):
                    self.ledger.write(self.group_of[lc], slot, p % self.t,
                                      Written(request_id, p, "resume", self.ex.owner(request_id, p)))

    def _write(self, step: Step, lc: int, held: tuple, p: int, entry: Written) -> None:
        b, g = p // self.t, self.group_of[lc]
        slot, sent = self.worker[step.request][lc].slot(b)
        mine = held[lc].get(b)
        if sent and mine == slot:
            self.ledger.write(g, slot, p % self.t, entry)
            return
        how = "padding: the worker was sent no id for it" if not sent else "an id the manager no longer holds for it"
        owned = "holds no slot for it" if mine is None else f"holds it in slot {mine}"
        there = self.ledger.read(g, slot, p % self.t)
        raise ExecutionDivergence(
            f"write[{step.request}][{lc}][{p}]",
            f"step {step.number} of {step.request!r} writes {'draft ' if entry.draft else ''}position {p} (block {b}) "
            f"through slot {slot} of pool group {g} ({how}); the manager {owned}; slot {slot} is held by "
            f"{self._holders(g, slot) or 'no request'} and holds there {there.describe() if there else 'nothing written'}",
            self.event, step.number)

    def _read(self, step: Step, lc: int, held: tuple, q: int) -> None:
        life_cycle, t = self.life_cycles[lc], self.t
        sinks = set(range(0, min(life_cycle.sink_blocks * t, q + 1)))
        if life_cycle.window is None:
            spec, worker = set(range(q + 1)), set(range(q + 1))
        else:
            spec = sinks | set(range(max(0, lifecycle.window_start(q, life_cycle.window)), q + 1))
            worker = sinks | set(range(max(0, self.ex.mask_of(q, life_cycle.window)), q + 1))
            if worker != spec:
                self._fire(f"step {step.number}: the mask of query {q} reads {sorted(worker ^ spec)} against the window",
                           step.number)
        rid, g = step.request, self.group_of[lc]
        where = f"read[{rid}][{lc}][{q}]"
        reader = f"query {q} of {rid!r} (step {step.number}, life cycle {lc})"
        for p in sorted(worker | spec):
            b = p // t
            slot, sent = self.worker[rid][lc].slot(b)
            there = self.ledger.read(g, slot, p % t)
            writer = there.describe() if there else "never written"
            problems = []
            if p not in spec:
                problems.append("outside the live window")
            if p not in worker:
                problems.append("inside the live window but masked out")
            mine = held[lc].get(b)
            if not sent or mine != slot:
                problems.append("through padding" if not sent else
                                f"through id {slot}, which the manager {'no longer holds' if mine is None else f'holds in slot {mine}'} "
                                f"for block {b} (now held by {self._holders(g, slot) or 'no request'})")
            owner = self.ex.owner(rid, p)
            if there is None:
                problems.append("of an unwritten slot position")
            elif there.draft or there.owner != owner or there.position != p:
                problems.append(f"of another token than token {p} of {owner!r}")
            if problems:
                raise ExecutionDivergence(
                    where, f"{reader} reads position {p} (block {b}, slot {slot} of pool group {g}): "
                    f"{'; '.join(problems)}; the slot position holds {writer}", self.event, step.number)


# ----------------------------------------------------------------------------- the campaign
def draw_config(rng: random.Random) -> Config:
    """A config the plane serves: one SWA layer (sinks sometimes), full attention sometimes, prefix
    sharing, vLLM's preemption (recompute), k tokens in flight, ample pools (slots are still reused)."""
    t = rng.choice((1, 2, 4))
    window = rng.randint(1, 8)
    layers = [AttentionLayer(window, t * rng.choice((0, 0, 1)))]
    if rng.random() < 0.3:
        layers.append(AttentionLayer())
    semantics = Semantics(prefix_sharing=True, in_flight_tokens=rng.randint(0, 3), suspend=SuspendMode.RECOMPUTE,
                          first_resume_copy=False)
    minimum = build_layout(Config(t, layers, semantics=semantics)).slots
    return Config(t, layers, slots=tuple(3 * n + 16 for n in minimum), semantics=semantics)


def _run_example(rng: random.Random, hooks: ExecutionHooks, events: int,
                 make: Any = None) -> tuple[ExecutionPlane, ExecutionDivergence | None]:
    plane = (make or ExecutionPlane)(draw_config(rng), hooks)
    k = plane.ex.k
    active: list[str] = []
    suspended: list[str] = []
    made = 0
    try:
        for _ in range(events):
            roll = rng.random()
            if (roll < 0.15 or not active) and made < 5:
                rid = f"r{made}"
                made += 1
                sources = [r for r in active if plane.manager.record_of(r).history >= plane.t]
                plane.create(rid, rng.choice(sources) if sources and rng.random() < 0.6 else None)
                if plane.resume(rid):
                    active.append(rid)
            elif roll < 0.6 and active:
                rid = rng.choice(active)
                run = plane.ex.runs[rid]
                if run.scheduled - run.written > k:
                    plane.execute()
                else:
                    plane.schedule(rid, rng.choice((1, 1, 1, 2, 3)), rng.choice((0, 0, 1, 2)))
            elif roll < 0.9:
                plane.execute()
            elif roll < 0.95 and active:
                rid = rng.choice(active)
                how = rng.choice(("preempt", "abort"))
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
    except ExecutionDivergence as found:
        return plane, found
    return plane, None


@attrs.frozen
class CampaignResult:
    """A campaign of ``examples`` seeded examples with one set of hooks: the first divergence (None:
    none), the example it came in, its plane's trace, and the events the hooks fired in that example."""

    name: str
    examples: int
    seconds: float
    divergence: ExecutionDivergence | None = None
    example: int | None = None
    trace: tuple[str, ...] = ()
    fired: tuple[tuple[int, int | None, str], ...] = ()

    def to_json(self) -> dict:
        d = self.divergence
        return {"name": self.name, "examples": self.examples, "seconds": round(self.seconds, 3),
                "caught": None if d is None else {"example": self.example, "event": d.event, "step": d.step,
                                                  "field": d.field, "message": d.message},
                "first_fired": self.fired[0] if self.fired else None}


def campaign(name: str | None, examples: int = 200, seed: int = 0, events: int = 60, make: Any = None) -> CampaignResult:
    """Seeded random examples on the plane with the seeded bug ``name``'s hooks (None: the spec's),
    stopping at the first divergence. ``make(config, hooks)`` builds the plane (default
    :class:`ExecutionPlane`; the torch plane, :mod:`.torch_plane`, wraps one)."""
    hooks = BUG_HOOKS[name] if name is not None else ExecutionHooks()
    start = time.perf_counter()
    for i in range(examples):
        plane, found = _run_example(random.Random(f"{seed}:{i}"), hooks, events, make)
        if found is not None:
            return CampaignResult(name or "spec", i + 1, time.perf_counter() - start, found, i, tuple(plane.trace),
                                  tuple(plane.fired))
    return CampaignResult(name or "spec", examples, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.engines.dataplane.execution",
                                     description="The execution data plane against the spec and each seeded bug.")
    parser.add_argument("names", nargs="*", help="seeded bugs (default: the spec and every one)")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BUG_HOOKS and n != "spec"]
    if unknown or args.examples < 1:
        print(f"execution: {'unknown seeded bug ' + repr(unknown[0]) if unknown else '--examples must be >= 1'}"
              f" (seeded bugs: {', '.join(BUG_HOOKS)})", file=sys.stderr)
        return 2
    names = args.names or ["spec", *BUG_HOOKS]
    results = [campaign(None if n == "spec" else n, args.examples, args.seed) for n in names]
    failed = any((r.divergence is None) != (r.name == "spec") for r in results)
    print_results(results, args.json)
    return 1 if failed else 0


def print_results(results: Sequence[Any], as_json: bool) -> None:
    """The report of a campaign main (this module's and :mod:`.driven`'s): the results' JSON, or a line
    per result (a result of an engine's plane is named with its engine)."""
    if as_json:
        print(json.dumps([r.to_json() for r in results], indent=1))
        return
    for r in results:
        who = f"{r.engine} {r.name}" if getattr(r, "engine", None) else r.name
        d = r.divergence
        if d is None:
            print(f"{who}: no divergence in {r.examples} examples ({r.seconds:.2f} s)")
        else:
            print(f"{who}: {'diverged' if r.name == 'spec' else 'caught'} in example {r.example} at event {d.event} "
                  f"(step {d.step}), first fired at event {r.fired[0][0] if r.fired else '-'} ({r.seconds:.2f} s)\n"
                  f"  {d.field}: {d.message}")


if __name__ == "__main__":
    sys.exit(main())
