"""scripts/gpu-trtllm-check (``swafloor.fuzz.engines.trtllm.gpu_check``) on this CPU, against the fake
KVCacheManagerV2 (tests/trtllm_fake_manager.py): with the test-only switch that puts the CPU stand-in on
the "real" side too (every report says so, never a GPU result), the two sides agree; a difference
planted on the "real" side (the fake's ``no-rollback`` bug, chosen by the side's environment) exits 1
naming the step it fires at; without a device only the stand-in side runs and nothing is said to
agree; bad input is one line, exit 2; ``--require-gpu`` without a device is exit 3. About 20 s on one
core (three runs, each two side processes of a few examples)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from swafloor.fuzz.engines.trtllm import cuda_standin, gpu_check, whole

ROOT = Path(__file__).resolve().parent.parent

_PACKAGE_INIT = '''
"""A source folder written for this test: the fake manager's names. PLANTED: a seeded bug of the fake
on the side named here only (the check tells each side's process which it is, in SWAFLOOR_GPU_CHECK_SIDE)."""
import os
import tests.trtllm_fake_manager as _fake

BUGS = ["no-rollback"] if PLANTED and os.environ.get("SWAFLOOR_GPU_CHECK_SIDE") == PLANTED else []
BufferConfig = _fake.BufferConfig
AttentionLayerConfig = _fake.AttentionLayerConfig
SsmLayerConfig = _fake.SsmLayerConfig
GpuCacheTierConfig = _fake.GpuCacheTierConfig
HostCacheTierConfig = _fake.HostCacheTierConfig
KVCacheManagerConfig = _fake.KVCacheManagerConfig


class KVCacheManager(_fake.FakeKVCacheManager):
    def __init__(self, config):
        super().__init__(config, BUGS)
'''


def _source(tmp_path: Path, planted: str | None = None) -> Path:
    folder = tmp_path / "src" / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True)
    (folder / "__init__.py").write_text(f"PLANTED = {planted!r}\n" + _PACKAGE_INIT)
    (folder / "_life_cycle_registry.py").write_text("")
    (folder / "rawref" / "__init__.py").write_text("NULL = None\n")
    return folder


@pytest.fixture
def check(monkeypatch):
    """``gpu_check.main`` in this process (its sides are processes of their own), on a machine with no
    CUDA device whatever this one has; the package the parent loads to check the source is removed after."""
    pytest.importorskip("cuda.bindings", reason="needs cuda-bindings (a test extra)")
    monkeypatch.setattr(cuda_standin, "device_present", lambda: False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.delenv(gpu_check.CWD_ENV, raising=False)
    try:
        yield gpu_check.main
    finally:
        if "restore" in whole._STATE:
            whole._STATE.pop("restore")()
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]


def test_both_sides_on_the_stand_in_agree_and_say_it_is_not_a_gpu_result(check, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = check(["--trtllm-source", str(_source(tmp_path)), "--examples", "5", "--test-standin-as-real",
                  "--out", str(out), "--budget", "200"])
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 0 and report["exit_code"] == 0, text
    assert report["agree"] is True and report["gpu_result"] is False and report["test_standin_as_real"] is True
    assert "TEST ONLY" in report["result"] and "not a GPU result" in report["result"]
    assert "real: TEST ONLY, the CPU stand-in forced in place of the real driver (not a GPU result)" in text
    assert report["sides"]["real"]["header"]["driver"] == "standin"  # the record says which driver ran
    cmp = report["comparison"]
    assert cmp["complete"] and not cmp["differences"] and cmp["runs"]["campaign"][0] == cmp["runs"]["campaign"][1] >= 5
    assert cmp["runs"]["progress"] == [31, 31] and cmp["steps_compared"] > 500
    assert all(row["same"] for row in cmp["rows"]) and len(cmp["rows"]) == 1 + 30
    # each side's record holds the same runs, every observation included
    records = {s: gpu_check.read_record(Path(p)) for s, p in report["records"].items()}
    assert [r["config"] for r in records["standin"]["runs"]] == [r["config"] for r in records["real"]["runs"]]
    assert any(c["call"] == "observe()" for c in records["real"]["runs"][0]["calls"])


def test_a_difference_planted_on_the_real_side_exits_1_naming_the_step_it_fires_at(check, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = check(["--trtllm-source", str(_source(tmp_path, planted="real")), "--examples", "5",
                  "--test-standin-as-real", "--out", str(out), "--budget", "200"])
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 1 and report["agree"] is False and report["result"] == "DIFFER", text
    first = report["comparison"]["differences"][0]
    # Where no-rollback fires, read from the clean side's record: the first resize that returned False
    # (a failing resize keeps its new capacity on the planted side) in the first run with one.
    clean = gpu_check.read_record(Path(report["records"]["standin"]))
    fired = None
    for run in clean["runs"]:
        step = -1
        for call in run["calls"]:
            if call["call"] in ("observe()", "build", "dispose()"):
                continue
            step += 1
            if call["call"].startswith("resize(") and call.get("returned") == {"ok": False}:
                fired = (run["index"], step, call["call"])
                break
        if fired:
            break
    assert fired is not None, "the campaign drew no failing resize: the plant never fires"
    assert first["run"] == f"campaign run {fired[0]}" and first["step"] == fired[1] and first["after"] == fired[2]
    assert first["field"].startswith("observed[lengths]")  # the capacity kept: the part it breaks
    assert f"DIFFERENCE: campaign run {fired[0]}, at step {fired[1]} ({fired[2]})" in text
    assert report["comparison"]["rows"][0]["same"] is False  # the planted side diverges from the reference too


def test_without_a_device_only_the_stand_in_runs_and_nothing_is_said_to_agree(check, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = check(["--trtllm-source", str(_source(tmp_path)), "--examples", "2", "--out", str(out), "--budget", "200"])
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 0 and report["comparison"] is None and report["agree"] is None and report["gpu_result"] is False
    assert "NO CUDA DEVICE: only the stand-in side ran; nothing was compared" in text
    assert "agree" not in text.lower()
    assert list(report["records"]) == ["standin"]


def test_bad_input_is_one_line_and_no_gpu_with_require_gpu_is_exit_3(check, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SWAFLOOR_TRTLLM_SOURCE", raising=False)
    source = str(_source(tmp_path))
    for argv, message in [
        ([], "--trtllm-source: a kv_cache_manager_v2 folder is needed"),
        (["--trtllm-source", str(tmp_path / "none")], "--trtllm-source="),
        (["--trtllm-source", source, "--examples", "0"], "--examples=0"),
        (["--trtllm-source", source, "--budget", "10"], "--budget=10.0"),
        (["--trtllm-source", source, "--examples", "x"], "--examples"),
        (["--trtllm-source", source, "--require-gpu", "--test-standin-as-real"], "--test-standin-as-real"),
        (["--trtllm-source", source, "--out", str(tmp_path)], "--out="),
    ]:
        assert check(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, (argv, err)
    assert check(["--trtllm-source", source, "--require-gpu"]) == gpu_check.EXIT_NO_GPU
    err = capsys.readouterr().err.strip()
    assert "no CUDA device" in err and "\n" not in err


# --------------------------------------------------------------------------- parts, without processes
def _run(calls: list[dict], kind: str = "campaign") -> dict:
    return {"index": 1, "kind": kind, "config": {"tokens_per_block": 4}, "calls": calls}


def test_a_run_differing_in_what_a_call_returned_is_reported_at_its_step():
    same = [{"call": "observe()", "observed": {"pool_totals": [2]}},
            {"call": "create('r0', reused_history=0)", "returned": None},
            {"call": "resume('r0')", "returned": {"ok": True}}]
    a = _run(same + [{"call": "resize('r0', capacity=5, history=4)", "returned": {"ok": True}}])
    b = _run(same + [{"call": "resize('r0', capacity=5, history=4)", "returned": {"ok": False}}])
    found = gpu_check.compare_runs(a, b)
    assert found["step"] == 2 and found["after"] == "resize('r0', capacity=5, history=4)"
    assert found["field"] == "returned[ok]" and (found["standin"], found["real"]) == (True, False)
    assert gpu_check.compare_runs(a, a) is None
    # after building, before any operation
    c = _run([{"call": "observe()", "observed": {"pool_totals": [3]}}] + same[1:])
    assert gpu_check.compare_runs(_run(same), c)["step"] == -1
    # an exception's message compared without addresses; its type compared
    x = _run([{"call": "commit('r0', tokens=1)", "raised": "ValueError", "message": gpu_check._masked("at 0x7f00ab")}])
    y = _run([{"call": "commit('r0', tokens=1)", "raised": "ValueError", "message": gpu_check._masked("at 0x55aa")}])
    z = _run([{"call": "commit('r0', tokens=1)", "raised": "KeyError", "message": gpu_check._masked("at 0x55aa")}])
    assert gpu_check.compare_runs(x, y) is None and gpu_check.compare_runs(x, z)["field"] == "raised"


def test_the_recorder_records_an_exception_and_raises_it_on():
    class Adapter:
        def commit(self, request_id, tokens):
            raise ValueError("Dereferencing a dangling rawref")

        def observe(self):
            return {"pool_totals": (2,), "pool_used": (1,)}

    calls: list[dict] = []
    recorded = gpu_check.Recorder(Adapter(), calls)
    with pytest.raises(ValueError, match="dangling"):
        recorded.commit("r0", 1)
    assert recorded.observe() == {"pool_totals": (2,), "pool_used": (1,)}
    assert calls == [{"call": "commit('r0', tokens=1)", "raised": "ValueError", "message": "Dereferencing a dangling rawref"},
                     {"call": "observe()", "observed": {"pool_totals": [2], "pool_used": [1]}}]


def test_the_copy_kernels_on_the_real_driver_are_one_async_copy_per_task_and_stop_at_an_error():
    seen = []

    class Driver:
        def __init__(self, fail_at=None):
            self.fail_at = fail_at

        def cuMemcpyAsync(self, dst, src, n, stream):  # noqa: N802
            seen.append((dst, src, n, stream))
            return (700 if len(seen) == self.fail_at else 0,)

    kernels = whole.driver_copy_kernels(Driver())
    task = kernels["MemToMemTask"]
    assert kernels["copy_device_to_host"]([task(10, 20), task(30, 40)], 4096, "s") == 0
    assert seen == [(10, 20, 4096, "s"), (30, 40, 4096, "s")]
    seen.clear()
    failing = whole.driver_copy_kernels(Driver(fail_at=1))
    assert failing["copy_host_to_device"]([task(1, 2), task(3, 4)], 8, 0) == 700 and len(seen) == 1
