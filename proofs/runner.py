"""Running theorems: Z3, the bounded concrete check, their agreement, and the replay of refutations.

A theorem meets its expectation when Z3's answer is the expected one, the concrete check agrees (a
proof holds on every bounded point; a refutation's counterexample fails on ints and, when minimal,
is exactly the first failing bounded point), and a refutation's replay really fails on the manager.
Anything else is *contradicted*; a solver ``unknown`` (or an unfinished minimisation) is *unknown*.

With ``jobs > 1`` the concrete checks run in forked worker processes, split by the first variable's
values, while the parent runs Z3 and the replays.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any, Callable, Sequence

import attrs

from . import concrete, discharge
from .concrete import ConcreteCheck
from .discharge import PROVED, REFUTED, UNKNOWN, Discharge
from .theorem import Replay, Theorem

__all__ = ["OK", "CONTRADICTED", "UNKNOWN_STATUS", "TheoremResult", "prove", "exit_code"]

OK, CONTRADICTED, UNKNOWN_STATUS = "ok", "contradicted", "unknown"


@attrs.frozen
class TheoremResult:
    theorem: Theorem
    discharge: Discharge
    concrete: ConcreteCheck
    disagreement: str | None
    replay: Replay | None
    seed: int

    @property
    def status(self) -> str:
        d, expected = self.discharge, self.theorem.expected.value
        if d.result != UNKNOWN and d.result != expected:
            return CONTRADICTED
        if self.disagreement is not None:
            return CONTRADICTED
        if d.result == REFUTED and (self.replay is None or not self.replay.confirmed):
            return CONTRADICTED
        if d.result == UNKNOWN or (d.result == REFUTED and not d.minimal):
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
            "concrete": {
                "holds": c.holds,
                "points": c.points,
                "seconds": round(c.seconds, 4),
                "counterexample": c.counterexample,
            },
            "agree": None if d.result == UNKNOWN else self.disagreement is None,
            "disagreement": self.disagreement,
            "replay": None
            if self.replay is None
            else {"confirmed": self.replay.confirmed, "summary": self.replay.summary, "trace": list(self.replay.trace)},
            "attempts": [attrs.asdict(a) | {"seconds": round(a.seconds, 4)} for a in d.attempts],
            "solver": f"z3 {discharge.z3_version()}",
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


def disagreement(theorem: Theorem, d: Discharge, c: ConcreteCheck) -> str | None:
    """Why Z3 and the bounded check disagree, or None (also when Z3 did not answer)."""
    if d.result == UNKNOWN:
        return None
    if d.result == PROVED:
        return None if c.holds else f"Z3 proved it, but it fails on ints at {c.counterexample}"
    admissible, holds = concrete.evaluate(theorem, d.counterexample)
    if not admissible or holds:
        return f"Z3's counterexample {d.counterexample} does not fail on ints"
    if c.holds:
        return f"Z3 refuted it at {d.counterexample}, outside the bounded ranges, where nothing fails"
    if d.minimal and c.counterexample != d.counterexample:
        return f"smallest counterexamples differ: Z3 {d.counterexample}, ints {c.counterexample}"
    return None


def _replay(theorem: Theorem, d: Discharge) -> Replay | None:
    if d.result != REFUTED or theorem.replay is None:
        return None
    try:
        return theorem.replay(d.counterexample)
    except Exception as exc:  # reported as an unconfirmed replay, which fails the run
        return Replay(False, f"replay raised {type(exc).__name__}: {exc}", ())


# Set in the parent just before forking the workers, which inherit it.
_WORK: Sequence[Theorem] = ()


def _concrete_chunk(index: int, chunk: int, chunks: int) -> ConcreteCheck:
    return concrete.check(_WORK[index], first=(chunk, chunks))


def _merge(parts: list[ConcreteCheck]) -> ConcreteCheck:
    """Chunks split the first variable's values, so the smallest failing point is the smallest of the
    chunks' first failures."""
    failures = [p.counterexample for p in parts if p.counterexample is not None]
    first = min(failures, key=lambda cex: list(cex.values())) if failures else None
    return ConcreteCheck(
        first is None, sum(p.points for p in parts), sum(p.seconds for p in parts), first
    )


def prove(
    theorems: Sequence[Theorem],
    *,
    timeout_s: float = 10.0,
    seed: int = 0,
    jobs: int = 1,
    progress: Callable[[TheoremResult | Theorem, str], None] | None = None,
) -> list[TheoremResult]:
    """Discharge each theorem with Z3, check it on ints and replay its refutation; see the module doc."""
    global _WORK
    pending: dict[int, Any] = {}
    pool = None
    if jobs > 1:
        _WORK = tuple(theorems)
        # Niced, so that Z3 in this process keeps its time budget on a busy machine.
        pool = multiprocessing.get_context("fork").Pool(jobs, initializer=os.nice, initargs=(5,))
        pending = {
            i: [pool.apply_async(_concrete_chunk, (i, k, jobs)) for k in range(jobs)] for i in range(len(theorems))
        }
    try:
        solved = []
        for theorem in theorems:
            d = discharge.discharge(theorem, timeout_s=timeout_s, seed=seed)
            solved.append((d, _replay(theorem, d)))
            if progress is not None:
                progress(theorem, f"z3 {d.result} in {d.seconds:.2f} s")
        results = []
        for i, (theorem, (d, replay)) in enumerate(zip(theorems, solved)):
            c = _merge([job.get() for job in pending[i]]) if pool else concrete.check(theorem)
            result = TheoremResult(theorem, d, c, disagreement(theorem, d, c), replay, seed)
            results.append(result)
            if progress is not None:
                progress(result, result.status)
        return results
    finally:
        if pool is not None:
            pool.terminate()
            _WORK = ()
