"""vLLM's own prefix-cache hit function (``swafloor.fuzz.engines.vllm.hit_diff``) against the model's longest valid
hit, on the pinned release, in the venv ``scripts/vllm-venv`` makes (a subprocess; in CI a missing
venv fails, elsewhere it skips). Every saved divergence class, ``tests/regressions/hits/*.json``,
checks itself here: the model still gives the saved lengths and the saved vLLM length still falls
in the saved class; traces of the pinned release also replay on vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from swafloor.fuzz.engines.vllm import hit_diff

ROOT = Path(__file__).resolve().parent.parent
from .vllm_venv import PYTHON, VENV, need_venv as _need_venv  # noqa: E402
HITS = sorted((ROOT / "tests" / "regressions" / "hits").glob("*.json"))
PINNED = "0.33.0"




def _python(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([str(PYTHON), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_there_are_saved_hit_traces():
    assert HITS, "tests/regressions/hits/ holds no trace"


@pytest.mark.parametrize("path", HITS, ids=[p.stem for p in HITS])
def test_saved_hit_trace_checks_itself(path):
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["kind"] == "vllm-hit" and saved["verdict"] and saved["why"]
    models = {r: hit_diff.model_hit(saved["case"], r) for r in hit_diff.REACHES}
    assert models == saved["models"]
    if saved["class"] == "error":  # an exception inside vLLM, with its input
        assert saved["vllm"] is None and saved["error"]
    else:
        assert hit_diff.divergence_class(saved["vllm"], models) == saved["class"] != "equal"


def test_the_classes_are_what_the_lengths_say():
    assert hit_diff.divergence_class(8, {"reusable": 8, "prompt": 12}) == "equal"
    assert hit_diff.divergence_class(12, {"reusable": 8, "prompt": 12}) == "other-reach"
    assert hit_diff.divergence_class(4, {"reusable": 8, "prompt": 12}) == "lost"
    assert hit_diff.divergence_class(16, {"reusable": 8, "prompt": 12}) == "bug"


@pytest.mark.parametrize("path", [p for p in HITS if json.loads(p.read_text())["release"] == PINNED],
                         ids=lambda p: p.stem)
def test_pinned_trace_replays_on_vllm(path):
    _need_venv()
    out = _python("-m", "swafloor.fuzz.engines.vllm.hit_diff", "--replay", str(path))
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert "vllm" in got, f"the venv's vLLM is not {PINNED}"
    assert got["vllm"] == saved["vllm"] and got["class"] == saved["class"]


def test_pinned_release_has_no_wrong_hit_and_only_traced_classes():
    """150 generated cases (seed 0) on the pinned release: no hit longer than the longest valid one, no
    exception inside vLLM, nothing unsupported, and every other divergence is a class with a trace."""
    _need_venv()
    out = _python("-m", "swafloor.fuzz.engines.vllm.hit_diff", "--cases", "150", "--seed", "0", "--json")
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["version"] == PINNED
    counts = report["counts"]
    assert counts["bug"] == counts["error"] == counts["unsupported"] == 0, counts
    assert counts["equal"] >= 100, counts
    traced = {json.loads(p.read_text())["class"] for p in HITS if json.loads(p.read_text())["release"] == PINNED}
    found = {ex["class"] for ex in report["examples"].values()}
    assert found <= traced, found - traced
