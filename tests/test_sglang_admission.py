"""``sglang-admission``: SGLang's own ``PrefillAdder.add_one_req`` (its ``SWAPrefillBudget``) against the model
of its gate and the reference's rule (:mod:`swafloor.fuzz.engines.sglang.admission`), on the pinned release,
in the venv ``scripts/sglang-venv`` makes (a subprocess; in CI a missing venv fails, elsewhere it skips).

- A bounded campaign (Hypothesis, seed 0) on the pinned release: SGLang's threshold equals the model of its
  gate on every case (``peers.sglang_prefill_budget_blocks``, exact), no exception inside SGLang, nothing
  non-monotone, and every class it finds has a saved trace with a verdict
  (``tests/regressions/sglang-admission/*.json``); the over-charging class is counted, not hidden.
- The plant (SGLang's reservation asking one page more) is a divergence from the model at its saved case.
- Every saved trace checks itself without SGLang (the model and the rule still give the saved charges), and
  replays on SGLang (its threshold and class as saved).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from swafloor.fuzz.engines.sglang import admission
from swafloor.reference import peers

from .sglang_venv import PYTHON, VENV, need_venv as _need_venv

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "tests" / "regressions" / "sglang-admission").glob("sglang-admission-*.json"))
PINNED = "0.5.23"
EXAMPLES = 60
MODULE = "swafloor.fuzz.engines.sglang.admission"


def _saved(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_there_are_saved_admission_traces():
    assert {_saved(p)["class"] for p in TRACES} >= {"over-charges", "minimum-above-rule", "admits-below-rule",
                                                     "admits-shrunk-chunk", "model-below"}


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_saved_trace_checks_itself(path):
    saved = _saved(path)
    assert saved["kind"] == "sglang-admission" and saved["why"]
    assert saved["class"] in admission.CLASSES and saved["class"] != "equal"
    assert saved["verdict"] == admission.CLASSES[saved["class"]]
    case, gate = saved["case"], saved.get("gate", "prefill-budget")
    assert gate in admission.GATES
    assert admission.model_charge(case, gate) == saved["model"] and admission.rule_charge(case) == saved["rule"]
    # the start-up's least pool where the release has it (0.5.16 on), else 1 page
    assert saved["sglang_minimum"] in (peers.sglang_min_swa_pages(case["t"], case["W"]), 1)
    # a class of comparison (a) carries the gate's form where the form is an older one
    base = saved["class"].removesuffix(f"-{gate}")
    assert base == saved["class"] or admission.named(base, gate) == saved["class"]
    if "plant" not in saved:  # the model is exact on every unplanted trace
        assert saved["sglang"] == saved["model"]


def test_charges_by_hand():
    # t=2, W=2 (SGLang's w = 1), P=1, C=2, O=1: the prompt paged to 2 tokens; the reservation
    # max(2 - 1, 0) + min(2 + 1, 1) + 2 = 4 tokens, strictly below the free ones: 3 pages; the chunk cut
    # needs min(1, 1) + 2 + 2 = 5 tokens free: 3 pages. The rule: ceil((2 + 1 - 2)/2) + 1 = 2; SGLang's
    # start-up accepts 2 pages (1 + 2 < 4).
    assert peers.sglang_swa_kv_tokens(2, 2, 2, 1, 2) == 4
    assert peers.sglang_prefill_budget_parts(2, 2, 1, 2, 1) == (3, 3)
    assert peers.sglang_prefill_budget_blocks(2, 2, 1, 2, 1) == 3
    assert peers.sglang_min_swa_pages(2, 2) == 2
    case = {"t": 2, "W": 2, "P": 1, "C": 2, "O": 1}
    assert admission.rule_charge(case) == 2 and admission.reference_completes(case, 2)
    # t=1, W=3, P=140, C=3, O=8: whole 5 pages (max(3 - 2, 0) + 2 + 1 = 4 tokens, strictly below); the
    # chunk cut at min(8, 2) + 1 + 1 = 4 tokens: 4 pages; unchunked, the whole prompt: 138 + 2 + 1 + 1 = 142
    assert peers.sglang_prefill_budget_parts(1, 3, 140, 3, 8) == (5, 4)
    assert peers.sglang_prefill_budget_blocks(1, 3, 140, 3, 8, False) == 142
    # W = 1 (SGLang's window 0): the whole run, P' + O + t tokens
    assert peers.sglang_swa_kv_tokens(4, 1, 8, 3, 4) == 15


def test_older_gates_by_hand():
    """The models of the older releases' gates (issue 33), each on points computed by hand from the release's
    source (schedule_policy.py): 0.5.16's budget max(min(P', C) - w, 0) + w + t (a whole window, w = W - 1),
    0.5.7's whole run P + O against the SWA pool's free tokens."""
    # 0.5.16, t=2, W=5 (w=4), P=7 (paged 8), C=4: whole max(4 - 4, 0) + 4 + 2 = 6 tokens, strictly below: 4 pages;
    # the chunk cut needs 4 + 2 + 2 = 8 tokens free: 4 pages. Unchunked: max(8 - 4, 0) + 4 + 2 = 10: 6 pages
    assert peers.sglang_window_headroom_tokens(2, 5, 4) == 6
    assert peers.sglang_window_headroom_parts(2, 5, 7, 4) == (4, 4)
    assert peers.sglang_window_headroom_blocks(2, 5, 7, 4) == 4
    assert peers.sglang_window_headroom_blocks(2, 5, 7, 4, False) == 6
    # t=1, W=3 (w=2), P=140, C=3: whole max(3 - 2, 0) + 2 + 1 = 4 tokens: 5 pages; the cut 2 + 1 + 1: 4 pages,
    # whatever O is; 0.5.17 on caps the headroom at the run's own window: O = 1 cuts at 1 + 1 + 1, 3 pages
    assert peers.sglang_window_headroom_parts(1, 3, 140, 3) == (5, 4)
    assert peers.sglang_prefill_budget_parts(1, 3, 140, 3, 1) == (5, 3)
    # 0.5.7, t=1, P=110, O=8: refused while 118 >= the free tokens: 119 pages, whatever W is
    assert peers.sglang_whole_run_blocks(1, 110, 8) == 119
    # 0.5.13.post1-0.5.15.post1: the prompt unrounded, max(min(P, C), w) + t: t=4, W=3, P=5, C=8:
    # max(5, 2) + 4 = 9 tokens, 10 free: 3 pages, no chunk cut. 0.5.16's page-rounded prompt: max(8 - 2, 0) + 2 + 4
    # = 12 tokens, 13 free: 4 pages whole; its cut at 2 + 4 + 4 tokens free: 3 pages (unchunked: 4)
    assert peers.sglang_admission_blocks(4, 3, 5, 8) == 3
    assert peers.sglang_window_headroom_parts(4, 3, 5, 8) == (4, 3)
    assert peers.sglang_window_headroom_blocks(4, 3, 5, 8, False) == 4
    # the same case through each gate's model: 0.5.17 on, max(8 - 2, 0) + min(8 + 1, 2) + 4 = 12 (4 pages) or the
    # cut at min(1, 2) + 4 + 4 (3 pages); 0.5.7: 5 + 1 + 1 tokens, 2 pages
    case = {"t": 4, "W": 3, "P": 5, "C": 8, "O": 1}
    assert [admission.model_charge(case, g) for g in admission.GATES] == [3, 3, 3, 3, 2]
    assert admission.model_charge({**case, "C": None}, "window-headroom") == 4
    assert admission.named("over-charges", "run-window") == "over-charges"
    assert admission.named("over-charges", "window-floor") == "over-charges-window-floor"


PINNED_TRACES = [p for p in TRACES if _saved(p)["release"] == PINNED]


@pytest.fixture(scope="module")
def campaign():
    """One subprocess (SGLang imported once): the campaign, then every pinned trace replayed."""
    _need_venv()
    env = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([str(PYTHON), "-m", MODULE, "--examples", str(EXAMPLES), "--seed", "0", "--json",
                          "--replay", *map(str, PINNED_TRACES)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_pinned_release_matches_the_model_with_only_traced_classes(campaign):
    assert campaign["version"] == PINNED, campaign
    counts = campaign["counts"]
    assert campaign["examples"] >= EXAMPLES * 0.9, campaign["examples"]
    assert counts["model-above"] == counts["model-below"] == 0, campaign["examples_by_class"]
    assert counts["error"] == counts["non-monotone"] == counts["over-charges-run-incomplete"] == 0, \
        campaign["examples_by_class"]
    assert counts["equal"] >= campaign["examples"] // 10, counts
    traced = {_saved(p)["class"] for p in PINNED_TRACES if "plant" not in _saved(p)}
    found = {name for name, n in counts.items() if n and name != "equal"}
    assert found <= traced, (found - traced, {k: campaign["examples_by_class"][k] for k in found - traced})


def test_the_over_charging_class_is_counted(campaign):
    """The refutation of sglang-prefill-budget-admits-at-chunk-floor, found in SGLang itself: counted, each
    a refusal at a pool SGLang's start-up accepts where the reference's lone run completed."""
    assert campaign["counts"]["over-charges"] > 0, campaign["counts"]
    ex = campaign["examples_by_class"]["over-charges"]
    assert ex["sglang"] > max(ex["rule"], ex["sglang_minimum"]) and ex["reference_completes_at"] == ex["sglang"] - 1
    # what it costs, one-sided (pages above the larger of the rule's charge and the start-up's least pool)
    cost = campaign["over_charge"]["over-charges"]
    assert cost["most"] >= ex["sglang"] - max(ex["rule"], ex["sglang_minimum"]) >= 1
    assert cost["pages"] >= campaign["counts"]["over-charges"], cost


def test_pinned_traces_replay_on_sglang(campaign):
    """Each saved trace of the pinned release: SGLang's threshold and the class as saved. The plant's trace
    replays with the plant in (a divergence from the model); the same case without it matches the model.
    (0.5.22's traces, the same classes on the same cases, are the classes ``swafloor matrix sglang --backends
    sglang-admission`` finds on that release, which it installs; they check themselves above.)"""
    replays = {r["trace"]: r for r in campaign["replays"]}
    assert set(replays) == {p.name for p in PINNED_TRACES}
    for path in PINNED_TRACES:
        saved, got = _saved(path), replays[path.name]
        assert got["sglang"] == saved["sglang"] and saved["class"] in got["classes"], (path.name, got)
        if "plant" in saved:
            assert got["clean"]["sglang"] == got["model"] and not {"model-above", "model-below"} & set(
                got["clean"]["classes"]), (path.name, got)


#: The older release whose traces replay in CI (0.5.16: the gate with a whole window of headroom and the chunk
#: cut; the other older gates' traces check themselves above, and ``swafloor matrix sglang --backends
#: sglang-admission`` replays every release's classes).
OLDER = "0.5.16"


def test_an_older_gate_replays_on_its_release():
    """Issue 33: SGLang 0.5.16's own ``add_one_req`` (its ``UnifiedRadixCache`` with the older prefix-cache API,
    its ``PrefillAdder._swa_budget_for_req`` and ``_swa_chunk_cap``), the release installed by the matrix's own
    code: each of its saved traces gives SGLang's threshold as saved, equal to the model of that gate
    (``peers.sglang_window_headroom_blocks``), and its class. In the same subprocess, 5 cases (seed 0) with the
    plant ``extra-page`` in that release's ``PrefillAdder._swa_budget_for_req``: the comparison with the
    model catches it (``model-below``; measured: 3 of the 5)."""
    from swafloor.fuzz import matrix

    _need_venv()
    paths = [p for p in TRACES if _saved(p)["release"] == OLDER]
    assert len(paths) >= 3, paths
    venv = matrix.find_venv(str(VENV), matrix.engine_named("sglang"))
    folder = matrix.install(OLDER, venv, matrix.cache_root(None, "sglang"))
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([str(PYTHON), "-m", MODULE, "--examples", "5", "--seed", "0", "--plant", "extra-page",
                          "--json", "--replay", *map(str, paths)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["version"] == OLDER and report["gate"] == "window-headroom", report
    assert report["plant"] == ["extra-page"] and report["counts"]["model-below"] >= 1, report["counts"]
    assert report["counts"]["error"] == 0, report["examples_by_class"].get("error")
    replays = {r["trace"]: r for r in report["replays"]}
    for path in paths:
        saved, got = _saved(path), replays[path.name]
        assert saved["gate"] == "window-headroom", path.name
        assert got["sglang"] == saved["sglang"] == got["model"] and saved["class"] in got["classes"], (path.name, got)
