"""``swafloor matrix sglang`` on an older SGLang release, end to end, from this (the main) environment.

The release is installed by the matrix's own code (cached under ~/.cache/swafloor/sglang), so a fresh
machine downloads it once: 0.5.14's wheel (12 MB), its own transformers pin and the few modules its
import path needs beyond the pinned venv (127 MB kept). Measured here (2 shared cores, load about 4):
49 s from nothing (empty ~/.cache/swafloor, ``PIP_NO_CACHE_DIR=1``: install 30 s, cells about 20 s),
22 s with the release cached. The regression traces that pin an older release's divergence
(``tests/regressions/sglang-X.Y.Z-*.json``, ``found.release``: issue 33, ``sglang-radix`` on 0.5.14's
``SWARadixCache``) replay as they expect there and as ``found.on_pinned`` says on the pinned release
(two subprocesses), and ``sglang-eagle`` drives 0.5.14's spec v2 allocation (5 examples, about 40 s
here). Like tests/test_sglang.py, the tests need the
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
TRACES = sorted((ROOT / "tests" / "regressions").glob("sglang-0.*.json"))


def _need_venv() -> None:
    if (VENV / "bin" / "python").exists() and (VENV / ".swafloor-sglang-complete").exists():
        return
    message = f"the SGLang venv {VENV} is missing or incomplete: make it with scripts/sglang-venv"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def test_matrix_command_runs_the_cells_of_an_older_release(tmp_path):
    """The command as users run it: the first supported release, 10 examples. ``sglang``
    runs SGLang 0.5.14's allocator (whole pages where its paged allocation is a Triton kernel) and
    passes; ``sglang-radix`` drives the SWA radix cache 0.5.14's registry builds,
    ``SWARadixCache``, on its older prefix-cache API (issue 33), and passes. ``sglang-lazy`` is left out:
    under 0.5.14's own eviction clock its cell meets, within 10 examples, the named cost of that clock (a
    lone request at the pool minimum waiting for it: liveness), found after about 400 s of shrinking; its
    trace, ``sglang-0.5.14-forward-clock-liveness.json``, replays on 0.5.14 below in seconds."""
    _need_venv()
    out = subprocess.run(
        [sys.executable, "-m", "swafloor", "matrix", "sglang", "--releases", RELEASE, "--backends", "sglang,sglang-radix",
         "--examples", "10", "--json", "--sglang-venv", str(VENV), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )
    assert out.stdout.strip().startswith("{"), out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["engine"] == "sglang" and report["releases"] == [RELEASE]
    assert report["backends"] == ["sglang", "sglang-radix"] and report["pinned"] == "0.5.23"
    assert report["command"] == f"swafloor matrix sglang --releases {RELEASE} --backends sglang,sglang-radix --examples 10"
    cells = {c["backend"]: c for c in report["cells"]}
    assert cells["sglang"]["result"] == "pass" and cells["sglang"]["sglang"] == RELEASE, cells
    assert cells["sglang"]["examples"] == 10 and cells["sglang"]["steps"] > 0
    assert cells["sglang-radix"]["result"] == "pass" and cells["sglang-radix"]["examples"] == 10, cells
    assert out.returncode == 0, out.stderr[-3000:]
    assert "matrix: " in out.stderr  # progress on stderr


def _matrix(tmp_path, releases: str, backends: str, examples: int, *more: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "swafloor", "matrix", "sglang", "--releases", releases, "--backends", backends,
         "--examples", str(examples), "--json", "--sglang-venv", str(VENV), "--out", str(tmp_path / "out"), *more],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )
    assert out.stdout.strip().startswith("{"), out.stderr[-3000:]
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_sglang_lazy_re_enacts_the_token_gate_of_an_older_scheduler(tmp_path):
    """Issue 33: on 0.5.18-0.5.20 the eviction function has no interval and the scheduler's
    ``maybe_evict_swa`` gates it per request (at least the interval's tokens out of the window since the
    eviction cursor); ``sglang-lazy`` re-enacts that gate around SGLang's own function and passes on 0.5.18,
    10 examples (measured: with the function called ungated the same cell diverges, ``tables@resize`` by
    its 9th example). The rule is read from the release's source: 0.5.14's forward-counter cadence is the
    release's own method, driven (test_matrix_command_runs_the_cells_of_an_older_release)."""
    _need_venv()
    report = _matrix(tmp_path, "0.5.18", "sglang-lazy", 10)
    (cell,) = report["cells"]
    assert (cell["release"], cell["backend"], cell["result"]) == ("0.5.18", "sglang-lazy", "pass"), cell
    assert cell["examples"] == 10 and cell["steps"] > 0 and cell["discard_rate"] == 0, cell


def test_sglang_eagle_drives_the_spec_v2_allocation_of_an_older_release(tmp_path):
    """Issue 33: on 0.5.14 the spec v2 decode preparation computes its lengths inline, token granular
    (no ``page_aligned_decode_alloc_lens``), its paged ``alloc_extend`` is a Triton kernel only, and it has
    neither ``coalesce_ranges`` nor ``free_kv_row_segments``: ``sglang-eagle`` computes the lengths the
    release's preparation computes (read from its source), places paged slots as the ``sglang`` backend
    does there and frees each range with the allocator's ``free``, and passes on-target (nothing refused:
    before issue 33 0.5.14..0.5.19 were unsupported and 0.5.20-0.5.21 refused 84% of their configs)."""
    _need_venv()
    report = _matrix(tmp_path, RELEASE, "sglang-eagle", 5)
    (cell,) = report["cells"]
    assert (cell["release"], cell["backend"], cell["result"]) == (RELEASE, "sglang-eagle", "pass"), cell
    assert cell["examples"] == 5 and cell["steps"] > 0 and cell["discard_rate"] == 0, cell
    assert "profile" not in cell, cell  # every block size drawn: 0.5.14's allocator has pages


def test_matrix_runs_its_cells_under_the_profile_asked(tmp_path):
    """``--profile pages`` (issue 33): the cell's campaign runs under that profile (the campaign's own
    record of the profile it ran, not the argument), on an older release, 2 examples."""
    _need_venv()
    report = _matrix(tmp_path, RELEASE, "sglang", 2, "--profile", "pages")
    (cell,) = report["cells"]
    assert report["profile"] == "pages" and cell["campaign"] == "pages", cell
    assert cell["result"] == "pass" and cell["examples"] == 2 and cell["steps"] > 0, cell


def test_0_5_7_builds_its_swa_radix_cache_for_a_hybrid_swa_model_and_frees_no_window_on_that_path():
    """Issue 33, read from SGLang 0.5.7 itself (installed by the matrix's own code): its radix path is
    reachable with a hybrid SWA model (the scheduler builds ``SWARadixCache`` when the radix cache is not
    disabled, and no server-args rule disables it for a sliding-window model), and on it nothing frees a
    running request's sliding window: the allocation calls ``evict_swa`` only for ``SWAChunkCache``, and the
    scheduler batch has no ``_evict_swa``. What sglang-0.5.7-radix-no-window-free.json's verdict rests on."""
    import re

    from swafloor.fuzz import matrix

    _need_venv()
    venv = matrix.find_venv(str(VENV), matrix.engine_named("sglang"))
    srt = matrix.install("0.5.7", venv, matrix.cache_root(None, "sglang"), lambda s: None) / "sglang" / "srt"
    scheduler = (srt / "managers" / "scheduler.py").read_text(encoding="utf-8")
    chunk_only = scheduler.index("and server_args.disable_radix_cache")  # the chunk cache: radix disabled
    radix = scheduler.index("elif self.is_hybrid_swa:", chunk_only)
    assert "SWARadixCache(" in scheduler[radix:radix + 300] and "SWAChunkCache(params)" in scheduler[chunk_only:radix]
    server_args = (srt / "server_args.py").read_text(encoding="utf-8")
    for m in re.finditer(r"self\.disable_radix_cache = True", server_args):  # none names a sliding window
        assert "swa" not in server_args[max(0, m.start() - 600):m.start()].lower(), server_args[m.start() - 600:m.start()]
    common = (srt / "mem_cache" / "common.py").read_text(encoding="utf-8")
    calls = [m.start() for m in re.finditer(r"\.evict_swa\(", common)]
    assert len(calls) == 2 and all("isinstance(batch.tree_cache, SWAChunkCache)" in common[c - 200:c] for c in calls)
    batch = (srt / "managers" / "schedule_batch.py").read_text(encoding="utf-8")
    assert "def _evict_swa" not in batch and "free_swa_out_of_window_slots" not in common + batch


def test_older_release_traces_replay_as_they_expect_there_and_on_the_pinned_release():
    """Each ``sglang-X.Y.Z-*.json`` trace: its saved divergence (part and step) on release X.Y.Z, installed by
    the matrix's own code, and ``found.on_pinned`` on the pinned release (0.5.14's radix cut keeping an
    extra page: a divergence there, gone on 0.5.23)."""
    from swafloor.fuzz import matrix

    _need_venv()
    assert TRACES, "no regression trace pins an older SGLang release"
    venv = matrix.find_venv(str(VENV), matrix.engine_named("sglang"))
    cache = matrix.cache_root(None, "sglang")
    by_release: dict[str, list[Path]] = {}
    for path in TRACES:
        found = json.loads(path.read_text(encoding="utf-8"))["found"]
        assert path.name.startswith(f"sglang-{found['release']}-") and found.get("verdict"), path.name
        by_release.setdefault(found["release"], []).append(path)
    pinned = dict(zip(TRACES, matrix.replay_traces(venv.pinned, TRACES, venv, cache)))
    for release, paths in by_release.items():
        for path, got in zip(paths, matrix.replay_traces(release, paths, venv, cache)):
            data = json.loads(path.read_text(encoding="utf-8"))
            saved = data["divergence"]
            assert got["release"] == release, (path.name, got)
            assert (got["verdict"], got.get("step_index")) == (f"divergence:{saved['field'].split('[')[0]}",
                                                               saved["step_index"]), (path.name, got)
            assert pinned[path]["verdict"].split(":")[0] == data["found"]["on_pinned"], (path.name, pinned[path])
