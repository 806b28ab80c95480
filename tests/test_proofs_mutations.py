"""Seeded bugs in the reference formulas flip at least one theorem; the patches are undone after."""

from __future__ import annotations

import pytest

from swafloor.proofs import catalogue, concrete, discharge, mutations
from swafloor.reference import floors, lifecycle


@pytest.mark.parametrize("mutation", mutations.MUTATIONS, ids=lambda m: m.name)
def test_each_mutation_flips_a_theorem(mutation):
    flipped = mutations.flips(mutation, catalogue.CATALOGUE, first_only=True)
    assert flipped, f"no theorem notices {mutation.name}"
    ((name, (expected, result, cex)),) = flipped.items()
    assert result != expected
    theorem = catalogue.by_name(name)
    with mutations.applied(mutation):  # the flip shows on ints too
        if result == "refuted":
            assert concrete.evaluate(theorem, cex) == (True, False)
        else:
            assert concrete.check(theorem).holds


@pytest.mark.parametrize(
    "mutation,name",
    [
        ("drop-in-flight-plus-one", "decode-sufficient"),
        ("floor-not-ceiling", "decode-sufficient"),
        ("sinks-ignored", "decode-sufficient"),
        ("pre-fix-floor", "decode-sufficient"),
        ("cpp-floor", "decode-tight"),
    ],
)
def test_the_mutation_refutes_the_theorem_it_breaks(mutation, name):
    (m,) = [m for m in mutations.MUTATIONS if m.name == mutation]
    with mutations.applied(m):
        assert discharge.discharge(catalogue.by_name(name), attempts=False).result == "refuted"


def test_patches_are_undone():
    before = (lifecycle.stale_range, floors.window_span_blocks, floors.step_floor, floors.swa_floor)
    for m in mutations.MUTATIONS:
        with mutations.applied(m):
            pass
    assert (lifecycle.stale_range, floors.window_span_blocks, floors.step_floor, floors.swa_floor) == before
    assert discharge.discharge(catalogue.by_name("decode-sufficient"), attempts=False).result == "proved"
