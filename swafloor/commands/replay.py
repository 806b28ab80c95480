"""``swafloor replay FILE``: replay a saved trace on a backend and the reference, step by step.

Exit 0 when the two agree on every step, 1 on a divergence (whatever the trace expects: a regression
trace recorded with ``"expect": "divergence"`` exits 1 on its mutant, and says it was expected),
2 on a malformed trace file (one line naming the field and the value) or a bad backend name.
"""

from __future__ import annotations

from ._common import print_json


def register(subparsers) -> None:
    p = subparsers.add_parser("replay", help="replay a saved fuzzing trace")
    p.add_argument("file", metavar="FILE", help="a trace saved by swafloor fuzz (JSON)")
    p.add_argument("--backend", default=None, metavar="NAME|MODULE:FACTORY",
                   help="the backend to replay on (default: the one the trace names)")
    p.add_argument("--against", default=None, metavar="NAME|MODULE:FACTORY",
                   help="what to compare with (default: the trace's, normally reference)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(args) -> int:
    from swafloor.fuzz.compare import jsonable
    from swafloor.fuzz.replay import replay
    from swafloor.fuzz.trace import TraceError, load

    try:
        trace = load(args.file)
    except TraceError as exc:
        from ..cli import UsageError

        raise UsageError(f"swafloor replay: {exc}") from None  # exc quotes the file, bounded
    result = replay(trace, args.backend, args.against)
    verdict = "divergence" if result.diverged else "match"
    if args.json:
        print_json({
            "result": verdict,
            "backend": result.backend,
            "against": result.against,
            "steps": len(trace.steps),
            "steps_run": result.steps_run,
            "expect": result.expect,
            "as_expected": result.as_expected,
            "divergence": None if result.divergence is None else jsonable(result.divergence.to_dict()),
            "lost_hits": [{"step_index": i, "request": rid, "longest": longest, "taken": taken, "rule": rule}
                          for i, rid, longest, taken, rule in result.lost_hits],
        })
    else:
        print(f"{result.backend} vs {result.against}: {verdict} after {result.steps_run} of {len(trace.steps)} steps"
              f" (the trace expects {result.expect}{'' if result.as_expected else '; NOT as expected'})")
        for i, rid, longest, taken, rule in result.lost_hits:
            print(f"lost hit at step {i}: resume({rid!r}) took {taken} tokens where the longest valid hit is "
                  f"{longest} (the backend recomputes {longest - taken}; lost-hit rule {rule})")
        if result.divergence is not None:
            print(result.divergence.describe())
        if not result.as_expected and not result.diverged:
            print(f"hint: {args.file} no longer diverges; to keep it as a regression, edit its \"expect\": "
                  f"\"divergence\" to \"expect\": \"match\" (replay then says as expected, exits 0 while "
                  f"the two agree and 1 if they diverge again) and keep it with your tests")
    return 1 if result.diverged else 0
