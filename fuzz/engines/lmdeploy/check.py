"""Run in LMDeploy's venv: the ``lmdeploy`` ci campaign, the same campaign with a bug planted in
LMDeploy's own code, and the replay of the regression traces; prints one JSON object.

    .venv-lmdeploy/bin/python -m swafloor.fuzz.engines.lmdeploy.check --examples 300 --out DIR \\
        [--plant NAME ...] [--regressions DIR] [--no-campaign] [--classify TRACE ...]

Each divergence is put in its class (:func:`classify`, by what the two sides showed at the step, never
by the trace's shape alone) or ``unknown``. The plants (each replaces one LMDeploy function in this
process only, restored afterwards):

- ``window-never-freed``: ``window_block_manager._num_blocks_to_drop`` returns 0: out-of-window
  blocks are never dropped (nor counted by ``can_allocate``).
- ``hands-out-held``: the GPU ``PhysicalAllocator.allocate`` hands out, as the first of the blocks it
  returns, the block it handed out last (still held) when one is in use.

A plant is caught when the campaign diverges and, replaying its shrunk trace with the plant on, the
first step at which the plant changed what LMDeploy did (its ``fired`` record: the step at which the
planted function returned something the real one would not have) is the step of the divergence.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs

__all__ = ["PLANTS", "classify", "main"]

PLANTS = ("window-never-freed", "hands-out-held")
#: The divergence classes met so far, each with its verdict in its trace (tests/regressions/lmdeploy/).
CLASSES = ("refused-step-keeps-stale", "allocate-raises-after-can-allocate", "drops-in-window-block-past-history",
           "new-block-not-allocated", "required-counts-blocks-past-history", "step-without-allocation-keeps-stale")

_step = {"index": -1}  # the step being replayed or run (set by the instrumented backend)


def classify(divergence: dict[str, Any]) -> str:
    """The class of a divergence (its ``to_dict()``), from what the sides showed at its step."""
    step, field = divergence.get("step") or {}, divergence.get("field", "")
    ref, got = divergence.get("reference"), divergence.get("backend")
    if step.get("op") != "resize":
        return "unknown"
    if field == "outcome" and isinstance(got, dict) and got.get("kind") == "crash" and "MemoryError" in str(got):
        return "allocate-raises-after-can-allocate"
    if field == "outcome" and isinstance(got, str) and got.startswith("crashed: MemoryError"):
        return "allocate-raises-after-can-allocate"
    if field == "outcome" and isinstance(ref, dict) and isinstance(got, dict) and step["capacity"] > step["history"]:
        # LMDeploy asks more blocks than the step needs (refuses where the reference fits) or fewer
        if ref.get("kind") == "ok" and got.get("kind") == "out-of-slots":
            return "required-counts-blocks-past-history"
        if ref.get("kind") == "out-of-slots" and got.get("kind") == "ok":
            return "new-block-not-allocated"
    if field.startswith("pool_used") and isinstance(ref, int) and isinstance(got, int) and got > ref and (
            divergence.get("refused") is False):
        return "required-counts-blocks-past-history"  # a step LMDeploy allowed took more slots than it needs
    if field.startswith(("tables", "pool_used", "slots")):
        held_more = (ref is None and got is not None) or (
            isinstance(ref, (int, list)) and isinstance(got, (int, list)) and _more(got, ref))
        held_less = (got is None and ref is not None) or (
            isinstance(ref, (int, list)) and isinstance(got, (int, list)) and _more(ref, got))
        refused = divergence.get("refused")
        if held_more and refused:
            return "refused-step-keeps-stale"
        if held_more and refused is False and divergence.get("allocated") is False:
            # a step LMDeploy served without calling allocate: the blocks that left the window stay held
            return "step-without-allocation-keeps-stale"
        if held_less and refused is False:
            # the block the backend lacks: the step's newest one (not allocated), or one before it (dropped)
            block = _block_index(field)
            if block is not None and block == (step["capacity"] - 1) // divergence.get("tokens_per_block", 1):
                return "new-block-not-allocated"
            return "drops-in-window-block-past-history"
    return "unknown"


def _block_index(field: str) -> int | None:
    """The block index a ``tables[r][lc][b]`` field names, or None."""
    parts = field.replace("]", "").split("[")
    return int(parts[3]) if field.startswith("tables") and len(parts) == 4 and parts[3].isdigit() else None


def _more(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a > b
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(x >= y for x, y in zip(a, b)) and a != b
    return False


@contextlib.contextmanager
def planted(name: str, fired: list[int]) -> Iterator[None]:
    """LMDeploy with the plant ``name`` on; ``fired`` gets the step index each time it changes a result."""
    from . import compat

    compat.load()
    if name == "window-never-freed":
        module = sys.modules["lmdeploy.pytorch.paging.block_manager.window_block_manager"]
        real = module._num_blocks_to_drop

        def plant(seq: Any, window_size: int) -> int:
            if real(seq, window_size) > 0:
                fired.append(_step["index"])
            return 0

        module._num_blocks_to_drop = plant
        try:
            yield
        finally:
            module._num_blocks_to_drop = real
    elif name == "hands-out-held":
        cls = sys.modules["lmdeploy.pytorch.paging.block_manager.base_block_manager"].PhysicalAllocator
        real_allocate = cls.allocate

        def allocate(self: Any, num_blocks: int) -> Any:
            used = self._num_blocks - self._free_count
            blocks = real_allocate(self, num_blocks)
            if used > 0 and num_blocks > 0:
                blocks = blocks.copy()
                blocks[0] = self._free_blocks[used - 1]
                fired.append(_step["index"])
            return blocks

        cls.allocate = allocate
        try:
            yield
        finally:
            cls.allocate = real_allocate
    else:
        raise ValueError(f"plant={name!r}: one of {', '.join(PLANTS)}")


def _counting(backend_factory: Callable) -> Callable:
    """A factory whose backends record, in ``_step``, the index of the step they run (replay order)."""
    from .backend import LmdeployBackend

    class Counting(LmdeployBackend):
        pass

    for op in ("create", "resume", "resize", "commit", "suspend", "close"):
        def wrapped(self, *args, _op=op, **kwargs):
            _step["index"] += 1
            return getattr(LmdeployBackend, _op)(self, *args, **kwargs)
        setattr(Counting, op, wrapped)

    def make(config):
        _step["index"] = -1
        return Counting(config)

    make.declaration = backend_factory.declaration
    make.capabilities = backend_factory.capabilities
    return make


def _step_facts(trace: Any, index: int) -> tuple[bool | None, bool | None]:
    """Whether the backend refused (out of blocks) the step ``index`` of ``trace``, and whether LMDeploy's
    ``allocate`` was called in it (on any block manager): the trace replayed up to it on the backend
    alone, its outcome read and the block managers' ``allocate`` calls counted. ``None`` where the step
    raised (neither a refusal nor an answer)."""
    from .backend import LmdeployBackend

    b = LmdeployBackend(trace.config)
    calls: list[int] = []
    for manager in b.managers:
        real = manager.allocate

        def counted(*args: Any, _real: Callable = real, **kwargs: Any) -> Any:
            calls.append(_step["index"])
            return _real(*args, **kwargs)

        manager.allocate = counted
    for i, step in enumerate(trace.steps[: index + 1]):
        args = step.to_dict()
        op = args.pop("op")
        rid = args.pop("request")
        _step["index"] = i
        try:
            out = getattr(b, op)(rid, *args.values())
        except Exception:  # noqa: BLE001 - the step raised: not a refusal
            return None, None
        if i == index:
            return (None if out is None else not out.ok), index in calls
    return None, None


def _classified(trace_path: Path) -> dict[str, Any]:
    from ...replay import replay
    from ...trace import load

    from .backend import semantics

    trace = load(trace_path)
    found = replay(trace, "lmdeploy")
    # the same steps under the semantics the backend claims now (a class now modelled matches there)
    claimed = replay(attrs.evolve(trace, config=attrs.evolve(trace.config, semantics=semantics())), "lmdeploy")
    under_claimed = None if claimed.divergence is None else json.loads(json.dumps(claimed.divergence.to_dict(), default=str))
    if found.divergence is None:
        return {"trace": str(trace_path), "class": None, "under_claimed": under_claimed}
    d = found.divergence.to_dict()
    d["refused"], d["allocated"] = _step_facts(trace, d["step_index"])
    d["tokens_per_block"] = trace.config.tokens_per_block
    return {"trace": str(trace_path), "divergence": json.loads(json.dumps(d, default=str)), "class": classify(d),
            "under_claimed": under_claimed}


def _campaign(examples: int, out: Path) -> dict[str, Any]:
    from ...runner import run_campaign

    result = run_campaign("lmdeploy", profile="ci", examples=examples, seed=0, out_dir=out)
    report: dict[str, Any] = {"result": result.result, "examples": result.examples, "steps": result.steps,
                              "discard_rate": result.discard_rate}
    if result.trace_file is not None:
        report.update(_classified(Path(result.trace_file)))
    return report


def _plant_run(name: str, examples: int, out: Path) -> dict[str, Any]:
    from ...protocol import BackendRecord
    from ...replay import replay
    from ...runner import run_campaign
    from ...trace import load

    from .backend import lmdeploy

    counting = BackendRecord("lmdeploy", _counting(lmdeploy))
    fired: list[int] = []
    with planted(name, fired):
        result = run_campaign(counting, profile="ci", examples=examples, seed=0, out_dir=out / name)
        report: dict[str, Any] = {"result": result.result, "fired_in_campaign": len(fired)}
        if result.trace_file is None:
            return report
        fired.clear()
        found = replay(load(result.trace_file), counting)
    d = found.divergence.to_dict() if found.divergence is not None else None
    report.update(divergence=json.loads(json.dumps(d, default=str)) if d else None,
                  first_fired=fired[0] if fired else None, trace=str(result.trace_file))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.engines.lmdeploy.check")
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plant", action="append", default=[], choices=PLANTS)
    parser.add_argument("--regressions", type=Path, default=None)
    parser.add_argument("--no-campaign", action="store_true")
    parser.add_argument("--classify", type=Path, nargs="*", default=[], metavar="TRACE",
                        help="also replay these traces (a matrix cell's) and name each one's class")
    args = parser.parse_args(argv)
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        data: dict[str, Any] = {}
        if not args.no_campaign:
            data["campaign"] = _campaign(args.examples, args.out)
        data["plants"] = {name: _plant_run(name, args.examples, args.out) for name in args.plant}
        if args.regressions is not None:
            data["regressions"] = [_classified(p) for p in sorted(args.regressions.glob("*.json"))]
        if args.classify:
            data["classified"] = [_classified(p) for p in args.classify]
    finally:
        sys.stdout = real_stdout
    print(json.dumps(data, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
