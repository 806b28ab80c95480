"""The vacuity detector: a goal part that z3.simplify reduces to True, or an implication whose
antecedent simplifies to False, is no theorem (issue 28, section 3)."""

from swafloor.proofs.symbolic import implies, upto
from swafloor.proofs.theorem import Expected, Theorem, vacuous_parts

X = upto("x", "x", 1, 3, "x <= 3", "x")
N = upto("n", "n", 1, 3, "n <= 3", "n")


def _theorem(goal):
    return Theorem(name="planted", statement="planted", expected=Expected.PROVED, variables=(X, N), goal=goal)


def test_a_part_simplify_reduces_to_true_is_vacuous():
    def goal(x, n):
        return (n * 1 <= n * 1, x * n >= x)

    assert vacuous_parts(_theorem(goal)) == [(0, "z3.simplify reduces it to True")]


def test_an_implication_from_a_false_antecedent_is_vacuous():
    def goal(x, n):
        return (implies(x < x, n < 0),)

    assert [i for i, _ in vacuous_parts(_theorem(goal))] == [0]


def test_a_part_a_solver_must_decide_is_not_vacuous():
    def goal(x, n):
        return (implies(x >= 1, x * n >= x), x + n >= n)

    assert vacuous_parts(_theorem(goal)) == []


def test_no_catalogue_theorem_has_a_vacuous_part():
    """The default run's theorems and the opt-in ones (run by name) alike."""
    from swafloor.proofs.catalogue import CATALOGUE, OPT_IN

    assert {t.name: vacuous_parts(t) for t in CATALOGUE + OPT_IN if vacuous_parts(t)} == {}


import pytest


@pytest.mark.parametrize("encoding", ["direct", "blocks"])
def test_the_solver_refuses_a_planted_vacuous_theorem(encoding):
    from swafloor.proofs.discharge import discharge
    from swafloor.proofs.theorem import VacuousGoal

    def goal(x, n):
        return (n * 1 <= n * 1, x * n >= x)

    with pytest.raises(VacuousGoal, match="goal part 0 is decided before any solver"):
        discharge(_theorem(goal), attempts=False, encoding=encoding)
