"""Token-level twins (proofs/twins.py): every theorem has one, each meets the theorem's expected
outcome, and a wrong formula that the concrete check (the goal on ints) cannot see, the twin sees."""

from __future__ import annotations

import pytest

from swafloor.proofs import concrete, twins
from swafloor.proofs.catalogue import CATALOGUE, OPT_IN, by_name
from swafloor.proofs.mutations import Mutation, applied
from swafloor.reference import arith, floors

NAMES = [t.name for t in CATALOGUE + OPT_IN]


def test_every_theorem_has_a_twin_and_no_twin_is_orphaned():
    assert sorted(twins.TWINS) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_twin_meets_the_expected_outcome(name):
    theorem, result = by_name(name), twins.run_twin(name)
    assert result.points > 0 and result.error is None
    if theorem.expected.value == "proved":
        assert result.holds, result.counterexample
        assert result.counterexample is None
    else:
        assert not result.holds and result.counterexample
        # the twin's counterexample, where it names the theorem's variables, fails the goal on ints too
        cex = result.counterexample
        if set(theorem.variable_names) <= set(cex):
            admissible, holds = concrete.evaluate(theorem, cex)
            assert admissible and not holds, cex


#: ceil turned into floor division everywhere in the reference: the live count (allocated blocks,
#: stale range) and the floors shrink together, so every goal below still holds on ints.
CEIL_AS_FLOOR = Mutation("ceil-as-floor", "cdiv is floor division", lambda: [(arith, "cdiv", arith.fdiv)])
SEEN_ONLY_BY_TWINS = ("decode-sufficient", "decode-tight", "step-sufficient", "in-flight-sufficient")


@pytest.mark.parametrize("name", SEEN_ONLY_BY_TWINS)
def test_a_wrong_formula_the_concrete_check_misses_the_twin_catches(name):
    theorem = by_name(name)
    assert concrete.check(theorem).holds and twins.run_twin(name).holds  # sound before the plant
    with applied(CEIL_AS_FLOOR):
        assert floors.swa_floor(2, 2, 0) == 1  # the plant is in (the real floor is 2)
        old = concrete.check(theorem)
        new = twins.run_twin(name)
    assert old.holds, f"the concrete check saw it after all: {old.counterexample}"
    assert not new.holds and new.counterexample


def test_a_floor_missing_its_plus_one_fails_the_sufficiency_twin_at_the_first_point():
    real = floors.step_floor
    plant = Mutation("no-plus-one", "step floor without +1",
                     lambda: [(floors, "step_floor", lambda t, W, S, n: real(t, W, S, n) - 1)])
    with applied(plant):
        result = twins.run_twin("decode-sufficient")
    assert not result.holds and result.counterexample == {"t": 1, "W": 1, "S": 0, "h": 0}


def test_an_exception_in_the_reference_fails_the_twin_with_what_raised():
    def boom(*args):
        raise ZeroDivisionError("planted")

    with applied(Mutation("raise", "swa_floor raises", lambda: [(floors, "swa_floor", boom)])):
        result = twins.run_twin("decode-tight")
    assert not result.holds and result.counterexample is None and "ZeroDivisionError" in result.error


def test_a_theorem_without_a_twin_is_an_error_not_a_counterexample():
    result = twins.run_twin("no-such-theorem")
    assert result.missing and result.error and result.counterexample is None and result.points == 0


def test_prove_contradicts_a_theorem_whose_twin_fails_though_solver_and_concrete_check_pass():
    from swafloor.proofs import runner

    theorem = by_name("decode-sufficient")
    (sound,) = runner.prove([theorem], jobs=1, solvers=("z3",))
    assert sound.status == runner.OK and sound.twin is not None and sound.twin.holds
    with applied(CEIL_AS_FLOOR):
        (planted,) = runner.prove([theorem], jobs=1, solvers=("z3",))
    assert planted.discharge.result == "proved" and planted.concrete.holds  # both blind to the plant
    assert not planted.twin.holds and not planted.twin_agrees
    assert planted.status == runner.CONTRADICTED and runner.exit_code([planted]) == 1
    assert planted.to_json()["token_level"]["agrees"] is False
