"""``swafloor prove``: discharge the theorem catalogue with Z3 (or cvc5, or both) and check each
theorem token by token (the twin, proofs/twins.py: the plain statement brute-forced block by block,
never the goal). Every refutation is also checked on ints (the concrete check: the goal itself,
evaluated on bounded ints; its first failing point must be the solvers' smallest counterexample);
``--concrete`` runs that check on the proofs too (the test suite does). Both solvers get the goals
rewritten exactly into linear arithmetic by default (``--encoding direct``: as written; see
proofs/discharge.py).

Exit 0 when every theorem meets its expected outcome, 1 when any result contradicts it (including a
disagreement between a solver and the bounded check, between the two solvers, or a refutation the
manager does not reproduce, or a token-level twin that misses the expected outcome), 3 when any is unknown (a solver timeout or ``unknown``, from either
solver), 2 on bad arguments (and ``--solver cvc5|both`` without cvc5 installed).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

from swafloor.proofs import DEFAULT_RLIMIT, DEFAULT_TIMEOUT_S
from swafloor.reference.show import bounded

from ._common import MAX_JOBS, MAX_SECONDS, float_in, int_in, print_json


def default_jobs() -> int:
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(2, os.cpu_count() or 1))


def register(subparsers) -> None:
    p = subparsers.add_parser("prove", help="prove the theorem catalogue with Z3 (and cvc5: --solver both, the main CI job)")
    p.add_argument("names", nargs="*", metavar="NAME", help="theorems to run (default: the whole catalogue)")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per theorem")
    p.add_argument("--list", action="store_true",
                   help="list the catalogue's theorems (name, expected outcome, statement) and prove nothing")
    p.add_argument("--timeout", type=float_in(0.001, MAX_SECONDS), default=DEFAULT_TIMEOUT_S, metavar="S",
                   help="each solver's wall-clock limit per theorem in seconds, a safety net beside the resource "
                        f"limits (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--budget", choices=("resources", "seconds"), default="resources",
                   help="what bounds a solver: its resource units per check, the same on any machine and load "
                        f"({_rlimits_text()}; default), or seconds alone (--timeout)")
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0, metavar="N", help="Z3 random seed (default 0)")
    p.add_argument("--jobs", type=int_in(1, MAX_JOBS), default=None, metavar="N",
                   help="worker processes for the solver runs and bounded checks (default: up to 2 cores)")
    p.add_argument("--solver", choices=("z3", "cvc5", "both"), default="z3",
                   help="which SMT solver discharges the theorems (default z3; cvc5 needs swafloor[cvc5])")
    p.add_argument("--encoding", choices=("direct", "blocks"), default=None,
                   help="the goal as written (direct, nonlinear division by t) or rewritten into linear arithmetic "
                        "(blocks, the default for both solvers)")
    p.add_argument("--concrete", action="store_true",
                   help="also run the bounded concrete check (the goal itself on ints) on the theorems expected "
                        "proved; it always runs on refutations (the test suite runs it on every theorem)")
    p.add_argument("--attempts", action="store_true",
                   help="also run the informational attempts beside some theorems (decode-tight in forall-exists "
                        "form, each to a 1 s limit; never counted; the bench stores their answers in docs/theorems.md)")
    p.set_defaults(handler=run)


def _rlimits_text() -> str:
    return ", ".join(f"{solver} {units:,}" for solver, units in DEFAULT_RLIMIT.items())


def _cex(cex) -> str:
    return " ".join(f"{k}={v}" for k, v in cex.items()) if cex else "-"


def _twin_why(r) -> str:
    w = r.twin
    if w.error:
        return f"token-level twin: {w.error}"
    if r.theorem.expected.value == "proved":
        return f"token-level twin: the plain statement fails at {_cex(w.counterexample)}"
    return f"token-level twin: no counterexample in {w.points} points"


def format_table(results, header: str) -> str:
    from swafloor.proofs.runner import CONTRADICTED, OK, UNKNOWN_STATUS

    solvers = [name for name, _ in results[0].discharges] if results else ["z3"]
    seconds_head = "seconds" if len(solvers) == 1 else "seconds " + "/".join(solvers)
    rows = [("theorem", "expected", "result", seconds_head, "concrete: goal on ints", "token-level: brute force",
             "counterexample")]
    notes: dict[int, list[str]] = {}
    for i, r in enumerate(results):
        c = r.concrete
        concrete = "not run (--concrete)" if c is None else f"{'holds' if c.holds else 'fails'}, {c.points} pts"
        w = r.twin
        twin = "-" if w is None else ("error" if w.error else f"{'holds' if w.holds else 'fails'}, {w.points} pts")
        answers = "/".join(d.result for _, d in r.discharges)
        seconds = "/".join(f"{d.seconds:.2f}" for _, d in r.discharges)
        rows.append((r.theorem.name, r.theorem.expected.value, answers, seconds, concrete, twin,
                     _cex(r.discharge.counterexample)))
        lines = notes.setdefault(i + 1, [])
        if r.status == CONTRADICTED:
            if not r.twin_agrees:
                lines.append(f"CONTRADICTED: {_twin_why(r)}")
            why = r.disagreement or (r.replay.summary if r.replay and not r.replay.confirmed else
                                     f"expected {r.theorem.expected.value}, got {r.discharge.result}")
            if r.twin_agrees or r.disagreement or r.discharge.result != r.theorem.expected.value or (
                    r.discharge.result == "refuted" and (r.replay is None or not r.replay.confirmed)):
                lines.append(f"CONTRADICTED: {why}")
        elif r.status == UNKNOWN_STATUS:
            if not r.twin_agrees:
                lines.append(f"UNKNOWN: {_twin_why(r)}")
            for name, d in r.discharges:
                if d.result == "unknown" or (d.result == "refuted" and not d.minimal):
                    lines.append(f"UNKNOWN ({name}): {d.reason or 'counterexample not shown minimal'}")
        if w is not None and w.counterexample and r.twin_agrees:
            lines.append(f"token-level counterexample: {_cex(w.counterexample)}")
        for name, d in r.discharges:
            own = r.theorem.rlimits.get(name)
            if own is not None and d.rlimit == own:
                lines.append(f"{name}: {own:,} resource units per check, the theorem's own allowance "
                             "(above the default budget)")
        if r.replay is not None and r.status == OK:
            lines.append(f"replay: {r.replay.summary}")
        for name, d in r.discharges:
            for a in d.attempts:
                reason = f" ({a.reason})" if a.reason else ""
                who = f" ({name})" if len(r.discharges) > 1 else ""
                lines.append(f"attempt {a.label}{who}: {a.result}{reason} in {a.seconds:.2f} s, not counted")
    widths = [max(len(row[k]) for row in rows) for k in range(6)]
    out = [header]
    for i, row in enumerate(rows):
        cells = [row[k].ljust(widths[k]) if k != 3 else row[k].rjust(widths[k]) for k in range(6)]
        out.append("  ".join(cells + [row[6]]).rstrip())
        out.extend(f"    {line}" for line in notes.get(i, []))
    return "\n".join(out)


def run(args) -> int:
    from swafloor.proofs import catalogue, discharge, runner

    from ..cli import UsageError

    theorems = catalogue.CATALOGUE
    if args.names:
        known = {t.name: t for t in theorems + catalogue.OPT_IN}  # opt-in theorems run by name only
        unknown = [n for n in args.names if n not in known]
        if unknown:
            raise UsageError(f"unknown theorem {bounded(unknown[0], 60)} (the names: swafloor prove --list)")
        theorems = tuple(known[n] for n in dict.fromkeys(args.names))
    if args.list:
        if args.json:
            print_json([{"name": t.name, "expected": t.expected.value, "statement": t.statement} for t in theorems])
        else:
            width = max(len(t.name) for t in theorems)
            for t in theorems:
                print(f"{t.name.ljust(width)}  {t.expected.value:<7}  {t.statement}")
        return 0
    jobs = args.jobs or default_jobs()
    solvers = ("z3", "cvc5") if args.solver == "both" else (args.solver,)
    encodings = {s: args.encoding for s in solvers if args.encoding}  # unset: each theorem's own, else the solver's default
    try:
        version = ", ".join(f"{discharge.solver_version(s)} ({encodings.get(s) or discharge.default_encoding(s)} encoding)" for s in solvers)
    except discharge.SolverMissing as exc:
        raise UsageError(f"--solver {args.solver}: {exc}") from None
    print(f"swafloor prove: {version}, seed {args.seed}, {len(theorems)} theorems", file=sys.stderr)

    def progress(item, message: str) -> None:
        name = getattr(item, "name", None) or item.theorem.name
        print(f"  {name}: {message}", file=sys.stderr)

    start = time.perf_counter()
    rlimits = DEFAULT_RLIMIT if args.budget == "resources" else None
    results = runner.prove(theorems, timeout_s=args.timeout, seed=args.seed, jobs=jobs, solvers=solvers,
                           encodings=encodings, rlimits=rlimits, progress=progress, attempts=args.attempts,
                           concrete=args.concrete)
    wall = time.perf_counter() - start
    if args.json:
        print_json([r.to_json() for r in results])
    else:
        budget = (f"resource units per check {', '.join(f'{s} {DEFAULT_RLIMIT[s]:,}' for s in solvers)}, "
                  if rlimits else "")
        header = (f"{version}; seed {args.seed}; {budget}timeout {args.timeout:g} s per theorem; "
                  f"solvers, token-level twins and bounded concrete checks (of {'every theorem' if args.concrete else 'refutations; --concrete: every theorem'}) on {jobs} worker(s)")
        print(format_table(results, header))
        statuses = [r.status for r in results]
        solver_s = ", ".join(
            f"{s} {sum(r.of(s).seconds for r in results):.1f} s" for s in solvers
        )
        checked = [r.concrete for r in results if r.concrete is not None]
        c_s = sum(c.seconds for c in checked)
        points = sum(c.points for c in checked)
        tw_s = sum(r.twin.seconds for r in results if r.twin is not None)
        tw_points = sum(r.twin.points for r in results if r.twin is not None)
        print(f"{len(results)} theorems: {statuses.count(runner.OK)} as expected, "
              f"{statuses.count(runner.CONTRADICTED)} contradicted, {statuses.count(runner.UNKNOWN_STATUS)} unknown; "
              f"{solver_s}, concrete checks (goal on ints) on {len(checked)} {c_s:.1f} s ({points} points), token-level twins (brute "
              f"force) {tw_s:.1f} s ({tw_points} points), summed over workers; wall {wall:.1f} s")
    return runner.exit_code(results)
