"""``swafloor bench reference --against vllm``: a command that prints figures (never a timed test).
These tests check that it runs and reports what it measured, with vLLM (in its venv) and without."""

from __future__ import annotations

import json
import subprocess

from swafloor.cli import main

from .test_vllm import PYTHON, ROOT, _need_venv


def test_without_vllm_the_reference_alone_and_why(capsys):
    assert main(["bench", "reference", "--against", "vllm", "--seconds", "0.01", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["reference"]
    assert figures["vllm_missing"] and "vllm" in figures["vllm_missing"].lower()
    assert [(r["window"], r["tokens_per_block"], r["requests"]) for r in figures["rows"]] == [
        (128, 32, 1), (128, 32, 64), (4096, 32, 1), (4096, 32, 64), (4096, 16, 8)]
    assert all(r["reference"]["steps"] > 0 and "vllm" not in r for r in figures["rows"])


def test_beside_vllm_in_its_venv():
    _need_venv()
    done = subprocess.run(
        [str(PYTHON), "-m", "swafloor", "bench", "reference", "--against", "vllm", "--seconds", "0.05", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout)["reference"]
    assert figures["vllm_missing"] is None
    for row in figures["rows"]:
        assert row["vllm"]["steps"] > 0 and row["reference"]["steps"] > 0
        # both sides decoded from history 0 to 2W before timing, so both ended past it
        assert row["vllm"]["final_history"] > 2 * row["window"] and row["reference"]["final_history"] > 2 * row["window"]
