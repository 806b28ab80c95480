"""Measuring the seeded bugs of the reference itself (:mod:`swafloor.fuzz.backends.reference_mutants`):
the oracle campaign against each, its shrunk trace for ``tests/regressions/``, the mutation score
(``python -m swafloor.fuzz.reference_mutants``)."""

from __future__ import annotations

import attrs

from .backends.reference_mutants import PREFIX, REFERENCE_MUTANTS, ReferenceMutant, names, resolve_mutant

__all__ = ["PREFIX", "REFERENCE_MUTANTS", "ReferenceMutant", "names", "resolve_mutant", "campaign", "regression_trace",
           "main", "scoring_backend", "score_row", "firing_of"]


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


def firing_of(name: str, result):
    """The campaign's trace replayed with the mutant ``name`` watched (:mod:`swafloor.fuzz.firing`): the
    step it fired at beside the step and field of the divergence (None: the campaign found none)."""
    from .firing import replay_firing, watched_record

    if result.divergence is None or result.trace is None:
        return None
    name = name.removeprefix(PREFIX)
    firings: list = []
    return replay_firing(result.trace, scoring_backend(REFERENCE_MUTANTS[name].backend),
                         watched_record(resolve_mutant(name), firings), firings)


def score_row(name: str, result, seconds: float, fired=None) -> dict:
    """One mutant's row of the score: the part it breaks (:data:`~swafloor.reference.seeded_bugs.BREAKS`),
    where the campaign's first divergence was (part, field, step index and operation), where the
    mutant fired (``fired``, a :class:`~swafloor.fuzz.firing.Fired` of the same trace: ``fired_at``,
    ``shown_at``, ``why``), and ``killed``: a divergence in the part it breaks, at the step it fired
    (or as :data:`~swafloor.reference.seeded_bugs.SEEN_LATER` states). A divergence in another part,
    or at another step, is ``caught_elsewhere`` (``verdict`` says why), not killed."""
    from swafloor.reference.seeded_bugs import BREAKS, ORACLE, part_of

    from .firing import judge

    d = result.divergence
    part = None if d is None else part_of(d.field)
    expected = list(BREAKS.get(name, ()))
    verdict = None
    if d is not None and part not in expected:
        verdict = f"{name} ({ORACLE}): diverged in {d.field} at step {d.step_index}, not in {'/'.join(expected)}"
    elif d is not None and fired is not None:
        verdict = judge(name, ORACLE, fired)
        if verdict is None and (fired.seen_at, fired.field) != (d.step_index, d.field):
            verdict = (f"{name}: the replay diverged in {fired.field} at step {fired.seen_at}, the campaign in "
                       f"{d.field} at step {d.step_index}")
    return {"name": name, "expected_part": expected, "killed": d is not None and verdict is None,
            "caught_elsewhere": d is not None and verdict is not None, "part": part,
            "field": None if d is None else d.field, "step_index": None if d is None else d.step_index,
            "step_op": None if d is None or d.step is None else d.step.op.value,
            "fired_at": None if fired is None else fired.fired_at,
            "shown_at": None if fired is None else fired.shown_at,
            "why": None if fired is None else fired.why, "verdict": verdict,
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
    which each is killed (its first divergence in the part it breaks, at the step the mutant fired: the
    field and step), the median of both and the mutation score; a divergence in another part, or at
    another step, is not a kill. ``--save DIR NAME ...`` saves
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
        row = score_row(name, result, spent, firing_of(name, result))
        if args.json:
            import json

            print(json.dumps(row), flush=True)
        if not row["killed"]:
            if not args.json:
                where = f"CAUGHT ELSEWHERE: {row['verdict']}" if row["caught_elsewhere"] else "SURVIVED"
                print(f"{name:30s} {where} ({result.examples} examples, {spent:.1f} s)", flush=True)
            continue
        killed_at.append(result.first_failure_example)
        seconds.append(result.first_failure_seconds or spent)
        if args.json:
            continue
        print(f"{name:30s} killed at example {result.first_failure_example:4d} after "
              f"{seconds[-1]:5.1f} s ({row['field']} at step {row['step_index']} {row['step_op']}, fired at step "
              f"{row['fired_at']})", flush=True)
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
