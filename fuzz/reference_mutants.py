"""Measuring the seeded bugs of the reference itself (:mod:`swafloor.fuzz.backends.reference_mutants`):
the oracle campaign against each, its shrunk trace for ``tests/regressions/``, the mutation score
(``python -m swafloor.fuzz.reference_mutants``)."""

from __future__ import annotations

import attrs

from .backends.reference_mutants import PREFIX, REFERENCE_MUTANTS, ReferenceMutant, names, resolve_mutant

__all__ = ["PREFIX", "REFERENCE_MUTANTS", "ReferenceMutant", "names", "resolve_mutant", "campaign", "regression_trace",
           "main", "scoring_backend", "score_row"]


# ----------------------------------------------------------------------------- measuring
def scoring_backend(name: str):
    """A backend (the oracle, a seeded bug) as a mutation score runs it: its own capabilities with ``pool_totals``
    left out of the comparison (named as set by the adapter). A pool's size is what a sizing bug
    changes, not what it breaks: such a bug counts as caught only where the undersized pool shows
    (a call runs out of slots at the step the floor still serves), never by the totals themselves."""
    from .backends import resolve
    from .protocol import Part

    record = resolve(name, "backend")
    caps = record.capabilities
    observations = {p: m for p, m in caps.observations.items() if p is not Part.POOL_TOTALS}
    caps = attrs.evolve(caps, observations=observations, adapter_set=caps.adapter_set | {Part.POOL_TOTALS})
    return attrs.evolve(record, capabilities=caps)


def campaign(name: str, *, examples: int = 300, seed: int | None = None, shrink: bool = False, out_dir=None):
    """The oracle campaign (ci profile) against the reference mutant ``name`` (the oracle of
    :func:`scoring_backend`: pool totals not compared)."""
    from .runner import PROFILES, run_campaign

    spec = name if name.startswith(PREFIX) else PREFIX + name
    seed = PROFILES["ci"].seed if seed is None else seed
    from .backends.reference_mutants import REFERENCE_MUTANTS

    mutant = REFERENCE_MUTANTS.get(spec[len(PREFIX):])
    backend = mutant.backend if mutant is not None else "oracle"
    return run_campaign(scoring_backend(backend), spec, profile="ci", examples=examples, seed=seed, shrink=shrink,
                        out_dir=out_dir)


def score_row(name: str, result, seconds: float) -> dict:
    """One mutant's row of the score: the part it breaks (:data:`~swafloor.reference.seeded_bugs.BREAKS`),
    where the campaign's first divergence was (part, field, step index and operation), and ``killed``:
    a divergence in the part it breaks. A divergence elsewhere is ``caught_elsewhere``, not killed."""
    from swafloor.reference.seeded_bugs import BREAKS, part_of

    d = result.divergence
    part = None if d is None else part_of(d.field)
    expected = list(BREAKS.get(name, ()))
    return {"name": name, "expected_part": expected, "killed": d is not None and part in expected,
            "caught_elsewhere": d is not None and part not in expected, "part": part,
            "field": None if d is None else d.field, "step_index": None if d is None else d.step_index,
            "step_op": None if d is None or d.step is None else d.step.op.value,
            "examples": result.examples, "first_failure_example": result.first_failure_example,
            "seconds": round(seconds, 3)}


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
    which each is killed (its first divergence in the part it breaks: the field and step), the median
    of both and the mutation score; a divergence in another part is not a kill. ``--save DIR NAME ...`` saves
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
        row = score_row(name, result, spent)
        if args.json:
            import json

            print(json.dumps(row), flush=True)
        if not row["killed"]:
            if not args.json:
                where = (f"CAUGHT ELSEWHERE: {row['field']} at step {row['step_index']}, not "
                         f"{'/'.join(row['expected_part'])}" if row["caught_elsewhere"] else "SURVIVED")
                print(f"{name:30s} {where} ({result.examples} examples, {spent:.1f} s)", flush=True)
            continue
        killed_at.append(result.first_failure_example)
        seconds.append(result.first_failure_seconds or spent)
        if args.json:
            continue
        print(f"{name:30s} killed at example {result.first_failure_example:4d} after "
              f"{seconds[-1]:5.1f} s ({row['field']} at step {row['step_index']} {row['step_op']})", flush=True)
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
