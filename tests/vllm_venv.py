"""Where the tests find vLLM's pinned venv (scripts/vllm-venv), and the one check they make before using
it: in CI (``CI=true``) a missing or incomplete venv fails the test; elsewhere it skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("SWAFLOOR_VLLM_VENV") or ROOT / ".venv-vllm")
PYTHON = VENV / "bin" / "python"


def need_venv() -> None:
    if PYTHON.exists() and (VENV / ".swafloor-vllm-complete").exists():
        return
    message = f"the vLLM venv {VENV} is missing or incomplete: make it with scripts/vllm-venv"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
