"""``vllm-admission``: vLLM's own admission path (``allocate_slots(..., full_sequence_must_fit=True)``) against
the model of its gate and the reference's rule (:mod:`swafloor.fuzz.engines.vllm.admission`), on the pinned
release, in the venv ``scripts/vllm-venv`` makes (a subprocess; in CI a missing venv fails, elsewhere it
skips).

- A bounded campaign (Hypothesis, seed 0) on the pinned release: no exception inside vLLM, nothing
  non-monotone, and every class it finds has a saved trace with a verdict
  (``tests/regressions/vllm-admission/*.json``); the over-charging class is counted, not hidden.
- Plants: vLLM's gate patched to charge one block more, or its cap dropped, is a divergence from the
  model at the saved example of that plant.
- Every saved trace checks itself without vLLM (the model and the rule still give the saved charges),
  and the pinned release's traces replay on vLLM (its threshold and classes as saved).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from swafloor.fuzz.engines.vllm import admission

ROOT = Path(__file__).resolve().parent.parent
from .vllm_venv import PYTHON, VENV, need_venv as _need_venv  # noqa: E402
TRACES = sorted((ROOT / "tests" / "regressions" / "vllm-admission").glob("vllm-admission-*.json"))
PINNED = "0.33.0"
EXAMPLES = 100
MODULE = "swafloor.fuzz.engines.vllm.admission"




def _python(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": ""}
    out = subprocess.run([str(PYTHON), "-m", MODULE, *args, "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _saved(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_there_are_saved_admission_traces():
    assert TRACES, "tests/regressions/ holds no vllm-admission trace"


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_saved_trace_checks_itself(path):
    saved = _saved(path)
    assert saved["kind"] == "vllm-admission" and saved["verdict"] and saved["why"]
    assert saved["class"] in admission.CLASSES and saved["class"] != "equal"
    case = saved["case"]
    if "plant" not in saved:
        k_first = admission.lookahead_of(case, saved.get("first_lookahead", "passed"))
        assert admission.model_charge(case, saved["capped"], saved.get("gated", True), k_first) == saved["model"]
    assert admission.rule_charge(case) == saved["rule"]


def test_classes_from_hand_computed_charges():
    # t=4, W=4, C=2, a long prompt: the cap ceil((4 - 1 + 2)/4) + 1 = 3 blocks, the rule's floor 2
    case = {"t": 4, "windows": [4], "P": 100, "C": 2, "k": 0}
    assert admission.model_charge(case, True) == 3 and admission.rule_charge(case) == 2
    assert admission.model_charge(case, False) == 25
    # with a full-attention group and k = 1: vLLM's gate cdiv(100, 4) = 25 more (the prompt, no drafts),
    # its first step cdiv(2 + 1, 4) = 1 a group: max(3 + 25, 1 + 1) = 28; the rule cdiv(100 + 1, 4) = 26 more
    both = {**case, "windows": [4, None], "k": 1}
    assert admission.model_parts(both, True) == (28, 2)
    assert admission.model_charge(both, True) == 28 and admission.rule_charge(both) == 2 + 26
    # drafts in the first step: t=1, W=1, P=10, C=2, k=2: the capped gate min(10, ceil(2/1) + 1) = 3, the
    # first step cdiv(2 + 2, 1) = 4: vLLM's charge 4; the rule's largest step max(2, 3) = 3, floor 3
    drafts = {"t": 1, "windows": [1], "P": 10, "C": 2, "k": 2}
    assert admission.model_parts(drafts, True) == (3, 4)
    assert admission.model_charge(drafts, True) == 4 and admission.rule_charge(drafts) == 3
    # no gate (before 0.19.1): the first step alone, cdiv(min(2, 10) + k, 1); the scheduler of 0.10.2-0.22.1
    # gives a fresh request no lookahead (k = 0 there: 2), 0.8.5-0.9.2 and 0.23.0 on give it k (4)
    assert admission.model_parts(drafts, True, gated=False) == (0, 4)
    assert admission.model_charge(drafts, True, False, admission.lookahead_of(drafts, "zero-when-fresh")) == 2
    assert admission.model_charge(drafts, True, False, admission.lookahead_of(drafts, "passed")) == 4
    assert admission.model_charge(drafts, False, True, admission.lookahead_of(drafts, "none")) == 10
    # the reference manager runs that lone request at the rule's 2 slots, not at 1
    assert admission.reference_completes(case, 2) and not admission.reference_completes(case, 1)


PINNED_TRACES = [p for p in TRACES if _saved(p)["release"] == PINNED]
PLANTS = [p for p in TRACES if "plant" in _saved(p)]


@pytest.fixture(scope="module")
def campaign():
    """One subprocess (vLLM imported once): the campaign, then every pinned trace replayed."""
    _need_venv()
    return _python("--examples", str(EXAMPLES), "--seed", "0", "--replay", *map(str, PINNED_TRACES))


def test_pinned_release_has_only_traced_classes(campaign):
    assert campaign["version"] == PINNED, campaign
    assert campaign["capped"], "the pinned release's coordinator takes apply_admission_cap"
    counts = campaign["counts"]
    assert campaign["examples"] >= EXAMPLES * 0.9, campaign["examples"]
    assert counts["error"] == counts["non-monotone"] == counts["over-charges-run-incomplete"] == 0, \
        campaign["examples_by_class"]
    assert counts["equal"] >= campaign["examples"] // 5, counts
    traced = {_saved(p)["class"] for p in PINNED_TRACES if "plant" not in _saved(p)}
    found = {name for name, n in counts.items() if n and name != "equal"}
    assert found <= traced, (found - traced, {k: campaign["examples_by_class"][k] for k in found - traced})


def test_the_over_charging_class_is_counted(campaign):
    """The refutation of vllm-capped-gate-admits-at-chunk-floor, found in vLLM itself: counted (a
    number in the report), each one a refusal at a pool where the reference's lone run completed."""
    assert campaign["counts"]["over-charges"] > 0, campaign["counts"]
    ex = campaign["examples_by_class"]["over-charges"]
    assert ex["vllm"] > ex["rule"] and ex["reference_completes_at"] == ex["vllm"] - 1


def test_there_are_plant_traces():
    assert {_saved(p)["plant"] for p in PLANTS} == {"extra-block", "no-cap"}


def test_pinned_traces_replay_on_vllm(campaign):
    """Each saved trace on the pinned release: vLLM's threshold and the class as saved. A plant's trace
    replays with the plant in (vLLM's gate patched), where it must be a divergence from the model; the
    same case without the plant matches the model: the plant, not the case, makes the divergence."""
    replays = {r["trace"]: r for r in campaign["replays"]}
    assert set(replays) == {p.name for p in PINNED_TRACES}
    for path in PINNED_TRACES:
        saved, got = _saved(path), replays[path.name]
        assert got["vllm"] == saved["vllm"] and saved["class"] in got["classes"], (path.name, got)
        if "plant" in saved:
            assert {"model-above", "model-below"} & set(got["classes"]), (path.name, got)
            assert got["clean"]["vllm"] == got["model"] and "model-below" not in got["clean"]["classes"] \
                and "model-above" not in got["clean"]["classes"], (path.name, got)


#: The older release whose traces replay in CI (issue 33): 0.13.0 has no full-sequence gate (its scheduler
#: admits when the first step's allocate_slots returns blocks) and gives a fresh request no lookahead.
OLDER = "0.13.0"


def test_an_older_release_replays_without_a_gate():
    """vLLM 0.13.0's own ``KVCacheManager.allocate_slots`` (no ``full_sequence_must_fit``, no
    ``can_fit_full_sequence``), the release installed by the matrix's own code: the inspection finds no gate and
    the scheduler's ``0 if request.num_computed_tokens == 0`` lookahead, and each of its saved traces (one with
    k > 0, where asking k lookahead slots would admit at a larger pool) gives vLLM's threshold as saved, equal to
    the model of the first step alone, and its class."""
    from swafloor.fuzz import matrix

    _need_venv()
    paths = [p for p in TRACES if _saved(p)["release"] == OLDER]
    assert paths and any(_saved(p)["case"]["k"] for p in paths), paths
    venv = matrix.find_venv(str(VENV), matrix.engine_named("vllm"))
    folder = matrix.install(OLDER, venv, matrix.cache_root(None, "vllm"))
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([str(PYTHON), "-m", MODULE, "--examples", "0", "--json", "--replay", *map(str, paths)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["version"] == OLDER, report
    replays = {r["trace"]: r for r in report["replays"]}
    for path in paths:
        saved, got = _saved(path), replays[path.name]
        assert saved["gated"] is False and saved["first_lookahead"] == "zero-when-fresh", path.name
        assert got["vllm"] == saved["vllm"] == got["model"] and saved["class"] in got["classes"], (path.name, got)
