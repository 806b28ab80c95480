"""SGLang's SWA allocator under differential test, in the venv ``scripts/sglang-venv`` makes.

SGLang is never installed where swafloor's own tests run: each test here runs the SGLang venv's
python in a subprocess. Without that venv the tests fail in CI (env ``CI=true``) and are skipped,
with the command that makes it, elsewhere.

- The whole ci profile (seed 0, 2000 examples) passes for ``sglang`` (eviction every token) and
  ``sglang-lazy`` (SGLang's default interval, 128), run side by side, one per core, with the discard
  rate and the SWA share on target: ``.venv-sglang/bin/swafloor fuzz --backend sglang --profile ci``.
- ``alloc_decode``'s non-atomicity: a caller that checks capacity first (as SGLang's scheduler
  does; the ``sglang`` backend) agrees with the reference when the SWA pool is short; one that does
  not loses a full-pool page per failed call, seen by physical identity (a slot neither held nor
  free) at that call, and the pages stay lost after the request closes.
- A bug planted in SGLang's own eviction (``free_swa_out_of_window_slots`` freeing nothing) is exit 1
  with a divergence at the step it shows, not ok and not a crash.
- SGLang's ``full_to_swa_index_mapping`` under identity (issue 33, :mod:`swafloor.fuzz.engines.sglang.mapping`):
  a plant leaving the mapping pointing at freed SWA slots (``radix_check``'s ``mapping-left-stale``) is a
  divergence on ``mapping`` at a step where the plant fired (its saved trace replayed with the plant in
  place, each call's firing recorded); the clean campaigns above run the same check after every step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swafloor.fuzz.runner import PROFILES

from .sglang_venv import PYTHON, need_venv as _need_venv

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("sglang", "sglang-lazy")
TIMEOUT = 900  # seconds for one subprocess; a hang still ends
EXAMPLES = 500  # the ci profile's first 500 per backend (CI's budget; the whole profile passes by hand: docs/backends.md)


def _run(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(
        [str(PYTHON), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """Both ci campaigns, started together (one core each), as ``{backend: (exit code, report, stderr)}``."""
    _need_venv()
    out = tmp_path_factory.mktemp("sglang-fuzz")
    running = {
        name: _run(["-m", "swafloor", "fuzz", "--backend", name, "--profile", "ci", "--examples", str(EXAMPLES), "--json",
                    "--out", str(out)], out)
        for name in BACKENDS
    }
    results = {}
    for name, proc in running.items():
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
        try:
            report = json.loads(stdout)
        except ValueError:
            report = None
        results[name] = (proc.returncode, report, stderr[-4000:])
    return results


@pytest.mark.parametrize("backend", BACKENDS)
def test_ci_profile_passes_with_the_generator_on_target(campaigns, backend):
    code, report, stderr = campaigns[backend]
    assert report is not None, f"no JSON report from swafloor fuzz --backend {backend}:\n{stderr}"
    assert code == 0 and report["result"] == "pass", json.dumps(report.get("divergence"), indent=1)[:4000]
    assert report["backend"] == backend and report["against"] == "reference"
    assert (report["profile"], report["seed"]) == ("ci", 0)
    assert report["examples"] >= EXAMPLES
    assert report["served"] >= EXAMPLES and report["steps"] > 10 * report["examples"]
    assert report["discard_rate"] <= 0.05, report
    assert report["swa_share"] >= 0.5, report
    assert report["targets"]["met"] is True
    assert report["import_seconds"] > 0 and report["backend_steps_per_second"] and report["reference_steps_per_second"]


def test_alloc_decode_non_atomicity_costs_an_unchecked_caller_a_page_per_failure(tmp_path):
    _need_venv()
    proc = _run(["-m", "swafloor.fuzz.engines.sglang.finding"], tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr[-4000:]
    found = json.loads(stdout)
    checked, unchecked = found["checked_caller"], found["unchecked_caller"]
    # The SWA pool (2 pages) runs short when the third page of an 8-token window is due (W=8, P=4).
    assert checked["failed_at_history"] == unchecked["failed_at_history"] == 8
    for row in checked["attempts"]:  # checking first: SGLang and the reference agree, nothing lost
        assert row["outcome"] == {"reference": False, "sglang": False}
        assert row["full_pages_used"]["sglang"] == row["full_pages_used"]["reference"] == 2
        assert row["integrity"] is None
    assert checked["after_close_full_pages_used"] == 0 and checked["after_close_integrity"] is None
    for lost, row in enumerate(unchecked["attempts"], start=1):  # not checking: one page lost per failure
        assert row["outcome"] == {"reference": False, "sglang": False}
        assert row["full_pages_used"] == {"reference": 2, "sglang": 2 + lost}
        field, total, seen, reason = row["integrity"]
        assert field == "slots.pool[1].total" and (total, seen) == (10, 10 - lost) and "a slot lost" in reason
    assert unchecked["after_close_full_pages_used"] == len(unchecked["attempts"])
    assert unchecked["after_close_integrity"][0] == "slots.pool[1].total"


def test_missing_venv_fails_in_ci_and_skips_elsewhere(tmp_path):
    """The rule above, checked by running this module against a venv path that does not exist."""
    missing = tmp_path / "no-such-venv"
    base = {k: v for k, v in os.environ.items() if k != "CI"}
    for ci, code, mark in (("true", 1, "FAILED"), ("", 0, "SKIPPED")):
        env = {**base, "SWAFLOOR_SGLANG_VENV": str(missing), "CI": ci}
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfs", __file__, "-k", "non_atomicity"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )
        assert out.returncode == code, out.stdout[-2000:]
        assert mark in out.stdout and "make it with scripts/sglang-venv" in out.stdout, out.stdout[-2000:]


def test_outside_its_venv_the_backend_refuses_cleanly_naming_the_script():
    """Where SGLang (or transformers, which its stand-ins import first) is missing, building the backend
    raises Unsupported naming scripts/sglang-venv, not an ImportError."""
    import importlib.util

    from swafloor.fuzz.backends import resolve
    from swafloor.fuzz.protocol import Unsupported
    from swafloor.reference import AttentionLayer, Config

    config = Config(4, [AttentionLayer(window=5), AttentionLayer()])
    if importlib.util.find_spec("sglang") is not None:  # run inside SGLang's venv: it builds
        assert resolve("sglang").factory(config) is not None
        return
    with pytest.raises(Unsupported, match="scripts/sglang-venv"):
        resolve("sglang").factory(config)


PLANT = '''
import sys
from swafloor.fuzz.engines.sglang import backend as adapter

loaded = adapter.import_sglang()
calls = []


def planted(req, pre_len, **kw):  # SGLang's own eviction, planted to free nothing: out-of-window pages leak
    calls.append(pre_len)


loaded["free_swa_out_of_window_slots"] = planted
from swafloor.cli import main

try:
    code = main(["fuzz", "--backend", "sglang", "--profile", "ci", "--examples", "300", "--json", "--out", sys.argv[1]])
finally:
    print(f"planted eviction called {len(calls)} times", file=sys.stderr)
sys.exit(code)
'''


def test_a_bug_planted_in_sglangs_eviction_is_a_divergence_at_its_step(tmp_path):
    """SGLang's ``free_swa_out_of_window_slots``, replaced in its venv by one that frees nothing: the check
    says so with exit 1 and a divergence at the step whose allocation needed the freed page, never ok
    and never a crash of ours."""
    _need_venv()
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    proc = _run([str(script), str(tmp_path / "out")], tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, stderr[-4000:]
    report = json.loads(stdout)
    assert report["result"] == "divergence" and "planted eviction called" in stderr, stderr[-4000:]
    divergence = report["divergence"]
    assert divergence["step"]["op"] == "resize" and divergence["backend"]["kind"] != "crash", divergence
    assert not stderr.count("planted eviction called 0 times")


MAPPING_PLANT = '''
import json, sys
from swafloor.fuzz.engines.sglang import backend as adapter, radix_check
from swafloor.fuzz.runner import run_campaign

adapter.import_sglang()
undo = radix_check.plant("mapping-left-stale")
try:
    result = run_campaign("sglang", profile="ci", examples=100, seed=0, out_dir=sys.argv[1])
    report = json.loads(json.dumps(result.to_dict(), default=str))
    report["fired"] = radix_check.FIRED["mapping-left-stale"]
    if report.get("trace_file"):
        report["firing"] = radix_check.fired_at("mapping-left-stale", report["trace_file"], adapter.SglangBackend)
finally:
    undo()
json.dump(report, sys.stdout)
'''


def test_a_mapping_left_pointing_at_a_freed_swa_slot_is_a_divergence_at_its_step(tmp_path):
    """SGLang's SWA frees planted to leave ``full_to_swa_index_mapping`` pointing at the freed SWA slots:
    a divergence on ``mapping`` (the adapter's identity check of the mapping), and on replay of the saved
    trace with the plant in place, at a step where the plant took effect (seed 0: the first close, step 3,
    the first call that frees SWA slots)."""
    _need_venv()
    script = tmp_path / "mapping_plant.py"
    script.write_text(MAPPING_PLANT)
    proc = _run([str(script), str(tmp_path / "out")], tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr[-4000:]
    report = json.loads(stdout)
    assert report["result"] == "divergence" and report["fired"] > 0, report
    divergence = report["divergence"]
    assert divergence["field"] == "mapping" and "freed SWA slot" in divergence["backend"]["message"], divergence
    firing = report["firing"]
    assert firing["aligned"], firing  # one backend call per trace step, so call i is step i
    assert firing["divergence"]["field"] == "mapping", firing
    assert firing["divergence"]["step_index"] == divergence["step_index"] in firing["fired_at"], firing
