"""vLLM's v1 block manager under differential test, in the venv ``scripts/vllm-venv`` makes.

vLLM is never installed where swafloor's own tests run: each test here runs the vLLM venv's python
in a subprocess. Without that venv the tests fail in CI (env ``CI=true``) and are skipped, with the
command that makes it, elsewhere.

- The ci profile's first :data:`EXAMPLES` (seed 0) pass for ``vllm`` and ``vllm-async`` (run side by
  side, one per core), with the discard rate and the SWA share on target.
- ``dataplane:vllm`` (attention through vLLM's own block tables) passes a bounded ci campaign.
- Bugs planted in vLLM's ``BlockPool`` (alias, leak, double free, a block queued twice; the free
  count kept right) are each caught by physical identity at the step they happen.
- Every ``tests/regressions/vllm-*.json`` replays as it expects: a trace that expects a divergence
  still shows the same one (part and both sides' kinds), a trace that expects a match matches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from .vllm_venv import PYTHON, VENV, need_venv as _need_venv  # noqa: E402
# Traces that pin an older release's divergence (found.release) replay in tests/test_vllm_releases.py.
REGRESSIONS = sorted(
    p for p in (ROOT / "tests" / "regressions").glob("vllm-*.json")
    if not (json.loads(p.read_text(encoding="utf-8")).get("found") or {}).get("release")
    and not p.name.startswith("vllm-prefix-")  # tests/test_vllm_prefix.py replays those
)
BACKENDS = ("vllm", "vllm-async")
#: The ci profile's first 500 examples per backend (CI's budget; the whole profile, 2000, passes:
#: ``swafloor fuzz --backend vllm --profile ci`` in the vLLM venv, as this stop's full run showed).
EXAMPLES = 500
TIMEOUT = 900  # seconds for one subprocess; CI's budget is far larger, a hang still ends




def _run(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.Popen(
        [str(PYTHON), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """Both ci campaigns, started together (one core each), as ``{backend: (exit code, report, stderr)}``."""
    _need_venv()
    out = tmp_path_factory.mktemp("vllm-fuzz")
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
    # The import is reported apart; both sides' operations were timed.
    assert report["import_seconds"] > 0 and report["backend_steps_per_second"] and report["reference_steps_per_second"]


REPLAY = r"""
import json, sys
from swafloor.fuzz.replay import replay
from swafloor.fuzz.trace import load
for path in sys.argv[1:]:
    trace = load(path)
    found = replay(trace)
    d = found.divergence
    print(json.dumps({
        "file": path, "backend": trace.backend, "expect": trace.expect, "steps": len(trace.steps),
        "steps_run": found.steps_run, "divergence": None if d is None else d.to_dict(),
        "saved": trace.divergence, "found": trace.found, "lost_hits": [list(x) for x in found.lost_hits],
    }))
"""


def test_regression_traces_replay_as_they_expect(tmp_path):
    _need_venv()
    assert REGRESSIONS, "no tests/regressions/vllm-*.json"
    proc = _run(["-c", REPLAY, *map(str, REGRESSIONS)], tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr[-4000:]
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(REGRESSIONS)
    backends = set()
    for row in rows:
        name = Path(row["file"]).name
        backends.add(row["backend"])
        assert row["backend"] in BACKENDS, name
        assert row["found"] and row["found"].get("class") and row["found"].get("verdict"), f"{name}: class and verdict"
        got = row["divergence"]
        if row["expect"] == "match":
            assert got is None, f"{name} diverges: {json.dumps(got)[:2000]}"
            assert row["steps_run"] == row["steps"]
            continue
        assert got is not None, f"{name}: {row['backend']} no longer diverges"
        saved = row["saved"]
        # the same step, field and values on both sides as the file stores
        same = {key: got[key] for key in ("step_index", "field", "reference", "backend")}
        want = {key: saved[key] for key in ("step_index", "field", "reference", "backend")}
        assert same == want, f"{name}: a different divergence: {json.dumps(got)[:2000]}"
    assert backends == set(BACKENDS)


DATAPLANE_EXAMPLES = 40


def test_attention_through_vllm_tables_matches_dense_attention(tmp_path):
    """``dataplane:vllm``: K/V written and read through the slots vLLM's own block tables give, attention
    after every resize compared with a dense copy (and every K/V read exactly), through vLLM's own
    block ids: over a bounded ci campaign vLLM loses no block it still needs and lets no two live
    blocks share a slot (that a shared slot would be seen is the planted alias's test)."""
    _need_venv()
    argv = ["-m", "swafloor", "fuzz", "--backend", "dataplane:vllm", "--profile", "ci",
            "--examples", str(DATAPLANE_EXAMPLES), "--json", "--out", str(tmp_path)]
    proc = _run(argv, tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    report = json.loads(stdout) if stdout.strip().startswith("{") else None
    assert report is not None, stderr[-4000:]
    assert proc.returncode == 0 and report["result"] == "pass", json.dumps(report.get("divergence"), indent=1)[:4000]
    assert report["backend"] == "dataplane:vllm" and report["examples"] >= DATAPLANE_EXAMPLES
    assert report["steps"] > 10 * report["examples"] and report["swa_share"] >= 0.5, report


def test_missing_venv_fails_in_ci_and_skips_elsewhere(tmp_path):
    """The rule above, checked by running this module against a venv path that does not exist."""
    missing = tmp_path / "no-such-venv"
    base = {k: v for k, v in os.environ.items() if k != "CI"}
    for ci, code, mark in (("true", 1, "FAILED"), ("", 0, "SKIPPED")):
        env = {**base, "SWAFLOOR_VLLM_VENV": str(missing), "CI": ci}
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfs", __file__, "-k", "regression_traces_replay"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )
        assert out.returncode == code, out.stdout[-2000:]
        assert mark in out.stdout and "make it with scripts/vllm-venv" in out.stdout, out.stdout[-2000:]


PLANT_EXAMPLES = 300  # each plant is caught within a few dozen examples of the ci profile (seed 0)


def test_bugs_planted_in_vllms_block_pool_are_caught_by_identity_at_their_step(tmp_path):
    """An alias (a held block handed out again), a leak, a double free and a block queued twice,
    each planted in vLLM's own ``BlockPool`` with its free count kept right (tests/vllm_plants.py):
    ``vllm`` sees each through physical identity (a ``slots`` divergence) at the very step the plant
    fires; ``dataplane:vllm``, reading vLLM's own block ids, sees the alias in the data at that step."""
    _need_venv()
    specs = ["alias", "leak", "double-free", "requeue", "alias@dataplane:vllm"]
    proc = _run(["-m", "tests.vllm_plants", str(PLANT_EXAMPLES), *specs], ROOT)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr[-4000:]
    rows = {f"{r['plant']}@{r['backend']}": r for r in map(json.loads, stdout.splitlines())}
    assert len(rows) == len(specs), stdout
    for spec, row in rows.items():
        assert row["result"] == "divergence", f"{spec} passed: the plant went unseen"
        assert row["fired_at"] is not None and row["seen_at"] == row["fired_at"], row
        field = "data[" if spec.endswith("dataplane:vllm") else "slots"
        assert row["field"].startswith(field) and row["replay_field"].startswith(field), row
    assert "ref_count" in rows["double-free@vllm"]["field"], rows["double-free@vllm"]
    assert ".slot[" in rows["alias@vllm"]["field"], rows["alias@vllm"]
