"""Discharging a theorem with an SMT solver: Z3 (the default) or cvc5 (through its pythonic API,
which mirrors z3py, so the same goal functions build its terms).

The goal is built by calling the theorem's goal function on the solver's integer constants, one per
variable, under the domain (each variable at least its lower bound; narrower domains are
implications inside the goal). Each conjunct is proved separately (``domain and not part``
unsatisfiable); a satisfiable one refutes the theorem, and the counterexample is then minimised
lexicographically in the theorem's variable order (t, then W, then S, then h, then the rest) by
bisection on each variable in turn.

Hygiene: one deadline per theorem shared by all its solver calls (``timeout_s``), the solver's random
seed set from ``seed``, and ``unknown`` (a timeout or an incomplete answer) reported as such, never
as proved. Each theorem is discharged in a fresh solver context, so what the solver does depends on
the theorem and the seed alone, not on the theorems discharged before it in the same process. cvc5
is imported only when asked for (the optional extra ``swafloor[cvc5]``).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import attrs
import z3

from .theorem import Theorem, goal_parts

__all__ = [
    "PROVED",
    "REFUTED",
    "UNKNOWN",
    "SOLVERS",
    "AttemptResult",
    "Discharge",
    "discharge",
    "run_attempts",
    "z3_version",
    "solver_version",
    "SolverMissing",
]

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"
SOLVERS = ("z3", "cvc5")


class SolverMissing(RuntimeError):
    """The requested solver is not installed."""


def z3_version() -> str:
    return z3.get_version_string()


def _cvc5() -> Any:
    try:
        from cvc5 import pythonic
    except ImportError as exc:  # the optional extra is missing
        raise SolverMissing("cvc5 is not installed: pip install 'swafloor[cvc5]'") from exc
    return pythonic


def solver_version(solver: str) -> str:
    """``"z3 4.x"`` or ``"cvc5 1.x"``; raises :class:`SolverMissing` when cvc5 is absent."""
    if solver == "z3":
        return f"z3 {z3_version()}"
    _cvc5()
    import cvc5

    return f"cvc5 {getattr(cvc5, '__version__', '?')}"


class _Z3:
    """The solver interface discharge needs, on z3py."""

    name = "z3"
    api = z3

    def __init__(self, seed: int):
        z3.set_param("smt.random_seed", seed)
        self.seed = seed
        self.ctx = z3.Context()

    def ints(self, names: Sequence[str]) -> list[Any]:
        return [z3.Int(n, self.ctx) for n in names]

    def solver(self, facts: Sequence[Any]) -> Any:
        solver = z3.Solver(ctx=self.ctx)
        solver.set("random_seed", self.seed)
        solver.add(*facts)
        return solver

    def set_timeout(self, solver: Any, ms: int) -> None:
        solver.set("timeout", ms)

    def set_rlimit(self, solver: Any, units: int) -> None:
        solver.set("rlimit", units)

    def as_bool(self, value: Any) -> Any:
        return z3.BoolVal(value, self.ctx) if isinstance(value, bool) else value


class _Cvc5:
    """The same interface on cvc5's pythonic API."""

    name = "cvc5"

    def __init__(self, seed: int):
        self.api = _cvc5()
        self.seed = seed
        self.ctx = self.api.Context()

    def ints(self, names: Sequence[str]) -> list[Any]:
        return [self.api.Int(n, self.ctx) for n in names]

    def solver(self, facts: Sequence[Any]) -> Any:
        solver = self.api.Solver(ctx=self.ctx)
        solver.set("seed", self.seed)
        solver.add(*facts)
        return solver

    def set_timeout(self, solver: Any, ms: int) -> None:
        solver.set("tlimit-per", ms)

    def set_rlimit(self, solver: Any, units: int) -> None:
        solver.set("rlimit-per", units)

    def as_bool(self, value: Any) -> Any:
        return self.api.BoolVal(value, self.ctx) if isinstance(value, bool) else value


def _backend(solver: str, seed: int) -> Any:
    if solver == "z3":
        return _Z3(seed)
    if solver == "cvc5":
        return _Cvc5(seed)
    raise ValueError(f"solver={solver!r}: must be one of {SOLVERS}")


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

    def __init__(self, backend: Any, seconds: float, rlimit: int | None = None):
        self.backend = backend
        self.seconds = seconds
        self.end = time.perf_counter() + seconds
        self.rlimit = rlimit
        self.reason: str | None = None

    def left(self) -> float:
        return self.end - time.perf_counter()

    def check(self, solver: Any, cap_s: float | None = None, share: float = 1.0) -> str:
        """``"sat"``, ``"unsat"`` or ``"unknown"``, within what is left (at most ``cap_s`` seconds, and
        ``share`` of the resource budget per check)."""
        left = self.left()
        if left <= 0:
            self.reason = "timeout"
            return UNKNOWN_ANSWER
        if cap_s is not None:
            left = min(left, cap_s)
        self.backend.set_timeout(solver, max(1, int(left * 1000)))
        if self.rlimit is not None:
            self.backend.set_rlimit(solver, max(1, int(self.rlimit * share)))
        answer = str(solver.check())
        if answer not in ("sat", "unsat"):
            self.reason = str(solver.reason_unknown() or "unknown")
            if self.left() <= 0:
                self.reason = "timeout"
            return UNKNOWN_ANSWER
        return answer


UNKNOWN_ANSWER = "unknown"


def _value(model: Any, sym: Any) -> int:
    return model.eval(sym, model_completion=True).as_long()


def _values(model: Any, syms: Sequence[Any]) -> dict[str, int]:
    """The model's values, read at once (a cvc5 model is only valid until the solver's next call)."""
    return {str(s): _value(model, s) for s in syms}


def _minimise(
    solver: Any, syms: Sequence[Any], lowers: Sequence[int], model: Any, deadline: _Deadline
) -> tuple[dict[str, int], bool]:
    """Fix each variable in turn at its smallest value that still admits a counterexample."""
    values = _values(model, syms)
    for sym, lower in zip(syms, lowers):
        best, lo = values[str(sym)], lower
        first = True
        while lo < best:
            mid = lo if first else (lo + best) // 2  # smallest counterexamples sit at the bound: try it first
            first = False
            solver.push()
            solver.add(sym <= mid)
            answer = deadline.check(solver)
            if answer == "sat":
                values = _values(solver.model(), syms)
                best = values[str(sym)]
            solver.pop()
            if answer == "unsat":
                lo = mid + 1
            elif answer != "sat":
                return values, False
        solver.add(sym == best)
    return values, True


def _attempt(theorem: Theorem, attempt: Any, seed: int, timeout_s: float, solver: str) -> AttemptResult:
    start = time.perf_counter()
    backend = _backend(solver, seed)
    deadline = _Deadline(backend, min(timeout_s, attempt.timeout_s))
    syms = backend.ints(theorem.variable_names)
    domain = [sym >= v.lower for sym, v in zip(syms, theorem.variables)]
    check = backend.solver(domain)
    check.add(backend.api.Not(backend.as_bool(attempt.build(*syms))))
    answer = deadline.check(check)
    result = PROVED if answer == "unsat" else REFUTED if answer == "sat" else UNKNOWN
    return AttemptResult(
        attempt.label,
        attempt.statement,
        result,
        time.perf_counter() - start,
        deadline.reason if result == UNKNOWN else None,
    )


LEMMA_SHARE = 0.2  # the most of the theorem's time one lemma check may take (a stuck lemma cannot eat it)
LEMMA_FIRST_SHARE = 0.05  # ... in the first round


def _lemmas(theorem: Theorem, syms: Sequence[Any], backend: Any, domain: list[Any], deadline: _Deadline) -> list[Any]:
    """Every lemma part the solver proves, in rounds: the first round tries each part from the domain
    alone, each later round tries the parts still open with everything the rounds before proved, until
    a round proves nothing new. Within a round the hypotheses are fixed, so what is proved does not
    depend on the order the lemmas are listed in (stages are a reading aid, not a schedule)."""
    pending = [backend.as_bool(part) for lemma in theorem.lemmas for part in goal_parts(lemma(*syms))]
    proved: list[Any] = []
    rounds = 0
    while pending and deadline.left() > 0:
        known = list(proved)
        # The first round is short: a lemma that needs others fails fast there and waits for them.
        share = LEMMA_FIRST_SHARE if rounds == 0 else LEMMA_SHARE
        rounds += 1
        for part in list(pending):
            check = backend.solver(domain + known)
            check.add(backend.api.Not(part))
            if deadline.check(check, deadline.seconds * share, share) == "unsat":
                proved.append(part)
                pending.remove(part)
        if len(proved) == len(known) and rounds > 1:
            break
    return proved


PROBE_BOUND = 4  # a stuck part is probed for a counterexample with every variable at most this
PROBE_CAP_S = 3.0


def _probe(backend: Any, check: Any, syms: Sequence[Any], lowers: Sequence[int], deadline: _Deadline) -> str:
    """A part the solver could not decide, searched for a counterexample among small values only: a
    model found there is a real counterexample ("sat"); finding none proves nothing ("unknown")."""
    check.push()
    check.add(*[sym <= max(lower, 0) + PROBE_BOUND for sym, lower in zip(syms, lowers)])
    answer = deadline.check(check, min(PROBE_CAP_S, deadline.seconds * 0.3))
    check.pop()
    return "sat" if answer == "sat" else UNKNOWN_ANSWER


def discharge(
    theorem: Theorem,
    *,
    timeout_s: float = 10.0,
    seed: int = 0,
    minimise: bool = True,
    attempts: bool = True,
    solver: str = "z3",
    rlimit: int | None = None,
) -> Discharge:
    """Prove or refute ``theorem`` with ``solver`` ("z3" or "cvc5") within ``timeout_s`` seconds.
    ``rlimit``: also at most that many of the solver's resource units per check, a budget that, unlike
    seconds, does not depend on the machine or its load (so an answer under it is reproducible)."""
    start = time.perf_counter()
    backend = _backend(solver, seed)
    api = backend.api
    deadline = _Deadline(backend, timeout_s, rlimit)
    syms = backend.ints(theorem.variable_names)
    lowers = [v.lower for v in theorem.variables]
    domain = [sym >= lower for sym, lower in zip(syms, lowers)]
    hypotheses = _lemmas(theorem, syms, backend, domain, deadline)

    parts = [backend.as_bool(p) for p in goal_parts(theorem.goal(*syms))]
    # First each part gets half an equal share of what is left (and, when undecided, a probe for a
    # small counterexample), so that one stuck part cannot hide a refutable one behind it; then the
    # parts still open get everything that is left.
    result, reason = PROVED, None
    open_parts = list(parts)
    for share in (True, False):
        still_open = []
        for i, part in enumerate(open_parts):
            check = backend.solver(domain + hypotheses)
            check.add(api.Not(part))
            cap = deadline.left() / (len(open_parts) - i) / 2 if share else None
            answer = deadline.check(check, cap)
            if answer not in ("sat", "unsat") and share:
                answer = _probe(backend, check, syms, lowers, deadline)
            if answer == "sat":
                result = REFUTED
                break
            if answer != "unsat":
                still_open.append(part)
        if result == REFUTED or not still_open:
            break
        open_parts = still_open
    if result != REFUTED and open_parts and still_open:
        result, reason = UNKNOWN, deadline.reason

    counterexample, minimal = None, False
    if result == REFUTED:
        check = backend.solver(domain + hypotheses)
        check.add(api.Or(*[api.Not(p) for p in parts]) if len(parts) > 1 else api.Not(parts[0]))
        boxed = False
        answer = deadline.check(check, deadline.left() / 2)
        if answer != "sat":  # found by the probe only: look for it in the probe's box again
            check.add(*[sym <= max(lower, 0) + PROBE_BOUND for sym, lower in zip(syms, lowers)])
            boxed, answer = True, deadline.check(check)
        if answer == "sat":
            model = check.model()
            if minimise:
                counterexample, minimal = _minimise(check, syms, lowers, model, deadline)
                minimal = minimal and not boxed  # the smallest in the box, not shown the smallest overall
                if boxed:
                    reason = "counterexample found among small values; not shown the smallest overall"
            else:
                counterexample = _values(model, syms)
        else:  # a part's negation was satisfiable, so this is: only the deadline can get here
            result, reason = UNKNOWN, deadline.reason
    seconds = time.perf_counter() - start

    tried = run_attempts(theorem, timeout_s=timeout_s, seed=seed, solver=solver) if attempts else ()
    return Discharge(result, seconds, counterexample, minimal, reason, len(hypotheses), tried)


def run_attempts(
    theorem: Theorem, *, timeout_s: float = 10.0, seed: int = 0, solver: str = "z3"
) -> tuple[AttemptResult, ...]:
    """The theorem's informational attempts (never counted), each in a fresh context."""
    return tuple(_attempt(theorem, a, seed, timeout_s, solver) for a in theorem.attempts)
