"""The block-coordinate encoding: a theorem's goal rewritten, exactly, into linear integer arithmetic.

Every formula in the reference divides by one divisor, the block size ``t``, and that division is what
makes the direct encoding nonlinear (SMT solvers decide it by incomplete heuristics: Z3 manages the
catalogue, cvc5 answers ``unknown`` on a third of it). Nothing else in the catalogue needs more than
linear arithmetic, so the encoding changes coordinates instead:

* every token count ``x`` (a variable whose unit is tokens) is written ``x = t*q_x + r_x`` with
  ``0 <= r_x < t``: whole blocks and a remainder;
* every integer expression is carried as a pair ``(P, Q)`` standing for ``t*P + Q``, where ``P`` and
  ``Q`` are linear in the atoms (quotients, remainders, block counts);
* ``(t*P + Q) div t = P + (Q div t)``, and when the interval analysis bounds ``Q`` between
  ``t*lo`` and ``t*hi + t - 1`` for small constants ``lo <= hi`` (remainders lie in ``[0, t-1]``), the
  quotient ``Q div t`` is ``lo`` plus one for each ``k`` in ``lo+1 .. hi`` with ``Q >= t*k``: linear;
* a comparison ``t*D + R < 0`` is ``D + (R div t) < 0`` (``t >= 1``), again linear when ``R`` is bounded
  (or ``R < 0`` when ``D`` is zero).

What falls outside that fragment (a product of two expressions neither of which is a constant or
``t``, a division of an unbounded remainder) raises :class:`Unsupported`, and the caller falls back to
the direct encoding. Each quotient's range is also an *obligation*: the solver must prove, from the
domain, that ``Q`` really lies in the range the analysis assumed, so a mistake in the analysis shows
up as an unproved obligation rather than as a proof of the wrong formula.

The goal is built once on Z3 terms (by the theorem's own goal function, from reference functions) and
translated here into the target solver's terms, Z3's or cvc5's (their pythonic APIs share names).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs
import z3

from .symbolic import BLOCK_SIZE, TOKENS, scratch_context

__all__ = ["Unsupported", "Affine", "BlockEncoding", "MAX_QUOTIENT_CASES"]
MAX_QUOTIENT_CASES = 64  # a quotient with a wider range than this is left to the direct encoding


class Unsupported(ValueError):
    """The goal leaves the linear block-coordinate fragment; the message says where."""


@attrs.frozen
class Affine:
    """``alpha*t + beta``: a bound that holds for every block size ``t >= 1``."""

    alpha: int
    beta: int

    def __add__(self, other: "Affine") -> "Affine":
        return Affine(self.alpha + other.alpha, self.beta + other.beta)

    def scaled(self, c: int) -> "Affine":
        return Affine(c * self.alpha, c * self.beta)


def _quotient_lower(b: Affine) -> int:
    """A lower bound on ``floor(x / t)`` for every ``x >= alpha*t + beta`` and ``t >= 1``."""
    return b.alpha + min(b.beta, 0)  # floor(beta/t) >= beta when beta < 0


def _quotient_upper(b: Affine) -> int:
    """An upper bound on ``floor(x / t)`` for every ``x <= alpha*t + beta`` and ``t >= 1``."""
    return b.alpha + (b.beta if b.beta >= 0 else -1)  # floor(beta/t) <= -1 when beta < 0


@attrs.frozen
class _Atom:
    term: Any  # the target solver's integer term
    lower: Affine | None
    upper: Affine | None


class _Lin:
    """``sum(coef * atom) + const`` over the encoder's atoms (indices), with exact integer coefficients."""

    __slots__ = ("coefs", "const")

    def __init__(self, coefs: Mapping[int, int] | None = None, const: int = 0):
        self.coefs = {a: c for a, c in (coefs or {}).items() if c != 0}
        self.const = const

    def key(self) -> tuple:
        return (tuple(sorted(self.coefs.items())), self.const)

    def is_const(self) -> bool:
        return not self.coefs

    def __add__(self, other: "_Lin") -> "_Lin":
        coefs = dict(self.coefs)
        for a, c in other.coefs.items():
            coefs[a] = coefs.get(a, 0) + c
        return _Lin(coefs, self.const + other.const)

    def scaled(self, k: int) -> "_Lin":
        return _Lin({a: k * c for a, c in self.coefs.items()}, k * self.const)

    def __sub__(self, other: "_Lin") -> "_Lin":
        return self + other.scaled(-1)


ZERO = _Lin()


@attrs.frozen
class _Form:
    """An integer expression ``t*P + Q``."""

    P: _Lin
    Q: _Lin

    def __add__(self, other: "_Form") -> "_Form":
        return _Form(self.P + other.P, self.Q + other.Q)

    def __sub__(self, other: "_Form") -> "_Form":
        return _Form(self.P - other.P, self.Q - other.Q)

    def scaled(self, k: int) -> "_Form":
        return _Form(self.P.scaled(k), self.Q.scaled(k))

    def constant(self) -> int | None:
        return self.Q.const if self.P.key() == ZERO.key() and self.Q.is_const() else None

    def is_block_size(self) -> bool:
        return self.P.key() == ((), 1) and self.Q.key() == ZERO.key()


def _const(c: int) -> _Form:
    return _Form(ZERO, _Lin(const=c))


class BlockEncoding:
    """The encoder for one theorem: its variables (name, unit, lower bound) in the target solver
    ``api`` (the z3 module or cvc5's pythonic module) and context ``ctx``."""

    def __init__(self, variables: Sequence[tuple[str, str, int]], api: Any, ctx: Any):
        self.api, self.ctx = api, ctx
        self.atoms: list[_Atom] = []
        self.obligations: list[Any] = []
        self.quantified = False  # a quantifier was translated (else every term is quantifier-free linear)
        self._memo: dict[int, tuple[Any, Any]] = {}  # Z3 term id -> (term, translation)
        self._quotients: dict[tuple, int] = {}
        sizes = [name for name, unit, _ in variables if unit == BLOCK_SIZE]
        if len(sizes) != 1:
            raise Unsupported(f"the encoding needs exactly one block-size variable, got {sizes}")
        self.t_name = sizes[0]
        self.t = api.Int(self.t_name, ctx)
        self.domain: list[Any] = [self.t >= 1]
        self.forms: dict[str, _Form] = {self.t_name: _Form(_Lin(const=1), ZERO)}
        self.coordinates: dict[str, tuple[Any, Any]] = {}  # token variable -> (q, r) terms
        self.plain: dict[str, Any] = {}  # other variables -> their term
        for name, unit, _ in variables:
            if unit == BLOCK_SIZE:
                continue
            if unit == TOKENS:
                self.domain += self._split(name)
            else:
                y = api.Int(name, ctx)
                self.forms[name] = _Form(ZERO, _Lin({self._atom(y, None, None): 1}))
                self.plain[name] = y
        # What the quotients' range obligations may assume: t >= 1 and every remainder in [0, t-1].
        self.basic = list(self.domain)
        z3ctx = scratch_context()
        self.z3_syms = [z3.Int(name, z3ctx) for name, _, _ in variables]
        self.domain += [self.bool(s >= lower) for s, (_, _, lower) in zip(self.z3_syms, variables)]

    def _split(self, name: str) -> list[Any]:
        """Make token count ``name`` the pair ``t*q + r``; returns the remainder's range ``0 <= r < t``."""
        api, ctx = self.api, self.ctx
        q, r = api.Int(f"{name}__blocks", ctx), api.Int(f"{name}__rest", ctx)
        rest = self._atom(r, Affine(0, 0), Affine(1, -1))
        self.forms[name] = _Form(_Lin({self._atom(q, None, None): 1}), _Lin({rest: 1}))
        self.coordinates[name] = (q, r)
        return [r >= 0, r <= self.t - 1]

    # ----------------------------------------------------------------------------- atoms and terms
    def _atom(self, term: Any, lower: Affine | None, upper: Affine | None) -> int:
        self.atoms.append(_Atom(term, lower, upper))
        return len(self.atoms) - 1

    def _term(self, lin: _Lin) -> Any:
        total = self.api.IntVal(lin.const, self.ctx)
        for a, c in sorted(lin.coefs.items()):
            total = total + c * self.atoms[a].term
        return total

    def _bounds(self, lin: _Lin) -> tuple[Affine | None, Affine | None]:
        lower = upper = Affine(0, lin.const)
        for a, c in lin.coefs.items():
            atom = self.atoms[a]
            lo, hi = (atom.lower, atom.upper) if c > 0 else (atom.upper, atom.lower)
            lower = None if lower is None or lo is None else lower + lo.scaled(c)
            upper = None if upper is None or hi is None else upper + hi.scaled(c)
        return lower, upper

    def _quotient(self, Q: _Lin, where: Any) -> _Lin:
        """``Q div t`` as a linear form over one new bounded atom (its range is an obligation).
        ``where``: the Z3 term it comes from, printed only in an :class:`Unsupported` message (printing
        a Z3 term is slow: done eagerly for every comparison, it once took most of the encoding's time)."""
        if Q.is_const() and Q.const == 0:
            return ZERO
        key = Q.key()
        if key in self._quotients:
            return _Lin({self._quotients[key]: 1})
        lower, upper = self._bounds(Q)
        if lower is None or upper is None:
            raise Unsupported(f"{where}: the remainder part {self._term(Q)} is unbounded")
        lo, hi = _quotient_lower(lower), _quotient_upper(upper)
        if hi - lo > MAX_QUOTIENT_CASES:
            raise Unsupported(f"{where}: the quotient of {self._term(Q)} has {hi - lo + 1} cases")
        q, t = self._term(Q), self.t
        value = self.api.IntVal(lo, self.ctx)
        for k in range(lo + 1, hi + 1):
            value = value + self.api.If(q >= k * t, 1, 0)
        self.obligations += [q >= lo * t, q <= hi * t + t - 1]
        index = self._atom(value, Affine(0, lo), Affine(0, hi))
        self._quotients[key] = index
        return _Lin({index: 1})

    def _negative(self, form: _Form, where: Any) -> Any:
        """``t*P + Q < 0`` as a linear constraint: ``P + (Q div t) < 0`` (``Q < 0`` when P is zero)."""
        if form.P.key() == ZERO.key():
            return self._term(form.Q) < 0
        return self._term(form.P + self._quotient(form.Q, where)) < 0

    # ----------------------------------------------------------------------------- translation
    def value(self, name: str, model: Any) -> int:
        """A variable's value in a model of the encoded problem."""
        def read(term: Any) -> int:
            return model.eval(term, model_completion=True).as_long()

        if name == self.t_name:
            return read(self.t)
        if name in self.coordinates:
            q, r = self.coordinates[name]
            return read(self.t) * read(q) + read(r)
        return read(self.plain[name])

    def bool(self, e: Any) -> Any:
        """A Z3 Boolean term over the theorem's variables, as a linear term of the target solver."""
        if isinstance(e, bool):
            return self.api.BoolVal(e, self.ctx)
        ident = e.get_id()  # unique while the term lives: the memo keeps it alive
        if ident not in self._memo:
            self._memo[ident] = (e, self._bool(e))
        return self._memo[ident][1]

    def _bool(self, e: Any) -> Any:
        if z3.is_quantifier(e):
            return self._quantifier(e)
        api, kind, kids = self.api, e.decl().kind(), e.children()
        if z3.is_true(e) or z3.is_false(e):
            return api.BoolVal(z3.is_true(e), self.ctx)
        if kind == z3.Z3_OP_AND:
            return api.And(*[self.bool(k) for k in kids])
        if kind == z3.Z3_OP_OR:
            return api.Or(*[self.bool(k) for k in kids])
        if kind == z3.Z3_OP_NOT:
            return api.Not(self.bool(kids[0]))
        if kind == z3.Z3_OP_IMPLIES:
            return api.Implies(self.bool(kids[0]), self.bool(kids[1]))
        if kind == z3.Z3_OP_ITE:
            return api.If(self.bool(kids[0]), self.bool(kids[1]), self.bool(kids[2]))
        if kind in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) and z3.is_bool(kids[0]):
            same = self.bool(kids[0]) == self.bool(kids[1])
            return same if kind == z3.Z3_OP_EQ else api.Not(same)
        if kind in _COMPARISONS:
            a, b = self.form(kids[0]), self.form(kids[1])
            where = e
            one = _const(1)
            if kind == z3.Z3_OP_LT:
                return self._negative(a - b, where)
            if kind == z3.Z3_OP_GT:
                return self._negative(b - a, where)
            if kind == z3.Z3_OP_LE:
                return self._negative(a - b - one, where)
            if kind == z3.Z3_OP_GE:
                return self._negative(b - a - one, where)
            equal = api.And(self._negative(a - b - one, where), self._negative(b - a - one, where))
            return equal if kind == z3.Z3_OP_EQ else api.Not(equal)
        raise Unsupported(f"no Boolean rule for {e.decl().name()} in {e}")

    def _quantifier(self, e: Any) -> Any:
        """``exists``/``forall`` over integers: each bound integer is split like a token count (sound
        for any integer), and its remainder's range joins the body (and the obligations' premises)."""
        if e.is_lambda():
            raise Unsupported(f"a lambda in {e}")
        self.quantified = True
        names = [e.var_name(i) for i in range(e.num_vars())]
        if any(e.var_sort(i) != z3.IntSort(e.ctx) for i in range(e.num_vars())):
            raise Unsupported(f"a quantifier over a non-integer sort in {e}")
        clash = [n for n in names if n in self.forms]
        if clash:
            raise Unsupported(f"the bound variable {clash[0]} shadows a variable of the theorem")
        consts = [z3.Int(n, e.ctx) for n in names]
        body = z3.substitute_vars(e.body(), *reversed(consts))  # de Bruijn index 0 is the last bound one
        ranges = [c for n in names for c in self._split(n)]
        self.basic += ranges
        inner = self.bool(body)
        bound = [term for n in names for term in self.coordinates[n]]
        if e.is_exists():
            return self.api.Exists(bound, self.api.And(*ranges, inner))
        return self.api.ForAll(bound, self.api.Implies(self.api.And(*ranges), inner))

    def form(self, e: Any) -> _Form:
        """A Z3 integer term over the theorem's variables as ``t*P + Q``."""
        ident = e.get_id()
        if ident not in self._memo:
            self._memo[ident] = (e, self._form(e))
        return self._memo[ident][1]

    def _form(self, e: Any) -> _Form:
        if z3.is_int_value(e):
            return _const(e.as_long())
        kind, kids = e.decl().kind(), e.children()
        if kind == z3.Z3_OP_UNINTERPRETED and not kids:
            name = e.decl().name()
            if name not in self.forms:
                raise Unsupported(f"unknown variable {name}")
            return self.forms[name]
        if kind == z3.Z3_OP_ADD:
            total = _const(0)
            for k in kids:
                total = total + self.form(k)
            return total
        if kind == z3.Z3_OP_SUB:
            total = self.form(kids[0])
            for k in kids[1:]:
                total = total - self.form(k)
            return total
        if kind == z3.Z3_OP_UMINUS:
            return self.form(kids[0]).scaled(-1)
        if kind == z3.Z3_OP_MUL:
            product = self.form(kids[0])
            for k in kids[1:]:
                product = self._times(product, self.form(k), e)
            return product
        if kind == z3.Z3_OP_IDIV:
            a, b = self.form(kids[0]), self.form(kids[1])
            c = b.constant()
            if c is not None and c >= 1 and a.P.key() == ZERO.key():
                # a block count divided by a positive numeral: integer division by a constant is linear
                return _Form(ZERO, _Lin({self._atom(self._term(a.Q) / self.api.IntVal(c, self.ctx), None, None): 1}))
            if not b.is_block_size():
                raise Unsupported(f"division by {kids[1]}, not by the block size, in {e}")
            return _Form(ZERO, a.P + self._quotient(a.Q, e))
        if kind == z3.Z3_OP_ITE:
            cond, a, b = self.bool(kids[0]), self.form(kids[1]), self.form(kids[2])
            return _Form(self._choose(cond, a.P, b.P), self._choose(cond, a.Q, b.Q))
        raise Unsupported(f"no integer rule for {e.decl().name()} in {e}")

    def _times(self, a: _Form, b: _Form, e: Any) -> _Form:
        for x, y in ((a, b), (b, a)):
            c = x.constant()
            if c is not None:
                return y.scaled(c)
            if x.is_block_size() and y.P.key() == ZERO.key():
                return _Form(y.Q, ZERO)
        raise Unsupported(f"a product of two non-constant expressions in {e}")

    def _choose(self, cond: Any, a: _Lin, b: _Lin) -> _Lin:
        """``If(cond, a, b)`` as a linear form: ``b`` plus one atom for the difference."""
        if a.key() == b.key():
            return a
        diff = a - b
        lower, upper = self._bounds(diff)
        hull_lo = None if lower is None else Affine(min(lower.alpha, 0), min(lower.beta, 0))
        hull_hi = None if upper is None else Affine(max(upper.alpha, 0), max(upper.beta, 0))
        zero = self.api.IntVal(0, self.ctx)
        return b + _Lin({self._atom(self.api.If(cond, self._term(diff), zero), hull_lo, hull_hi): 1})


_COMPARISONS = (z3.Z3_OP_LT, z3.Z3_OP_LE, z3.Z3_OP_GT, z3.Z3_OP_GE, z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT)
