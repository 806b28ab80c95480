"""The variables theorems quantify over: each with its domain (``name >= lower``, unbounded above) for
the solver and a bounded range for the concrete check, plus logic connectives that, like the
reference's arithmetic kernel, work on Python bools, numpy arrays (the vectorised bounded check) and
solver terms (Z3, cvc5) alike.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import attrs

__all__ = [
    "Var",
    "TOKENS",
    "BLOCK_SIZE",
    "upto",
    "T",
    "W",
    "S",
    "H",
    "STEP",
    "implies",
    "all_of",
    "any_of",
    "negate",
    "symbols",
    "scratch_context",
]

Env = Mapping[str, int]

TOKENS, BLOCK_SIZE = "tokens", "block size"  # the units the block-coordinate encoding treats specially


@attrs.frozen
class Var:
    """A universally quantified integer: ``name >= lower``. ``values(env)`` gives its bounded range
    for the concrete check, given the values of the variables before it; ``bound_text`` says what
    that range is, for the table and the docs."""

    name: str
    meaning: str
    lower: int
    values: Callable[[Env], Iterable[int]] = attrs.field(eq=False)
    bound_text: str
    constant: bool = False  # the bounded range does not depend on the variables before it
    unit: str = "count"  # "tokens", "block size" or "count": the block-coordinate encoding splits tokens

    def at_least(self, lower: int) -> "Var":
        """The same variable with a larger lower bound (domain and bounded range alike)."""
        values = self.values
        return attrs.evolve(self, lower=lower, values=lambda env: [x for x in values(env) if x >= lower])

    def describe(self) -> str:
        return f"{self.name} >= {self.lower} ({self.meaning}); checked on ints for {self.bound_text}"


def upto(
    name: str, meaning: str, lower: int, upper: Callable[[Env], int] | int, bound_text: str, unit: str = "count"
) -> Var:
    """A variable whose bounded range is ``lower .. upper`` (inclusive); ``upper`` may depend on the
    variables before it. ``unit``: what it counts (see :class:`Var`)."""
    if isinstance(upper, int):
        top = upper
        return Var(name, meaning, lower, lambda env: range(lower, top + 1), bound_text, constant=True, unit=unit)
    return Var(name, meaning, lower, lambda env: range(lower, upper(env) + 1), bound_text, unit=unit)



# The parameters every sizing statement shares. The bounded ranges are the issue's: t <= 16,
# W <= 64, S <= 2, n <= 8, and h up to two windows and two blocks past the sinks.
T = upto("t", "tokens per block", 1, 16, "t <= 16", BLOCK_SIZE)
W = upto("W", "window in tokens", 1, 64, "W <= 64", TOKENS)
S = upto("S", "sink blocks", 0, 2, "S <= 2")
H = upto(
    "h",
    "history: tokens already computed",
    0,
    lambda env: env["S"] * env["t"] + 2 * (env["W"] + env["t"]) - 1,
    "h < S*t + 2*(W + t)",
    TOKENS,
)
STEP = upto("n", "tokens in one step", 1, 8, "n <= 8", TOKENS)


def _family(xs: Iterable[Any]) -> str:
    """Which library the terms come from: "bool" (all plain bools), "numpy", "cvc5" or "z3"."""
    family = "bool"
    for x in xs:
        if isinstance(x, bool):
            continue
        top = type(x).__module__.partition(".")[0]
        if top in ("numpy", "cvc5"):
            return top
        family = "z3"
    return family


def _solver(family: str) -> Any:
    if family == "cvc5":
        from cvc5 import pythonic

        return pythonic
    import z3

    return z3


def implies(a: Any, b: Any) -> Any:
    """``a -> b`` on bools, elementwise on numpy arrays, ``Implies`` on solver terms."""
    family = _family((a, b))
    if family == "bool":
        return (not a) or b
    if family == "numpy":
        import numpy

        return numpy.logical_or(numpy.logical_not(a), b)
    return _solver(family).Implies(a, b)


def _connective(xs: tuple, python: Any, numpy_name: str, solver_name: str, unit: bool) -> Any:
    """One n-ary connective on any family: Python's ``all``/``any`` on bools, numpy's elementwise
    form folded from ``unit`` on arrays, the solver's own on terms."""
    family = _family(xs)
    if family == "bool":
        return python(xs)
    if family == "numpy":
        import numpy

        out = unit
        for x in xs:
            out = getattr(numpy, numpy_name)(out, x)
        return out
    return getattr(_solver(family), solver_name)(*xs)


def all_of(*xs: Any) -> Any:
    return _connective(xs, all, "logical_and", "And", True)


def any_of(*xs: Any) -> Any:
    return _connective(xs, any, "logical_or", "Or", False)


def negate(x: Any) -> Any:
    family = _family((x,))
    if family == "bool":
        return not x
    if family == "numpy":
        import numpy

        return numpy.logical_not(x)
    return _solver(family).Not(x)


def symbols(variables: Iterable[Var], ctx: Any = None) -> list[Any]:
    """One Z3 integer constant per variable, named after it, in the Z3 context ``ctx`` (default: the
    global one)."""
    import z3

    return [z3.Int(v.name, ctx) for v in variables]


_SCRATCH: dict[int, Any] = {}


def scratch_context() -> Any:
    """One Z3 context per process for terms no solver decides: the goals the block encoding reads and
    translates (:mod:`.blockform`), the parts the vacuity check simplifies (:func:`.theorem.vacuous_parts`).
    Making a Z3 context costs tens of milliseconds while another one lives (two per theorem and solver
    once took a fifth of ``swafloor prove``); the solver's own context stays fresh per theorem
    (:mod:`.discharge`), so what a solver does never depends on what this one holds."""
    import os

    import z3

    pid = os.getpid()  # a forked worker makes its own (the parent's may be in use there)
    if pid not in _SCRATCH:
        _SCRATCH.clear()
        _SCRATCH[pid] = z3.Context()
    return _SCRATCH[pid]
