"""``swafloor bench``: figures, never pass/fail. Targets:

- ``reference``: decode steps per second of the reference manager beside the token-level oracle's,
  for one request and for 64 requests sharing pools, W in {128, 4096}; with ``--against vllm``,
  beside vLLM v1's sliding-window manager in the same process (run it with the vLLM venv's python,
  ``.venv-vllm/bin/swafloor bench reference --against vllm``; elsewhere it says vLLM is missing).
- ``proofs``: each theorem's Z3 seconds beside its bounded concrete check's, and their ratio.
- ``fuzz``: per mutant, the median examples and seconds to catch it; differential steps per second.
- ``dataplane``: steps per second of ``dataplane:reference`` beside the table-only campaign, on
  ``SWAFLOOR_DEVICE`` (needs torch; says so when it is missing).
"""

from __future__ import annotations

import importlib
import sys
import time

from swafloor.reference import AttentionLayer, Config, build_layout, cdiv
from swafloor.reference.show import bounded

from ._common import float_in, format_duration, print_json

TARGETS = {
    "reference": "swafloor.commands.bench:reference_figures",
    "proofs": "swafloor.proofs.bench:run",
    "fuzz": "swafloor.fuzz.bench:run",
    "dataplane": "swafloor.fuzz.engines.dataplane.bench:run",
}
FORMATTERS = {
    "reference": "swafloor.commands.bench:format_reference",
    "proofs": "swafloor.proofs.bench:format",
    "fuzz": "swafloor.fuzz.bench:format",
    "dataplane": "swafloor.fuzz.engines.dataplane.bench:format",
}


#: What each fixed-size target costs, in CPU seconds (user + sys of ``time swafloor bench TARGET``,
#: its solver processes included) on the development machine (x86_64, 2 cores, Python 3.11.7, measured
#: under a load average near 8, which CPU seconds mostly discount): the basis of the estimate printed
#: before measuring. A slower or busier machine takes longer than estimated.
TYPICAL_SECONDS = {"proofs": 140.0, "fuzz": 76.0, "dataplane": 26.0}
REFERENCE_FIGURE_OVERHEAD = 0.3  # seconds to build each reference figure's sides beyond its budget


def estimate(targets: list[str], seconds: float, against: str) -> str:
    """One line, printed before any measuring: about how long ``targets`` take in all, and why."""
    total, parts = 0.0, []
    for target in targets:
        if target == "reference":
            figures = 2 * (len(VLLM_ROWS) if against == "vllm" else 4)  # two sides per row
            cost = figures * (seconds + REFERENCE_FIGURE_OVERHEAD)
            parts.append(f"reference {figures} figures x {seconds:g} s")
        else:
            cost = TYPICAL_SECONDS[target]
            parts.append(f"{target} ~{format_duration(cost)}")
        total += cost
    basis = "; the others as measured on the development machine" if set(targets) - {"reference"} else ""
    return (f"bench: {', '.join(targets)}: about {format_duration(total)} in all ({', '.join(parts)}{basis}); "
            "Ctrl-C stops")


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="print performance figures (reference, proofs, fuzz, dataplane)")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"what to measure: {', '.join(TARGETS)} (default: all)")
    p.add_argument("--seconds", type=float_in(0.001, 3600.0), default=1.0,
                   help="time budget per reference figure (default 1)")
    p.add_argument("--against", choices=("oracle", "vllm"), default="oracle",
                   help="what the reference target measures the reference beside (default oracle)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _load(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def run(args) -> int:
    from ..cli import UsageError

    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        raise UsageError(f"swafloor bench: TARGET={bounded(unknown[0], 60)}: must be one of {', '.join(TARGETS)}")
    targets = list(dict.fromkeys(args.targets)) or list(TARGETS)
    print(estimate(targets, args.seconds, args.against), file=sys.stderr, flush=True)
    results = {}
    for target in targets:
        print(f"bench: measuring {target} ...", file=sys.stderr)
        if target == "reference" and args.against == "vllm":
            results[target] = vllm_figures(seconds=args.seconds)
            continue
        fn = _load(TARGETS[target])
        results[target] = fn(seconds=args.seconds) if target == "reference" else fn()
    if args.json:
        print_json(results)
        return 0
    for target in targets:
        formatter = format_vllm if target == "reference" and args.against == "vllm" else _load(FORMATTERS[target])
        print(formatter(results[target]))
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


# The rows of the speed issue: (W, t, requests), each request from history 2W, slots at the floor.
VLLM_ROWS = ((128, 32, 1), (128, 32, 64), (4096, 32, 1), (4096, 32, 64), (4096, 16, 8))


def _reference_decode(config: Config, requests: int, seconds: float, start_history: int) -> dict:
    """The reference Manager driven like :func:`swafloor.fuzz.engines.vllm.decode.decode_rate` drives vLLM: warmed
    up by decoding from history 0 (untimed), then round-robin ``resize(h + 1, h)`` and ``commit(1)``."""
    from swafloor.reference import Manager
    from swafloor.fuzz.engines.vllm.decode import timed_rounds

    manager = Manager(config)
    ids = [f"r{i}" for i in range(requests)]
    history = dict.fromkeys(ids, 0)
    for rid in ids:
        manager.create(rid)
        assert manager.resume(rid)

    def step(rid: str) -> None:
        h = history[rid]
        if not manager.resize(rid, h + 1, h):
            raise AssertionError(f"reference: {rid} ran out of slots at history {h}")
        manager.commit(rid, 1)
        history[rid] = h + 1

    figures = timed_rounds(step, ids, seconds, start_history, lambda: max(history.values()))
    manager.check()
    return figures


def vllm_figures(seconds: float = 1.0, rows=VLLM_ROWS) -> dict:
    """Decode steps per second of the reference beside vLLM's SlidingWindowManager, row by row, in
    this process; without vLLM, the reference alone and the reason."""
    from swafloor.fuzz.engines.vllm import decode as vllm_decode

    missing = vllm_decode.available()
    out = []
    for window, t, n in rows:
        floor = build_layout(Config(t, [AttentionLayer(window)])).min_slots[0]
        config = Config(t, [AttentionLayer(window)], slots=[n * floor])
        row = {"window": window, "tokens_per_block": t, "requests": n, "slots": n * floor,
               "start_history": 2 * window,
               "reference": _reference_decode(config, n, seconds, 2 * window)}
        if missing is None:
            row["vllm"] = vllm_decode.decode_rate(window, t, n, n * floor, seconds, 2 * window)
            row["ratio"] = round(row["reference"]["steps_per_second"] / row["vllm"]["steps_per_second"], 2)
        out.append(row)
    return {"seconds_per_figure": seconds, "python": sys.version.split()[0], "vllm_missing": missing, "rows": out}


def format_vllm(figures: dict) -> str:
    missing = figures["vllm_missing"]
    lines = [
        f"reference manager vs vLLM v1 SlidingWindowManager + BlockPool: decode steps per second "
        f"({figures['seconds_per_figure']} s each, Python {figures['python']}, one process), "
        f"each request from history 2W, slots at the floor",
    ]
    if missing:
        lines.append(f"vLLM is not importable here ({missing}); the reference alone:")
    lines.append(f"{'W':>6} {'t':>4} {'requests':>8} {'slots':>6} {'reference':>12} {'vLLM':>10} {'ref/vLLM':>9}")
    for r in figures["rows"]:
        vllm = f"{r['vllm']['steps_per_second']:>10,}" if "vllm" in r else f"{'-':>10}"
        ratio = f"{r['ratio']:>8}x" if "ratio" in r else f"{'-':>9}"
        lines.append(
            f"{r['window']:>6} {r['tokens_per_block']:>4} {r['requests']:>8} {r['slots']:>6} "
            f"{r['reference']['steps_per_second']:>12,} {vllm} {ratio}"
        )
    return "\n".join(lines)
