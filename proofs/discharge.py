"""Discharging a theorem with an SMT solver: Z3 (the default) or cvc5 (through its pythonic API,
which mirrors z3py, so the same goal functions build its terms).

The goal is built by calling the theorem's goal function on the solver's integer constants, one per
variable, under the domain (each variable at least its lower bound; narrower domains are
implications inside the goal). Each conjunct is proved separately (``domain and not part``
unsatisfiable); a satisfiable one refutes the theorem, and the counterexample is then minimised
lexicographically in the theorem's variable order (t, then W, then S, then h, then the rest) by
bisection on each variable in turn.

Two encodings of the same goal. ``direct``: the goal's terms as they are, with integer division by
the block size (nonlinear; Z3 decides the catalogue with the theorems' lemma hints, cvc5 does not).
``blocks``: the same goal rewritten exactly into linear arithmetic by :mod:`.blockform` (token counts
in whole blocks and a remainder), which any SMT solver decides; its range obligations are proved
first, and a goal outside that fragment falls back to ``direct`` (the discharge says so). By default
both solvers get the block encoding: Z3 decides it three times faster than the direct one over the
catalogue (``python -m swafloor.proofs.bench``), and cvc5 decides only it. ``--encoding direct`` gives
every solver the goal as written; the test suite runs Z3 so (tests/test_proofs.py), beside the bounded
concrete check of every theorem, so the rewrite is checked against the goal as written in CI.

Hygiene: one deadline per theorem shared by all its solver calls (``timeout_s``), the solver's random
seed set from ``seed``, and ``unknown`` (a timeout or an incomplete answer) reported as such, never
as proved. Each theorem is discharged in a fresh solver context, so what the solver does depends on
the theorem and the seed alone, not on the theorems discharged before it in the same process. cvc5
is imported only when asked for (the optional extra ``swafloor[cvc5]``).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Sequence

import attrs
import z3

from . import DEFAULT_TIMEOUT_S, blockform
from .symbolic import BLOCK_SIZE
from .theorem import Theorem, goal_parts, solver_goal_parts

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
    "ENCODINGS",
    "default_encoding",
]

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"
SOLVERS = ("z3", "cvc5")
ENCODINGS = ("direct", "blocks")


def default_encoding(solver: str) -> str:
    """The encoding a solver gets unless asked otherwise (or a theorem names one): the linear one, for
    both (see the module doc)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r}: must be one of {SOLVERS}")
    return "blocks"


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
        self.incremental = False  # see :meth:`scoped`

    def ints(self, names: Sequence[str]) -> list[Any]:
        return [z3.Int(n, self.ctx) for n in names]

    def solver(self, facts: Sequence[Any]) -> Any:
        solver = z3.Solver(ctx=self.ctx)
        solver.set("random_seed", self.seed)
        solver.add(*facts)
        return solver

    def set_timeout(self, solver: Any, ms: int) -> None:
        solver.set("timeout", ms)

    def scoped(self, facts: Sequence[Any]) -> Any:
        """A solver whose checks share ``facts`` through push/pop, or None: each check gets a fresh
        solver (pushing switches Z3 from its preprocessing tactics to its incremental core, which
        decides the nonlinear direct goals worse). On the block encoding (quantifier-free linear, see
        :meth:`linear`) the incremental core is as good and spares a solver per part: one is shared."""
        return self.solver(facts) if self.incremental else None

    def set_rlimit(self, solver: Any, units: int) -> None:
        solver.set("rlimit", units)

    def linear(self) -> None:
        """Every check from now on is quantifier-free linear (Z3 picks its tactics from the problem
        itself): its parts may share one incremental solver (:meth:`scoped`)."""
        self.incremental = True

    def numeral_divisors(self) -> None:
        """The goal has no block-size variable: it divides by numerals only, and its parts may share one
        incremental solver too (measured: a fifth of Z3's time on the three such theorems)."""
        self.incremental = True

    def as_bool(self, value: Any) -> Any:
        return z3.BoolVal(value, self.ctx) if isinstance(value, bool) else value


class _Cvc5:
    """The same interface on cvc5's pythonic API."""

    name = "cvc5"

    def __init__(self, seed: int, rlimit: int | None = None):
        self.api = _cvc5()
        self.seed = seed
        self.rlimit = rlimit
        self.ctx = self.api.Context()
        #: the logic its solvers are set to, None for cvc5's default (every theory); see :meth:`linear`
        self.logic: str | None = None
        self.incremental = False  # its parts share a solver only with hypotheses (see :meth:`scoped`)

    def numeral_divisors(self) -> None:
        pass  # no logic is set: a goal with no block-size variable could still multiply two variables

    def linear(self) -> None:
        """Every check from now on is quantifier-free linear integer arithmetic (the block encoding of
        a goal without quantifiers): tell cvc5 so (QF_LIA), which spares it the theories it would
        otherwise set up and halves its time on the largest goals. A term outside the logic makes cvc5
        raise, never answer."""
        self.logic = "QF_LIA"

    def ints(self, names: Sequence[str]) -> list[Any]:
        return [self.api.Int(n, self.ctx) for n in names]

    def solver(self, facts: Sequence[Any]) -> Any:
        if self.logic is None:
            solver = self.api.Solver(ctx=self.ctx)
        else:
            solver = self.api.SolverFor(self.logic, ctx=self.ctx)
        solver.set("seed", self.seed)
        if self.logic == "QF_LIA":  # the block encoding's quotients and choices are if-then-else terms:
            solver.set("ite-simp", "true")  # simplifying them first cuts cvc5's time by a tenth to a half
        if self.rlimit is not None:  # cvc5 takes a resource limit only before its first assertion
            solver.set("rlimit-per", self.rlimit)
        solver.add(*facts)
        return solver

    def set_timeout(self, solver: Any, ms: int) -> None:
        solver.set("tlimit-per", ms)

    def scoped(self, facts: Sequence[Any]) -> Any:
        """One solver for checks that share ``facts``, each check in its own push/pop scope: cvc5's
        pythonic solver is incremental anyway (every check is a check-sat-assuming), and a fresh one
        per part (its options, its logic, every lemma hypothesis asserted and preprocessed again) cost
        mixed-pool-group-sufficient ten times its 52 small checks."""
        return self.solver(facts)

    def set_rlimit(self, solver: Any, units: int) -> None:
        pass  # set once per solver when it is made (the whole limit per check, not a share of it)

    def as_bool(self, value: Any) -> Any:
        return self.api.BoolVal(value, self.ctx) if isinstance(value, bool) else value


def _backend(solver: str, seed: int, rlimit: int | None = None) -> Any:
    if solver == "z3":
        return _Z3(seed)
    if solver == "cvc5":
        return _Cvc5(seed, rlimit)
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
    encoding: str = "direct"
    obligations: int = 0  # range obligations the block encoding proved first
    #: CPU seconds (this process) spent building and encoding the goal, before any solver check
    build_seconds: float = 0.0
    #: the resource units each check was allowed (None: seconds alone bounded it)
    rlimit: int | None = None


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


class _Direct:
    """The goal's own terms: the theorem's variables as the solver's integer constants."""

    name = "direct"

    def __init__(self, theorem: Theorem, backend: Any):
        self.backend = backend
        self.syms = backend.ints(theorem.variable_names)
        self.domain = [sym >= v.lower for sym, v in zip(self.syms, theorem.variables)]
        self.basic: list[Any] = []
        self.obligations: list[Any] = []
        self.parts = [backend.as_bool(p) for p in solver_goal_parts(theorem, self.syms)]

    def lemma_parts(self, theorem: Theorem) -> list[Any]:
        if theorem.lemma_solvers is not None and self.backend.name not in theorem.lemma_solvers:
            return []
        return [self.backend.as_bool(p) for lemma in theorem.lemmas for p in goal_parts(lemma(*self.syms))]

    def at_most(self, i: int, value: int) -> Any:
        return self.syms[i] <= value

    def fix(self, i: int, value: int) -> Any:
        return self.syms[i] == value

    def values(self, model: Any) -> dict[str, int]:
        """The model's values, read at once (a cvc5 model is only valid until the solver's next call)."""
        return {str(s): model.eval(s, model_completion=True).as_long() for s in self.syms}


class _Blocks:
    """The goal rewritten into linear arithmetic (:mod:`.blockform`); needs no lemma hints."""

    name = "blocks"

    def __init__(self, theorem: Theorem, backend: Any):
        if theorem.variables[0].unit != BLOCK_SIZE:
            raise blockform.Unsupported("the block size must be the first variable (minimisation fixes it first)")
        enc = self.enc = blockform.BlockEncoding(
            [(v.name, v.unit, v.lower) for v in theorem.variables], backend.api, backend.ctx
        )
        self.names = theorem.variable_names
        self.parts = [enc.bool(p) for p in solver_goal_parts(theorem, enc.z3_syms)]
        self.domain, self.basic = enc.domain, enc.basic
        self.obligations = list(enc.obligations)  # those the goal and the domain rest on
        self.block_size: int | None = None

    def lemma_parts(self, theorem: Theorem) -> list[Any]:
        return []

    def at_most(self, i: int, value: int) -> Any:
        """``variable <= value``; once the block size is fixed (minimisation fixes it first), a token
        count's bound is ``t*q + r <= value`` with ``t`` a number: linear without a quotient."""
        name = self.names[i]
        if name in self.enc.coordinates and self.block_size is not None:
            q, r = self.enc.coordinates[name]
            return q * self.block_size + r <= value
        return self.enc.bool(self.enc.z3_syms[i] <= value)

    def fix(self, i: int, value: int) -> Any:
        name = self.names[i]
        if name == self.enc.t_name:
            self.block_size = value
        if name in self.enc.coordinates and self.block_size is not None:
            q, r = self.enc.coordinates[name]
            return q * self.block_size + r == value
        return self.enc.bool(self.enc.z3_syms[i] == value)

    def values(self, model: Any) -> dict[str, int]:
        return {name: self.enc.value(name, model) for name in self.names}


def _encode(theorem: Theorem, backend: Any, encoding: str) -> tuple[Any, str | None]:
    """The theorem in ``encoding``, or in the direct one (with the reason) when the block encoding
    does not cover its goal."""
    if encoding == "blocks":
        try:
            return _Blocks(theorem, backend), None
        except blockform.Unsupported as exc:
            return _Direct(theorem, backend), f"block encoding unsupported: {exc}"
    if encoding != "direct":
        raise ValueError(f"encoding={encoding!r}: must be one of {ENCODINGS}")
    return _Direct(theorem, backend), None


def _minimise(
    solver: Any, enc: Any, lowers: Sequence[int], values: dict[str, int], deadline: _Deadline
) -> tuple[dict[str, int], bool]:
    """Fix each variable in turn at its smallest value that still admits a counterexample, starting
    from ``values``, a counterexample (a model of what ``solver`` holds)."""
    for i, (name, lower) in enumerate(zip(list(values), lowers)):
        best, lo = values[name], lower
        first = True
        while lo < best:
            mid = lo if first else (lo + best) // 2  # smallest counterexamples sit at the bound: try it first
            first = False
            solver.push()
            solver.add(enc.at_most(i, mid))
            answer = deadline.check(solver)
            if answer == "sat":
                values = enc.values(solver.model())
                best = values[name]
            solver.pop()
            if answer == "unsat":
                lo = mid + 1
            elif answer != "sat":
                return values, False
        solver.add(enc.fix(i, best))
    return values, True


def _obligations_fail(backend: Any, enc: Any, deadline: _Deadline) -> str | None:
    """Why the block encoding's range obligations are not proved (None when they are, or when there
    are none): its quotients are exact only on the ranges it assumed."""
    if not enc.obligations:
        return None
    check = backend.solver(enc.basic)
    check.add(backend.api.Not(backend.api.And(*enc.obligations)))
    answer = deadline.check(check)
    if answer == "unsat":
        return None
    why = "fails (a bug in proofs/blockform.py)" if answer == "sat" else f"undecided ({deadline.reason})"
    return f"a range obligation of the block encoding {why}"


def _attempt(
    theorem: Theorem, attempt: Any, seed: int, timeout_s: float, solver: str, encoding: str | None = None
) -> AttemptResult:
    start = time.perf_counter()
    backend = _backend(solver, seed)
    deadline = _Deadline(backend, min(timeout_s, attempt.timeout_s))
    encoding = encoding or theorem.encodings.get(solver) or default_encoding(solver)
    label = attempt.label if encoding == "direct" else f"{attempt.label}, block encoding"
    api, answer, reason = backend.api, UNKNOWN_ANSWER, None
    try:
        if encoding != "blocks":
            raise blockform.Unsupported("direct encoding asked for")
        enc = blockform.BlockEncoding([(v.name, v.unit, v.lower) for v in theorem.variables], api, backend.ctx)
        claim, domain = enc.bool(attempt.build(*enc.z3_syms)), enc.domain
        reason = _obligations_fail(backend, enc, deadline)
        if reason is not None:
            claim = None
    except blockform.Unsupported:
        if encoding == "blocks":
            label = attempt.label
        syms = backend.ints(theorem.variable_names)
        domain = [sym >= v.lower for sym, v in zip(syms, theorem.variables)]
        claim = backend.as_bool(attempt.build(*syms))
    if claim is not None:
        check = backend.solver(domain)
        check.add(api.Not(claim))
        answer = deadline.check(check)
        reason = deadline.reason
    result = PROVED if answer == "unsat" else REFUTED if answer == "sat" else UNKNOWN
    return AttemptResult(label, attempt.statement, result, time.perf_counter() - start,
                         reason if result == UNKNOWN else None)


@contextlib.contextmanager
def _checking(backend: Any, scoped: Any, facts: Sequence[Any]) -> Iterator[Any]:
    """A solver holding ``facts`` for one check: a scope of ``scoped`` (popped after the check), or a
    fresh solver when the backend shares none (:meth:`_Z3.scoped`)."""
    if scoped is None:
        yield backend.solver(facts)
        return
    scoped.push()
    try:
        yield scoped
    finally:
        scoped.pop()


LEMMA_SHARE = 0.2  # the most of the theorem's time one lemma check may take (a stuck lemma cannot eat it)
LEMMA_FIRST_SHARE = 0.05  # ... in the first round


def _lemmas(theorem: Theorem, enc: Any, backend: Any, domain: list[Any], deadline: _Deadline) -> list[Any]:
    """Every lemma part the solver proves, in rounds: the first round tries each part from the domain
    alone, each later round tries the parts still open with everything the rounds before proved, until
    a round proves nothing new. Within a round the hypotheses are fixed, so what is proved does not
    depend on the order the lemmas are listed in (stages are a reading aid, not a schedule)."""
    pending = enc.lemma_parts(theorem)
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


def _box(enc: Any, lowers: Sequence[int]) -> list[Any]:
    """Every variable at most ``PROBE_BOUND`` past its lower bound (or past 0)."""
    return [enc.at_most(i, max(lower, 0) + PROBE_BOUND) for i, lower in enumerate(lowers)]


def _probe(check: Any, enc: Any, lowers: Sequence[int], deadline: _Deadline) -> str:
    """A part the solver could not decide, searched for a counterexample among small values only: a
    model found there is a real counterexample ("sat"); finding none proves nothing ("unknown")."""
    check.push()
    check.add(*_box(enc, lowers))
    answer = deadline.check(check, min(PROBE_CAP_S, deadline.seconds * 0.3))
    check.pop()
    return "sat" if answer == "sat" else UNKNOWN_ANSWER


def discharge(
    theorem: Theorem,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    seed: int = 0,
    minimise: bool = True,
    attempts: bool = True,
    solver: str = "z3",
    rlimit: int | None = None,
    encoding: str | None = None,
) -> Discharge:
    """Prove or refute ``theorem`` with ``solver`` ("z3" or "cvc5") within ``timeout_s`` seconds.
    ``rlimit``: also at most that many of the solver's resource units per check, a budget that, unlike
    seconds, does not depend on the machine or its load (so an answer under it is reproducible).
    ``encoding``: "direct" or "blocks" (see the module doc); by default :func:`default_encoding`."""
    start, cpu = time.perf_counter(), time.process_time()
    backend = _backend(solver, seed, rlimit)
    api = backend.api
    deadline = _Deadline(backend, timeout_s, rlimit)
    enc, fallback = _encode(theorem, backend, encoding or theorem.encodings.get(solver) or default_encoding(solver))
    if (enc.name == "blocks" and not enc.enc.quantified) or (enc.name == "direct" and theorem.linear):
        backend.linear()
    elif all(v.unit != BLOCK_SIZE for v in theorem.variables):  # block sizes are constants of the goal
        backend.numeral_divisors()
    build_s = time.process_time() - cpu
    lowers = [v.lower for v in theorem.variables]
    domain = enc.domain

    def done(result: str, reason: str | None, **more: Any) -> Discharge:
        tried = run_attempts(theorem, timeout_s=timeout_s, seed=seed, solver=solver, encoding=encoding) if attempts else ()
        return Discharge(result, time.perf_counter() - start, reason=reason, attempts=tried,
                         encoding=enc.name, obligations=len(enc.obligations), build_seconds=build_s, rlimit=rlimit,
                         **more)

    why = _obligations_fail(backend, enc, deadline)
    if why is not None:
        return done(UNKNOWN, why)
    hypotheses = _lemmas(theorem, enc, backend, domain, deadline)

    parts = enc.parts
    # First each part gets half an equal share of what is left (and, when undecided, a probe for a
    # small counterexample), so that one stuck part cannot hide a refutable one behind it; then the
    # parts still open get everything that is left.
    result, reason = PROVED, None
    found: dict[str, int] | None = None  # a counterexample a part's own check found (not the probe)
    open_parts = list(parts)
    # With proved lemmas as hypotheses, the parts share one solver where the backend allows it
    # (:meth:`_Cvc5.scoped`): a fresh solver per part would take in every hypothesis again.
    # So do Z3's on a goal it decides incrementally as well (:meth:`_Z3.scoped`).
    scoped = backend.scoped(domain + hypotheses) if hypotheses or backend.incremental else None
    for share in (True, False):
        still_open = []
        for i, part in enumerate(open_parts):
            with _checking(backend, scoped, domain + hypotheses) as check:
                check.add(api.Not(part))
                cap = deadline.left() / (len(open_parts) - i) / 2 if share else None
                answer = deadline.check(check, cap)
                if answer == "sat":  # read at once: a cvc5 model is valid only until the next call
                    found = enc.values(check.model())
                elif answer != "unsat" and share:
                    answer = _probe(check, enc, lowers, deadline)
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
        if found is not None:  # the part's own check found it: its model is a model of this one
            answer, values = "sat", found
        else:
            answer = deadline.check(check, deadline.left() / 2)
            if answer != "sat":  # found by the probe only: look for it in the probe's box again
                check.add(*_box(enc, lowers))
                boxed, answer = True, deadline.check(check)
            values = enc.values(check.model()) if answer == "sat" else None
        if answer == "sat":
            if minimise:
                counterexample, minimal = _minimise(check, enc, lowers, values, deadline)
                minimal = minimal and not boxed  # the smallest in the box, not shown the smallest overall
                if boxed:
                    reason = "counterexample found among small values; not shown the smallest overall"
            else:
                counterexample = values
        else:  # a part's negation was satisfiable, so this is: only the deadline can get here
            result, reason = UNKNOWN, deadline.reason
    if fallback is not None:
        reason = fallback if reason is None else f"{reason}; {fallback}"
    return done(result, reason, counterexample=counterexample, minimal=minimal, lemmas_proved=len(hypotheses))


def run_attempts(
    theorem: Theorem, *, timeout_s: float = DEFAULT_TIMEOUT_S, seed: int = 0, solver: str = "z3", encoding: str | None = None
) -> tuple[AttemptResult, ...]:
    """The theorem's informational attempts (never counted), each in a fresh context."""
    return tuple(_attempt(theorem, a, seed, timeout_s, solver, encoding) for a in theorem.attempts)
