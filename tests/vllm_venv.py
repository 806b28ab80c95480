"""Where the tests find vLLM's pinned venv (scripts/vllm-venv), and the one check they make before using
it: in CI (``CI=true``) a missing or incomplete venv fails the test; elsewhere it skips.
:func:`matrix_venv` is the same check made by ``swafloor matrix``'s own lookup (the release tests')."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("SWAFLOOR_VLLM_VENV") or ROOT / ".venv-vllm")
PYTHON = VENV / "bin" / "python"


def _missing(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def need_venv() -> None:
    if PYTHON.exists() and (VENV / ".swafloor-vllm-complete").exists():
        return
    _missing(f"the vLLM venv {VENV} is missing or incomplete: make it with scripts/vllm-venv")


def matrix_venv():
    """The pinned venv as ``swafloor matrix vllm`` finds it (:func:`swafloor.fuzz.matrix.find_venv`)."""
    from swafloor.fuzz import matrix
    from swafloor.fuzz.engines.vllm.matrix import VLLM

    try:
        return matrix.find_venv(VENV, VLLM)
    except matrix.MatrixError as exc:
        _missing(str(exc))
