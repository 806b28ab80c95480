"""Benchmark: each theorem's Z3 seconds beside the seconds of its bounded concrete check (the same
goal on ints), and their ratio. Figures only, never pass/fail. Everything runs in one process, one
after the other, so the figures are not disturbed by the workers ``swafloor prove`` uses.

``python -m swafloor.proofs.bench`` prints them; ``swafloor bench proofs`` calls :func:`run` and
:func:`format`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from . import catalogue, concrete, discharge

__all__ = ["run", "format"]


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 1) if b > 0 else None


def run(timeout_s: float = 10.0, seed: int = 0) -> dict[str, Any]:
    """Discharge and check every catalogue theorem; return the figures."""
    rows = []
    start = time.perf_counter()
    for theorem in catalogue.CATALOGUE:
        d = discharge.discharge(theorem, timeout_s=timeout_s, seed=seed, attempts=False)
        c = concrete.check(theorem)
        rows.append({
            "name": theorem.name,
            "result": d.result,
            "z3_seconds": round(d.seconds, 4),
            "concrete_seconds": round(c.seconds, 4),
            "concrete_points": c.points,
            "ratio": _ratio(c.seconds, d.seconds),
        })
    z3_total = sum(r["z3_seconds"] for r in rows)
    concrete_total = sum(r["concrete_seconds"] for r in rows)
    return {
        "solver": f"z3 {discharge.z3_version()}",
        "seed": seed,
        "theorems": rows,
        "z3_seconds": round(z3_total, 3),
        "concrete_seconds": round(concrete_total, 3),
        "concrete_points": sum(r["concrete_points"] for r in rows),
        "ratio": _ratio(concrete_total, z3_total),
        "wall_seconds": round(time.perf_counter() - start, 3),
    }


def format(figures: dict[str, Any]) -> str:  # noqa: A001 - the name ``swafloor bench`` looks up
    width = max(len(r["name"]) for r in figures["theorems"])
    lines = [
        f"proofs: {figures['solver']}, seed {figures['seed']}; Z3 (unbounded) vs the bounded concrete check",
        f"{'theorem'.ljust(width)}  result    z3 s  concrete s    points  concrete/z3",
    ]
    for r in figures["theorems"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.1f}x"
        lines.append(
            f"{r['name'].ljust(width)}  {r['result']:<8}{r['z3_seconds']:6.2f}  {r['concrete_seconds']:10.2f}"
            f"  {r['concrete_points']:8d}  {ratio:>11}"
        )
    total_ratio = "-" if figures["ratio"] is None else f"{figures['ratio']:.1f}x"
    lines.append(
        f"{'total'.ljust(width)}  {'':8}{figures['z3_seconds']:6.2f}  {figures['concrete_seconds']:10.2f}"
        f"  {figures['concrete_points']:8d}  {total_ratio:>11}"
    )
    lines.append(f"(one process, wall {figures['wall_seconds']:.1f} s)")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format(run()), file=sys.stdout)
