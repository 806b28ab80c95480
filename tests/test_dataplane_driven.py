"""The driven execution data plane (fuzz/engines/dataplane/driven.py; issue 34): a real engine driven in
its own order of schedule, write and free, every read of a step checked against the spec.

- TensorRT-LLM V2's order on the tests' fake manager (tests/trtllm_fake_manager.py, upstream's API):
  the spec's campaign is clean; each seeded bug is caught at a read it broke, and the same example
  with the spec's hooks passes (the bug, not the example, makes it diverge); an exception inside the
  engine is a divergence with its trace; the stored traces of real upstream (tests/regressions/driven/)
  replay clean on the fake, which is what makes them upstream's.
- SGLang's order on SGLang's own allocator, in the SGLang venv (scripts/sglang-venv), by a subprocess:
  the spec's campaign is clean and each seeded bug is caught at a read it broke.
- As backends (``dataplane:sglang``, ``dataplane:trtllm-v2``: :class:`~swafloor.fuzz.engines.dataplane.driven.DrivenBackend`):
  the names resolve to the driver's plane, not the torch wrapper; the fuzz machine's operations on it
  (TensorRT-LLM V2 on the fake; SGLang in its venv) pass under the spec, and each seeded bug planted in
  the record (the module's ``planted``) is caught at a read it broke, its trace saved and replayed to
  the same divergence and clean under the spec. SGLang's eviction plant needs a step of the request in
  flight when its next is scheduled (the overlap scheduler): its record draws ``k = 1``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from . import trtllm_fake_manager as fake
from swafloor.fuzz.backends import resolve
from swafloor.fuzz.engines.dataplane import driven as ordered
from swafloor.fuzz.engines.dataplane.execution import ExecutionDivergence
from swafloor.fuzz.engines.trtllm import driver as trt
from swafloor.fuzz.engines.trtllm.v2 import adapter_factory
from swafloor.fuzz.protocol import BackendRecord, Comparison, Operation, Part, Unsupported
from swafloor.fuzz.replay import replay
from swafloor.fuzz.runner import run_campaign
from swafloor.fuzz.trace import load
from swafloor.reference import AttentionLayer, Config
from swafloor.reference.hooks import ExecutionHooks

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "tests" / "regressions" / "driven"
SGLANG = Path(os.environ.get("SWAFLOOR_SGLANG_VENV") or ROOT / ".venv-sglang")
EXAMPLES = 120  # TensorRT-LLM's campaign on the fake (about 2 s)
SGLANG_EXAMPLES = 30
BACKEND_EXAMPLES = 40  # dataplane:trtllm-v2 on the fake through the fuzz machine (ci profile, seed 0)
SGLANG_BACKEND_EXAMPLES = 20  # dataplane:sglang in its venv under the spec (with the plants: about 25 s, SGLang's import included)
SGLANG_PLANT_EXAMPLES = 40  # each plant's cut (the eviction's is caught past example 25)


def _fake():
    return trt.driver_on(fake.module())


# ----------------------------------------------------------------------------- TensorRT-LLM V2 on the fake
def test_trtllm_order_spec_campaign_is_clean():
    result = ordered.campaign("trtllm-v2", None, EXAMPLES, make=_fake())
    assert result.divergence is None, (result.divergence, result.trace[-6:])
    assert result.examples == EXAMPLES


@pytest.mark.parametrize("name", sorted(ordered.BUGS["trtllm-v2"]))
def test_trtllm_order_seeded_bug_is_caught_at_a_read_it_broke(name):
    result = ordered.campaign("trtllm-v2", name, EXAMPLES, make=_fake())
    assert result.divergence is not None, f"{name} not caught in {EXAMPLES} examples"
    assert result.divergence.field.startswith("read["), result.divergence.field
    assert result.caught_where_fired(), (result.divergence.message, result.fired)
    # the same example under the spec's hooks passes: the bug made it diverge
    bug = ordered.BUGS["trtllm-v2"][name]
    plane, found = ordered._run_example(random.Random(f"trtllm-v2:0:{result.example}"), trt, _fake(),
                                        ExecutionHooks(), (), 50)
    assert found is None, found
    assert bug.what


def test_an_exception_inside_the_engine_is_a_divergence_with_its_trace():
    make = _fake()

    class Failing:
        """A driver whose engine raises when a step's tokens are committed (composition, not a subclass)."""

        def __init__(self, config, hooks=()):
            self.inner = make(config, hooks)
            self.layout = self.inner.layout

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def executed(self, rid, start, end):
            raise RuntimeError(f"commit of {rid} failed")

    plane, found = ordered._run_example(random.Random("trtllm-v2:0:0"), trt, Failing, ExecutionHooks(), (), 50)
    assert isinstance(found, ExecutionDivergence) and found.field == "raised@execute"
    assert "RuntimeError: commit of" in found.message and plane.trace[-1].startswith(f"{found.event}: execute()")


def test_a_read_of_another_requests_token_names_slot_reader_and_writer():
    """A driver whose worker translates r1's positions through r0's page table (a wrong table, pages
    that are r0's): r0's next read finds r1's token where its own was, named with slot and writer."""
    make = _fake()

    class Aliased:
        def __init__(self, config, hooks=()):
            self.inner = make(config, hooks)
            self.layout = self.inner.layout

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def locate_positions(self, rid, lc, positions):
            return self.inner.locate_positions("r0", lc, positions)

    config = trt.draw_config(random.Random(0))
    config = Config(2, [AttentionLayer(4)], slots=(16,), semantics=config.semantics)
    plane = ordered.DrivenPlane(config, Aliased(config))
    assert plane.open("r0") and plane.open("r1")
    plane.schedule("r0", 2)
    plane.execute()
    plane.schedule("r1", 2)
    plane.execute()  # r1 writes its tokens 0 and 1 into r0's slot, and reads them back: no divergence yet
    plane.schedule("r0", 1)
    with pytest.raises(ExecutionDivergence) as err:
        plane.execute()
    found = err.value
    assert found.field == "read[r0][0][2]" and found.step == 2
    assert "reads position 0" in found.message and "another token than token 0 of 'r0'" in found.message
    assert "written by request 'r1' at step 1" in found.message and "get_base_page_indices(0)[0]" in found.message
    plane.driver.dispose()


def test_the_cli_refuses_bad_input_in_one_line(capsys):
    assert ordered.main(["nosuch"]) == 2
    assert ordered.main(["trtllm-v2", "no-such-bug"]) == 2
    assert ordered.main(["trtllm-v2", "--examples", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "engine" in err[0] and "'nosuch'" in err[0]
    assert "'no-such-bug'" in err[1] and "--examples" in err[2] and "0" in err[2]


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("trtllm-*.json")), ids=lambda p: p.stem)
def test_upstream_trtllm_traces_replay_clean_on_the_fake(path):
    """Each divergence of real upstream has its verdict and its trace; the same example on the fake
    manager (upstream's API, the spec's behaviour) passes: the divergence is upstream's, not the plane's."""
    data = json.loads(path.read_text())
    assert data["verdict"] and data["trace"] and data["field"] and data["command"]
    plane, found = ordered._run_example(random.Random(f"trtllm-v2:{data['seed']}:{data['example']}"), trt, _fake(),
                                        ExecutionHooks(), (), 50)
    assert found is None, found
    events = [line.split(" -> ")[0] for line in data["trace"] if line[0].isdigit()]
    assert [line.split(" -> ")[0] for line in plane.trace[: len(events)]] == events  # the same events, to upstream's divergence
    assert data["field"].startswith("raised@") and data["event"] == len(events)


# ----------------------------------------------------------------------------- SGLang, in its venv
def _sglang_python() -> Path:
    """The SGLang venv's python; without the venv a skip, a failure under CI."""
    python = SGLANG / "bin" / "python"
    if not (python.exists() and (SGLANG / ".swafloor-sglang-complete").exists()):
        message = f"the SGLang venv {SGLANG} is missing or incomplete: make it with scripts/sglang-venv"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


def test_sglang_order_spec_is_clean_and_each_seeded_bug_caught():
    python = _sglang_python()
    env = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([str(python), "-m", "swafloor.fuzz.engines.dataplane.driven", "sglang", "--examples",
                           str(SGLANG_EXAMPLES), "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    results = {r["name"]: r for r in json.loads(done.stdout)}
    assert results["spec"]["caught"] is None and results["spec"]["examples"] == SGLANG_EXAMPLES
    for name in ordered.BUGS["sglang"]:
        caught = results[name]["caught"]
        assert caught is not None and caught["field"].startswith("read[") and results[name]["at_firing"], results[name]


# ----------------------------------------------------------------------------- as backends
def _driven_trtllm() -> BackendRecord:
    """``dataplane:trtllm-v2`` over the fake manager: the registered record's path, the fake's driver."""
    return ordered.wrap_driven(BackendRecord("trtllm-v2", adapter_factory(fake.module())), "dataplane:trtllm-v2",
                               "cpu", make=_fake())


@pytest.mark.parametrize("name", ["sglang", "sglang-lazy", "trtllm-v2"])
def test_a_driven_engines_dataplane_name_is_its_drivers_plane_not_the_torch_wrapper(name, monkeypatch):
    monkeypatch.delenv("SWAFLOOR_TRTLLM_SOURCE", raising=False)
    record = resolve(f"dataplane:{name}", device="cpu")
    caps = record.capabilities
    assert record.name == f"dataplane:{name}" and record.inner.name == name and record.event_order is None
    assert caps.observations == {Part.OUTCOME: Comparison.AT_LEAST}
    assert (Operation.SUSPEND in caps.operations) == (name != "trtllm-v2")  # V2 drops a step by an abort only
    assert any("engine's own order" in note for note in caps.notes)
    if name == "trtllm-v2":  # built: the driver's own refusal without a source (the torch wrapper builds the inner)
        with pytest.raises(Unsupported, match="source folder"):
            record.factory(Config(4, [AttentionLayer(4)]))
    plain = resolve("dataplane:reference", device="cpu")  # every other name keeps the torch wrapper
    assert type(plain.factory(Config(4, [AttentionLayer(4)]))).__name__ == "DataPlaneBackend"


def test_trtllm_backend_path_spec_is_clean():
    result = run_campaign(_driven_trtllm(), "reference", examples=BACKEND_EXAMPLES, seed=0, shrink=False, out_dir=None)
    assert result.result == "pass", result.divergence.describe() if result.divergence else result.retired
    assert result.examples == BACKEND_EXAMPLES and result.steps > 50 * BACKEND_EXAMPLES and result.served_swa > 0


@pytest.mark.parametrize("name", sorted(ordered.BUGS["trtllm-v2"]))
def test_trtllm_backend_path_catches_each_seeded_bug_at_a_read_it_broke_and_replays_it(name, monkeypatch, tmp_path):
    monkeypatch.setattr(ordered, "planted", ordered.BUGS["trtllm-v2"][name])
    record = _driven_trtllm()
    result = run_campaign(record, "reference", examples=BACKEND_EXAMPLES, seed=0, shrink=False, out_dir=tmp_path)
    found = result.divergence
    assert found is not None, f"{name} not caught in {BACKEND_EXAMPLES} examples"
    assert found.field.startswith("read[") and found.reason == "the backend's own check failed after the operation"
    message = found.backend.message
    assert "a read the seeded bug broke" in message and "plane event" in message and "step" in message
    assert "written by" in message or "nothing" in message  # the writer, or that there is none
    assert result.trace_file is not None and result.trace_file.exists()
    again = replay(load(result.trace_file), record)  # the saved trace, replayed: the same read diverges
    assert again.divergence is not None and again.divergence.field == found.field
    monkeypatch.setattr(ordered, "planted", None)  # under the spec the same trace runs clean
    assert replay(load(result.trace_file), record).divergence is None


SGLANG_BACKEND = r"""
import json, sys, tempfile, warnings
warnings.filterwarnings("ignore")
from swafloor.fuzz.backends import resolve
from swafloor.fuzz.engines.dataplane import driven
from swafloor.fuzz.replay import replay
from swafloor.fuzz.runner import run_campaign
from swafloor.fuzz.trace import load
examples, plant_examples, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rows = []
# the overlap scheduler's draw (a step of the request in flight when its next is scheduled: k = 1), which
# the eviction's plant needs; dataplane:sglang itself draws sglang's claim (k = 0)
overlap = driven.wrap_driven(resolve("sglang"), "dataplane:sglang", "cpu", in_flight_tokens=1)
for name in ["spec", *driven.BUGS["sglang"]]:
    driven.planted = driven.BUGS["sglang"].get(name)
    record, n = ("dataplane:sglang", examples) if name == "spec" else (overlap, plant_examples)
    r = run_campaign(record, "reference", examples=n, seed=0, shrink=False, out_dir=f"{out}/{name}")
    d = r.divergence
    row = {"name": name, "examples": r.examples, "field": d and d.field, "message": d and d.backend.message,
           "result": r.result}
    if d is not None:
        row["replayed"] = replay(load(r.trace_file), "dataplane:sglang").divergence.field
        driven.planted = None
        spec = replay(load(r.trace_file), "dataplane:sglang").divergence
        row["spec_replay"] = spec and spec.describe()
    rows.append(row)
print(json.dumps(rows))
"""


def test_sglang_backend_path_spec_is_clean_and_each_seeded_bug_caught_at_a_read_it_broke(tmp_path):
    python = _sglang_python()
    env = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore", "SWAFLOOR_DEVICE": "cpu"}
    done = subprocess.run([str(python), "-c", SGLANG_BACKEND, str(SGLANG_BACKEND_EXAMPLES), str(SGLANG_PLANT_EXAMPLES),
                           str(tmp_path)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["name"]: r for r in json.loads(done.stdout.strip().splitlines()[-1])}
    assert rows["spec"]["result"] == "pass" and rows["spec"]["examples"] == SGLANG_BACKEND_EXAMPLES, rows["spec"]
    for name in ordered.BUGS["sglang"]:
        row = rows[name]
        assert row["field"] is not None and row["field"].startswith("read["), row
        assert "a read the seeded bug broke" in row["message"] and "req_to_token" in row["message"], row
        assert row["replayed"] == row["field"] and row["spec_replay"] is None, row
