"""Seeded bugs in the reference formulas: each flips every theorem it is expected to flip (all of
them, not only the first), on both solvers (Z3 direct, cvc5 on the block encoding) and on ints; the patches reach every user of the formula
and are undone after; the mutation score is therefore 100%."""

from __future__ import annotations

import pytest

from swafloor.proofs import catalogue, concrete, discharge, mutations
from swafloor.reference import floors, lifecycle

CASES = [(m, name) for m in mutations.MUTATIONS for name in m.expected]


def test_every_mutation_expects_flips_of_catalogue_theorems():
    names = {t.name for t in catalogue.CATALOGUE}
    assert len({m.name for m in mutations.MUTATIONS}) == len(mutations.MUTATIONS)
    for m in mutations.MUTATIONS:
        assert m.expected, f"{m.name} names no theorem it flips"
        assert set(m.expected) <= names, (m.name, set(m.expected) - names)


def _solvers() -> list[str]:
    """Z3 on the goal as written; cvc5 on the block encoding (an optional extra; required in CI)."""
    import os

    try:
        import cvc5.pythonic  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        return ["z3"]
    return ["z3", "cvc5"]


@pytest.mark.parametrize("solver", _solvers())
@pytest.mark.parametrize("mutation,name", CASES, ids=[f"{m.name}:{n}" for m, n in CASES])
def test_the_mutation_flips_the_theorem(mutation, name, solver):
    theorem = catalogue.by_name(name)
    flipped = mutations.flips(mutation, [theorem], solver=solver)
    assert name in flipped, f"{name} does not notice {mutation.name}"
    expected, result, cex = flipped[name]
    assert result != expected
    with mutations.applied(mutation):  # the flip shows on ints too
        if result == "refuted":
            assert concrete.evaluate(theorem, cex) == (True, False)
        else:
            assert concrete.check(theorem).holds


def test_the_score_is_the_share_of_mutations_that_flip_something(monkeypatch):
    fake = {m.name: ({m.expected[0]: ("proved", "refuted", {})} if i % 2 else {})
            for i, m in enumerate(mutations.MUTATIONS)}
    monkeypatch.setattr(mutations, "flips", lambda m, theorems, **kw: fake[m.name])
    out = mutations.score(mutations.MUTATIONS, catalogue.CATALOGUE)
    caught = sum(1 for v in fake.values() if v)
    assert out["caught"] == caught and out["total"] == len(mutations.MUTATIONS)
    assert out["score"] == round(100.0 * caught / len(mutations.MUTATIONS), 1) < 100.0
    for row in out["mutations"]:
        assert row["missing"] == sorted(set(row["expected"]) - set(row["flipped"]))


def test_a_mutation_reaches_modules_that_import_the_formula_by_name():
    import swafloor.reference as package
    from swafloor.reference import config

    (m,) = [x for x in mutations.MUTATIONS if x.name == "ssm-minimum-zero"]
    real = floors.life_cycle_min_slots
    with mutations.applied(m):
        assert floors.life_cycle_min_slots is not real
        assert package.life_cycle_min_slots is floors.life_cycle_min_slots
        if hasattr(config, "life_cycle_min_slots"):
            assert config.life_cycle_min_slots is floors.life_cycle_min_slots
    assert floors.life_cycle_min_slots is real and package.life_cycle_min_slots is real


def test_patches_are_undone():
    watched = [(lifecycle, "stale_range"), (lifecycle, "window_span_blocks"), (lifecycle, "resize_peak"),
               (lifecycle, "first_resume_peak"), (floors, "window_span_blocks"), (floors, "step_floor"),
               (floors, "swa_floor"), (floors, "full_attention_floor"), (floors, "life_cycle_min_slots"),
               (floors, "worst_case_history"), (floors, "in_flight_floor"), (floors, "first_floor_history")]
    before = [getattr(mod, name) for mod, name in watched]
    for m in mutations.MUTATIONS:
        with mutations.applied(m):
            pass
    assert [getattr(mod, name) for mod, name in watched] == before
    assert discharge.discharge(catalogue.by_name("decode-sufficient"), attempts=False).result == "proved"


def test_bench_prints_the_score_and_both_solvers():
    from swafloor.proofs import bench

    cols = bench.columns(("z3", "cvc5"))
    assert [(c["key"], c["default"]) for c in cols] == [
        ("z3 direct", False), ("z3 blocks", True), ("cvc5 direct", False), ("cvc5 blocks", True)]
    answers = {"z3 direct": "proved", "z3 blocks": "proved", "cvc5 direct": "unknown", "cvc5 blocks": "proved"}
    row = {"name": "decode-tight", "expected": "proved", "result": "proved", "z3_seconds": 0.1,
           "concrete_seconds": 0.01, "concrete_points": 3072, "ratio": 0.1}
    row.update({k: {"result": v, "seconds": 10.0 if v == "unknown" else 0.1} for k, v in answers.items()})
    figures = {
        "solvers": ["z3 4", "cvc5 1"], "columns": cols, "seed": 0, "timeout_s": 10.0, "theorems": [row],
        "solver_seconds": {k: row[k]["seconds"] for k in answers}, "concrete_seconds": 0.01,
        "concrete_points": 3072, "ratio": 0.1, "wall_seconds": 10.2, "machine": "test",
        "decode_tight_forall_exists": {"cvc5 direct": {"label": "forall-exists", "result": "unknown",
                                                       "reason": "timeout", "seconds": 2.0}},
        "mutations": {"score": 50.0, "caught": 1, "total": 2, "mutations": [
            {"mutation": "a", "flipped": ["decode-tight"], "expected": ["decode-tight"], "missing": []},
            {"mutation": "b", "flipped": [], "expected": ["decode-tight"], "missing": ["decode-tight"]}]},
    }
    text = bench.format(figures)
    assert "mutation score: 50.0% (1 of 2 seeded bugs flip a theorem)" in text
    assert "b: 0 flipped (none); expected but not flipped: decode-tight" in text
    assert "forall-exists form, cvc5 direct: unknown (timeout)" in text
    header, table_head, first = text.splitlines()[:3]
    assert "cvc5 1" in header and "cvc5 blocks" in table_head
    assert first.split()[1:9] == ["0.10", "proved", "0.10", "proved*", "10.00", "unknown", "0.10", "proved*"]
