"""Replays every saved trace in tests/regressions/ on every run.

Each file names the backend that must diverge from the reference on it (a seeded bug's minimal
failing trace, saved by ``swafloor fuzz``); the oracle must not diverge on it, nor the reference from
itself. Add a file by copying a trace that ``swafloor fuzz`` saved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swafloor.fuzz.backends import MUTANT_NAMES
from swafloor.fuzz.replay import replay
from swafloor.fuzz.trace import load

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
# vllm-*.json need vLLM: tests/test_vllm.py replays them in the venv scripts/vllm-venv makes;
# sglang-*.json need SGLang: tests/test_sglang_radix.py replays them in the venv scripts/sglang-venv makes.
FILES = sorted(p for p in REGRESSIONS.glob("*.json") if not p.name.startswith(("vllm-", "sglang-")))


def test_every_mutant_has_a_regression_trace():
    named = {load(path).backend for path in FILES}
    assert set(MUTANT_NAMES) <= named, sorted(set(MUTANT_NAMES) - named)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_regression_trace(path):
    trace = load(path)
    assert trace.expect == "divergence" and trace.backend, f"{path.name} must name the backend that diverges"
    found = replay(trace)
    assert found.diverged, f"{trace.backend} no longer diverges from {trace.against} on {path.name}"
    for peer in ("oracle", "reference"):
        clean = replay(trace, peer)
        assert not clean.diverged, f"{peer} diverges on {path.name}:\n{clean.divergence.describe()}"
