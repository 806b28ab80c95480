"""The block-coordinate encoding (proofs/blockform.py): exact on ints, linear, guarded by its range
obligations, and falling back to the direct encoding outside its fragment."""

from __future__ import annotations

import random

import attrs
import pytest
import z3

from swafloor.proofs import blockform, catalogue, discharge
from swafloor.proofs.symbolic import BLOCK_SIZE, TOKENS, H, T, W, all_of, upto
from swafloor.proofs.theorem import Attempt, Theorem, goal_parts
from swafloor.reference import floors, lifecycle

#: The theorems the block encoding covers: those with a block-size variable. The others enumerate
#: their block sizes as constants of the goal (two sizes per pool group, which one variable cannot
#: say) and run in the direct encoding (test_theorems_without_a_block_size_fall_back_to_direct).
NAMES = [t.name for t in catalogue.CATALOGUE if any(v.unit == BLOCK_SIZE for v in t.variables)]
FIXED_SIZES = {"mixed-pool-group-sufficient", "mixed-pool-group-tight", "hit-mixed-valid"}
#: theorems about counts of requests, with no tokens or block sizes at all
NO_TOKENS = {"preemption-spares-the-oldest", "free-order-cost", "decode-clock-due-every-e", "forward-clock-no-floor"}


def _encode(theorem: Theorem) -> tuple[blockform.BlockEncoding, list]:
    enc = blockform.BlockEncoding([(v.name, v.unit, v.lower) for v in theorem.variables], z3, z3.Context())
    return enc, [enc.bool(p) for p in goal_parts(theorem.goal(*enc.z3_syms))]


def _points(theorem: Theorem, count: int, rng: random.Random) -> list[dict[str, int]]:
    """Points of the domain: every variable at its lower bound, then small and large random values."""
    points = [{v.name: v.lower for v in theorem.variables}]
    for i in range(count):
        top = 12 if i % 2 else 3000
        points.append({v.name: v.lower + rng.randint(0, top) for v in theorem.variables})
    return points


def _truth(enc: blockform.BlockEncoding, term, point: dict[str, int]) -> bool:
    """An encoded term at a point: each token count replaced by its whole blocks and remainder."""
    t = point[enc.t_name]
    subs = [(enc.t, z3.IntVal(t, enc.ctx))]
    for name, (q, r) in enc.coordinates.items():
        subs += [(q, z3.IntVal(point[name] // t, enc.ctx)), (r, z3.IntVal(point[name] % t, enc.ctx))]
    subs += [(y, z3.IntVal(point[name], enc.ctx)) for name, y in enc.plain.items()]
    value = z3.simplify(z3.substitute(term, *subs))
    assert z3.is_true(value) or z3.is_false(value), value
    return z3.is_true(value)


@pytest.mark.parametrize("name", NAMES)
def test_the_encoding_agrees_with_the_goal_on_ints(name):
    theorem = catalogue.by_name(name)
    enc, parts = _encode(theorem)
    for point in _points(theorem, 30, random.Random(name)):
        values = [point[n] for n in theorem.variable_names]
        expected = [bool(p) for p in goal_parts(theorem.goal(*values))]
        assert [_truth(enc, p, point) for p in parts] == expected, point
        assert all(_truth(enc, d, point) for d in enc.domain), point
        assert all(_truth(enc, o, point) for o in enc.obligations), point


def _kinds(term, seen=None, visited=None) -> set:
    """The operators in ``term``, each shared subterm visited once (the terms are DAGs: walked as
    trees, the eviction theorems' goals took minutes)."""
    seen = set() if seen is None else seen
    visited = set() if visited is None else visited
    stack = [term]
    while stack:
        term = stack.pop()
        if not z3.is_app(term) or term.get_id() in visited:
            continue
        visited.add(term.get_id())
        kind = term.decl().kind()
        if kind == z3.Z3_OP_MUL and sum(not z3.is_int_value(k) for k in term.children()) > 1:
            seen.add("nonlinear product")
        if kind == z3.Z3_OP_IDIV and z3.is_int_value(term.children()[1]) and term.children()[1].as_long() >= 1:
            kind = "division by a numeral"  # linear (a block count divided by a constant alignment)
        seen.add(kind)
        stack.extend(term.children())
    return seen


@pytest.mark.parametrize("name", NAMES)
def test_every_catalogue_goal_becomes_linear(name):
    enc, parts = _encode(catalogue.by_name(name))
    kinds, visited = set(), set()
    for term in parts + enc.domain + enc.obligations:
        _kinds(term, kinds, visited)
    assert not kinds & {z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_DIV, "nonlinear product"}


def test_the_direct_encoding_is_nonlinear():
    """The check above can fail: the goal as written divides by t."""
    theorem = catalogue.by_name("decode-sufficient")
    kinds = set()
    for term in goal_parts(theorem.goal(*[z3.Int(n) for n in theorem.variable_names])):
        _kinds(term, kinds)
    assert z3.Z3_OP_IDIV in kinds


def test_a_wrong_quotient_range_is_caught_by_the_obligations(monkeypatch):
    """If the interval analysis assumed too narrow a range, the quotient would be wrong and proofs
    could be wrong: the obligations, proved first, catch it and the theorem is unknown, not proved."""
    monkeypatch.setattr(blockform, "_quotient_upper", lambda b: b.alpha + min(b.beta, 0) - 1)
    for solver in ("z3",) + (("cvc5",) if _has_cvc5() else ()):
        d = discharge.discharge(catalogue.by_name("decode-sufficient"), solver=solver, encoding="blocks",
                                attempts=False)
        assert d.result == "unknown" and "range obligation" in d.reason and "fails" in d.reason, d


def _ci() -> bool:
    import os

    return os.environ.get("CI") == "true"


def _toy(goal, variables=(T, W, H)) -> Theorem:
    return Theorem("toy", "a theorem made up for this test", "proved", variables, goal)


def test_a_goal_outside_the_fragment_falls_back_to_the_direct_encoding():
    def product(t, W, h):  # a product of two token counts: not linear in block coordinates
        return W * h >= 0

    with pytest.raises(blockform.Unsupported, match="product of two non-constant"):
        _encode(_toy(product))
    d = discharge.discharge(_toy(product), solver="z3", encoding="blocks", attempts=False)
    assert d.result == "proved" and d.encoding == "direct" and "block encoding unsupported" in d.reason


def test_division_by_anything_but_the_block_size_is_unsupported():
    def halves(t, W, h):
        return W / 2 <= W

    with pytest.raises(blockform.Unsupported, match="not by the block size"):
        _encode(_toy(halves))


def test_a_false_toy_theorem_is_refuted_with_the_smallest_counterexample():
    """Refutations in the block encoding: model values are read back as t*q + r, minimised in order."""
    def wrong(t, W, h):  # one block fewer than the floor (no sinks) serves every decode step: false
        return lifecycle.live_blocks(h, h + 1, t, W, 0) <= floors.swa_floor(t, W, 0) - 1

    for solver in ("z3",) + (("cvc5",) if _has_cvc5() else ()):
        d = discharge.discharge(_toy(wrong), solver=solver, encoding="blocks", attempts=False)
        assert d.encoding == "blocks" and d.result == "refuted" and d.minimal
        assert d.counterexample == {"t": 1, "W": 1, "h": 0}


def _has_cvc5() -> bool:
    try:
        import cvc5.pythonic  # noqa: F401
    except ImportError:
        if _ci():
            pytest.fail("cvc5 is not installed: pip install 'swafloor[cvc5]'")
        return False
    return True


def _exists(expected_extra: int):
    def build(t, W, S):
        h = z3.Int("h_witness", t.ctx)
        live = lifecycle.live_blocks(h, h + 1, t, W, S)
        return z3.Exists([h], all_of(h >= 0, live == floors.swa_floor(t, W, S) + expected_extra))
    return build


@pytest.mark.parametrize("solver", ["z3", "cvc5"])
def test_forall_exists_decode_tight_is_decided_in_the_block_encoding(solver):
    if solver == "cvc5" and not _has_cvc5():
        pytest.skip("cvc5 is not installed")
    (tried,) = discharge.run_attempts(catalogue.by_name("decode-tight"), solver=solver, encoding="blocks")
    assert tried.result == "proved" and "block encoding" in tried.label
    # The same form with a floor one too large has no witness: not proved.
    wrong = attrs.evolve(catalogue.by_name("decode-tight"),
                         attempts=(Attempt("forall-exists", "one block too many", _exists(1)),))
    (tried,) = discharge.run_attempts(wrong, solver=solver, encoding="blocks")
    assert tried.result != "proved"


def test_units_are_declared_where_the_encoding_needs_them():
    """Every catalogue theorem but those with their block sizes as constants has exactly one block-size
    variable, first (minimisation fixes it first)."""
    assert {t.name for t in catalogue.CATALOGUE} - set(NAMES) == FIXED_SIZES | NO_TOKENS
    for theorem in catalogue.CATALOGUE:
        units = [v.unit for v in theorem.variables]
        if theorem.name in NO_TOKENS:
            assert BLOCK_SIZE not in units and TOKENS not in units, theorem.name
            continue
        if theorem.name in FIXED_SIZES:
            assert BLOCK_SIZE not in units and TOKENS in units, theorem.name
            continue
        assert units[0] == BLOCK_SIZE and units.count(BLOCK_SIZE) == 1, theorem.name
        assert TOKENS in units or theorem.name == "ceil-identity-at-zero", theorem.name
    assert upto("x", "made up", 0, 3, "x <= 3").unit == "count"


@pytest.mark.parametrize("name", sorted(FIXED_SIZES))
def test_theorems_without_a_block_size_fall_back_to_direct(name):
    """Asked for the block encoding, a theorem with no block-size variable gets the direct one, saying why."""
    theorem = catalogue.by_name(name)
    with pytest.raises(blockform.Unsupported):
        _encode(theorem)
    encoded, reason = discharge._encode(theorem, discharge._backend("z3", 0), "blocks")
    assert encoded.name == "direct" and "block encoding unsupported" in reason
