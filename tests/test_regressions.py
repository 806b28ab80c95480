"""Replays every saved trace in tests/regressions/ on every run.

Each file names the backend that must diverge from the reference on it (a seeded bug's minimal
failing trace, saved by ``swafloor fuzz``) and the divergence it gave: the step, the field and both
values. Replayed against the reference it must give that divergence again, values included; replayed
against the oracle (token-level, written apart from the reference) it must give the same one, so the
stored reference value is not only the reference's word; and the oracle must not diverge from the
reference on it. Add a file by copying a trace that ``swafloor fuzz`` saved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swafloor.fuzz.backends import MUTANT_NAMES
from swafloor.fuzz.replay import replay
from swafloor.fuzz.trace import load

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
# vllm-*.json need vLLM: tests/test_vllm.py replays them in the venv scripts/vllm-venv makes;
# sglang-*.json need SGLang: tests/test_sglang_radix.py replays them in the venv scripts/sglang-venv makes.
FILES = sorted(p for p in REGRESSIONS.glob("*.json") if not p.name.startswith(("vllm-", "sglang-")))
#: What a divergence must repeat: where (step, field) and what each side showed.
COMPARED = ("step_index", "field", "reference", "backend")


def _shown(divergence) -> dict | None:
    """The compared keys of a divergence, as the trace file holds them (JSON values)."""
    return None if divergence is None else {k: json.loads(json.dumps(divergence.to_dict()[k])) for k in COMPARED}


def test_every_mutant_has_a_regression_trace():
    named = {load(path).backend for path in FILES}
    assert set(MUTANT_NAMES) <= named, sorted(set(MUTANT_NAMES) - named)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_regression_trace(path):
    trace = load(path)
    assert trace.expect == "divergence" and trace.backend, f"{path.name} must name the backend that diverges"
    assert trace.divergence and all(k in trace.divergence for k in COMPARED), f"{path.name}: no stored divergence"
    stored = {k: trace.divergence[k] for k in COMPARED}
    found = replay(trace)
    assert found.diverged, f"{trace.backend} no longer diverges from {trace.against} on {path.name}"
    assert _shown(found.divergence) == stored, f"{path.name}: a different divergence: {found.divergence.describe()}"
    on_oracle = replay(trace, against="oracle")
    assert _shown(on_oracle.divergence) == stored, f"{path.name}: against the oracle: {_shown(on_oracle.divergence)}"
    clean = replay(trace, "oracle")
    assert not clean.diverged, f"the oracle diverges from the reference on {path.name}:\n{clean.divergence.describe()}"
