"""``swafloor fuzz --workers N``: processes with their own seeds sharing one example database.

Bounded: two workers, small budgets, fixed seeds. A worker process costs a few seconds to start
(spawn: it imports Hypothesis and swafloor afresh).
"""

from __future__ import annotations

import json

import pytest

from swafloor.cli import main
from swafloor.fuzz.workers import WorkersError, _split, format_workers, run_workers

MUTANT = "mutant:release-inflight-block"  # caught within a few examples by seeds 0 and 1


def test_examples_are_split_between_workers():
    assert _split(7, 2) == [4, 3] and _split(6, 3) == [2, 2, 2] and sum(_split(2001, 4)) == 2001


def test_two_workers_pass_with_merged_counts(tmp_path):
    result = run_workers("oracle", workers=2, examples=40, seed=5, database=tmp_path / "db", out_dir=None)
    assert result.result == "pass"
    assert [w.seed for w in result.workers] == [5, 6]
    assert [w.examples for w in result.workers] == [20, 20]
    assert result.examples == 40 and result.steps == sum(w.steps for w in result.workers) > 0
    data = result.to_dict()
    assert data["workers"] == 2 and data["seeds"] == [5, 6] and data["steps_per_second"] > 0
    assert "2 workers" in format_workers(result)


def test_a_failure_found_by_one_worker_replays_in_the_others_and_in_the_next_run(tmp_path):
    db, out = tmp_path / "db", tmp_path / "out"
    first = run_workers(MUTANT, workers=2, examples=2000, seed=0, database=db, out_dir=out)
    assert first.result == "divergence"
    finder = first.workers[first.first_worker]
    others = [w for w in first.workers if w.index != first.first_worker]
    assert finder.result == "divergence"
    # The other worker either found it too, or was stopped and replayed the saved failure.
    assert all(w.result == "divergence" or (w.result == "stopped" and w.replayed) for w in others)
    trace_file = first.first.trace_file
    assert trace_file is not None and trace_file.exists() and list(out.iterdir()) == [trace_file]
    assert any(db.rglob("*")), "the failure was saved in the shared database"

    # The next run, with other seeds: worker 0 replays the database first, so the very first
    # example diverges; the other worker replays it as well.
    again = run_workers(MUTANT, workers=2, examples=2000, seed=100, database=db, out_dir=None)
    assert again.result == "divergence"
    if again.first_worker == 0:  # worker 1 searches with its own seed and may get there first
        assert again.first.first_failure_example == 1
    assert all(w.result == "divergence" or (w.result == "stopped" and w.replayed) for w in again.workers)
    # Alone, worker 0 shows it plainly: the saved failure is its very first example.
    alone = run_workers(MUTANT, workers=1, examples=2000, seed=200, database=db, out_dir=None)
    assert alone.result == "divergence" and alone.first.first_failure_example == 1


def test_bad_worker_arguments_are_typed_errors(tmp_path):
    with pytest.raises(WorkersError, match="workers=0"):
        run_workers("oracle", workers=0, database=tmp_path)
    with pytest.raises(WorkersError, match="examples=1: fewer than workers=2"):
        run_workers("oracle", workers=2, examples=1, database=tmp_path)


def test_cli_workers_json_and_exit_codes(tmp_path, capsys):
    db = tmp_path / "db"
    code = main(["fuzz", "--backend", "oracle", "--workers", "2", "--examples", "20", "--db", str(db), "--json"])
    captured = capsys.readouterr()
    assert code == 0
    data = json.loads(captured.out)
    assert data["result"] == "pass" and data["workers"] == 2 and data["database"] == str(db)
    assert "steps" in captured.err and "/s" in captured.err  # progress and summary on stderr

    code = main(["fuzz", "--backend", "oracle", "--workers", "2", "--examples", "1", "--db", str(db)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].endswith("examples=1: fewer than workers=2")


def test_cli_db_without_workers_replays_the_saved_failure_first(tmp_path, capsys):
    db = tmp_path / "db"
    argv = ["fuzz", "--backend", MUTANT, "--db", str(db), "--no-shrink", "--out", str(tmp_path / "out"), "--json"]
    assert main(argv + ["--seed", "0"]) == 1
    capsys.readouterr()
    assert main(argv + ["--seed", "12345"]) == 1
    assert json.loads(capsys.readouterr().out)["first_failure_example"] == 1


def test_ctrl_c_stops_every_worker_and_prints_what_they_did(tmp_path):
    """Ctrl-C in a terminal reaches the whole process group: the parent stops its workers, prints one
    summary with the merged counts so far, and exits 130; no worker outlives it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    argv = [sys.executable, "-m", "swafloor", "fuzz", "--backend", "oracle", "--workers", "2",
            "--examples", str(10**9), "--db", str(tmp_path / "db"), "--out", str(tmp_path)]
    def interruptible():  # a child of a background job inherits SIGINT ignored; a terminal's command does not
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=interruptible)
    seen = []
    try:
        for line in proc.stderr:  # until the merged progress shows steps: the workers are searching
            seen.append(line)
            if "workers (2 running): searching" in line and " 0 steps" not in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    summary = [line for line in err.splitlines() if line.startswith("fuzz: interrupted")]
    assert len(summary) == 1 and "2 workers" in summary[0] and "no divergence so far" in summary[0], err
    assert int(summary[0].split(" examples")[0].split()[-1].replace(",", "")) > 0, summary
    assert "Traceback" not in err and out == ""
    deadline = time.monotonic() + 15  # the group empties (an exited child may wait a moment to be reaped)
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("a process of the fuzz command's group outlived it")
