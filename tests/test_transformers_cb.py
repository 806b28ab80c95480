"""transformers' continuous-batching paged cache (``transformers-cb``) under differential test, in the
venv ``scripts/transformers-venv`` makes (transformers 5.25.0).

transformers' continuous batching is never imported where swafloor's own tests run: each test here runs
the transformers venv's python in a subprocess. Without that venv the tests fail in CI (env ``CI=true``)
and are skipped, with the command that makes it, elsewhere.

- A bounded ci campaign (seed 0, its first :data:`EXAMPLES` examples), compared with the reference under
  the ring (``Semantics.window_ring``): outcome, pool use and tables exactly, so no request is retired;
  every read and write index the allocators hand the attention, and physical identity, hold at every
  step; its only possible divergence is the sector class (docs/findings.md 12), which the engine with
  its sectors handed back does not show.
- The traces of tests/regressions/transformers-cb/ (their configs under the ring semantics the backend
  claims) replayed on the pinned release: the classes fixed upstream match the reference there, the
  sector class still diverges, at its stored step.
- Plants, each caught at the step it first fired: a read index one token off, a window block never
  freed; an exception raised inside transformers' own code is a divergence (a crash of the engine)
  with its input saved and replayable.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("SWAFLOOR_TRANSFORMERS_VENV") or ROOT / ".venv-transformers")
PYTHON = VENV / "bin" / "python"
REGRESSIONS = ROOT / "tests" / "regressions" / "transformers-cb"
TIMEOUT = 900  # seconds for one subprocess; a hang still ends
EXAMPLES = 40  # the ci profile's first 40
PINNED = "5.25.0"


def _need_venv() -> None:
    if PYTHON.exists() and (VENV / ".swafloor-transformers-complete").exists():
        return
    message = f"the transformers venv {VENV} is missing or incomplete: make it with scripts/transformers-venv"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([str(PYTHON), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def test_the_venv_imports_the_pinned_release_and_its_sector_allocators():
    _need_venv()
    out = _run(["-c", "import transformers; from swafloor.fuzz.engines.transformers.backend import import_transformers as i; "
                      "print(transformers.__version__, i()['shape'])"])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [PINNED, "sectors"]


def test_bounded_ci_campaign_meets_only_the_sector_class(tmp_path):
    """The ci campaign's first EXAMPLES examples: every read, write and slot check holds until the first
    divergence, and that divergence is the sector class (docs/findings.md 12): an outcome the engine
    refuses where the reference serves, on a config with a window and full attention, which the same
    engine with its free sectors handed back before each allocation (the suggested fix) serves."""
    _need_venv()
    out = _run(["-m", "swafloor", "fuzz", "--backend", "transformers-cb", "--profile", "ci", "--examples", str(EXAMPLES),
                "--json", "--out", str(tmp_path)], tmp_path)
    report = json.loads(out.stdout)
    assert report["backend"] == "transformers-cb" and report["against"] == "reference"
    assert report["served"] > 0
    # outcome compared exactly (the ring modelled): nothing retires, and no one-sided limit applies
    assert report["retired"] == 0 and report["max_retired_share"] is None, report
    divergence = report.get("divergence")
    if divergence is None:  # the class not met within the examples: then nothing else was either
        assert report["result"] == "pass", report
        return
    assert divergence["field"] == "outcome" and divergence["backend"]["kind"] == "out-of-slots", divergence
    assert divergence["reference"]["kind"] == "ok", divergence
    trace = json.loads(Path(report["trace_file"]).read_text())
    windows = {layer["window"] for layer in trace["config"]["layers"]}
    assert None in windows and len(windows) == 2, trace["config"]
    fixed = _run(["-m", "swafloor", "replay", report["trace_file"], "--backend", "tests.transformers_plants:sectors_reclaimed",
                  "--json"])
    assert json.loads(fixed.stdout)["result"] == "match", fixed.stdout[-3000:] + fixed.stderr[-2000:]


TRACES = sorted(REGRESSIONS.glob("*.json"))
REPLAY = """
import json, sys
from swafloor.fuzz.replay import replay
from swafloor.fuzz.trace import load
for path in sys.argv[1:]:
    d = replay(load(path)).divergence
    print(json.dumps({"path": path, "divergence": None if d is None else d.to_dict()}))
"""


@pytest.fixture(scope="module")
def replays():
    """Every trace of tests/regressions/transformers-cb/ replayed on the pinned release, in one process."""
    _need_venv()
    out = _run(["-c", REPLAY, *map(str, TRACES)])
    assert out.returncode == 0, out.stderr[-3000:]
    return {Path(d["path"]).name: d["divergence"] for d in map(json.loads, out.stdout.strip().splitlines())}


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_regression_trace_on_the_pinned_release(path, replays):
    """A trace saved on its release (the file name's prefix): on the pinned release it diverges at its
    stored step and field when the class is still there (sectors), else it matches the reference."""
    stored = json.loads(path.read_text())
    got = replays[path.name]
    release = path.name.split("-")[0]
    if release == PINNED:
        assert got is not None, f"{path.name} no longer diverges on {PINNED}"
        assert (got["step_index"], got["field"]) == (stored["divergence"]["step_index"], stored["divergence"]["field"])
    else:
        assert got is None, f"{path.name}, fixed after {release}, diverges on {PINNED}: {got}"


PLANTS = ("read_one_token_off", "window_block_never_freed", "engine_raises")


@pytest.fixture(scope="module")
def plants(tmp_path_factory):
    """Each plant's campaign (ci profile, 150 examples) and the step it fired at, in one process."""
    _need_venv()
    out = _run(["-m", "tests.transformers_plants", "150", str(tmp_path_factory.mktemp("plants")), *PLANTS])
    assert out.returncode == 0, out.stderr[-4000:]
    return {d["plant"]: d for d in map(json.loads, out.stdout.strip().splitlines())}


@pytest.mark.parametrize("plant, field", [("read_one_token_off", "reads"), ("window_block_never_freed", "slots")])
def test_a_plant_is_caught_at_the_step_it_fires(plant, field, plants):
    got = plants[plant]
    divergence = got["report"]["divergence"]
    assert got["code"] == 1 and divergence is not None, got["report"]
    assert divergence["field"] == field and divergence["backend"]["kind"] == "check", divergence
    assert got["fired"] is not None and divergence["step_index"] == got["fired"], (divergence, got["fired"])


def test_an_exception_in_transformers_code_is_a_divergence_with_its_input(plants):
    got = plants["engine_raises"]
    divergence = got["report"]["divergence"]
    assert got["code"] == 1 and divergence is not None, got["report"]
    assert divergence["backend"]["kind"] == "crash" and "planted: write indices refused" in divergence["backend"]["message"]
    assert divergence["step_index"] == got["fired"]
    trace = json.loads(Path(got["report"]["trace_file"]).read_text())
    assert trace["steps"][divergence["step_index"]] == divergence["step"] and trace["config"]


def test_the_matrix_runs_transformers_cb_from_the_first_release_with_a_sliding_window_allocator():
    from swafloor.fuzz import matrix

    engine = matrix.engine_named("transformers")
    assert engine.releases[0] == "4.57.6" and engine.releases[-1] == PINNED and engine.backends == ("transformers-cb",)
    assert engine.venv_script == "scripts/transformers-venv" and matrix.cache_root(None, "transformers").name == "transformers"


@pytest.mark.parametrize("requires, pins", [
    ("huggingface-hub<1.0,>=0.34.0\nRequires-Dist: tokenizers<=0.23.0,>=0.22.0", ["huggingface_hub==0.36.0", "tokenizers==0.22.2"]),
    ("huggingface-hub<2.0,>=1.5.0\nRequires-Dist: tokenizers<=0.23.0,>=0.22.0", ["huggingface_hub==1.33.0", "tokenizers==0.22.2"]),
    ("huggingface-hub<3.0,>=2.4.0\nRequires-Dist: tokenizers<0.24.0,>=0.23.1", []),
])
def test_each_release_is_installed_with_the_hub_and_tokenizers_it_requires(tmp_path, requires, pins):
    from swafloor.fuzz.engines.transformers.matrix import _with_release

    meta = tmp_path / "transformers-9.9.9.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Name: transformers\nRequires-Dist: {requires}\nRequires-Dist: pytest; extra == 'x'\n")
    assert _with_release(tmp_path) == pins
