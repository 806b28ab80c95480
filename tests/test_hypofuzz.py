"""HypoFuzz runs the pytest plugin's differential test on two local workers against one shared
example database; a failure it finds there replays first in a later plain pytest run.

Bounded: HypoFuzz runs until stopped, so the test stops it as soon as the seeded bug's failure is in
the database (or after ``LIMIT`` seconds). In CI (``CI=true``) a missing hypofuzz fails the test.

HypoFuzz shares tests out between workers round-robin (one test keeps one of two workers idle), so
the run fuzzes two seeded bugs: worker 0 gets both, worker 1 the one the test waits for. (The oracle
is no good here: under HypoFuzz's line tracing its long decode runs take seconds per example.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

MUTANT = "mutant:release-inflight-block"
OTHER = "mutant:legacy-floor"  # a second test, so that HypoFuzz gives each worker one (caught at once)
LIMIT = 240  # seconds HypoFuzz may take to start two workers and catch the mutant


def _require_hypofuzz() -> None:
    try:
        import hypofuzz  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("hypofuzz is not installed: CI installs swafloor[hypofuzz] (.ci/run)")
        pytest.skip("hypofuzz is not installed (pip install 'swafloor[hypofuzz]')")


def _failure_key(backend: str) -> bytes:
    """The example database key of the plugin's Hypothesis test for ``backend`` (node id based)."""
    from hypothesis.internal.reflection import function_digest

    from swafloor.fuzz.plugin import differential_test

    test = differential_test(backend)
    test.hypothesis.inner_test._hypothesis_internal_add_digest = f"::swafloor-hypofuzz[{backend}|reference]".encode()
    return function_digest(test.hypothesis.inner_test)


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_hypofuzz_two_workers_share_the_database_and_a_plain_run_replays_the_failure(tmp_path):
    _require_hypofuzz()
    from hypothesis.database import DirectoryBasedExampleDatabase

    db = tmp_path / "db"
    hypothesis_cli = Path(sys.executable).parent / "hypothesis"
    log = (tmp_path / "hypofuzz.log").open("w")
    fuzz = subprocess.Popen(
        [str(hypothesis_cli), "fuzz", "-n", "2", "--no-dashboard", "--",
         "-p", "no:cacheprovider", f"--swafloor-backend={OTHER}", f"--swafloor-backend={MUTANT}",
         "--swafloor-hypofuzz", f"--swafloor-db={db}"],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    key = _failure_key(MUTANT)
    found = False
    try:
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline and fuzz.poll() is None:
            if db.exists() and list(DirectoryBasedExampleDatabase(str(db)).fetch(key)):
                found = True
                break
            time.sleep(1)
    finally:
        if fuzz.poll() is None:
            os.killpg(fuzz.pid, signal.SIGINT)
            try:
                fuzz.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(fuzz.pid, signal.SIGKILL)
                fuzz.wait()
        log.close()
    output = (tmp_path / "hypofuzz.log").read_text()
    assert "using 2 processes to fuzz 2 tests" in output, output[-3000:]
    assert found, f"no failure saved within {LIMIT} s:\n{output[-3000:]}"
    assert "AttributeError" not in output, output[-3000:]

    # A plain pytest run of one fixed example: passes on an empty database, fails on the shared one
    # because Hypothesis replays the failure HypoFuzz saved there first.
    args = [f"--swafloor-backend={MUTANT}", "--swafloor-hypofuzz", "--swafloor-examples=1", "--swafloor-seed=0"]
    clean = _pytest(tmp_path, *args, f"--swafloor-db={tmp_path / 'empty-db'}")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    replayed = _pytest(tmp_path, *args, f"--swafloor-db={db}")
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "DivergenceFound" in replayed.stdout and "1 failed" in replayed.stdout


def test_the_hypothesis_test_form_runs_under_plain_pytest(tmp_path):
    """Without HypoFuzz, ``--swafloor-hypofuzz`` is an ordinary Hypothesis test: the oracle passes."""
    run = _pytest(tmp_path, "--swafloor-backend=oracle", "--swafloor-hypofuzz", "--swafloor-examples=30",
                  f"--swafloor-db={tmp_path / 'db'}", "-rA")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASSED ::swafloor-hypofuzz[oracle|reference]" in run.stdout and "1 passed" in run.stdout
