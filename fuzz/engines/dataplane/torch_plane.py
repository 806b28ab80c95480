"""The torch data plane on the execution layer (issue 34): KV written when a step executes, attention
computed through the worker's own table with the worker's mask, compared with the dense computation.

:class:`TorchExecutionPlane` wraps an :class:`~.execution.ExecutionPlane` (the reference's execution
layer, the worker's tables and the ledger) and gives it a device (:class:`~.engine.Engine`: paged KV
tensors and the dense copies). When a step executes, before the ledger's checks, the worker's forward
runs on the device:

- the step's keys and values (positions ``[start, end)``) and its drafter's (``[end, end + drafts)``,
  data of their own) are written through the worker's table (:class:`~.tables.WorkerTable`: the ids
  the scheduler sent, never shrunk; a block it was never sent reads and writes the padding slot 0, as
  a zero-initialised table does);
- each query of the step attends through that table with the worker's mask (the layer's
  :meth:`~swafloor.reference.execution.Execution.mask_of`, the reference's live window unless a seeded
  bug's hook moves it), and its output and every key and value it read are compared with the dense
  computation on the request's own sequence (:meth:`~.engine.Engine.check`; the dense side restates the
  window by position);
- a request created on another's content loads, on resume, the reused blocks that are not hits.

A mismatch is an :class:`~.execution.ExecutionDivergence` on ``data[request][life cycle][token]`` at
the execute event; then the ledger's checks run (:meth:`~.execution.ExecutionPlane.execute`). Slots
freed by the manager keep their data, as device memory does. The device is any torch device
(``--device cpu|cuda|auto``); nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from swafloor.reference import Config, build_layout
from swafloor.reference.hooks import ExecutionHooks

from .engine import Engine, Row, device_name, request_seed
from .execution import BUG_HOOKS, ExecutionDivergence, ExecutionPlane, campaign

__all__ = ["TorchExecutionPlane", "maker", "main"]


class TorchExecutionPlane:
    """An :class:`~.execution.ExecutionPlane` whose worker computes attention on a torch device."""

    def __init__(self, config: Config, hooks: ExecutionHooks = ExecutionHooks(), device: str = "cpu", seed: int = 0):
        self.plane = ExecutionPlane(config, hooks)
        layout = build_layout(config)
        self.engine = Engine(layout, layout.slots, device, seed=seed)
        self.engine.mask_start = self.plane.ex.mask_of  # the worker's mask on the paged side
        self.seed = seed
        self.checks = 0

    def __getattr__(self, name: str) -> Any:  # ex, manager, t, trace, fired, create, schedule, drop, ...
        return getattr(self.plane, name)

    # ------------------------------------------------------------------ events with a device side
    def resume(self, request_id: str) -> Any:
        outcome = self.plane.resume(request_id)
        run = self.plane.ex.runs[request_id]
        if outcome and run.hit:
            held = self.plane.manager.slots().held.get(request_id, ())
            source = self.plane.manager.slots().held.get(run.source) or tuple({} for _ in held)
            t = self.plane.t
            for lc, table in enumerate(held):
                loaded = {b for b, slot in table.items() if b * t < run.hit and source[lc].get(b) != slot}
                if loaded:
                    self.engine.write(request_id, self.rseed(request_id), lc, dict(table), 0, run.hit, "loaded",
                                      blocks=loaded)
        return outcome

    def execute(self) -> Any:
        if self.plane.ex.queue:
            self._forward(self.plane.ex.queue[0])
        return self.plane.execute()

    # ------------------------------------------------------------------ the forward
    def rseed(self, request_id: str) -> Any:
        """The request's data seed: its own, after its source's for the tokens of the hit it was created
        on (segments, as :meth:`~.engine.Engine.series` reads them)."""
        run = self.plane.ex.runs[request_id]
        own = request_seed(self.seed, request_id)
        if run.source is None or not run.hit:
            return own
        return ((run.hit, self.rseed(run.source)), (None, own))

    def _table(self, request_id: str, lc: int, end: int) -> dict[int, int]:
        worker = self.plane.worker[request_id][lc]
        return {b: worker.slot(b)[0] for b in range((end - 1) // self.plane.t + 1)}

    def _forward(self, step: Any) -> None:
        rid, rseed = step.request, self.rseed(step.request)
        rows = []
        for lc in range(len(self.plane.life_cycles)):
            table = self._table(rid, lc, step.end + step.drafts)
            self.engine.write(rid, rseed, lc, table, step.start, step.end, "wrote")
            if step.drafts:
                draft = request_seed(self.seed, f"{rid}#draft")
                self.engine.write(rid, draft, lc, table, step.end, step.end + step.drafts, "draft")
            rows.append(Row(rid, rseed, lc, table, step.start, step.end))
        self.checks += 1
        found = self.engine.check(rows)
        if found is not None:
            event = self.plane.event + 1
            self.plane.event = event
            self.plane.trace.append(f"{event}: execute() -> step {step.number} of {rid!r} [{step.start}, {step.end}) "
                                    f"+ {step.drafts} drafts -> the device's attention differs")
            raise ExecutionDivergence(found.field, found.message, event, step.number)


def maker(device: str = "cpu", seed: int = 0):
    """``make(config, hooks)`` for :func:`~.execution.campaign`: a torch plane on ``device``."""

    def make(config: Config, hooks: ExecutionHooks) -> TorchExecutionPlane:
        return TorchExecutionPlane(config, hooks, device, seed)

    return make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.engines.dataplane.torch_plane",
                                     description="The torch data plane on the execution layer: the spec and each seeded bug.")
    parser.add_argument("names", nargs="*", help="seeded bugs (default: the spec and every one)")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when torch sees one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BUG_HOOKS and n != "spec"]
    if unknown or args.examples < 1:
        print(f"torch_plane: {'names: unknown seeded bug ' + repr(unknown[0]) if unknown else '--examples: must be >= 1, got ' + str(args.examples)}"
              f" (seeded bugs: {', '.join(BUG_HOOKS)})", file=sys.stderr)
        return 2
    try:
        device = device_name(args.device)
    except RuntimeError as exc:
        print(f"torch_plane: --device: {args.device!r}: {exc}", file=sys.stderr)
        return 2
    if device not in ("cpu", "cuda"):
        print(f"torch_plane: --device: {args.device!r}: must be cpu, cuda or auto", file=sys.stderr)
        return 2
    names = args.names or ["spec", *BUG_HOOKS]
    results = [campaign(None if n == "spec" else n, args.examples, args.seed, make=maker(device, args.seed))
               for n in names]
    failed = any((r.divergence is None) != (r.name == "spec") for r in results)
    if args.json:
        print(json.dumps({"device": device, "results": [r.to_json() for r in results]}, indent=1))
    else:
        print(f"device: {device}")
        for r in results:
            d = r.divergence
            print(f"{r.name}: " + (f"no divergence in {r.examples} examples ({r.seconds:.2f} s)" if d is None else
                                   f"caught in example {r.example} at event {d.event} (step {d.step}) "
                                   f"({r.seconds:.2f} s)\n  {d.field}: {d.message}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
