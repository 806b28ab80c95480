"""The arithmetic kernel: integer operations that work on Python ints and on Z3 integer terms.

On ints they compute. On Z3 terms they build Z3 expressions: SMT-LIB integer ``div`` is floor division
whenever the divisor is positive, which is the only case swafloor divides by (tokens per block >= 1),
and ``ite`` becomes ``z3.If``. z3 is imported lazily, only when a symbolic term is actually met, so the
manager never needs it.

Callers must keep every divisor positive; on ints a non-positive divisor raises ``ZeroDivisionError``
or gives floor semantics, on Z3 terms the caller's domain constraints (t >= 1) carry that obligation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fdiv", "cdiv", "fmod", "imin", "imax", "ite", "is_concrete"]


def is_concrete(*values: Any) -> bool:
    """True when every value is a plain Python int or bool (nothing symbolic)."""
    return all(isinstance(v, (int, bool)) for v in values)


def fdiv(a: Any, b: Any) -> Any:
    """Floor division ``a // b`` for a positive divisor ``b``."""
    if type(a) is int and type(b) is int:  # fast path: the manager and the bounded checks live here
        return a // b
    if is_concrete(a, b):
        return a // b
    return a / b  # Z3: integer division, floor for b > 0


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division ``ceil(a / b)`` for a positive divisor ``b``."""
    return fdiv(a + b - 1, b)


def fmod(a: Any, b: Any) -> Any:
    """The remainder of floor division, in ``[0, b)`` for a positive divisor ``b``."""
    return a - b * fdiv(a, b)


def ite(cond: Any, then: Any, otherwise: Any) -> Any:
    """If-then-else: a Python choice for a bool condition, ``z3.If`` for a symbolic one."""
    if isinstance(cond, bool):
        return then if cond else otherwise
    import z3  # only symbolic callers get here

    return z3.If(cond, then, otherwise)


def imin(a: Any, b: Any) -> Any:
    """The smaller of two integers."""
    return ite(a <= b, a, b)


def imax(a: Any, b: Any) -> Any:
    """The larger of two integers."""
    return ite(a >= b, a, b)
