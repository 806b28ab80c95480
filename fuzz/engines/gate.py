"""What the engines' admission differentials share (``vllm-admission``, ``sglang-admission``; issue 32):
each asks an engine's own admission gate one lone request at many pool sizes, and compares the least
pool it admits at with swafloor's model of that gate and with the reference's rule. The engine's side
(building its objects, asking it) and the comparison's classes stay in each room; here:

- :func:`least_admitting`: the threshold by bisection over ``low..bound``, monotonicity checked (not
  assumed) at the pools that matter;
- :func:`lone_run_completes`: the reference's lone run of the request on a manager at one pool size;
- :func:`drawn_cases`: a campaign's cases, drawn by Hypothesis from a fixed seed;
- :func:`differential_main`: the command line of a room's differential (``python -m ...admission``).

Engine-neutral: it imports no engine and no room.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from swafloor.reference import Config, ConfigError, Manager, admission

from ..protocol import Unsupported

__all__ = ["least_admitting", "lone_run_completes", "drawn_cases", "differential_main"]


def least_admitting(admits: Callable[[int], bool], low: int, bound: int, probes: Iterable[int] = ()) -> dict[str, Any]:
    """The least pool in ``low..bound`` at which ``admits`` holds (None if it refuses at ``bound``), by
    bisection. Bisection assumes the answer is monotone in the pool; that is checked at ``low``, at
    ``bound``, at the threshold's neighbours and around each of ``probes`` (the charges compared): a
    refusal at or above the threshold, or an admission below it, is ``non_monotone`` (the first such
    pool). ``asked`` counts the pools asked (each once)."""
    answers: dict[int, bool] = {}

    def ask(n: int) -> bool:
        if n not in answers:
            answers[n] = admits(n)
        return answers[n]

    threshold = None
    if ask(bound):
        lo, hi = low, bound  # the least admitting pool lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if ask(mid):
                hi = mid
            else:
                lo = mid + 1
        threshold = lo
    for n in sorted({low, bound, *(p + d for p in (*probes, *(() if threshold is None else (threshold,)))
                                   for d in (-1, 0, 1))}):
        if low <= n <= bound:
            ask(n)
    bad = next((n for n, ok in sorted(answers.items()) if ok != (threshold is not None and n >= threshold)), None)
    return {"threshold": threshold, "non_monotone": bad, "bound": bound, "asked": len(answers)}


def lone_run_completes(make_config: Callable[[], Config], prompt: int, output: int, chunk: int, lookahead: int) -> bool:
    """The lone run (``prompt`` tokens prefilled in chunks of ``chunk``, ``output`` tokens decoded, ``lookahead``
    slots a step) completes on a reference manager of ``make_config()``, its invariants checked after every
    call (:func:`swafloor.reference.admission.lone_run`); a config below the reference's minimum does not run."""
    try:
        config = make_config()
    except ConfigError:
        return False
    manager = Manager(config)

    def call(op: str, rid: str, *args: int):
        result = getattr(manager, op)(rid, *args)
        manager.check()
        return result

    return admission.lone_run(call, "r0", prompt, output, chunk, lookahead)


def drawn_cases(strategy: Callable[[], Any], examples: int, seed: int) -> list:
    """``examples`` draws of ``strategy()`` by Hypothesis with a fixed seed (no database, no shrinking: every
    case is kept, none fails), each case once, in the order drawn; the seed alone decides them."""
    from hypothesis import HealthCheck, Phase, given, seed as fixed_seed, settings

    from ..stream import source_blind

    drawn: list = []

    @fixed_seed(seed)
    @settings(max_examples=examples, database=None, phases=(Phase.generate,), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def draw(case):
        if case not in drawn:
            drawn.append(case)

    with source_blind():
        draw()
    return drawn


def differential_main(argv: Sequence[str] | None, *, module: str, engine: str, key: str, load: Callable[[], Any],
                      version: Callable[[], str], run: Callable[[int, int], dict], replay: Callable[[Path], dict],
                      planted: Callable[[str | None], Any], plants: Sequence[str], classes: dict[str, str],
                      example: Callable[[dict], str]) -> int:
    """A room's differential on the command line: ``--examples`` cases from ``--seed`` (with ``--plant``,
    the engine patched for the campaign: a check of the check), ``--replay`` saved traces, ``--json``.
    ``engine`` is its title (``vLLM``), ``key`` the field its records name the engine's value by, ``example``
    the one line that shows a class's example after ``e.g. CASE:``. Exit 0: the differential reports what
    it found; the suite's tests judge it."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--examples", type=int, default=200, help="cases to generate (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plant", choices=plants, help=f"patch {engine}'s gate for the campaign (a check of the check)")
    parser.add_argument("--replay", type=Path, nargs="*", default=[], help="saved traces to replay (each with its own plant)")
    args = parser.parse_args(argv)
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # an engine may log to stdout on import
    try:
        load()
        data: dict[str, Any] = {"version": version()}
        if args.examples:
            with planted(args.plant):
                data.update(run(args.examples, args.seed))
        if args.replay:
            data["replays"] = [replay(path) for path in args.replay]
    except Unsupported as exc:
        data = {"version": version(), "unsupported": str(exc)}
    finally:
        sys.stdout = real_stdout
    if args.json:
        print(json.dumps(data))
        return 0
    print(f"{engine} {data.get('version')}{' (plant: ' + args.plant + ')' if args.plant else ''}: "
          f"{data.get('unsupported') or ''}")
    for name, n in (data.get("counts") or {}).items():
        if n:
            ex = data["examples_by_class"][name]
            print(f"  {name}: {n}  ({classes[name]})")
            print(f"    e.g. {ex['case']}: {example(ex)}")
    if "seconds" in data:
        print(f"  {data['examples']} examples in {data['seconds']} s")
    for r in data.get("replays", []):
        print(f"  replay {r['trace']}: {engine} {r[key]}, classes {r['classes']}" +
              (f", without the plant {r['clean']}" if "clean" in r else ""))
    return 0
