"""``swafloor bench``: figures, never pass/fail. Targets:

- ``reference``: decode steps per second of the reference manager beside the token-level oracle's,
  for one request and for 64 requests sharing pools, W in {128, 4096}.
- ``proofs``: each theorem's Z3 seconds beside its bounded concrete check's, and their ratio.
- ``fuzz``: per mutant, the median examples and seconds to catch it; differential steps per second.
"""

from __future__ import annotations

import importlib
import sys
import time

from swafloor.reference import AttentionLayer, Config, build_layout, cdiv
from swafloor.reference.show import bounded

from ._common import float_in, print_json

TARGETS = {
    "reference": "swafloor.commands.bench:reference_figures",
    "proofs": "swafloor.proofs.bench:run",
    "fuzz": "swafloor.fuzz.bench:run",
}
FORMATTERS = {
    "reference": "swafloor.commands.bench:format_reference",
    "proofs": "swafloor.proofs.bench:format",
    "fuzz": "swafloor.fuzz.bench:format",
}


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="print performance figures (reference, proofs, fuzz)")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"what to measure: {', '.join(TARGETS)} (default: all)")
    p.add_argument("--seconds", type=float_in(0.001, 3600.0), default=1.0,
                   help="time budget per reference figure (default 1)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _load(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def run(args) -> int:
    from swafloor.cli import UsageError

    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        raise UsageError(f"swafloor bench: TARGET={bounded(unknown[0], 60)}: must be one of {', '.join(TARGETS)}")
    targets = list(dict.fromkeys(args.targets)) or list(TARGETS)
    results = {}
    for target in targets:
        print(f"bench: measuring {target} ...", file=sys.stderr)
        fn = _load(TARGETS[target])
        results[target] = fn(seconds=args.seconds) if target == "reference" else fn()
    if args.json:
        print_json(results)
        return 0
    for target in targets:
        print(_load(FORMATTERS[target])(results[target]))
        print()
    return 0


def _decode_rate(factory, config: Config, requests: int, seconds: float, start_history: int) -> dict:
    """Round-robin decode steps on ``requests`` requests, each starting from ``start_history`` reused
    tokens (a multiple of t: no copy at resume), until ``seconds`` pass; steps per second."""
    backend = factory(config)
    ids = [f"r{i}" for i in range(requests)]
    history = dict.fromkeys(ids, start_history)
    for rid in ids:
        backend.create(rid, start_history)
        assert backend.resume(rid)
    steps, start = 0, time.perf_counter()
    deadline = start + seconds
    while steps == 0 or time.perf_counter() < deadline:  # at least one round: a rate needs steps
        for rid in ids:
            h = history[rid]
            outcome = backend.resize(rid, h + 1, h)
            if not outcome:
                raise AssertionError(f"bench: {rid} ran out of slots at history {h}: {outcome.describe()}")
            backend.commit(rid, 1)
            history[rid] = h + 1
        steps += requests
    elapsed = time.perf_counter() - start
    return {"steps": steps, "seconds": round(elapsed, 3), "steps_per_second": round(steps / elapsed),
            "final_history": max(history.values())}


def reference_figures(seconds: float = 1.0, t: int = 32, windows=(128, 4096), requests=(1, 64)) -> dict:
    from swafloor.fuzz.backends import resolve

    rows = []
    for window in windows:
        for n in requests:
            floor = build_layout(Config(t, [AttentionLayer(window)])).min_slots[0]
            config = Config(t, [AttentionLayer(window)], slots=[n * floor])
            start_history = t * cdiv(2 * window, t)  # two windows in, a multiple of t
            row = {"window": window, "tokens_per_block": t, "requests": n, "slots": n * floor,
                   "start_history": start_history}
            for name in ("reference", "oracle"):
                built = time.perf_counter()
                factory = resolve(name).factory
                rate = _decode_rate(factory, config, n, seconds, start_history)
                rate["build_and_run_seconds"] = round(time.perf_counter() - built, 3)
                row[name] = rate
            row["speedup"] = round(row["reference"]["steps_per_second"] / row["oracle"]["steps_per_second"], 1)
            rows.append(row)
    return {"seconds_per_figure": seconds, "python": sys.version.split()[0], "rows": rows}


def format_reference(figures: dict) -> str:
    lines = [
        f"reference manager vs token-level oracle: decode steps per second "
        f"({figures['seconds_per_figure']} s each, Python {figures['python']}), each request from history 2W",
        f"{'W':>6} {'t':>4} {'requests':>8} {'slots':>6} {'reference':>12} {'oracle':>10} {'ratio':>7}"
        f" {'h reached (ref/oracle)':>24}",
    ]
    for r in figures["rows"]:
        lines.append(
            f"{r['window']:>6} {r['tokens_per_block']:>4} {r['requests']:>8} {r['slots']:>6} "
            f"{r['reference']['steps_per_second']:>12,} {r['oracle']['steps_per_second']:>10,} "
            f"{r['speedup']:>6}x {r['reference']['final_history']:>12}/{r['oracle']['final_history']}"
        )
    return "\n".join(lines)
