"""Benchmark: each theorem's solver seconds (Z3, and cvc5 when installed, each on the direct and the
block encoding) beside the seconds of its
bounded concrete check (the same goal on ints), and the mutation score (the share of seeded bugs in
the reference's formulas that flip at least one theorem). Figures only, never pass/fail. The solver
and concrete figures run in one process, one after the other, so they are not disturbed by workers;
the mutation score runs on two forked workers.

``python -m swafloor.proofs.bench`` prints them; ``swafloor bench proofs`` calls :func:`run` and
:func:`format`. ``python -m swafloor.proofs.bench --write-times`` also stores the per-theorem solver
times in ``docs/solver_times.json`` (machine-dependent data, kept beside the docs, not in the package),
which docs/theorems.md shows (with the machine they came from).
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import sys
import time
from typing import Any

from . import catalogue, concrete, discharge, mutations

__all__ = ["run", "format", "available_solvers", "columns", "TIMES_FILE"]

#: In the checkout's docs/ folder (this package is the checkout's proofs/; an installed copy has none).
TIMES_FILE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "solver_times.json"


def available_solvers() -> tuple[str, ...]:
    solvers = ["z3"]
    try:
        discharge.solver_version("cvc5")
        solvers.append("cvc5")
    except discharge.SolverMissing:
        pass
    return tuple(solvers)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 1) if b > 0 else None


def columns(solvers: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every solver on every encoding; ``default`` marks what ``swafloor prove`` gives each solver."""
    return [{"key": f"{s} {e}", "solver": s, "encoding": e, "default": e == discharge.default_encoding(s)}
            for s in solvers for e in discharge.ENCODINGS]


def run(timeout_s: float = discharge.DEFAULT_TIMEOUT_S, seed: int = 0, score: bool = True) -> dict[str, Any]:
    """Discharge and check every catalogue theorem with every installed solver on both encodings; the
    mutation score."""
    solvers = available_solvers()
    cols = columns(solvers)
    rows = []
    start = time.perf_counter()
    for theorem in catalogue.CATALOGUE:
        row: dict[str, Any] = {"name": theorem.name, "expected": theorem.expected.value}
        for col in cols:
            d = discharge.discharge(theorem, timeout_s=timeout_s, seed=seed, attempts=False, solver=col["solver"],
                                    encoding=col["encoding"])
            row[col["key"]] = {"result": d.result, "seconds": round(d.seconds, 4), "encoding": d.encoding}
        c = concrete.check(theorem)
        z3_s = row["z3 direct"]["seconds"]
        row.update({
            "result": row["z3 direct"]["result"],
            "z3_seconds": z3_s,
            "concrete_seconds": round(c.seconds, 4),
            "concrete_points": c.points,
            "ratio": _ratio(c.seconds, z3_s),
        })
        rows.append(row)
    attempts = {}
    for col in cols:
        (attempt,) = discharge.run_attempts(catalogue.by_name("decode-tight"), timeout_s=timeout_s, seed=seed,
                                            solver=col["solver"], encoding=col["encoding"])
        attempts[col["key"]] = {"label": attempt.label, "result": attempt.result, "reason": attempt.reason,
                                "seconds": round(attempt.seconds, 4)}
    z3_total = sum(r["z3_seconds"] for r in rows)
    concrete_total = sum(r["concrete_seconds"] for r in rows)
    figures = {
        "solvers": [discharge.solver_version(s) for s in solvers],
        "columns": cols,
        "solver": discharge.solver_version("z3"),
        "seed": seed,
        "timeout_s": timeout_s,
        "theorems": rows,
        "solver_seconds": {c["key"]: round(sum(r[c["key"]]["seconds"] for r in rows), 3) for c in cols},
        "z3_seconds": round(z3_total, 3),
        "concrete_seconds": round(concrete_total, 3),
        "concrete_points": sum(r["concrete_points"] for r in rows),
        "ratio": _ratio(concrete_total, z3_total),
        "decode_tight_forall_exists": attempts,
        "wall_seconds": round(time.perf_counter() - start, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
                   f"load average {os.getloadavg()[0]:.1f} at the end",
    }
    if score:
        figures["mutations"] = mutations.score(mutations.MUTATIONS, catalogue.CATALOGUE, timeout_s=timeout_s,
                                               seed=seed, jobs=2)
    return figures


def format(figures: dict[str, Any]) -> str:  # noqa: A001 - the name ``swafloor bench`` looks up
    keys = [c["key"] for c in figures["columns"]]
    width = max(len(r["name"]) for r in figures["theorems"])
    cells = "".join(f"  {k:>20}" for k in keys)
    lines = [
        f"proofs: {', '.join(figures['solvers'])}, seed {figures['seed']}, timeout {figures['timeout_s']:g} s; "
        "each solver on each encoding (seconds and answer; * = what swafloor prove uses) vs the bounded check",
        f"{'theorem'.ljust(width)}{cells}  concrete s    points  concrete/z3",
    ]
    marks = {c["key"]: "*" if c["default"] else "" for c in figures["columns"]}
    for r in figures["theorems"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.1f}x"
        cells = "".join(f"  {r[k]['seconds']:7.2f} {r[k]['result'] + marks[k]:<12}" for k in keys)
        lines.append(f"{r['name'].ljust(width)}{cells}  {r['concrete_seconds']:10.2f}  {r['concrete_points']:8d}"
                     f"  {ratio:>11}")
    totals = "".join(f"  {figures['solver_seconds'][k]:7.2f} {'':<12}" for k in keys)
    total_ratio = "-" if figures["ratio"] is None else f"{figures['ratio']:.1f}x"
    lines.append(f"{'total'.ljust(width)}{totals}  {figures['concrete_seconds']:10.2f}"
                 f"  {figures['concrete_points']:8d}  {total_ratio:>11}")
    for key, a in figures["decode_tight_forall_exists"].items():
        reason = f" ({a['reason']})" if a["reason"] else ""
        lines.append(f"decode-tight, forall-exists form, {key}: {a['result']}{reason} in {a['seconds']:.2f} s")
    lines.append(f"(one process, wall {figures['wall_seconds']:.1f} s; {figures['machine']})")
    if "mutations" in figures:
        m = figures["mutations"]
        lines.append(f"mutation score: {m['score']:.1f}% ({m['caught']} of {m['total']} seeded bugs flip a theorem)")
        for row in m["mutations"]:
            missing = f"; expected but not flipped: {', '.join(row['missing'])}" if row["missing"] else ""
            lines.append(f"  {row['mutation']}: {len(row['flipped'])} flipped ({', '.join(row['flipped']) or 'none'})"
                         f"{missing}")
    return "\n".join(lines)


def write_times(figures: dict[str, Any], path: pathlib.Path = TIMES_FILE) -> None:
    """Store the per-theorem results and seconds of every solver on every encoding for docs/theorems.md."""
    keys = [c["key"] for c in figures["columns"]]
    data = {
        "command": "python -m swafloor.proofs.bench --write-times",
        "machine": figures["machine"],
        "solvers": figures["solvers"],
        "columns": figures["columns"],
        "timeout_s": figures["timeout_s"],
        "seed": figures["seed"],
        "theorems": {r["name"]: {k: {"result": r[k]["result"], "seconds": r[k]["seconds"]} for k in keys}
                     for r in figures["theorems"]},
        "decode_tight_forall_exists": figures["decode_tight_forall_exists"],
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    figures = run(score="--no-score" not in sys.argv)
    print(format(figures), file=sys.stdout)
    if "--write-times" in sys.argv:
        write_times(figures)
