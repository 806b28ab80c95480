"""Where the tests find SGLang's pinned venv (scripts/sglang-venv), and the one check they make before using
it: in CI (``CI=true``) a missing or incomplete venv fails the test; elsewhere it skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("SWAFLOOR_SGLANG_VENV") or ROOT / ".venv-sglang")
PYTHON = VENV / "bin" / "python"


def need_venv() -> None:
    if PYTHON.exists() and (VENV / ".swafloor-sglang-complete").exists():
        return
    message = f"the SGLang venv {VENV} is missing or incomplete: make it with scripts/sglang-venv"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
