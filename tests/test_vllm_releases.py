"""An older vLLM release under test beside the pinned one: the regression traces that pin its divergences
(``tests/regressions/vllm-X.Y.Z-*.json``, ``found.release``) replay as they expect there, and as
``found.on_pinned`` says on the pinned release; ``swafloor matrix vllm`` runs one bounded cell of it
from this (the main) environment.

The release is installed by the same code as ``swafloor matrix`` (cached under ~/.cache/swafloor/vllm),
so a fresh machine downloads it once (a 0.3-0.4 GB wheel; 16-22 MB kept). Like tests/test_vllm.py, the tests need the
pinned vLLM venv: without it they fail in CI (``CI=true``) and are skipped, with the command that makes
it, elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swafloor.fuzz import matrix

from .vllm_venv import VENV, matrix_venv as _venv

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "tests" / "regressions").glob("vllm-*.json"))
TIMEOUT = 1200


def _found(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")).get("found") or {}


RELEASE_TRACES = [p for p in TRACES if _found(p).get("release")]
#: The releases CI installs: those the traces pin (a 0.3-0.4 GB download and 1-2 minutes each, once per machine).
RELEASES = sorted({_found(p)["release"] for p in RELEASE_TRACES}, key=matrix.release_key)




def test_release_traces_are_well_formed():
    assert RELEASES, "no regression trace pins an older release"
    for path in RELEASE_TRACES:
        found = _found(path)
        assert path.name.startswith(f"vllm-{found['release']}-"), f"{path.name}: the file name names the release"
        assert found.get("class") and found.get("verdict"), f"{path.name}: class and verdict"
        assert found.get("on_pinned") in ("match", "divergence"), f"{path.name}: found.on_pinned"


@pytest.fixture(scope="module")
def on_pinned() -> dict:
    """Every release trace replayed on the pinned release, in one process (vLLM imported once)."""
    venv = _venv()
    replays = matrix.replay_traces(venv.pinned, RELEASE_TRACES, venv, matrix.cache_root(None, "vllm"))
    assert len(replays) == len(RELEASE_TRACES)
    return dict(zip(RELEASE_TRACES, replays))


@pytest.mark.parametrize("release", RELEASES)
def test_release_traces_replay_as_they_expect(release, on_pinned):
    venv = _venv()
    folder = matrix.install(release, venv, matrix.cache_root(None, "vllm"), progress=lambda s: print(s, file=sys.stderr))
    assert folder is not None, f"{release} is the pinned release"
    paths = [p for p in RELEASE_TRACES if _found(p)["release"] == release]
    on_release = matrix.replay_traces(release, paths, venv, matrix.cache_root(None, "vllm"))
    assert len(on_release) == len(paths)
    for path, got in zip(paths, on_release):
        pinned = on_pinned[path]
        data = json.loads(path.read_text(encoding="utf-8"))
        assert got["release"] == release and pinned["release"] == venv.pinned
        if data["expect"] == "match":
            assert got["verdict"] == "match", (path.name, got)
        else:
            saved = data["divergence"]
            want = f"divergence:{saved['field'].split('[')[0]}"
            assert (got["verdict"], got.get("step_index")) == (want, saved["step_index"]), (path.name, got)
        assert pinned["verdict"].split(":")[0] == data["found"]["on_pinned"], (path.name, "on the pinned release", pinned)


def test_matrix_command_runs_a_cell_of_an_older_release(tmp_path):
    """The command as users run it, from this environment: one release, both backends, 50 examples (seed 0 meets the class within them);
    the older release's ``vllm`` passes under its release profile (its connector load modelled,
    ``load_holds_prefix``), ``vllm-async`` shows the bug of its asynchronous scheduling."""
    _venv()
    release = "0.11.2"
    assert release in RELEASES  # installed by the test above
    out = subprocess.run(
        [sys.executable, "-m", "swafloor", "matrix", "vllm", "--releases", release, "--examples", "50", "--json",
         "--backends", "vllm,vllm-async", "--vllm-venv", str(VENV), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )
    assert out.stdout.strip().startswith("{"), out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["releases"] == [release] and report["backends"] == ["vllm", "vllm-async"]
    assert report["domain"].startswith("domain: no sinks, no SSM, one pool group, no capacity cuts")
    cells = {c["backend"]: c for c in report["cells"]}
    assert cells["vllm"]["vllm"] == release
    # vllm there: its KV-connector load (before vllm-project/vllm#30166) is in its release profile, so it passes
    assert cells["vllm"]["result"] == "pass" and cells["vllm"]["profile"] == {"load_holds_prefix": True}, cells
    # vllm-async there: the asynchronous scheduler of that time frees on the scheduled history (a vLLM bug)
    assert cells["vllm-async"]["result"] == "divergence" and cells["vllm-async"]["part"] == "tables", cells
    assert out.returncode == 1 and Path(cells["vllm-async"]["trace_file"]).is_file()
    assert "matrix: " in out.stderr  # progress on stderr


TWO_BACKENDS = r"""
import json
from swafloor.fuzz.engines.vllm import backend as vllm
from swafloor.reference import AttentionLayer, Config
from swafloor.fuzz.protocol import Part
tables = []
for _ in range(2):  # a campaign builds many backends in one process
    b = vllm.VllmBackend(Config(1, [AttentionLayer(1)], slots=[1]), 0)
    b.create("r0"); b.resume("r0"); b.resize("r0", 1, 0); b.commit("r0", 1); b.resize("r0", 2, 1)
    tables.append(list(b.observe()[Part.TABLES]["r0"][0].dense()))
print(json.dumps({"tables": tables, "has_is_null": "is_null" in vars(type(b.pool.null_block))}))
"""


def test_a_release_without_is_null_reads_every_pool_null_block_as_null():
    """0.8.x blocks have no ``is_null``: the adapter tells each pool's null block by identity. A divergence
    the matrix found on 0.8.5 (block 0 shown held after it was freed) was ours: only the first pool's null
    block was marked, so every later backend in the same process read its null block as a held one."""
    venv = _venv()
    release = RELEASES[0]
    folder = matrix.install(release, venv, matrix.cache_root(None, "vllm"))
    out = subprocess.run([str(venv.python), "-c", TWO_BACKENDS], capture_output=True, text=True, timeout=TIMEOUT,
                         env=matrix._env(folder), cwd=str(folder))
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["tables"] == [[None, 1], [None, 1]], data  # block 0 freed (null) in both, block 1 held
