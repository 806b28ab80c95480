"""``swafloor matrix sglang`` on an older SGLang release, end to end, from this (the main) environment.

The release is installed by the matrix's own code (cached under ~/.cache/swafloor/sglang), so a fresh
machine downloads it once: 0.5.14's wheel (12 MB), its own transformers pin and the few modules its
import path needs beyond the pinned venv (127 MB kept). Measured here (2 shared cores, load about 4):
49 s from nothing (empty ~/.cache/swafloor, ``PIP_NO_CACHE_DIR=1``: install 30 s, cells about 20 s),
22 s with the release cached. Like tests/test_sglang.py, the test needs the
pinned SGLang venv: without it it fails in CI (``CI=true``) and is skipped, with the command that makes
it, elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("SWAFLOOR_SGLANG_VENV") or ROOT / ".venv-sglang")
TIMEOUT = 900
RELEASE = "0.5.14"  # the first supported release: its paged allocation is a Triton kernel only


def _need_venv() -> None:
    if (VENV / "bin" / "python").exists() and (VENV / ".swafloor-sglang-complete").exists():
        return
    message = f"the SGLang venv {VENV} is missing or incomplete: make it with scripts/sglang-venv"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def test_matrix_command_runs_the_cells_of_an_older_release(tmp_path):
    """The command as users run it: the first supported release, every backend, 10 examples. ``sglang``
    runs SGLang 0.5.14's allocator (whole pages where its paged allocation is a Triton kernel) and
    passes; ``sglang-lazy`` is unsupported there, naming the piece it lacks (the eviction function's
    interval, then the scheduler's); ``sglang-radix`` drives the SWA radix cache 0.5.14's registry builds,
    ``SWARadixCache``, on its older prefix-cache API (issue 33), and passes."""
    _need_venv()
    out = subprocess.run(
        [sys.executable, "-m", "swafloor", "matrix", "sglang", "--releases", RELEASE, "--examples", "10", "--json",
         "--sglang-venv", str(VENV), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )
    assert out.stdout.strip().startswith("{"), out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["engine"] == "sglang" and report["releases"] == [RELEASE]
    assert report["backends"] == ["sglang", "sglang-lazy", "sglang-radix"] and report["pinned"] == "0.5.23"
    assert report["command"] == f"swafloor matrix sglang --releases {RELEASE} --examples 10"
    cells = {c["backend"]: c for c in report["cells"]}
    assert cells["sglang"]["result"] == "pass" and cells["sglang"]["sglang"] == RELEASE, cells
    assert cells["sglang"]["examples"] == 10 and cells["sglang"]["steps"] > 0
    assert cells["sglang-lazy"]["result"] == "unsupported" and "eviction_interval" in cells["sglang-lazy"]["why"], cells
    assert cells["sglang-radix"]["result"] == "pass" and cells["sglang-radix"]["examples"] == 10, cells
    assert out.returncode == 0, out.stderr[-3000:]
    assert "matrix: " in out.stderr  # progress on stderr
