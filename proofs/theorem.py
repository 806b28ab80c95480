"""What a theorem is: data. A name, a plain statement, the expected outcome, the variables it
quantifies over, and the goal: ONE Python function of those variables, built from reference
functions, that the solver evaluates on Z3 terms and the concrete check on ints.
"""

from __future__ import annotations

import enum
import inspect
from typing import Any, Callable, Mapping

import attrs

from .symbolic import Var, scratch_context

__all__ = ["Expected", "Replay", "Attempt", "Theorem", "goal_parts", "ConstantGoal", "VacuousGoal", "solver_goal_parts", "vacuous_parts"]


class Expected(str, enum.Enum):
    PROVED = "proved"
    REFUTED = "refuted"


@attrs.frozen
class Replay:
    """A counterexample run on the reference manager. ``confirmed``: the manager really failed (or
    really exceeded the floor) where the counterexample says; ``summary`` is one line, ``trace``
    every call with its outcome."""

    confirmed: bool
    summary: str
    trace: tuple[str, ...]


@attrs.frozen
class Attempt:
    """An informational solver query beside a theorem (say, a quantified form of it). Reported with
    whatever the solver answers; never counted towards the theorem or the exit code."""

    label: str
    statement: str
    build: Callable[..., Any]  # the solver's constants of the theorem's variables -> the claim (may quantify)
    timeout_s: float = 1.0


@attrs.frozen
class Theorem:
    """A catalogue entry. ``goal(*variables)`` returns a bool (or Z3 Bool), or a tuple of them (a
    conjunction whose parts the solver discharges one by one); a domain narrower than the variables'
    lower bounds is an implication inside the goal. ``lemmas`` are auxiliary statements over the same
    variables (hints for nonlinear arithmetic), grouped in stages for the reader: the solver proves
    them in rounds (each round from what the rounds before proved, so their order does not matter)
    and uses those it proved as hypotheses for the goal; a lemma it cannot prove is simply not used. ``replay`` runs a refutation's counterexample on the reference manager; ``attempts`` are
    informational queries reported beside the theorem."""

    name: str
    statement: str
    expected: Expected = attrs.field(converter=Expected)
    variables: tuple[Var, ...] = attrs.field(converter=tuple)
    goal: Callable[..., Any] = attrs.field(eq=False)
    lemmas: tuple[Callable[..., Any], ...] = attrs.field(default=(), converter=tuple, eq=False)
    replay: Callable[[Mapping[str, int]], Replay] | None = attrs.field(default=None, eq=False)
    attempts: tuple[Attempt, ...] = attrs.field(default=(), converter=tuple, eq=False)
    #: solver -> the encoding it gets for this theorem unless the caller names one (default: the
    #: solver's own default, the block encoding); ``{"z3": "blocks"}`` marks a goal whose direct form
    #: Z3 decides slowly or not at all (the test suite's run of Z3 on the goals as written leaves it out)
    encodings: Mapping[str, str] = attrs.field(factory=dict, eq=False)
    #: the solvers that get the lemma hints (default: every solver); a solver left out decides the goal
    #: without them (the hints are never parts: a solver that needs none is spared proving them)
    lemma_solvers: tuple[str, ...] | None = attrs.field(default=None, eq=False)
    #: the direct goal (and its lemmas) is quantifier-free linear integer arithmetic: a solver that takes
    #: a logic is told so (cvc5: QF_LIA, as for the block encoding). It narrows what the solver sets up,
    #: never what it proves: a term outside the logic makes cvc5 raise, never answer.
    linear: bool = attrs.field(default=False, eq=False)
    #: solver -> resource units per check this theorem is allowed when its solver needs more than the default
    #: budget (:data:`~swafloor.proofs.DEFAULT_RLIMIT`): part of the theorem's data, so ``swafloor prove NAME``
    #: decides it with no flag; the runner gives each check the larger of this and the run's own budget.
    #: Resource units, never seconds, so the answer is the same on any machine and load.
    rlimits: Mapping[str, int] = attrs.field(factory=dict, eq=False)

    def rlimit(self, solver: str, default: int | None) -> int | None:
        """The resource units per check ``solver`` gets on this theorem under a run whose budget is ``default``
        (None: seconds alone bound the run, and so this theorem)."""
        if default is None:
            return None
        return max(default, self.rlimits.get(solver, 0))

    def __attrs_post_init__(self) -> None:
        names = list(self.variable_names)
        for fn in (self.goal, *self.lemmas):
            if list(inspect.signature(fn).parameters) != names:
                raise ValueError(f"theorem {self.name}: {fn.__name__} must take the variables {tuple(names)}")
        for solver, units in self.rlimits.items():
            if solver not in ("z3", "cvc5") or type(units) is not int or units < 1:
                raise ValueError(f"theorem {self.name}: rlimits[{solver!r}] = {units!r}: a solver (z3, cvc5) and "
                                 "a positive number of resource units")
        if self.expected is Expected.REFUTED and self.replay is None:
            raise ValueError(f"theorem {self.name}: a refutation needs a replay on the reference manager")

    @property
    def variable_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variables)


def goal_parts(value: Any) -> tuple[Any, ...]:
    """A goal's value as a tuple of conjuncts."""
    return value if isinstance(value, tuple) else (value,)


class ConstantGoal(ValueError):
    """A goal part came out a Python constant on solver terms: Python decided it before any solver
    saw it, so no solver proved anything (ssm-minimum once was such a theorem)."""


class VacuousGoal(ValueError):
    """A goal part that ``z3.simplify`` decides (True, or an implication from False): no theorem."""


def solver_goal_parts(theorem: Theorem, syms: Any) -> tuple[Any, ...]:
    """The goal's conjuncts on solver terms; :class:`ConstantGoal` if any is a plain bool."""
    parts = goal_parts(theorem.goal(*syms))
    for i, part in enumerate(parts):
        if isinstance(part, bool) or type(part).__module__.partition(".")[0] == "numpy":
            raise ConstantGoal(f"theorem {theorem.name}: goal part {i} is the constant {bool(part)} before any "
                               "solver sees it; state it as a property of the variables")
    vacuous = vacuous_parts(theorem, parts if _plain_z3(theorem, syms) else None)
    if vacuous:
        i, why = vacuous[0]
        raise VacuousGoal(f"theorem {theorem.name}: goal part {i} is decided before any solver sees it ({why}); "
                          f"{len(vacuous)} such part(s): drop or restate them")
    return parts


def _plain_z3(theorem: Theorem, syms: Any) -> bool:
    """``syms`` are Z3 integer constants named after the theorem's variables, nothing more: the goal
    built on them is the goal :func:`vacuous_parts` builds itself (so it need not be built twice)."""
    import z3

    return len(syms) == len(theorem.variables) and all(
        isinstance(s, z3.ArithRef) and z3.is_const(s) and s.is_int() and s.decl().kind() == z3.Z3_OP_UNINTERPRETED
        and s.decl().name() == name for s, name in zip(syms, theorem.variable_names)
    )


def vacuous_parts(theorem: Theorem, parts: tuple[Any, ...] | None = None) -> list[tuple[int, str]]:
    """The goal parts no solver would decide: ``(index, why)`` for each part that ``z3.simplify``
    reduces to True, or that is an implication whose antecedent ``z3.simplify`` reduces to False.
    Evaluated on fresh Z3 integer constants named after the theorem's variables (lower bounds are
    not assumed, so a part counts as vacuous only when it is so for every integer). ``parts``: the
    goal's parts already built on such constants (any Z3 context), else the goal is built here."""
    import z3

    if parts is None:
        parts = goal_parts(theorem.goal(*[z3.Int(name) for name in theorem.variable_names]))
    else:  # simplified in a context of their own: the solver's context sees no term the check makes
        scratch = scratch_context()
        parts = tuple(p.translate(scratch) if isinstance(p, z3.ExprRef) and p.ctx is not scratch else p
                      for p in parts)
    found = []
    for i, part in enumerate(parts):
        if not isinstance(part, z3.BoolRef):
            found.append((i, f"the Python constant {bool(part)}"))
            continue
        if z3.is_true(z3.simplify(part)):
            found.append((i, "z3.simplify reduces it to True"))
        elif z3.is_implies(part) and z3.is_false(z3.simplify(part.arg(0))):
            found.append((i, "its antecedent simplifies to False"))
    return found
