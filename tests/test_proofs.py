"""The theorem catalogue: every theorem runs, meets its expectation, agrees with its bounded concrete
check (vectorised and one point at a time alike), and docs/theorems.md is its rendering. Seeds 0 to
9 and lemma orders: tests/test_proofs_robust.py."""

from __future__ import annotations

import pathlib

import pytest

from swafloor.proofs import catalogue, concrete, discharge, docs, runner
from swafloor.proofs.symbolic import H, S, T, W, any_of, upto
from swafloor.proofs.theorem import ConstantGoal, Expected, Theorem, goal_parts
from swafloor.reference import floors, lifecycle

NAMES = [t.name for t in catalogue.CATALOGUE]
ROOT = pathlib.Path(__file__).resolve().parent.parent


#: Z3 on the goals as written (``swafloor prove`` gives it the block encoding): all but the theorems
#: whose direct form it decides slowly or not at all (those marked ``encodings={"z3": "blocks"}``)
DIRECT = [t for t in catalogue.CATALOGUE if t.encodings.get("z3") != "blocks"]


@pytest.fixture(scope="module")
def run():
    """The whole catalogue (seed 0, Z3 + concrete check of every theorem + twins + replays), Z3 on the
    goal as written where it decides it: with the concrete check, what checks the block encoding that
    ``swafloor prove`` gives both solvers against the goal as written."""
    rest = [t for t in catalogue.CATALOGUE if t not in DIRECT]
    results = runner.prove(DIRECT, seed=0, jobs=2, encodings={"z3": "direct"}, concrete=True)
    results += runner.prove(rest, seed=0, jobs=2, concrete=True)
    return {r.theorem.name: r for r in results}


#: The theorems whose direct form Z3 does not decide in time, by name: a theorem joins this list only by
#: a change here, so the suite never drifts into checking fewer goals as written unnoticed.
BLOCKS_ONLY = {
    "full-attention-floor-exact", "eviction-floor-sufficient", "eviction-floor-tight", "refused-keeps-stale-cost",
    "ring-window-floor", "sync-floor-short-in-flight-exact", "shared-batch-exact", "hit-window-backed", "hit-aligned",
    "hit-valid", "hit-longest",
    # the decode clock's floor and interval (issue 33): the eviction floor's shape at k + e - 1, as its own
    "decode-clock-floor-sufficient", "decode-clock-floor-tight", "decode-clock-interval-one",
}


def test_the_suite_runs_z3_on_the_goals_as_written(run):
    """Most of the catalogue: every theorem but those whose direct form Z3 does not decide in time."""
    assert {t.name for t in catalogue.CATALOGUE if t not in DIRECT} == BLOCKS_ONLY
    assert len(DIRECT) >= 4 * len(BLOCKS_ONLY)  # most of the catalogue: 59 of 73 today
    for theorem in DIRECT:
        d = run[theorem.name].discharge
        assert d.encoding == "direct" and d.result == theorem.expected.value, (theorem.name, d)


def test_names_are_unique_and_statements_present():
    assert len(NAMES) == len(set(NAMES))
    for theorem in catalogue.CATALOGUE:
        assert theorem.statement.strip() and theorem.variables


def test_the_whole_catalogue_is_executed(run):
    assert sorted(run) == sorted(NAMES)
    for name, result in run.items():
        assert result.discharge.seconds > 0, name
        assert result.concrete is not None and result.concrete.points > 0, name


@pytest.mark.parametrize("name", NAMES)
def test_theorem_meets_expectation(run, name):
    r = run[name]
    assert r.status == runner.OK, (r.discharge, r.disagreement, r.replay)
    assert r.discharge.result == r.theorem.expected.value
    assert r.disagreement is None
    if r.theorem.expected is Expected.REFUTED:
        assert r.discharge.minimal
        assert r.concrete.counterexample == r.discharge.counterexample
        assert r.replay is not None and r.replay.confirmed, r.replay
    else:
        assert r.concrete.holds and r.discharge.counterexample is None
    assert runner.exit_code([r]) == 0


def test_the_catalogue_covers_the_issues_theorems():
    for name in ["first-floor-history", "full-attention-below-floor", "full-attention-floor-exact", "pool-group-tight",
                 "mixed-steps-tight", "in-flight-sufficient", "in-flight-tight", "sync-floor-short-in-flight",
                 "sync-floor-short-in-flight-exact", "ssm-minimum", "stale-is-token-level"]:
        catalogue.by_name(name)
    for folded in ["decode-transition", "concurrency", "concurrency-minus-one"]:
        with pytest.raises(KeyError):
            catalogue.by_name(folded)


def test_issue_examples_of_the_new_formulas(run):
    assert floors.first_floor_history(4, 4, 0) == 4
    assert floors.first_floor_history(32, 128, 1) == 160
    assert floors.in_flight_floor(3, 16, 0, 1) == 7 and floors.swa_floor(3, 16, 0) == 6
    assert run["full-attention-below-floor"].discharge.counterexample == {"t": 1, "W": 1, "S": 1, "m": 1, "h": 1}
    assert run["sync-floor-short-in-flight"].discharge.counterexample == {"t": 1, "W": 1, "S": 0, "h": 1}


@pytest.mark.parametrize("name", ["decode-sufficient", "pool-group-sufficient", "full-attention-floor-exact",
                                  "resume-partial-copy", "sync-floor-short-in-flight", "window-span"])
def test_vectorised_and_scalar_checks_agree(name):
    theorem = catalogue.by_name(name)
    fast, slow = concrete.check(theorem), concrete.check_scalar(theorem)
    assert fast.holds == slow.holds and fast.counterexample == slow.counterexample
    if fast.holds:
        assert fast.points == slow.points


def test_the_vectorised_check_finds_a_failure_deep_inside():
    def late(t, W, S, h):
        return any_of(t != 16, W != 64, S != 2, h != 190)

    theorem = Theorem("late", "fails at one point", Expected.PROVED, (T, W, S, H), late)
    c = concrete.check(theorem)
    assert not c.holds and c.counterexample == {"t": 16, "W": 64, "S": 2, "h": 190}


def test_forall_exists_attempt_is_reported_and_not_counted(run):
    r = run["decode-tight"]
    (attempt,) = r.discharge.attempts
    assert attempt.label == "forall-exists"
    assert attempt.result in ("proved", "refuted", "unknown")
    assert r.status == runner.OK  # whatever the attempt says


def test_docs_are_the_rendering_of_the_catalogue(run):
    committed = (ROOT / "docs" / "theorems.md").read_text()
    assert committed == docs.render([run[name] for name in NAMES]), (
        "docs/theorems.md is stale: python -m swafloor.proofs.docs > docs/theorems.md"
    )


# ----------------------------------------------------------------------------- the checks can fail
def _beyond_bounds(t, W, S, h):
    return h < 10_000


def test_a_counterexample_outside_the_bounds_is_a_disagreement():
    theorem = Theorem("beyond-bounds", "h stays below 10000", Expected.PROVED, (T, W, S, H), _beyond_bounds)
    (r,) = runner.prove([theorem], concrete=False)  # as swafloor prove runs it: a refutation is checked anyway
    assert r.discharge.result == "refuted" and r.discharge.counterexample["h"] == 10_000
    assert r.concrete.holds
    assert "outside the bounded ranges" in r.disagreement
    assert r.status == runner.CONTRADICTED and runner.exit_code([r]) == 1


def _one_window_block(t, W, S, h):
    return lifecycle.live_blocks(h, h + 1, t, W, S) <= 1


def test_concrete_finds_the_same_smallest_counterexample():
    theorem = Theorem("one-block", "one block suffices", Expected.PROVED, (T, W, S, H), _one_window_block)
    d = discharge.discharge(theorem)
    c = concrete.check(theorem)
    assert d.result == "refuted" and not c.holds
    assert d.counterexample == c.counterexample
    # every point before it in the variables' order holds
    assert concrete.evaluate(theorem, c.counterexample) == (True, False)


def test_concrete_chunks_merge_to_the_whole():
    theorem = catalogue.by_name("resume-partial-copy")
    whole = concrete.check(theorem)
    parts = [concrete.check(theorem, first=(k, 3)) for k in range(3)]
    merged = concrete.merge(parts)
    assert merged.counterexample == whole.counterexample
    proved = catalogue.by_name("decode-tight")
    assert sum(concrete.check(proved, first=(k, 2)).points for k in range(2)) == concrete.check(proved).points


def test_unknown_is_never_proved():
    d = discharge.discharge(catalogue.by_name("resume-partial-copy-exact"), timeout_s=0.001)
    assert d.result == "unknown" and d.reason


def test_bounded_ranges_are_the_issues():
    env = {}
    assert list(T.values(env)) == list(range(1, 17))
    assert list(W.values(env)) == list(range(1, 65))
    assert list(S.values(env)) == [0, 1, 2]
    for t, w, s in [(1, 1, 0), (16, 64, 2), (5, 3, 1), (2, 64, 0)]:
        top = max(H.values({"t": t, "W": w, "S": s}))
        assert top >= s * t + 2 * w  # two windows past the sinks
        assert top >= floors.worst_case_history(t, w, s) + t
    assert list(upto("x", "x", 2, 4, "x <= 4").at_least(3).values(env)) == [3, 4]


# ----------------------------------------------------------------------------- issue 16, part 4
def test_no_goal_is_decided_before_a_solver_sees_it():
    """Every conjunct of every goal, built on solver constants, is a solver term: ssm-minimum's goal
    once was the Python constant True and still counted as proved."""
    import z3

    from swafloor.proofs.symbolic import symbols

    for theorem in catalogue.CATALOGUE:
        for i, part in enumerate(goal_parts(theorem.goal(*symbols(theorem.variables)))):
            assert isinstance(part, z3.ExprRef), (theorem.name, i, part)


@pytest.mark.parametrize("encoding", ["direct", "blocks"])
def test_a_constant_goal_is_refused_not_proved(encoding):
    theorem = Theorem("constant", "decided by Python", Expected.PROVED, (T, H), lambda t, h: 1 == 1)
    with pytest.raises(ConstantGoal, match="constant True before any solver"):
        discharge.discharge(theorem, attempts=False, encoding=encoding)


def test_staleness_is_token_level_on_ints_beyond_the_grid():
    """The reference's stale range against a token-by-token listing, at sizes the bounded check does
    not reach (the theorem proves it for all)."""
    for t, W, S, h in [(7, 1000, 3, 12_345), (1, 5, 0, 99), (64, 4096, 1, 10**5 + 3), (3, 2, 40, 50)]:
        start, end = lifecycle.stale_range(h, t, W, S)
        listed = [b for b in range(h // t + 3) if b >= S and all(p < h + 1 - W for p in range(b * t, b * t + t))]
        assert listed == list(range(start, end)), (t, W, S, h)
        assert all(lifecycle.stale_by_tokens(b, h, t, W, S) == (b in listed) for b in range(h // t + 3))


def test_statements_claim_what_their_goals_fix():
    """decode-sufficient and pool-group-tight no longer claim N requests or any number of life cycles
    as proved; ssm-minimum is stated for one request in a pool group with a symbolic SWA life cycle."""
    assert "a step this goal does not contain" in catalogue.by_name("decode-sufficient").statement
    assert "arithmetic outside it" in catalogue.by_name("pool-group-tight").statement
    assert "any number of SWA life cycles" not in catalogue.by_name("pool-group-tight").statement
    assert {"W", "S", "h"} <= set(catalogue.by_name("ssm-minimum").variable_names)
    assert "One request" in catalogue.by_name("ssm-minimum").statement


def test_lemma_hints_go_only_to_the_solvers_named():
    """mixed-pool-group-sufficient's hints are cvc5's (Theorem.lemma_solvers): Z3 proves the goal without
    them, cvc5 proves them first and uses them."""
    theorem = catalogue.by_name("mixed-pool-group-sufficient")
    assert theorem.lemma_solvers == ("cvc5",)
    z3_run = discharge.discharge(theorem, attempts=False, rlimit=discharge_rlimit("z3"))
    assert z3_run.result == "proved" and z3_run.lemmas_proved == 0
    cvc5_run = discharge.discharge(theorem, attempts=False, solver="cvc5", rlimit=discharge_rlimit("cvc5"))
    assert cvc5_run.result == "proved" and cvc5_run.lemmas_proved > 0


def discharge_rlimit(solver):
    from swafloor.proofs import DEFAULT_RLIMIT

    return DEFAULT_RLIMIT[solver]
