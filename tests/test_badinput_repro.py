"""Every reproducer of issue 11 (bad input), kept: a clean error or a bounded, correct answer.

CLI cases run in-process through ``swafloor.cli.main``; cases where memory or signals matter run in
a child process under a memory limit (RLIMIT_AS) with a timeout.
"""

from __future__ import annotations

import json
import math
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swafloor.cli import main
from swafloor.fuzz.trace import TraceError, load, loads
from swafloor.reference import (
    AttentionLayer,
    Config,
    ConfigError,
    Manager,
    RequestError,
    build_layout,
    live_blocks,
    sink_blocks_for,
    swa_floor,
)
from swafloor.reference.show import bounded

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "tests" / "regressions" / "mutant-floor-division.json"
MEMORY = 2 * 1024**3


def deep(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_exit_2(code, err, needle=""):
    assert code == 2, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert needle in err, err


def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a child of a background job may inherit SIG_IGN


def swafloor_child(*argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "swafloor", *argv], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_limits, cwd=ROOT)


# ------------------------------------------------------------------ bounded reprs
@pytest.mark.parametrize("value,shown", [
    (10**5000, "<int of 5,001 digits>"),
    (-(10**5000), "-<int of 5,001 digits>"),
    (deep(1000), "[[[[[...]]]]]"),
    ("a\nb", "'a\\nb'"),
    (12345, "12345"),
], ids=["huge", "minus-huge", "deep", "newline", "small"])
def test_bounded_never_raises_and_stays_short(value, shown):
    assert bounded(value) == shown


def test_bounded_cuts_long_values_to_the_limit():
    text = bounded("x" * 10**6, 40)
    assert len(text) == 40 and text.endswith("...") and "\n" not in text


# ------------------------------------------------------------------ deep nesting
def test_config_from_a_1000_deep_list_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        Config.from_dict(deep(1000))
    assert info.value.field == "config" and "must be an object" in str(info.value)


def test_config_with_deep_values_in_fields_names_the_field():
    data = {"tokens_per_block": 4, "layers": [{"kind": "attention", "window": 4}], "pool_groups": [deep(1000)]}
    with pytest.raises(ConfigError) as info:
        Config.from_dict(data)
    assert info.value.field == "pool_groups[0]"


def test_trace_nested_2000_deep_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 2000 + "]" * 2000)
    code, out, err = run_cli(capsys, "replay", str(path))
    assert_one_line_exit_2(code, err, "nests 2000 levels deep")


# ------------------------------------------------------------------ 5000-digit numbers in messages
def test_config_from_a_5000_digit_int():
    with pytest.raises(ConfigError) as info:
        Config.from_dict(10**5000)
    assert "<int of 5,001 digits>" in str(info.value)


def test_reused_history_of_minus_10_to_the_5000():
    m = Manager(Config(4, [AttentionLayer(4)]))
    before = m.snapshot()
    with pytest.raises(RequestError) as info:
        m.create("r0", reused_history=-(10**5000))
    assert info.value.field == "reused_history" and "-<int of 5,001 digits>" in str(info.value)
    assert m.snapshot() == before
    m.check()


def test_a_trace_holding_a_5000_digit_number_exits_2(tmp_path, capsys):
    text = REGRESSION.read_text().replace('"tokens_per_block": 2', '"tokens_per_block": ' + "9" * 5000)
    path = tmp_path / "big.json"
    path.write_text(text)
    code, out, err = run_cli(capsys, "replay", str(path))
    assert_one_line_exit_2(code, err, "is not a valid trace")
    assert err.startswith("swafloor replay: ") and "TraceError" not in err  # one style, no class name
    assert len(err) < 600


def test_a_config_count_above_10_to_the_18_is_rejected_not_computed():
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"tokens_per_block": 10**5000, "layers": [{"kind": "attention", "window": 4}]})
    assert info.value.field == "tokens_per_block" and "must be <=" in str(info.value)


# ------------------------------------------------------------------ request ids
@pytest.mark.parametrize("call", [
    lambda m: m.create({"r0"}),
    lambda m: m.create(float("nan")),
    lambda m: m.create(7),
    lambda m: m.resize({"a": 1}, 1, 1),
    lambda m: m.commit(["r0"], 1),
])
def test_request_ids_must_be_strings(call):
    m = Manager(Config(4, [AttentionLayer(4)]))
    m.create("r0")
    before = m.snapshot()
    with pytest.raises(RequestError) as info:
        call(m)
    assert info.value.field == "request_id"
    assert m.snapshot() == before and m.snapshot() == m.snapshot()
    m.check()


# ------------------------------------------------------------------ backend specs
@pytest.mark.parametrize("argv,needle", [
    (["--backend", ".x:y"], "not an absolute module name"),
    (["--backend", "reference", "--against", ".x:y"], "--against='.x:y'"),
    (["--backend", "reference", "--against", "builtins:print"], "is not a backend factory"),
    (["--backend", "reference", "--against", "swafloor.reference:Manager"], "lacks observe"),
    (["--backend", "swafloor.reference:Manager"], "--backend='swafloor.reference:Manager'"),
    (["--backend", "os:sep"], "is not callable"),
    (["--backend", "no_such_module_xyz:f"], "cannot import module"),
])
def test_fuzz_backend_specs_fail_cleanly(tmp_path, capsys, argv, needle):
    code, out, err = run_cli(capsys, "fuzz", *argv, "--examples", "1", "--out", str(tmp_path))
    assert_one_line_exit_2(code, err, needle)


@pytest.mark.parametrize("argv,needle", [
    (["--against", ".x:y"], "not an absolute module name"),
    (["--against", "builtins:print"], "is not a backend factory"),
    (["--backend", "swafloor.reference:Manager"], "lacks observe"),
])
def test_replay_backend_specs_fail_cleanly(capsys, argv, needle):
    code, out, err = run_cli(capsys, "replay", str(REGRESSION), *argv)
    assert_one_line_exit_2(code, err, needle)


# ------------------------------------------------------------------ a trace cannot choose code to run
@pytest.mark.parametrize("field,spec", [
    ("backend", "tests.trace_payload_never_imported:factory"),
    ("against", "tests.trace_payload_never_imported:factory"),
    ("backend", "dataplane:tests.trace_payload_never_imported:factory"),
])
def test_a_trace_naming_a_module_is_refused_without_importing_it(tmp_path, capsys, field, spec):
    data = json.loads(REGRESSION.read_text())
    data[field] = spec
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(data))
    before = set(sys.modules)
    code, out, err = run_cli(capsys, "replay", str(path))
    assert_one_line_exit_2(code, err, "a trace file may name only registered backends")
    assert "tests.trace_payload_never_imported" not in set(sys.modules) - before


def test_the_same_module_spec_is_honoured_on_the_command_line(capsys):
    spec = "swafloor.fuzz.backends.reference:reference"
    code, out, err = run_cli(capsys, "replay", str(REGRESSION), "--backend", spec, "--json")
    assert code == 0 and json.loads(out)["backend"] == spec


# ------------------------------------------------------------------ numbers the CLI accepted, then failed on
@pytest.mark.parametrize("argv,needle", [
    (["bench", "--seconds", "1e-9"], "--seconds"),
    (["bench", "--seconds", "inf"], "finite"),
    (["bench", "--seconds", "nan"], "finite"),
    (["prove", "--timeout", "inf"], "--timeout"),
    (["prove", "--jobs", "1000000000000000000"], "--jobs"),
    (["prove", "--seed", "99999999999999999999999"], "--seed"),
    (["simulate", "--window", "4", "--tokens-per-block", "4", "--slots", str(10**20)], "--slots"),
    (["fuzz", "--backend", "reference", "--out", "/dev/null/x"], "--out"),
    (["fuzz", "--backend", "reference", "--examples", str(10**16)], "--examples"),
    (["floor", "--window", "9" * 5000, "--tokens-per-block", "4"], "5,000-digit"),
    (["floor", "--window=--", "--tokens-per-block", "4"], "--window: expected one argument"),
    (["floor", "--window", "4", "--tokens-per-block=--"], "--tokens-per-block: expected one argument"),
    (["explain", "--window", "4", "--tokens-per-block", "4", "--history=--"], "--history"),
    (["floor", "--window", "a\nb", "--tokens-per-block", "4"], "'a\\nb'"),
    (["floor", "--window", "4", "--tokens-per-block", "4", "--bogus", "x\ny"], "unrecognized"),
    # found by the campaign: files to write are checked at parse time too
    (["explain", "--window", "1", "--tokens-per-block", "1", "--svg=/"], "is a folder"),
    (["explain", "--window", "1", "--tokens-per-block", "1", "--svg=/nonexistent/x"], "does not exist"),
    (["explain", "--window", "1", "--tokens-per-block", "1", "--svg=/dev/null/x"], "is not a folder"),
    (["explain", "--window", "1", "--tokens-per-block", "1", "--svg=" + "x" * 5000], "too long"),
])
def test_absurd_values_exit_2_with_one_line_at_parse_time(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert_one_line_exit_2(code, err, needle)
    assert out == ""


def test_bench_with_the_smallest_budget_still_gives_rates(capsys):
    code, out, err = run_cli(capsys, "bench", "reference", "--seconds", "0.001", "--json")
    rows = json.loads(out)["reference"]["rows"]
    assert code == 0 and all(r["reference"]["steps"] > 0 and r["oracle"]["steps"] > 0 for r in rows)
    assert all(math.isfinite(r["speedup"]) for r in rows)


# ------------------------------------------------------------------ files
def test_replaying_dev_zero_is_refused_cheaply(capsys):
    code, out, err = run_cli(capsys, "replay", "/dev/zero")
    assert_one_line_exit_2(code, err, "is not a regular file (a character device)")


def test_a_trace_over_16_mib_is_refused_unread(tmp_path, capsys):
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(17 * 1024 * 1024)  # sparse: no disk used
    code, out, err = run_cli(capsys, "replay", str(big))
    assert_one_line_exit_2(code, err, "larger than 16 MiB")


@pytest.mark.parametrize("argv", [["replay"], ["replay", "--json"], ["explain", "--trace"]],
                         ids=["replay", "replay-json", "explain-trace"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, argv):
    """Issue 16: ``swafloor replay FIFO`` blocked forever in ``open`` (no writer ever comes). Run in a
    child with a timeout, so the old behaviour fails this test instead of hanging the suite."""
    import os

    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = swafloor_child(*argv, str(fifo), timeout=30)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "is not a regular file (a FIFO)" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 30


def test_a_file_name_with_a_newline_gives_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short name: a long temporary folder's would be cut before it
    code, out, err = run_cli(capsys, "replay", "a\nb.json")
    assert_one_line_exit_2(code, err, "a\\nb.json")


@pytest.mark.parametrize("text,needle", [
    ('{"schema": NaN}', "NaN"),
    ('{"schema": "swafloor-trace/1", "x\\ny": 1}', "unknown field"),
])
def test_trace_text_errors_are_one_line(text, needle):
    with pytest.raises(TraceError) as info:
        loads(text)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_step_number_beyond_10_to_the_18_is_refused():
    data = json.loads(REGRESSION.read_text())
    data["steps"] = [{"op": "create", "request": "r0", "reused_history": 10**19}]
    with pytest.raises(TraceError) as info:
        loads(json.dumps(data))
    assert info.value.field == "steps[0].reused_history"


# ------------------------------------------------------------------ memory grows with the work, not the numbers
def test_simulate_a_billion_slots_one_step():
    proc = swafloor_child("simulate", "--window", "4", "--tokens-per-block", "4", "--slots", "1000000000",
                          "--steps", "1", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    # one decode step from history 0 holds the blocks live at (h=0, c=1): a pool of a billion is not touched
    assert result["ok"] and result["slots"] == 10**9 and result["peak_used"] == live_blocks(0, 1, 4, 4, 0) == 1


def test_simulate_a_window_of_10_to_the_12_with_one_token_blocks():
    proc = swafloor_child("simulate", "--window", "1000000000000", "--tokens-per-block", "1", "--steps", "1", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["ok"] and result["min_slots"] == swa_floor(1, 10**12, 0)


def test_explain_at_a_history_of_10_to_the_12():
    proc = swafloor_child("explain", "--window", "4", "--tokens-per-block", "4", "--history", "1000000000000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stdout) < 20_000 and "held blocks: 2" in proc.stdout


def test_explain_with_a_billion_tokens_per_block():
    proc = swafloor_child("explain", "--window", "4", "--tokens-per-block", "1000000000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = sink_blocks_for(0, 10**9)
    assert len(proc.stdout) < 20_000 and f"= {swa_floor(10**9, 4, s)}" in proc.stdout


@pytest.mark.parametrize("steps,needle", [
    ([{"op": "create", "request": "r0", "reused_history": 10**12}], "spans"),
    ([{"op": "create", "request": "r0", "reused_history": 10**6}, {"op": "resume", "request": "r0"}], "spans"),
])
def test_replay_refuses_traces_no_side_serves_in_bounded_time(tmp_path, capsys, steps, needle):
    data = json.loads(REGRESSION.read_text())
    data.update(steps=steps, backend="reference", expect="match")
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    started = time.perf_counter()
    code, out, err = run_cli(capsys, "replay", str(path))
    assert_one_line_exit_2(code, err, needle)
    assert time.perf_counter() - started < 30  # not a speed figure: a hang detector


def test_replay_refuses_a_window_the_oracle_cannot_serve(tmp_path, capsys):
    data = json.loads(REGRESSION.read_text())
    data["config"]["layers"][0]["window"] = 10**6
    data.update(backend="oracle", expect="match")
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(data))
    code, out, err = run_cli(capsys, "replay", str(path))
    assert_one_line_exit_2(code, err, "serves a window plus sinks plus 3 blocks of at most")


def test_replay_refuses_huge_blocks_the_oracle_would_walk(tmp_path, capsys):
    data = json.loads(REGRESSION.read_text())  # found by the campaign: t = 10**12 hung the oracle's build
    data["config"]["tokens_per_block"] = 10**12
    data.update(backend="oracle", expect="match")
    path = tmp_path / "wide-blocks.json"
    path.write_text(json.dumps(data))
    code, out, err = run_cli(capsys, "replay", str(path))
    assert_one_line_exit_2(code, err, "backend 'oracle' serves a window plus sinks plus 3 blocks")


def test_a_config_with_20000_distinct_windows_builds_in_linear_time():
    started = time.perf_counter()
    layout = build_layout(Config(4, [AttentionLayer(w + 1) for w in range(20000)]))
    assert len(layout.life_cycles) == 20000
    assert time.perf_counter() - started < 10  # quadratic took over 20 s; a hang detector, not a figure


# ------------------------------------------------------------------ long work: progress and Ctrl-C
def _interrupt_after(argv, marker):
    """Start ``swafloor ARGV``, wait for a stderr line containing ``marker`` (its progress: the
    work is under way), send SIGINT, and return the exit code and all output."""
    proc = subprocess.Popen([sys.executable, "-m", "swafloor", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_limits, cwd=ROOT)
    seen = []
    try:
        for line in proc.stderr:  # blocks until the command reports progress (or exits)
            seen.append(line)
            if marker in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, "".join(seen) + err


def test_simulate_a_billion_steps_shows_progress_and_stops_on_ctrl_c():
    code, out, err = _interrupt_after(
        ["simulate", "--window", "4", "--tokens-per-block", "4", "--steps", "1000000000"], "of 1,000,000,000 steps")
    assert code == 130, err
    assert "simulate: " in err and "of 1,000,000,000 steps" in err  # progress
    lines = err.splitlines()  # issue 16: an estimate of the total time comes before any progress line
    assert "in all" in lines[0] and "1,000,000,000 steps at about" in lines[0], lines[:2]
    assert "interrupted after at least" in err and "no deadlock so far" in err  # the summary
    assert "Traceback" not in err


def test_fuzz_10_to_the_12_examples_shows_progress_and_stops_on_ctrl_c(tmp_path):
    code, out, err = _interrupt_after(
        ["fuzz", "--backend", "reference", "--examples", str(10**12), "--out", str(tmp_path)], "fuzz: searching")
    assert code == 130, err
    assert "fuzz: searching" in err and "fuzz: interrupted after" in err and "Traceback" not in err


def test_bench_with_defaults_estimates_its_time_shows_progress_and_stops_on_ctrl_c():
    code, out, err = _interrupt_after(["bench"], "bench: measuring reference")
    assert code == 130, err
    lines = err.splitlines()
    assert lines[0].startswith("bench: reference, proofs, fuzz, dataplane: about ") and "in all" in lines[0], lines
    assert lines[1] == "bench: measuring reference ..." and "swafloor: interrupted" in err
    assert "Traceback" not in err


def test_misuse_messages_bound_5000_digit_lengths():
    """Found by the extended campaign (issue 16): the message of a resize whose capacity is below a
    5000-digit history converted that int to text and raised ValueError instead of RequestError."""
    m = Manager(Config(1, [AttentionLayer(window=1)]))
    m.create("r")
    m.resume("r")
    with pytest.raises(RequestError, match="is below history <int of 5,001 digits>"):
        m.resize("r", 0, 10**5000)
    m.create("big", reused_history=10**5000)
    m.resume("big")
    with pytest.raises(RequestError, match="goes backwards from <int of 5,001 digits>"):
        m.resize("big", 10**5000, 0)
    with pytest.raises(RequestError, match="exceeds capacity <int of 5,001 digits>"):
        m.commit("big", 1)
