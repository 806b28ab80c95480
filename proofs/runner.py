"""Running theorems: the solver(s), the bounded concrete check, their agreement, and the replay of
refutations.

A theorem meets its expectation when each solver's answer is the expected one, the concrete check
agrees (a proof holds on every bounded point; a refutation's counterexample fails on ints and, when
minimal, is exactly the first failing bounded point), the solvers agree with each other (same
answer, same smallest counterexample), and a refutation's replay really fails on the manager.

The concrete check evaluates the goal the solvers decide, so on a proof it can only catch a solver
(or a block encoding) that proves a false goal; two solvers and the twin already stand there. It
therefore runs on every refutation, expected or not (it is what a smallest counterexample is
compared with; a refutation fails early, so it costs milliseconds), and on proofs only when asked
(``concrete=True``: ``swafloor prove --concrete``, the test suite, ``swafloor docs build``).
Beside them each theorem's token-level twin (:mod:`.twins`) brute-forces the plain statement block by
block; a twin that misses the expected outcome (a proof failing on its grid, a refutation finding no
counterexample) contradicts the theorem too. Anything else is *contradicted*; a solver ``unknown`` (or an unfinished minimisation) is *unknown*.

With ``jobs > 1`` every solver run and every concrete check is a task for a pool of forked worker
processes (the longest first); the parent collects them and runs the replays.
"""

from __future__ import annotations

import multiprocessing
from typing import Any, Callable, Mapping, Sequence

import attrs

from . import concrete, discharge, twins
from . import concrete as _concrete  # ``concrete`` is also prove's keyword
from .concrete import ConcreteCheck
from . import DEFAULT_RLIMIT
from .discharge import DEFAULT_TIMEOUT_S, PROVED, REFUTED, UNKNOWN, Discharge
from .theorem import Replay, Theorem
from .twins import TwinResult

__all__ = ["OK", "CONTRADICTED", "UNKNOWN_STATUS", "TheoremResult", "prove", "exit_code"]

OK, CONTRADICTED, UNKNOWN_STATUS = "ok", "contradicted", "unknown"


@attrs.frozen
class TheoremResult:
    """``discharges``: one per solver, in the order asked for; ``discharge`` is the first."""

    theorem: Theorem
    discharges: tuple[tuple[str, Discharge], ...]
    #: None: not run (a proof without ``concrete=True``; see the module doc)
    concrete: ConcreteCheck | None
    disagreement: str | None
    replay: Replay | None
    seed: int
    #: the token-level twin (proofs/twins.py): the plain statement brute-forced block by block
    twin: TwinResult | None = None

    @property
    def twin_agrees(self) -> bool:
        """The twin meets the expected outcome: a proof holds on its grid, a refutation fails there."""
        if self.twin is None:
            return True
        if self.twin.error is not None:
            return False
        return self.twin.holds == (self.theorem.expected.value == PROVED)

    @property
    def discharge(self) -> Discharge:
        return self.discharges[0][1]

    @property
    def solver(self) -> str:
        return self.discharges[0][0]

    def of(self, solver: str) -> Discharge | None:
        return dict(self.discharges).get(solver)

    @property
    def status(self) -> str:
        expected = self.theorem.expected.value
        answered = [d for _, d in self.discharges if d.result != UNKNOWN]
        if any(d.result != expected for d in answered):
            return CONTRADICTED
        if self.disagreement is not None:
            return CONTRADICTED
        if not self.twin_agrees and not self.twin.missing:
            return CONTRADICTED
        d = self.discharge
        if d.result == REFUTED and (self.replay is None or not self.replay.confirmed):
            return CONTRADICTED
        if not self.twin_agrees or len(answered) < len(self.discharges) or any(
            d.result == REFUTED and not d.minimal for _, d in self.discharges
        ):
            return UNKNOWN_STATUS
        return OK

    def to_json(self) -> dict[str, Any]:
        d, c = self.discharge, self.concrete
        return {
            "name": self.theorem.name,
            "statement": self.theorem.statement,
            "expected": self.theorem.expected.value,
            "result": d.result,
            "seconds": round(d.seconds, 4),
            "counterexample": d.counterexample,
            "status": self.status,
            "reason": d.reason,
            "minimal": d.minimal if d.result == REFUTED else None,
            "variables": [
                {"name": v.name, "lower": v.lower, "meaning": v.meaning, "bounded": v.bound_text}
                for v in self.theorem.variables
            ],
            "concrete": None if c is None else {
                "holds": c.holds,
                "points": c.points,
                "seconds": round(c.seconds, 4),
                "counterexample": c.counterexample,
            },
            "token_level": None
            if self.twin is None
            else {
                "what": "token-level brute force of the plain statement (proofs/twins.py), not the goal",
                "holds": self.twin.holds,
                "points": self.twin.points,
                "seconds": round(self.twin.seconds, 4),
                "counterexample": self.twin.counterexample,
                "error": self.twin.error,
                "agrees": self.twin_agrees,
                "missing": self.twin.missing,
            },
            "agree": None if d.result == UNKNOWN else self.disagreement is None,
            "disagreement": self.disagreement,
            "replay": None
            if self.replay is None
            else {"confirmed": self.replay.confirmed, "summary": self.replay.summary, "trace": list(self.replay.trace)},
            "attempts": [attrs.asdict(a) | {"seconds": round(a.seconds, 4)} for a in d.attempts],
            "solver": discharge.solver_version(self.solver),
            "encoding": d.encoding,
            "solvers": {
                name: {
                    "result": x.result,
                    "seconds": round(x.seconds, 4),
                    "counterexample": x.counterexample,
                    "minimal": x.minimal if x.result == REFUTED else None,
                    "reason": x.reason,
                    "encoding": x.encoding,
                    "rlimit": x.rlimit,
                    "rlimit_own": self.theorem.rlimits.get(name),
                    "obligations": x.obligations,
                    "attempts": [attrs.asdict(a) | {"seconds": round(a.seconds, 4)} for a in x.attempts],
                }
                for name, x in self.discharges
            },
            "seed": self.seed,
        }


def exit_code(results: Sequence[TheoremResult]) -> int:
    """0 when every theorem met its expectation, 1 when any was contradicted, else 3 (unknown)."""
    statuses = {r.status for r in results}
    if CONTRADICTED in statuses:
        return 1
    if UNKNOWN_STATUS in statuses:
        return 3
    return 0


def disagreement(theorem: Theorem, d: Discharge, c: ConcreteCheck | None) -> str | None:
    """Why a solver and the bounded check disagree, or None (also when the solver did not answer).
    ``c`` None: the check was not run (a proof, see the module doc); a counterexample is still
    evaluated on ints."""
    if d.result == UNKNOWN:
        return None
    if d.result == PROVED:
        return None if c is None or c.holds else f"the solver proved it, but it fails on ints at {c.counterexample}"
    admissible, holds = concrete.evaluate(theorem, d.counterexample)
    if not admissible or holds:
        return f"the solver's counterexample {d.counterexample} does not fail on ints"
    if c is None:  # not reached by prove: any refutation gets the check
        return None
    if c.holds:
        return f"refuted at {d.counterexample}, outside the bounded ranges, where nothing fails"
    if d.minimal and c.counterexample != d.counterexample:
        return f"smallest counterexamples differ: solver {d.counterexample}, ints {c.counterexample}"
    return None


def solvers_disagree(discharges: Sequence[tuple[str, Discharge]]) -> str | None:
    """Why two solvers' answers differ (both answered), or None."""
    answered = [(n, d) for n, d in discharges if d.result != UNKNOWN]
    for (n1, d1), (n2, d2) in zip(answered, answered[1:]):
        if d1.result != d2.result:
            return f"{n1} {d1.result}, {n2} {d2.result}"
        if d1.minimal and d2.minimal and d1.counterexample != d2.counterexample:
            return f"smallest counterexamples differ: {n1} {d1.counterexample}, {n2} {d2.counterexample}"
    return None


def _why(theorem: Theorem, discharges: Sequence[tuple[str, Discharge]], c: ConcreteCheck | None) -> str | None:
    across = solvers_disagree(discharges)
    if across is not None:
        return across
    for name, d in discharges:
        why = disagreement(theorem, d, c)
        if why is not None:
            return why if len(discharges) == 1 else f"{name}: {why}"
    return None


def _replay(theorem: Theorem, d: Discharge) -> Replay | None:
    if d.result != REFUTED or theorem.replay is None:
        return None
    try:
        return theorem.replay(d.counterexample)
    except Exception as exc:  # reported as an unconfirmed replay, which fails the run
        return Replay(False, f"replay raised {type(exc).__name__}: {exc}", ())


def _refuting(discharges: Sequence[tuple[str, Discharge]]) -> Discharge:
    """The discharge whose counterexample is replayed: the first that refuted, else the first."""
    return next((d for _, d in discharges if d.result == REFUTED), discharges[0][1])


# Set in the parent just before forking the workers, which inherit it.
_WORK: Sequence[Theorem] = ()
_OPTIONS: dict[str, Any] = {}


def _task(kind: str, index: int, solver: str | None) -> Any:
    theorem = _WORK[index]
    if kind == "concrete":
        return concrete.check(theorem)
    if kind.startswith("concrete "):  # "concrete k/m": the k-th of m chunks of the first variable's values
        k, m = map(int, kind.split()[1].split("/"))
        return concrete.check(theorem, (k, m))
    if kind == "twin":
        return twins.run_twin(theorem.name)
    options = dict(_OPTIONS)
    encoding = options.pop("encodings").get(solver)
    rlimit = theorem.rlimit(solver, options.pop("rlimits").get(solver))  # the theorem's own allowance, if larger
    if kind == "attempts":  # informational: each attempt runs to its own short time limit
        return discharge.run_attempts(theorem, solver=solver, encoding=encoding, **options)
    return discharge.discharge(theorem, solver=solver, attempts=False, encoding=encoding, rlimit=rlimit, **options)


def _cost(theorem: Theorem, kind: str) -> float:
    """A rough order for scheduling, the longest first so that the short ones fill the end evenly:
    attempts (they run to their time limit) and solver runs with lemmas first, then the rest with the
    concrete checks (in chunks, so that no long one is left alone at the end), the twins last (most
    take milliseconds)."""
    if kind.startswith("concrete"):
        return 10.0 * len(theorem.variables) + 5.0
    if kind == "twin":
        return 15.0
    if kind == "attempts":
        return 1000.0
    return 100.0 * len(theorem.lemmas) + 10.0 * len(theorem.variables)


def _concrete_chunks(theorems: Sequence[Theorem], jobs: int) -> list[tuple[str, ...]]:
    """Each theorem's concrete check as tasks: with several workers, one chunk of the first variable's
    values per worker (the largest checks take seconds), merged into one result (:func:`concrete.merge`);
    a refutation (its smallest counterexample sits at the start) and a check with fewer first values
    than workers stay whole."""
    out = []
    for theorem in theorems:
        first = theorem.variables[0]
        m = jobs if jobs > 1 and theorem.expected.value == PROVED and first.constant else 1
        if m > 1 and len(list(first.values({}))) < m:
            m = 1
        out.append(("concrete",) if m == 1 else tuple(f"concrete {k}/{m}" for k in range(m)))
    return out


def prove(
    theorems: Sequence[Theorem],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    seed: int = 0,
    jobs: int = 1,
    solvers: Sequence[str] = ("z3",),
    encodings: Mapping[str, str] | None = None,
    rlimits: Mapping[str, int] | None = DEFAULT_RLIMIT,
    progress: Callable[[TheoremResult | Theorem, str], None] | None = None,
    twin: bool = True,
    attempts: bool = True,
    concrete: bool = True,
) -> list[TheoremResult]:
    """Discharge each theorem with each solver, check it on ints and replay its refutation; see the
    module doc. ``encodings``: solver -> "direct" or "blocks" (default: :func:`discharge.default_encoding`).
    ``rlimits``: solver -> its resource units per check (default :data:`~swafloor.proofs.DEFAULT_RLIMIT`;
    None: seconds alone bound the solvers), within ``timeout_s`` per theorem and solver. ``attempts``: also
    run the theorems' informational attempts (``swafloor prove --attempts``; off by default there).
    ``concrete``: the bounded concrete check on every theorem; False: on refutations only, expected or
    not (``swafloor prove`` without ``--concrete``; see the module doc)."""
    global _WORK, _OPTIONS
    theorems = tuple(theorems)
    tasks = [("solve", i, s) for i in range(len(theorems)) for s in solvers]
    if attempts:  # informational queries, never counted (each runs to its own short time limit)
        tasks += [("attempts", i, s) for i, t in enumerate(theorems) if t.attempts for s in solvers]
    chunks = _concrete_chunks(theorems, jobs)
    checked = [concrete or t.expected.value == REFUTED for t in theorems]  # the rest: only if refuted
    tasks += [(kind, i, None) for i in range(len(theorems)) if checked[i] for kind in chunks[i]]
    if twin:
        tasks += [("twin", i, None) for i in range(len(theorems))]  # a theorem without a twin fails
    tasks.sort(key=lambda task: -_cost(theorems[task[1]], task[0]))
    _WORK, _OPTIONS = theorems, {
        "timeout_s": timeout_s, "seed": seed, "encodings": dict(encodings or {}), "rlimits": dict(rlimits or {}),
    }
    for solver in solvers:  # imported once, here, not once per forked worker
        discharge.solver_version(solver)
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    try:
        if pool is not None:
            pending = {task: pool.apply_async(_task, task) for task in tasks}
            get = lambda task: pending[task].get()  # noqa: E731
        else:
            get = lambda task: _task(*task)  # noqa: E731
        results = []
        for i, theorem in enumerate(theorems):
            discharges = tuple(
                (s, attrs.evolve(get(("solve", i, s)),
                                 attempts=get(("attempts", i, s)) if attempts and theorem.attempts else ()))
                for s in solvers
            )
            if progress is not None:
                for s, d in discharges:
                    progress(theorem, f"{s} {d.result} in {d.seconds:.2f} s")
            if checked[i]:
                c = _concrete.merge([get((kind, i, None)) for kind in chunks[i]]) if len(chunks[i]) > 1 else \
                    get((chunks[i][0], i, None))
            elif any(d.result == REFUTED for _, d in discharges):  # refuted against expectation: checked here
                c = _concrete.check(theorem)
            else:
                c = None
            tw = get(("twin", i, None)) if twin else None
            result = TheoremResult(
                theorem, discharges, c, _why(theorem, discharges, c), _replay(theorem, _refuting(discharges)), seed, tw
            )
            results.append(result)
            if progress is not None:
                progress(result, result.status)
        if pool is not None:  # every task is done: let the workers exit (and be counted by `time`)
            pool.close()
            pool.join()
            pool = None
        return results
    finally:
        if pool is not None:
            pool.terminate()
        _WORK, _OPTIONS = (), {}
