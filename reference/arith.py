"""The arithmetic kernel: integer operations that work on Python ints and on Z3 integer terms.

On ints they compute. On solver terms (Z3, or cvc5's pythonic API, which mirrors it) they build
expressions: SMT-LIB integer ``div`` is floor division whenever the divisor is positive, which is the
only case swafloor divides by (tokens per block >= 1), and ``ite`` becomes the solver's ``If``. On numpy
integer arrays (the vectorised bounded checks) they compute elementwise: ``//`` and ``numpy.where``.
A solver or numpy is imported lazily, only when one of its terms is actually met (dispatch on the
term's type), so the manager never needs them.

Callers must keep every divisor positive; on ints a non-positive divisor raises ``ZeroDivisionError``
or gives floor semantics, on Z3 terms the caller's domain constraints (t >= 1) carry that obligation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fdiv", "cdiv", "fmod", "imin", "imax", "ite", "is_concrete"]


def is_concrete(*values: Any) -> bool:
    """True when every value is a plain Python int or bool (nothing symbolic)."""
    return all(isinstance(v, (int, bool)) for v in values)


def _family(x: Any) -> str:
    """The top-level module of a value's type: "z3", "cvc5", "numpy", "builtins", ..."""
    return type(x).__module__.partition(".")[0]


def _solver_term(x: Any) -> bool:
    return _family(x) in ("z3", "cvc5")


def fdiv(a: Any, b: Any) -> Any:
    """Floor division ``a // b`` for a positive divisor ``b``."""
    if type(a) is int and type(b) is int:  # fast path: the manager lives here
        return a // b
    if _solver_term(a) or _solver_term(b):
        return a / b  # solver terms: integer division, floor for b > 0
    return a // b  # ints, numpy arrays: floor division


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division ``ceil(a / b)`` for a positive divisor ``b``."""
    return fdiv(a + b - 1, b)


def fmod(a: Any, b: Any) -> Any:
    """The remainder of floor division, in ``[0, b)`` for a positive divisor ``b``."""
    return a - b * fdiv(a, b)


def ite(cond: Any, then: Any, otherwise: Any) -> Any:
    """If-then-else: a Python choice for a bool condition, the solver's ``If`` for a solver term,
    ``numpy.where`` for a numpy array."""
    if isinstance(cond, bool):
        return then if cond else otherwise
    family = _family(cond)
    if family == "numpy":
        import numpy  # only the vectorised bounded checks get here

        return numpy.where(cond, then, otherwise)
    if family == "cvc5":
        from cvc5 import pythonic  # only the second solver gets here

        return pythonic.If(cond, then, otherwise)
    import z3  # only symbolic callers get here

    return z3.If(cond, then, otherwise)


def imin(a: Any, b: Any) -> Any:
    """The smaller of two integers."""
    return ite(a <= b, a, b)


def imax(a: Any, b: Any) -> Any:
    """The larger of two integers."""
    return ite(a >= b, a, b)
