"""Every theorem meets its expectation under Z3 seeds 0 to 9, and a theorem with lemma hints does so
whatever order its lemmas come in. The budget is Z3's resource limit per check (RLIMIT, about the
work the slowest check of the default 10 s run needs, several times over), not seconds, so the
answers do not depend on the machine's load; the wall-clock limit is only a safety net. The sweep
runs on two forked workers in one test (bounded CI time); every solver run is a fresh Z3 context."""

from __future__ import annotations

import functools
import multiprocessing
import random

import attrs
import pytest

from swafloor.proofs import catalogue, discharge
from swafloor.proofs.theorem import goal_parts

SEEDS = range(10)
RLIMIT = 20_000_000  # Z3 resource units per check
SAFETY_S = 300.0
WITH_LEMMAS = [t.name for t in catalogue.CATALOGUE if t.lemmas]


def _reordered(theorem, order: int):
    """The theorem with all its lemma parts in one stage, shuffled by ``order`` (-1: reversed)."""
    stages = theorem.lemmas

    @functools.wraps(stages[0])
    def lemma(*values):
        parts = [part for stage in stages for part in goal_parts(stage(*values))]
        index = list(range(len(parts)))
        if order < 0:
            index.reverse()
        else:
            random.Random(order).shuffle(index)
        return tuple(parts[i] for i in index)

    return attrs.evolve(theorem, lemmas=(lemma,))


def _run(task):
    name, seed, order = task
    theorem = catalogue.by_name(name)
    if order is not None:
        theorem = _reordered(theorem, order)
    d = discharge.discharge(theorem, seed=seed, attempts=False, timeout_s=SAFETY_S, rlimit=RLIMIT)
    return task, d.result, d.counterexample, d.minimal, round(d.seconds, 2)


@pytest.fixture(scope="module")
def sweep():
    tasks = [(t.name, seed, None) for t in catalogue.CATALOGUE for seed in SEEDS]
    tasks += [(name, seed, order) for name in WITH_LEMMAS for seed in (0, 9) for order in (-1, 1)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return pool.map(_run, tasks, chunksize=1)


def test_every_theorem_holds_under_seeds_0_to_9(sweep):
    first = {}
    for (name, seed, order), result, cex, minimal, seconds in sweep:
        if order is not None:
            continue
        theorem = catalogue.by_name(name)
        assert result == theorem.expected.value, (name, seed, result, seconds)
        if result == "refuted":
            assert minimal, (name, seed)
            assert first.setdefault(name, cex) == cex, (name, seed, cex)  # the same smallest counterexample
    assert {name for (name, _, order), *_ in sweep if order is None} == {t.name for t in catalogue.CATALOGUE}


def test_lemmas_in_any_order(sweep):
    assert WITH_LEMMAS, "no theorem with lemmas to reorder"
    seen = 0
    for (name, seed, order), result, _, _, seconds in sweep:
        if order is None:
            continue
        seen += 1
        assert result == catalogue.by_name(name).expected.value, (name, seed, order, result, seconds)
    assert seen == len(WITH_LEMMAS) * 4


def test_reordering_really_reorders():
    theorem = catalogue.by_name(WITH_LEMMAS[0])
    import z3

    values = [z3.Int(n) for n in theorem.variable_names]
    original = [str(p) for stage in theorem.lemmas for p in goal_parts(stage(*values))]
    reversed_ = [str(p) for p in goal_parts(_reordered(theorem, -1).lemmas[0](*values))]
    assert reversed_ == original[::-1] and len(original) > 1


def test_the_resource_budget_is_a_real_limit():
    theorem = catalogue.by_name("resume-partial-copy-exact")
    d = discharge.discharge(theorem, attempts=False, timeout_s=SAFETY_S, rlimit=1000)
    assert d.result == "unknown" and d.reason
