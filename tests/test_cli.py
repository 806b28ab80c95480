"""The command line of the reference: floor, explain, simulate; exit codes and JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from swafloor.cli import main
from swafloor.reference import sink_blocks_for, swa_floor

from . import brute


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_floor_json_w4_t4(capsys):
    code, out, _ = run_cli(capsys, "floor", "--window", "4", "--tokens-per-block", "4", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["floor_blocks"] == 2 and data["sink_blocks"] == 0 and data["window_blocks"] == 2


@pytest.mark.parametrize("w,t,k,n", [(128, 32, 1, None), (128, 32, 0, 2048), (7, 3, 5, 4), (1, 1, 0, 1)])
def test_floor_json_matches_brute_force(capsys, w, t, k, n):
    argv = ["floor", "--window", str(w), "--tokens-per-block", str(t), "--sink-tokens", str(k), "--json"]
    if n:
        argv += ["--step-tokens", str(n)]
    code, out, _ = run_cli(capsys, *argv)
    data = json.loads(out)
    horizon = k + 3 * w + 2 * t
    assert data["floor_blocks"] == brute.worst_step_need(t, w, k, 1, horizon)[0]
    if n:
        assert data["step_floor_blocks"] == brute.worst_step_need(t, w, k, n, horizon + n)[0]


def test_floor_text_names_the_terms(capsys):
    code, out, _ = run_cli(capsys, "floor", "--window", "128", "--tokens-per-block", "32", "--sink-tokens", "1")
    assert code == 0 and "6 blocks" in out and "S = ceil(1/32) = 1" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["floor", "--window", "0", "--tokens-per-block", "4"], "--window"),
        (["floor", "--window", "4", "--tokens-per-block", "0"], "--tokens-per-block"),
        (["floor", "--window", "4", "--tokens-per-block", "x"], "--tokens-per-block"),
        (["floor", "--window", "4"], "--tokens-per-block"),
        (["floor", "--window", "4", "--tokens-per-block", "4", "--sink-tokens", "-1"], "--sink-tokens"),
        (["simulate", "--window", "4", "--tokens-per-block", "4", "--slots", "0"], "--slots"),
        (["simulate", "--window", "4", "--tokens-per-block", "4", "--floor-rule", "x"], "--floor-rule"),
        (["explain", "--window", "4", "--tokens-per-block", "4", "--history", "-1"], "--history"),
        (["nonsense"], "nonsense"),
        ([], "COMMAND"),
        (["bench", "nothing"], "TARGET='nothing'"),
        (["bench", "reference", "--seconds", "0"], "--seconds"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_simulate_legacy_deadlocks_at_first_straddle_and_fixed_runs(capsys):
    base = ["simulate", "--window", "4", "--tokens-per-block", "4", "--steps", "20", "--json"]
    code, out, _ = run_cli(capsys, *base, "--floor-rule", "legacy")
    legacy = json.loads(out)
    first_straddle = next(h for h in range(20) if len(brute.live_set(h, h + 1, 4, 4, 0)) > 1)
    assert code == 4 and legacy["ok"] is False and legacy["failed_at_history"] == first_straddle
    assert legacy["slots"] == 1
    code, out, _ = run_cli(capsys, *base, "--floor-rule", "fixed")
    fixed = json.loads(out)
    assert code == 0 and fixed["ok"] is True and fixed["failed_at_history"] is None and fixed["slots"] == 2


def test_simulate_history_in_resize_shows_the_upstream_transient(capsys):
    base = ["simulate", "--window", "5", "--tokens-per-block", "4", "--history-in-resize", "--json"]
    _, out, _ = run_cli(capsys, *base, "--release-order", "hold-until-return")
    assert json.loads(out)["ok"] is False
    _, out, _ = run_cli(capsys, *base)
    assert json.loads(out)["ok"] is True


def test_simulate_text(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--window", "4", "--tokens-per-block", "4", "--floor-rule", "legacy")
    assert code == 4 and "DEADLOCK at history 4" in out and "swafloor explain" in out


def test_simulate_hint_after_a_hold_until_return_deadlock_draws_that_step(capsys):
    """The suggested explain command, run as printed, draws a step holding more than the pool has."""
    import shlex

    code, out, _ = run_cli(capsys, "simulate", "--window", "5", "--tokens-per-block", "4", "--history-in-resize",
                           "--release-order", "hold-until-return")
    assert code == 4
    hint = next(line.split("see: ", 1)[1] for line in out.splitlines() if "see: " in line)
    assert "--release-order hold-until-return" in hint
    code, out, _ = run_cli(capsys, *shlex.split(hint)[1:], "--json")
    assert code == 0 and json.loads(out)["live_blocks"] == 3  # two slots in the pool: the third is the deadlock


def test_one_flag_name_for_tokens_in_flight():
    from swafloor.docs.sections import _subparsers

    names = {opt for p in _subparsers().values() for a in p._actions for opt in a.option_strings if "flight" in opt}
    assert names == {"--in-flight"}


def test_explain_worst_case_picture(capsys):
    code, out, _ = run_cli(capsys, "explain", "--window", "4", "--tokens-per-block", "4")
    assert code == 0
    assert "held blocks: 2 = the floor" in out and "oooW WW*." in out


def test_explain_json_marks_tokens(capsys):
    code, out, _ = run_cli(
        capsys, "explain", "--window", "6", "--tokens-per-block", "4", "--sink-tokens", "3", "--history", "17", "--json"
    )
    pic = json.loads(out)
    assert [b["held"] for b in pic["blocks"]] == [True, False, False, True, True]
    tokens = "".join(b["tokens"] for b in pic["blocks"])
    assert tokens.index("*") == 17 and tokens.count("W") == 5 and tokens[:3] == "SSS"
    assert pic["live_blocks"] == len(brute.live_set(17, 18, 4, 6, 3))
    assert pic["floor_blocks"] == swa_floor(4, 6, sink_blocks_for(3, 4))


def test_module_and_console_script_entry_points():
    out = subprocess.run(
        [sys.executable, "-m", "swafloor", "floor", "--window", "4", "--tokens-per-block", "4", "--json"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert json.loads(out)["floor_blocks"] == 2


def test_bench_reference_prints_figures_for_both_managers(capsys):
    code, out, err = run_cli(capsys, "bench", "reference", "--seconds", "0.02", "--json")
    rows = json.loads(out)["reference"]["rows"]
    assert code == 0 and "measuring reference" in err
    assert {(r["window"], r["requests"]) for r in rows} == {(128, 1), (128, 64), (4096, 1), (4096, 64)}
    for r in rows:
        for name in ("reference", "oracle"):
            assert r[name]["steps"] >= r["requests"] and r[name]["steps_per_second"] > 0
            assert r[name]["final_history"] > r["start_history"]


ERROR_LINE = re.compile(r"^swafloor [a-z-]+( [a-z-]+)?: ")


def _bad_argvs(tmp_path):
    """A bad argument for every subcommand (nested ones included), by the parser and by the handler."""
    from swafloor.cli import COMMANDS

    not_json = tmp_path / "not.json"
    not_json.write_text("{not json")
    argvs = [[name, "--no-such-flag"] for name in COMMANDS]
    argvs += [["check", "trtllm", "--no-such-flag"], ["docs", "build", "--no-such-flag"],
              ["floor", "--window", "4", "--tokens-per-block", "4", "extra"],
              ["floor", "--hf-config", str(tmp_path / "missing.json")],
              ["simulate", "--window", "4", "--tokens-per-block", "4", "--steps", "0"],
              ["replay", str(not_json)], ["explain", "--trace", str(not_json)],
              ["prove", "no-such-theorem"], ["bench", "nothing"], ["fuzz", "--backend", "no-such-backend"],
              ["docs", "build", "--root", str(tmp_path)]]
    return argvs


def test_every_error_is_one_line_naming_its_command(capsys, tmp_path):
    """Every subcommand's bad argument prints exactly one line, ``swafloor COMMAND: message`` with no
    Python class name, and exits 2."""
    for argv in _bad_argvs(tmp_path):
        code, out, err = run_cli(capsys, *argv)
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1, (argv, code, err)
        assert ERROR_LINE.match(lines[0]) and lines[0].startswith(f"swafloor {argv[0]}"), (argv, lines[0])
        assert not re.search(r"\b[A-Z][A-Za-z]*Error\b", lines[0]), (argv, lines[0])


def test_simulate_steps_zero_names_the_flag(capsys):
    code, _, err = run_cli(capsys, "simulate", "--window", "4", "--tokens-per-block", "4", "--steps", "0")
    assert code == 2 and "--steps" in err


def test_floor_rule_has_help():
    from swafloor.docs.sections import _subparsers

    action = next(a for a in _subparsers()["simulate"]._actions if "--floor-rule" in a.option_strings)
    assert action.help and "fixed" in action.help and "legacy" in action.help


def test_prove_list_names_every_theorem(capsys):
    from swafloor.proofs.catalogue import CATALOGUE

    code, out, _ = run_cli(capsys, "prove", "--list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == [t.name for t in CATALOGUE]
    code, out, _ = run_cli(capsys, "prove", "--list", "--json")
    assert code == 0 and [(d["name"], d["statement"]) for d in json.loads(out)] == [(t.name, t.statement) for t in CATALOGUE]
    code, _, err = run_cli(capsys, "prove", "no-such-theorem")
    assert code == 2 and "swafloor prove --list" in err and "theorems.md" not in err
