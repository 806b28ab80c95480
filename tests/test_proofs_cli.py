"""``swafloor prove``: the table, --json, and exit codes 0, 1, 2 and 3 produced honestly."""

from __future__ import annotations

import json

import attrs
import pytest

from swafloor.cli import main
from swafloor.proofs import catalogue
from swafloor.proofs.symbolic import H, S, T, W, any_of
from swafloor.proofs.theorem import Expected, Theorem
from swafloor.reference import arith, floors, lifecycle


def prove(capsys, *argv):
    code = main(["prove", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_whole_catalogue_exits_0_with_a_table(capsys):
    code, out, err = prove(capsys)
    assert code == 0, out
    assert "z3 " in out.splitlines()[0] and "z3 " in err
    for theorem in catalogue.CATALOGUE:
        assert theorem.name in out
    assert f"{len(catalogue.CATALOGUE)} theorems: {len(catalogue.CATALOGUE)} as expected, 0 contradicted, 0 unknown" in out
    assert "replay: decode step at h=1" in out  # legacy-floor-insufficient's replay line
    assert "attempt forall-exists" not in out  # informational attempts only when asked for


def test_attempts_only_when_asked(capsys):
    code, out, _ = prove(capsys, "decode-tight", "--attempts")
    assert code == 0 and "attempt forall-exists" in out  # ", block encoding": the default


def test_json_schema(capsys):
    names = ["decode-sufficient", "legacy-floor-insufficient"]
    code, out, _ = prove(capsys, *names, "--json", "--seed", "1")
    data = json.loads(out)
    assert code == 0 and [d["name"] for d in data] == names
    for d in data:
        assert {"name", "statement", "expected", "result", "seconds", "counterexample"} <= set(d)
        assert d["expected"] in ("proved", "refuted") and d["result"] in ("proved", "refuted", "unknown")
        assert isinstance(d["seconds"], float) and d["seed"] == 1 and d["solver"].startswith("z3 ")
        cex = d["counterexample"]
        assert cex is None or all(isinstance(k, str) and type(v) is int for k, v in cex.items())
        assert d["agree"] is True and d["status"] == "ok"
    proved, refuted = data
    assert proved["counterexample"] is None and proved["concrete"] is None  # a proof's only with --concrete
    assert set(refuted["counterexample"]) == {"t", "W", "S", "h"}
    assert refuted["replay"]["confirmed"] and refuted["replay"]["trace"]
    assert refuted["concrete"]["counterexample"] == refuted["counterexample"]


def test_the_concrete_check_of_proofs_only_when_asked_and_always_on_refutations(capsys):
    code, out, _ = prove(capsys, "decode-sufficient", "legacy-floor-insufficient", "--json", "--jobs", "1")
    proved, refuted = json.loads(out)
    assert code == 0 and proved["concrete"] is None
    assert not refuted["concrete"]["holds"] and refuted["concrete"]["counterexample"] == refuted["counterexample"]
    code, out, _ = prove(capsys, "decode-sufficient", "--concrete", "--json", "--jobs", "1")
    (proved,) = json.loads(out)
    assert code == 0 and proved["concrete"]["holds"] and proved["concrete"]["points"] > 1000
    code, out, _ = prove(capsys, "decode-sufficient", "--jobs", "1")
    assert code == 0 and "not run (--concrete)" in out


def _flipped_decode_sufficient(t, W, S, h):
    return lifecycle.live_blocks(h, h + 1, t, W, S) <= floors.swa_floor(t, W, S)


def test_a_result_contradicting_its_expectation_exits_1(capsys, monkeypatch):
    flipped = Theorem(
        "test-only-flipped", "decode-sufficient, expected refuted on purpose", Expected.REFUTED, (T, W, S, H),
        _flipped_decode_sufficient, replay=lambda cex: None,
    )
    monkeypatch.setattr(catalogue, "CATALOGUE", (flipped,))
    code, out, _ = prove(capsys, "--jobs", "1")
    assert code == 1
    assert "CONTRADICTED: expected refuted, got proved" in out


def _hard_nonlinear(t, W, S, h):
    """The same-call characterisation's second part without its lemmas: Z3 gets stuck on it."""
    peak = lifecycle.transition_peak(h, h + 1, h + 2, t, W, S, True)
    return any_of(peak <= floors.swa_floor(t, W, S), arith.fmod(W - 1, t) == 0)


def test_an_unknown_exits_3(capsys, monkeypatch):
    hard = Theorem("test-only-hard", "nonlinear, no hints", Expected.PROVED, (T, W, S, H), _hard_nonlinear)
    monkeypatch.setattr(catalogue, "CATALOGUE", (hard,))
    code, out, _ = prove(capsys, "--timeout", "0.3", "--jobs", "1")
    assert code == 3
    assert "UNKNOWN" in out and "0 contradicted, 1 unknown" in out


def test_a_tiny_timeout_is_unknown_never_proved(capsys):
    code, out, _ = prove(capsys, "resume-partial-copy-exact", "same-call-release-transient", "--timeout", "0.001",
                         "--json")
    data = json.loads(out)
    assert code == 3
    assert all(d["result"] != "proved" for d in data) and any(d["status"] == "unknown" for d in data)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["no-such-theorem"], "no-such-theorem"),
        (["--timeout", "0"], "--timeout"),
        (["--timeout", "x"], "--timeout"),
        (["--seed", "-1"], "--seed"),
        (["--jobs", "0"], "--jobs"),
        (["--encoding", "sideways"], "--encoding"),
    ],
)
def test_bad_arguments_exit_2(capsys, argv, needle):
    code, out, err = prove(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


# ----------------------------------------------------------------------------- --solver
def _need_cvc5():
    """cvc5 is an optional extra; in CI (CI=true) its absence is a failure, not a skip."""
    import os

    try:
        import cvc5.pythonic  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("cvc5 is not installed: pip install 'swafloor[cvc5]'")
        pytest.skip("cvc5 is not installed")


EASY = ["ceil-identity-at-zero", "ssm-minimum", "legacy-floor-insufficient"]


def test_both_solvers_agree_and_report_side_by_side(capsys):
    _need_cvc5()
    code, out, err = prove(capsys, *EASY, "--solver", "both", "--json", "--jobs", "1")
    data = json.loads(out)
    assert code == 0, data
    assert "cvc5 " in err and "z3 " in err
    for d in data:
        assert set(d["solvers"]) == {"z3", "cvc5"}
        assert d["solvers"]["z3"]["result"] == d["solvers"]["cvc5"]["result"] == d["expected"]
        assert (d["solvers"]["z3"]["encoding"], d["solvers"]["cvc5"]["encoding"]) == ("blocks", "blocks")
        assert d["solvers"]["z3"]["obligations"] > 0 and d["solvers"]["cvc5"]["obligations"] > 0
    refuted = data[-1]["solvers"]
    assert refuted["z3"]["counterexample"] == refuted["cvc5"]["counterexample"] == {"t": 1, "W": 1, "S": 1, "h": 1}


def test_encoding_chooses_for_every_solver(capsys):
    code, out, err = prove(capsys, "decode-sufficient", "--encoding", "direct", "--json", "--jobs", "1")
    (d,) = json.loads(out)
    assert code == 0 and d["encoding"] == "direct" and d["solvers"]["z3"]["obligations"] == 0
    assert "z3 " in err and "(direct encoding)" in err
    code, out, err = prove(capsys, "decode-sufficient", "--json", "--jobs", "1")
    (d,) = json.loads(out)
    assert code == 0 and d["encoding"] == "blocks" and d["solvers"]["z3"]["obligations"] > 0  # the default
    assert "(blocks encoding)" in err


def test_cvc5_alone(capsys):
    _need_cvc5()
    code, out, _ = prove(capsys, "ceil-identity-at-zero", "--solver", "cvc5", "--jobs", "1")
    assert code == 0 and out.splitlines()[0].startswith("cvc5 ")


def _fake(result_of):
    """A discharge that answers ``result_of[solver]`` (or the real answer) for every theorem."""
    from swafloor.proofs import discharge

    real = discharge.discharge

    def fake(theorem, *, solver="z3", **kwargs):
        d = real(theorem, solver="z3", **kwargs)
        if solver in result_of:
            return attrs.evolve(d, result=result_of[solver], counterexample=None, minimal=False,
                                reason="fake" if result_of[solver] == "unknown" else None)
        return d

    return fake


def test_a_disagreement_between_solvers_exits_1(capsys, monkeypatch):
    from swafloor.proofs import discharge

    monkeypatch.setattr(discharge, "solver_version", lambda s: f"{s} test")
    monkeypatch.setattr(discharge, "discharge", _fake({"cvc5": "refuted"}))
    code, out, _ = prove(capsys, "ceil-identity", "--solver", "both", "--jobs", "1")
    assert code == 1
    assert "CONTRADICTED: z3 proved, cvc5 refuted" in out


def test_an_unknown_from_either_solver_exits_3(capsys, monkeypatch):
    from swafloor.proofs import discharge

    monkeypatch.setattr(discharge, "solver_version", lambda s: f"{s} test")
    monkeypatch.setattr(discharge, "discharge", _fake({"cvc5": "unknown"}))
    code, out, _ = prove(capsys, "ceil-identity", "--solver", "both", "--jobs", "1")
    assert code == 3
    assert "UNKNOWN (cvc5): fake" in out and "proved/unknown" in out


def test_solver_missing_exits_2_with_one_line(capsys, monkeypatch):
    from swafloor.proofs import discharge

    def missing():
        raise discharge.SolverMissing("cvc5 is not installed: pip install 'swafloor[cvc5]'")

    monkeypatch.setattr(discharge, "_cvc5", missing)
    code, out, err = prove(capsys, "--solver", "both")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "cvc5 is not installed" in err


def test_bad_solver_exits_2(capsys):
    code, out, err = prove(capsys, "--solver", "yices")
    assert code == 2 and out == "" and "--solver" in err and len(err.strip().splitlines()) == 1


def test_the_default_budget_is_resource_units_and_a_tiny_one_is_unknown_never_proved(monkeypatch, capsys):
    """`prove` bounds each solver check by resource units (the same answer under any load): the header
    names them, and a budget far too small for the theorem gives unknown (exit 3), never a proof."""
    from swafloor import proofs
    from swafloor.proofs import runner

    code, out, _ = prove(capsys, "resume-partial-copy-exact", "--jobs", "1")
    assert code == 0 and "resource units per check z3 20,000,000" in out
    results = runner.prove((catalogue.by_name("resume-partial-copy-exact"),), rlimits={"z3": 1}, jobs=1)
    assert results[0].discharge.result == "unknown" and runner.exit_code(results) == 3
    monkeypatch.setitem(proofs.DEFAULT_RLIMIT, "z3", 1)
    code, out, _ = prove(capsys, "resume-partial-copy-exact", "--jobs", "1")
    assert code == 3 and "UNKNOWN" in out
    code, out, _ = prove(capsys, "resume-partial-copy-exact", "--jobs", "1", "--budget", "seconds")
    assert code == 0 and "resource units" not in out
