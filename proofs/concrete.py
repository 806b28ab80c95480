"""The bounded concrete check: the theorem's own goal function evaluated on Python ints, exhaustively
over each variable's bounded range, in the theorem's variable order. The first failing point is
therefore the lexicographically smallest counterexample within the bounds, the same order the
solver minimises in, so the two counterexamples can be compared exactly.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import attrs

from .theorem import Theorem

__all__ = ["ConcreteCheck", "check", "evaluate"]


@attrs.frozen
class ConcreteCheck:
    """``holds``: no point of the bounded ranges failed. ``points``: goal evaluations made.
    ``counterexample``: the first failing point, if any."""

    holds: bool
    points: int
    seconds: float
    counterexample: dict[str, int] | None = None


def _truth(value: Any) -> bool:
    if type(value) is tuple:
        return all(value)
    return value


def evaluate(theorem: Theorem, point: Mapping[str, int]) -> tuple[bool, bool]:
    """``(admissible, holds)`` of the goal at one point (ints): whether the point is in the domain
    (every variable at least its lower bound), and whether the goal holds there."""
    values = [point[name] for name in theorem.variable_names]
    admissible = all(x >= v.lower for x, v in zip(values, theorem.variables))
    return admissible, bool(_truth(theorem.goal(*values)))


def check(theorem: Theorem, first: tuple[int, int] = (0, 1)) -> ConcreteCheck:
    """Evaluate the goal at every point of the bounded ranges, stopping at the first failure.

    ``first = (k, m)`` keeps every m-th value of the first variable, starting at the k-th: the chunks
    ``(0, m) .. (m - 1, m)`` split the check between m workers."""
    variables = theorem.variables
    chunk, chunks = first
    last = len(variables) - 1
    goal = theorem.goal
    values = [0] * len(variables)
    env: dict[str, int] = {}
    points = 0

    def search(i: int) -> bool:  # True when a counterexample was found (left in ``values``)
        nonlocal points
        var = variables[i]
        domain = var.values(env)
        if i == 0:
            domain = list(domain)[chunk::chunks]
        if i < last:
            for x in domain:
                values[i] = env[var.name] = x
                if search(i + 1):
                    return True
            return False
        for x in domain:
            values[i] = x
            points += 1
            value = goal(*values)
            if not (all(value) if type(value) is tuple else value):
                return True
        return False

    start = time.perf_counter()
    found = search(0)
    seconds = time.perf_counter() - start
    counterexample = dict(zip(theorem.variable_names, values)) if found else None
    return ConcreteCheck(not found, points, seconds, counterexample)
