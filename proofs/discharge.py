"""Discharging a theorem with Z3.

The goal is built by calling the theorem's goal function on Z3 integer constants, one per variable,
under the domain (each variable at least its lower bound; narrower domains are implications inside
the goal). Each
conjunct is proved separately (``domain and not part`` unsatisfiable); a satisfiable one refutes the
theorem, and the counterexample is then minimised lexicographically in the theorem's variable order
(t, then W, then S, then h, then the rest) by bisection on each variable in turn.

Hygiene: one deadline per theorem shared by all its solver calls (``timeout_s``), Z3's random seed
set from ``seed``, and ``unknown`` (a timeout or an incomplete answer) reported as such, never as
proved. Each theorem is discharged in a fresh Z3 context, so what the solver does depends on the
theorem and the seed alone, not on the theorems discharged before it in the same process.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import attrs
import z3

from .symbolic import symbols
from .theorem import Theorem, goal_parts

__all__ = ["PROVED", "REFUTED", "UNKNOWN", "AttemptResult", "Discharge", "discharge", "z3_version"]

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


def z3_version() -> str:
    return z3.get_version_string()


@attrs.frozen
class AttemptResult:
    label: str
    statement: str
    result: str
    seconds: float
    reason: str | None


@attrs.frozen
class Discharge:
    """What the solver said about one theorem. ``counterexample`` names every variable (refuted
    only); ``minimal`` says whether the lexicographic minimisation finished within the deadline."""

    result: str
    seconds: float
    counterexample: dict[str, int] | None = None
    minimal: bool = False
    reason: str | None = None
    lemmas_proved: int = 0
    attempts: tuple[AttemptResult, ...] = ()


class _Deadline:
    """Solver calls that share what is left of one time budget."""

    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds
        self.reason: str | None = None

    def check(self, solver: z3.Solver) -> Any:
        left = self.end - time.perf_counter()
        if left <= 0:
            self.reason = "timeout"
            return z3.unknown
        solver.set("timeout", max(1, int(left * 1000)))
        answer = solver.check()
        if answer == z3.unknown:
            self.reason = solver.reason_unknown() or "unknown"
        return answer


def _as_bool(value: Any, ctx: z3.Context) -> Any:
    return z3.BoolVal(value, ctx) if isinstance(value, bool) else value


def _solver(seed: int, facts: Sequence[Any], ctx: z3.Context) -> z3.Solver:
    solver = z3.Solver(ctx=ctx)
    solver.set("random_seed", seed)
    solver.add(*facts)
    return solver


def _value(model: z3.ModelRef, sym: Any) -> int:
    return model.eval(sym, model_completion=True).as_long()


def _minimise(
    solver: z3.Solver, syms: Sequence[Any], lowers: Sequence[int], model: z3.ModelRef, deadline: _Deadline
) -> tuple[dict[str, int], bool]:
    """Fix each variable in turn at its smallest value that still admits a counterexample."""
    for sym, lower in zip(syms, lowers):
        best, lo = _value(model, sym), lower
        while lo < best:
            mid = (lo + best) // 2
            solver.push()
            solver.add(sym <= mid)
            answer = deadline.check(solver)
            if answer == z3.sat:
                model = solver.model()
                best = _value(model, sym)
            solver.pop()
            if answer == z3.unsat:
                lo = mid + 1
            elif answer != z3.sat:
                return {str(s): _value(model, s) for s in syms}, False
        solver.add(sym == best)
    return {str(s): _value(model, s) for s in syms}, True


def _attempt(theorem: Theorem, attempt: Any, seed: int, timeout_s: float) -> AttemptResult:
    start = time.perf_counter()
    deadline = _Deadline(min(timeout_s, attempt.timeout_s))
    ctx = z3.Context()
    syms = symbols(theorem.variables, ctx)
    domain = [sym >= v.lower for sym, v in zip(syms, theorem.variables)]
    solver = _solver(seed, domain, ctx)
    solver.add(z3.Not(_as_bool(attempt.build(*syms), ctx)))
    answer = deadline.check(solver)
    result = PROVED if answer == z3.unsat else REFUTED if answer == z3.sat else UNKNOWN
    return AttemptResult(
        attempt.label,
        attempt.statement,
        result,
        time.perf_counter() - start,
        deadline.reason if result == UNKNOWN else None,
    )


def discharge(
    theorem: Theorem, *, timeout_s: float = 10.0, seed: int = 0, minimise: bool = True, attempts: bool = True
) -> Discharge:
    """Prove or refute ``theorem`` with Z3 within ``timeout_s`` seconds."""
    z3.set_param("smt.random_seed", seed)
    start = time.perf_counter()
    deadline = _Deadline(timeout_s)
    ctx = z3.Context()
    syms = symbols(theorem.variables, ctx)
    lowers = [v.lower for v in theorem.variables]
    domain = [sym >= lower for sym, lower in zip(syms, lowers)]

    hypotheses: list[Any] = []
    for lemma in theorem.lemmas:  # each stage is proved from the stages before it
        earlier = list(hypotheses)
        for part in goal_parts(lemma(*syms)):
            solver = _solver(seed, domain + earlier, ctx)
            solver.add(z3.Not(_as_bool(part, ctx)))
            if deadline.check(solver) == z3.unsat:
                hypotheses.append(_as_bool(part, ctx))

    parts = [_as_bool(p, ctx) for p in goal_parts(theorem.goal(*syms))]
    result, reason = PROVED, None
    for part in parts:
        solver = _solver(seed, domain + hypotheses, ctx)
        solver.add(z3.Not(part))
        answer = deadline.check(solver)
        if answer == z3.sat:
            result = REFUTED
            break
        if answer != z3.unsat:
            result, reason = UNKNOWN, deadline.reason

    counterexample, minimal = None, False
    if result == REFUTED:
        solver = _solver(seed, domain + hypotheses, ctx)
        solver.add(z3.Or(*[z3.Not(p) for p in parts]))
        if deadline.check(solver) == z3.sat:
            model = solver.model()
            if minimise:
                counterexample, minimal = _minimise(solver, syms, lowers, model, deadline)
            else:
                counterexample = {str(s): _value(model, s) for s in syms}
        else:  # a part's negation was satisfiable, so this is: only the deadline can get here
            result, reason = UNKNOWN, deadline.reason
    seconds = time.perf_counter() - start

    tried = tuple(_attempt(theorem, a, seed, timeout_s) for a in theorem.attempts) if attempts else ()
    return Discharge(result, seconds, counterexample, minimal, reason, len(hypotheses), tried)
