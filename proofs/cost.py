"""Where ``swafloor prove --solver both`` spends its CPU: figures, never pass/fail.

``python -m swafloor.proofs.cost`` runs, one after the other in one process, every task the main job
runs for each theorem (each solver on the encoding ``prove`` gives it, the token-level twin, and the
bounded concrete check where ``prove`` runs it, on refutations), and prints each one's CPU seconds
(``time.process_time``: the machine's load barely moves them, unlike wall seconds); a solver's
seconds are split into *build* (the goal built and encoded for that solver) and the checks. The
concrete check of the proofs, which ``prove`` runs only with ``--concrete``, is summed apart. Then it
runs ``swafloor prove --solver both`` itself, in a child process, and prints that run's CPU seconds
(user + sys, its workers included) and wall seconds, with the load average it ran under: wall seconds
on a loaded machine say little, CPU seconds on 2 cores bound the wall from below (CPU / 2).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from typing import Any

from . import DEFAULT_RLIMIT, catalogue, concrete, discharge, twins

__all__ = ["measure", "whole_run", "format", "main"]

COLUMNS = ("z3 build", "z3", "cvc5 build", "cvc5", "twin", "concrete")


def _cpu(fn: Any) -> tuple[Any, float]:
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def measure(solvers: tuple[str, ...] = ("z3", "cvc5")) -> dict[str, Any]:
    """Per theorem, the CPU seconds of every task ``swafloor prove --solver both`` runs for it."""
    rows, proofs_concrete = [], 0.0
    for theorem in catalogue.CATALOGUE:
        row: dict[str, Any] = {"name": theorem.name}
        for solver in solvers:
            d, seconds = _cpu(lambda: discharge.discharge(theorem, solver=solver, attempts=False,
                                                          rlimit=DEFAULT_RLIMIT[solver]))
            if d.result != theorem.expected.value:
                raise RuntimeError(f"{theorem.name}: {solver} {d.result}, expected {theorem.expected.value}")
            row[f"{solver} build"] = d.build_seconds
            row[solver] = seconds - d.build_seconds
            row[f"{solver} encoding"] = d.encoding
        _, row["twin"] = _cpu(lambda: twins.run_twin(theorem.name))
        c, seconds = _cpu(lambda: concrete.check(theorem))
        if theorem.expected.value == discharge.REFUTED:
            row["concrete"] = seconds
        else:
            row["concrete"] = 0.0
            proofs_concrete += seconds
        rows.append(row)
    totals = {k: sum(r.get(k, 0.0) for r in rows) for k in COLUMNS}
    return {"rows": rows, "totals": totals, "proofs_concrete": proofs_concrete, "solvers": solvers}


def whole_run(argv: tuple[str, ...] = ("prove", "--solver", "both")) -> dict[str, Any]:
    """``swafloor argv`` in a child process: its exit code, CPU seconds (user + sys, with its workers)
    and wall seconds, and the load average around it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "swafloor", *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": "swafloor " + " ".join(argv), "exit": done.returncode, "cpu": cpu, "wall": wall,
            "load": (load, os.getloadavg()[0]), "cpus": os.cpu_count()}


def format(figures: dict[str, Any], run: dict[str, Any] | None = None) -> str:  # noqa: A001
    rows = figures["rows"]
    width = max(len(r["name"]) for r in rows)
    lines = ["CPU seconds per task of swafloor prove --solver both, one process, one task after the other "
             "(build: the goal built and encoded for that solver; concrete: refutations only, as prove runs it)",
             f"{'theorem'.ljust(width)}" + "".join(f"  {c:>10}" for c in COLUMNS)]
    for r in rows:
        lines.append(f"{r['name'].ljust(width)}" + "".join(f"  {r[c]:10.3f}" for c in COLUMNS))
    totals = figures["totals"]
    lines.append(f"{'total'.ljust(width)}" + "".join(f"  {totals[c]:10.2f}" for c in COLUMNS))
    lines.append(f"sum of the tasks: {sum(totals.values()):.1f} s CPU; the concrete check of the proofs "
                 f"(only with --concrete, and in the test suite): {figures['proofs_concrete']:.1f} s more")
    if run is not None:
        lines.append(f"{run['command']}: exit {run['exit']}, {run['cpu']:.1f} s CPU (user + sys, workers included), "
                     f"{run['wall']:.1f} s wall on {run['cpus']} cpus under a load average of "
                     f"{run['load'][0]:.1f} to {run['load'][1]:.1f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    figures = measure()
    run = None if "--no-run" in argv else whole_run()
    print(format(figures, run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
