"""LMDeploy's block managers under differential test, in the venv ``scripts/lmdeploy-venv`` makes.

LMDeploy is never installed where swafloor's own tests run: the tests run the LMDeploy venv's python
in one subprocess (``python -m swafloor.fuzz.engines.lmdeploy.check``). Without that venv they fail in
CI (env ``CI=true``) and are skipped, with the command that makes it, elsewhere.

- The ci campaign (seed 0, bounded) on the pinned release passes its 300 examples now that both
  semantics classes are modelled (a refused step keeps its stale blocks: ``refused_keeps_stale``; a step
  that needs no new block calls no allocate and keeps them: ``stale_freed_on_growth``) and the adapter
  calls the block managers as the release's decode schedule does: each modelled class's trace matches
  under the semantics the backend claims; the engine bugs are pinned by their traces.
- Two bugs planted in LMDeploy's own code (out-of-window blocks never dropped; a held block handed out
  again) are each a divergence at the step the plant first changed what LMDeploy did.
- Every regression trace replays to its stored divergence, values included, in its class; the one where
  LMDeploy's allocator raises (``MemoryError`` after ``can_allocate`` said yes) is a divergence naming
  the exception and the step it came from, not a crash of ours.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("SWAFLOOR_LMDEPLOY_VENV") or ROOT / ".venv-lmdeploy")
PYTHON = VENV / "bin" / "python"
REGRESSIONS = ROOT / "tests" / "regressions" / "lmdeploy"
TIMEOUT = 600  # seconds for the subprocess; a hang still ends
EXAMPLES = 300  # the ci profile's first 300 (the campaign passes them on 0.18.0)
PLANTS = ("window-never-freed", "hands-out-held")
COMPARED = ("step_index", "field", "reference", "backend")


def _need_venv() -> None:
    if PYTHON.exists() and (VENV / ".swafloor-lmdeploy-complete").exists():
        return
    message = f"the LMDeploy venv {VENV} is missing or incomplete: make it with scripts/lmdeploy-venv"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    _need_venv()
    out = tmp_path_factory.mktemp("lmdeploy")
    args = [str(PYTHON), "-m", "swafloor.fuzz.engines.lmdeploy.check", "--examples", str(EXAMPLES), "--out", str(out),
            "--regressions", str(REGRESSIONS)]
    for plant in PLANTS:
        args += ["--plant", plant]
    env = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(args, cwd=out, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_ci_campaign_passes_on_the_pinned_release(checked):
    campaign = checked["campaign"]
    # both semantics classes modelled, the decode schedule's call pattern followed: no divergence in 300
    # examples (the plants below show the same campaign catching a changed LMDeploy)
    assert campaign["result"] == "pass" and campaign["examples"] == EXAMPLES, json.dumps(campaign)[:3000]
    assert campaign["discard_rate"] <= 0.05, campaign


def test_a_step_needing_no_block_calls_no_allocate_and_keeps_the_stale_blocks(checked):
    """The class found in the matrix (0.2.5), on the pinned release: LMDeploy's allocate is not called at
    the step (the decode schedule skips a sequence needing no block) and block 0 stays held."""
    got = {Path(r["trace"]).name: r for r in checked["regressions"]}["lmdeploy-step-without-allocation-keeps-stale.json"]
    d = got["divergence"]
    assert d["refused"] is False and d["allocated"] is False, d
    assert d["field"] == "tables[r0][0][0]" and d["reference"] is None and d["backend"] == 0, d


def test_the_modelled_class_matches_under_the_claimed_semantics_and_no_other_does(checked):
    """Each regression trace replayed with the semantics the backend claims now: the two modelled classes'
    (stored under the semantics without their option) match, every engine bug still diverges where it did."""
    replays = {Path(r["trace"]).name: r for r in checked["regressions"]}
    modelled = ("lmdeploy-refused-step-keeps-stale.json", "lmdeploy-step-without-allocation-keeps-stale.json")
    for name in modelled:
        assert replays[name]["under_claimed"] is None, name
    for name, got in replays.items():
        if name not in modelled:
            assert got["under_claimed"] is not None, name
            assert {k: got["under_claimed"][k] for k in COMPARED} == {k: got["divergence"][k] for k in COMPARED}, name


@pytest.mark.parametrize("plant", PLANTS)
def test_a_bug_planted_in_lmdeploy_is_a_divergence_at_the_step_it_fires(checked, plant):
    found = checked["plants"][plant]
    assert found["result"] == "divergence" and found["fired_in_campaign"] > 0, found
    d = found["divergence"]
    assert d is not None and found["first_fired"] == d["step_index"], found
    assert d["step"]["op"] == "resize" and "crash" not in json.dumps(d["backend"]), d


def test_every_regression_trace_gives_its_stored_divergence_in_its_class(checked):
    replays = {Path(r["trace"]).name: r for r in checked["regressions"]}
    files = sorted(p.name for p in REGRESSIONS.glob("*.json"))
    assert sorted(replays) == files and len(files) == 4
    for name in files:
        stored = json.loads((REGRESSIONS / name).read_text())
        got = replays[name]
        assert stored["expect"] == "divergence" and stored["found"]["verdict"], name
        assert {k: got["divergence"][k] for k in COMPARED} == {k: stored["divergence"][k] for k in COMPARED}, name
        assert name == f"lmdeploy-{got['class']}.json", (name, got["class"])


def test_an_exception_in_lmdeploys_allocator_is_a_divergence_with_its_input(checked):
    got = {Path(r["trace"]).name: r for r in checked["regressions"]}["lmdeploy-allocate-raises-after-can-allocate.json"]
    d = got["divergence"]
    assert d["field"] == "outcome" and d["reference"] == {"kind": "ok"}
    assert d["backend"] == {"kind": "crash", "message": "MemoryError: No enough free memory blocks."}
    assert d["step"] == {"op": "resize", "request": "r0", "capacity": 6, "history": 4}


def test_outside_its_venv_the_backend_refuses_cleanly_naming_the_script():
    import importlib.util

    from swafloor.fuzz.backends import resolve
    from swafloor.fuzz.protocol import Unsupported
    from swafloor.reference import AttentionLayer, Config

    config = Config(4, [AttentionLayer(window=5)])
    if importlib.util.find_spec("lmdeploy") is not None:  # run inside LMDeploy's venv: it builds
        assert resolve("lmdeploy").factory(config) is not None
        return
    with pytest.raises(Unsupported, match="scripts/lmdeploy-venv"):
        resolve("lmdeploy").factory(config)


@pytest.mark.parametrize("body, every_step", [
    # _schedule_decoding allocating for every running sequence (0.4.2-0.11.1)
    ("    def _schedule_decoding(self, prealloc_size=0):\n        for seq in running:\n"
     "            self.block_manager.allocate(seq, prealloc_size)\n", True),
    # ... skipping a sequence that needs no block (0.2.5-0.4.1)
    ("    def _schedule_decoding(self):\n        def _try_append_slot(seq):\n"
     "            if self.block_manager.num_required_blocks(seq) == 0:\n                return True\n", False),
    # schedule_running skipping it (0.12.0 on), _schedule_decoding still allocating for every sequence
    ("    def _schedule_decoding(self, prealloc_size=0):\n        for seq in running:\n"
     "            self.block_manager.allocate(seq, prealloc_size)\n\n"
     "    def schedule_running(self, running, num_required_tokens=1, prealloc_size=1):\n        for seq in running:\n"
     "            num_required_blocks = self.block_manager.num_required_blocks(seq, num_required_tokens)\n"
     "            if num_required_blocks == 0:\n                continue\n", False),
])
def test_whether_every_step_allocates_is_read_from_the_release_scheduler(tmp_path, body, every_step):
    """Hand-written scheduler texts of each shape (not LMDeploy's files): compat reads the decode schedule."""
    from swafloor.fuzz.engines.lmdeploy.compat import allocates_every_step

    folder = tmp_path / "pytorch" / "paging"
    folder.mkdir(parents=True)
    (folder / "scheduler.py").write_text("class Scheduler:\n\n" + body)
    assert allocates_every_step(str(tmp_path)) is every_step
    assert allocates_every_step(str(tmp_path / "elsewhere")) is False  # no scheduler file: taken as skipping
