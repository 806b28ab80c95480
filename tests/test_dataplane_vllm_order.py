"""``dataplane:vllm-prefix`` (and ``-eagle``) in vLLM's own order of events (issue 34), in the venv
``scripts/vllm-venv`` makes (:mod:`swafloor.fuzz.engines.dataplane.ordered`, vLLM's order declared in
:mod:`swafloor.fuzz.engines.vllm.order`): the scheduler's calls at schedule time, KV written when the step
runs, a step dropped by a close, every read of a step checked against who wrote each slot position.

- The ci profile's first :data:`EXAMPLES` examples of ``dataplane:vllm-prefix`` and the first
  :data:`EAGLE_EXAMPLES` of ``dataplane:vllm-prefix-eagle`` (seed 0, every divergence class,
  :mod:`swafloor.fuzz.classes`) meet only classes that have a verdict and a trace in
  tests/regressions/dataplane-vllm/, and nothing else.
- Each of those traces replays to its divergence (step, field, both sides), names its class and verdict,
  and on the wrapped backend alone (no data plane) matches the reference: no count or table sees it.
- Seeded bugs of vLLM's side, planted as tests/vllm_plants.py plants them: vLLM's scheduler handing the
  worker no lookahead block (``lookahead-not-handed``) is a ``write-padding`` divergence at the operation
  where the step it was withheld for executes, that step scheduled where the plant fired; a worker mask one
  token late (``worker-mask-one-late``) is a ``read-outside-window`` divergence where it fires; a newly
  scheduled request freed before its first step runs, the hashes ``allocate_slots`` registered kept
  (``hashes-kept-after-drop``), is a ``read-unwritten`` divergence where a later hit's step reads that KV
  (seen later than the drop, where the read happens; the plain backend matches the reference there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_vllm import PYTHON, REPLAY, ROOT, TIMEOUT, _need_venv, _run  # noqa: F401

TRACES = sorted((ROOT / "tests" / "regressions" / "dataplane-vllm").glob("*.json"))
EXAMPLES = 60  # the ci profile's first 60 (CI's budget: 120 took 258 s wall on a machine loaded 9x over; 500 and 2000: docs/fuzzing-engines.md)
#: dataplane:vllm-prefix-eagle's cut (65 s wall on a machine loaded 9x over, of which importing vLLM most; its
#: read-other-token@commit class, first at example 3, now matches: 250 examples, docs/fuzzing-engines.md)
EAGLE_EXAMPLES = 20
PLANT_EXAMPLES = 150


def _classes_of_traces() -> dict[str, str]:
    """The divergence classes the traces that still diverge pin, with their verdicts."""
    out = {}
    for path in TRACES:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["expect"] == "divergence":
            out[data["found"]["class"]] = data["found"]["verdict"]
    return out


@pytest.mark.parametrize("backend,examples", [("dataplane:vllm-prefix", EXAMPLES),
                                              ("dataplane:vllm-prefix-eagle", EAGLE_EXAMPLES)])
def test_ci_cut_meets_only_classes_with_a_verdict(tmp_path, backend, examples):
    _need_venv()
    proc = _run(["-m", "swafloor", "fuzz", "--backend", backend, "--profile", "ci", "--examples",
                 str(examples), "--classes", "4", "--json", "--out", str(tmp_path)], tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    report = json.loads(stdout)
    assert report["backend"] == backend and (report["profile"], report["seed"]) == ("ci", 0), report
    assert not report["limited"], report["classes"]  # a last run found no other class
    met = {row["class"] for row in report["classes"]}
    verdicts = _classes_of_traces()
    assert met <= set(verdicts), (met, sorted(verdicts))
    assert report["targets"]["met"], report


def test_each_class_trace_replays_and_no_count_sees_it(tmp_path):
    _need_venv()
    assert TRACES, "no tests/regressions/dataplane-vllm/*.json"
    plain = []
    for path in TRACES:  # a divergence's steps on the wrapped backend alone
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["expect"] != "divergence":
            continue
        copy = tmp_path / f"plain-{path.name}"
        copy.write_text(json.dumps({**data, "backend": data["backend"].removeprefix("dataplane:"), "expect": "match",
                                    "divergence": None}), encoding="utf-8")
        plain.append(copy)
    proc = _run(["-c", REPLAY, *map(str, TRACES), *map(str, plain)], tmp_path)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr[-4000:]
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(TRACES) + len(plain)
    for row in rows[: len(TRACES)]:
        name = Path(row["file"]).name
        assert row["backend"] in ("dataplane:vllm-prefix", "dataplane:vllm-prefix-eagle"), name
        assert row["found"] and row["found"].get("class") and row["found"].get("verdict"), f"{name}: class and verdict"
        got, saved = row["divergence"], row["saved"]
        if row["expect"] == "match":
            assert got is None and row["steps_run"] == row["steps"], f"{name} diverges: {json.dumps(got)[:2000]}"
            continue
        assert got is not None, f"{name}: no longer diverges"
        keys = ("step_index", "field", "reference", "backend")
        assert {k: got[k] for k in keys} == {k: saved[k] for k in keys}, f"{name}: {json.dumps(got)[:2000]}"
    for row in rows[len(TRACES):]:  # no count, table or slot comparison sees what the data plane saw
        assert row["divergence"] is None and row["steps_run"] == row["steps"], row


def test_seeded_bugs_of_vllms_side_are_caught_at_their_step():
    _need_venv()
    from tests.test_vllm import _run as run_module

    proc = run_module(["-m", "tests.vllm_plants", str(PLANT_EXAMPLES), "lookahead-not-handed@dataplane:vllm-prefix-eagle",
                       "worker-mask-one-late@dataplane:vllm-prefix", "hashes-kept-after-drop@dataplane:vllm-prefix"], ROOT)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr[-4000:]
    lookahead, mask, kept = (json.loads(line) for line in stdout.splitlines() if line.startswith("{"))
    # the block withheld at the schedule where the plant fired; the draft write through no block where
    # that step executes (the first operation that runs it)
    assert lookahead["result"] == "divergence" and lookahead["field"].startswith("write-padding["), lookahead
    assert lookahead["replay_field"] == lookahead["field"] and "draft position" in lookahead["replay_message"], lookahead
    assert lookahead["scheduled_at"] == lookahead["fired_at"] is not None, lookahead
    assert lookahead["seen_at"] == lookahead["executed_at"] > lookahead["fired_at"], lookahead
    # the mask is applied when the step executes: seen where it fires
    assert mask["result"] == "divergence" and mask["field"].startswith("read-outside-window["), mask
    assert mask["replay_field"] == mask["field"] and mask["seen_at"] == mask["fired_at"] == mask["executed_at"], mask
    # the drop fires at a close; the hit's read of the KV it never wrote is where the reading step executes
    assert kept["result"] == "divergence" and kept["field"].startswith("read-unwritten["), kept
    assert kept["replay_field"] == kept["field"] and "nothing written" in kept["replay_message"], kept
    assert kept["fired_at"] is not None and kept["seen_at"] == kept["executed_at"] > kept["fired_at"], kept
