"""Measuring the seeded bugs of the reference itself (:mod:`swafloor.fuzz.backends.reference_mutants`):
the oracle campaign against each, its shrunk trace for ``tests/regressions/``, the mutation score
(``python -m swafloor.fuzz.reference_mutants``)."""

from __future__ import annotations

import attrs

from .backends.reference_mutants import PREFIX, REFERENCE_MUTANTS, ReferenceMutant, names, resolve_mutant

__all__ = ["PREFIX", "REFERENCE_MUTANTS", "ReferenceMutant", "names", "resolve_mutant", "campaign", "regression_trace",
           "main"]


# ----------------------------------------------------------------------------- measuring
def campaign(name: str, *, examples: int = 300, seed: int | None = None, shrink: bool = False, out_dir=None):
    """The oracle campaign (ci profile) against the reference mutant ``name``."""
    from .runner import PROFILES, run_campaign

    spec = name if name.startswith(PREFIX) else PREFIX + name
    seed = PROFILES["ci"].seed if seed is None else seed
    from .backends.reference_mutants import REFERENCE_MUTANTS

    mutant = REFERENCE_MUTANTS.get(spec[len(PREFIX):])
    backend = mutant.backend if mutant is not None else "oracle"
    return run_campaign(backend, spec, profile="ci", examples=examples, seed=seed, shrink=shrink, out_dir=out_dir)


def regression_trace(name: str, *, examples: int = 300, seed: int | None = None):
    """The shrunk trace on which the oracle campaign kills ``name``, recast as the mutant diverging
    from the reference (what tests/regressions/ replays), or None when the campaign does not kill it."""
    from .replay import replay

    result = campaign(name, examples=examples, seed=seed, shrink=True)
    if result.trace is None:
        return None
    trace = attrs.evolve(result.trace, backend=PREFIX + name.removeprefix(PREFIX), against="reference")
    found = replay(trace)
    if not found.diverged:
        return None
    return attrs.evolve(trace, expect="divergence", divergence=found.divergence.to_dict())


def main(argv: list[str] | None = None) -> int:
    """``python -m swafloor.fuzz.reference_mutants [--examples N] [--seed S] [--json] [NAME ...]``: run the
    oracle campaign against each reference mutant (all by default) and print the example and time at
    which each is killed, the median of both and the mutation score. ``--save DIR NAME ...`` saves
    each one's shrunk trace (the mutant against the reference) into DIR."""
    import argparse
    import statistics
    import time
    from pathlib import Path

    from .trace import save

    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.reference_mutants")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--save", type=Path, default=None, metavar="DIR")
    parser.add_argument("--json", action="store_true", help="one JSON object per mutant, one per line")
    args = parser.parse_args(argv)
    chosen = [n.removeprefix(PREFIX) for n in args.names] or list(REFERENCE_MUTANTS)
    for name in chosen:
        if name not in REFERENCE_MUTANTS:
            parser.error(f"{name!r} is not a reference mutant")
    if args.save is not None:
        for name in chosen:
            trace = regression_trace(name, examples=args.examples, seed=args.seed)
            if trace is None:
                print(f"{name}: not killed", flush=True)
                continue
            path = save(trace, args.save / f"reference-mutant-{name}.json")
            print(f"{name}: {len(trace.steps)} steps -> {path}", flush=True)
        return 0
    killed_at, seconds = [], []
    for name in chosen:
        started = time.perf_counter()
        result = campaign(name, examples=args.examples, seed=args.seed)
        spent = time.perf_counter() - started
        if args.json:
            import json

            print(json.dumps({"name": name, "killed": result.divergence is not None, "examples": result.examples,
                              "first_failure_example": result.first_failure_example, "seconds": round(spent, 3),
                              "field": None if result.divergence is None else result.divergence.field}), flush=True)
        if result.divergence is None:
            if not args.json:
                print(f"{name:30s} SURVIVED {result.examples} examples ({spent:.1f} s)", flush=True)
            continue
        killed_at.append(result.first_failure_example)
        seconds.append(result.first_failure_seconds or spent)
        if args.json:
            continue
        print(f"{name:30s} killed at example {result.first_failure_example:4d} after "
              f"{seconds[-1]:5.1f} s ({result.divergence.field})", flush=True)
    if args.json:
        return 0 if len(killed_at) == len(chosen) else 1
    print(f"mutation score: {len(killed_at)}/{len(chosen)}", end="")
    if killed_at:
        print(f"; median example {statistics.median(killed_at)}, median time {statistics.median(seconds):.1f} s, "
              f"slowest example {max(killed_at)}, all in {sum(seconds):.1f} s")
    else:
        print()
    return 0 if len(killed_at) == len(chosen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
