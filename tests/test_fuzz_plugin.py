"""The pytest plugin, run as a third party would: ``pytest --swafloor-backend=pkg.mod:factory``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

THIRD_PARTY = textwrap.dedent(
    """
    from swafloor.fuzz.backends.oracle import OracleManager
    from swafloor.fuzz.protocol import Capabilities, factory

    class Adapter:
        def __init__(self, config):
            self.m = OracleManager(config)
        def create(self, rid, reused_history=0):
            self.m.create(rid, reused_history)
        def resume(self, rid):
            return self.m.resume(rid)
        def resize(self, rid, capacity, history):
            return self.m.resize(rid, capacity, history)
        def commit(self, rid, tokens):
            self.m.commit(rid, tokens)
        def suspend(self, rid):
            self.m.suspend(rid)
        def close(self, rid):
            self.m.close(rid)
        def observe(self):
            return self.m.snapshot()

    @factory(Capabilities())
    def make(config):
        return Adapter(config)
    """
)


def _pytest(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )


def test_plugin_passes_a_correct_third_party_backend(tmp_path):
    (tmp_path / "thirdparty.py").write_text(THIRD_PARTY)
    run = _pytest(tmp_path, "--swafloor-backend=thirdparty:make", "--swafloor-examples=150")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_plugin_fails_a_buggy_backend_with_the_replay_command(tmp_path):
    out = tmp_path / "failures"
    run = _pytest(
        tmp_path,
        "--swafloor-backend=swafloor.fuzz.backends.mutants:release_inflight_block",
        "--swafloor-examples=300",
        f"--swafloor-out={out}",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed" in run.stdout and "replay: swafloor replay" in run.stdout
    assert len(list(out.glob("*.json"))) == 1


def test_plugin_is_inert_without_the_option(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    run = _pytest(tmp_path, "-v")
    assert run.returncode == 0 and "1 passed" in run.stdout
    assert "swafloor-differential" not in run.stdout
