"""``swafloor prove``: the table, --json, and exit codes 0, 1, 2 and 3 produced honestly."""

from __future__ import annotations

import json

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
    assert "attempt forall-exists:" in out


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
    assert proved["counterexample"] is None and proved["concrete"]["holds"]
    assert set(refuted["counterexample"]) == {"t", "W", "S", "h"}
    assert refuted["replay"]["confirmed"] and refuted["replay"]["trace"]
    assert refuted["concrete"]["counterexample"] == refuted["counterexample"]


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
    ],
)
def test_bad_arguments_exit_2(capsys, argv, needle):
    code, out, err = prove(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err
