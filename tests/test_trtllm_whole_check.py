"""``swafloor check trtllm --whole`` and the progress properties it runs (issue 31), against the fake
KVCacheManagerV2 (tests/trtllm_fake_manager.py, written from upstream's documented behaviour): the
properties hold on the fake, each seeded bug of the fake fails the property it breaks and no other,
and the command passes a fake source folder and fails (exit 1, the deadlock's step and life cycle) on
the fake's pre-fix minimum. About 6 s on one core."""

from __future__ import annotations

import json
import sys

import pytest

from swafloor.fuzz.engines.trtllm import progress

from . import trtllm_fake_manager as fake


def _by_name(results):
    failed = {r.name for r in results if r.ok is False}
    unsupported = {r.name for r in results if r.ok is None}
    return failed, unsupported


def test_every_progress_property_holds_on_the_fake():
    results = progress.run_progress(fake.module())
    assert len(results) == len(progress.PROPERTIES) * len(progress.CONFIGS)
    failed, unsupported = _by_name(results)
    assert not failed and not unsupported, [r.to_dict() for r in results if r.ok is not True]
    # the resume gate at 0.97 refuses a lone request at a full pool, as the modelled gate does
    gate = [r for r in results if r.name == "resume-gate"]
    assert all(r.detail["refused_at_history"] is not None for r in gate)
    lone = [r for r in results if r.name == "lone-completes"]
    assert all(r.detail["completed"] and r.steps > 10 for r in lone)


@pytest.mark.parametrize(("bug", "breaks"), [
    ("pre-fix-minimum", {"quota-below-minimum", "initial-pool-ratio"}),
    ("stale-never-freed", {"lone-completes", "suspended-resumes", "suspended-resumes-host"}),
    ("resume-needs-a-free-slot", {"suspended-resumes", "suspended-resumes-host"}),
    ("gate-counts-evictable", {"resume-gate"}),
])
def test_a_seeded_bug_fails_the_properties_it_breaks_and_no_other(bug, breaks):
    results = progress.run_progress(fake.module([bug]))
    failed, unsupported = _by_name(results)
    assert failed == breaks and not unsupported
    for r in results:
        if r.ok is False:
            assert r.operations and r.operations[0] == progress.op("create")


def test_the_pre_fix_minimum_shows_the_seeds_deadlock_with_its_step_and_life_cycle():
    seed = progress.CONFIGS[0]  # W = t = 4
    (result,) = [r for r in progress.run_progress(fake.module(["pre-fix-minimum"]), configs=(seed,))
                 if r.name == "quota-below-minimum"]
    d = result.detail
    assert d["upstream_totals"] == [1] and d["rule_minimum"] == [2]
    out = d["lone_request_runs_out"]
    # block 1 needed while block 0 is still in the window [1, 4]: the third decode step after the first
    assert out["at"] == "resize('r0', capacity=5, history=4)" and out["history"] == 4
    assert out["short"][0]["life_cycles"] == [{"index": 0, "kind": "swa", "window": 4, "sink_blocks": 0}]
    assert progress.describe(result.operations[-1]) == out["at"]
    from swafloor.fuzz.trace import Step

    assert Step(**result.operations[-1]).describe() == out["at"]  # the fuzz reports' own spelling


def test_a_gate_disagreement_fails_at_the_resume_it_fires():
    (result,) = [r for r in progress.run_progress(fake.module(["gate-counts-evictable"])) if r.ok is False]
    d = result.detail
    assert d["operation"] == "resume" and d["at"] == "resume('r0')"
    assert d["used"][0] * 100 <= 97 * d["totals"][0]  # the model admits on upstream's own statistics


# --------------------------------------------------------------------------- the command, on fake sources
_PACKAGE_INIT = '''
"""A source folder written for this test: it exports the fake manager's names (BUGS: its seeded bugs)."""
import tests.trtllm_fake_manager as _fake

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


def _source(tmp_path, bugs):
    folder = tmp_path / ("pre-fix" if bugs else "post-fix") / "kv_cache_manager_v2"
    (folder / "rawref").mkdir(parents=True)
    (folder / "__init__.py").write_text(f"BUGS = {list(bugs)!r}\n" + _PACKAGE_INIT)
    (folder / "_life_cycle_registry.py").write_text("")
    (folder / "rawref" / "__init__.py").write_text("NULL = None\n")
    return folder


@pytest.fixture
def whole_cli(monkeypatch):
    pytest.importorskip("cuda.bindings", reason="needs cuda-bindings (a test extra)")
    from swafloor.cli import main
    from swafloor.fuzz.engines.trtllm import v2 as v2_backend
    from swafloor.fuzz.engines.trtllm import whole

    monkeypatch.setenv("SWAFLOOR_CUDA_DRIVER", "standin")
    monkeypatch.setenv(v2_backend.SOURCE_ENV, "")
    monkeypatch.setattr(v2_backend, "_LOADED", {})
    try:
        yield main
    finally:
        if "restore" in whole._STATE:
            whole._STATE.pop("restore")()
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]


def test_the_command_passes_a_fake_source(whole_cli, tmp_path, capsys):
    source = _source(tmp_path, [])
    code = whole_cli(["check", "trtllm", "--source", str(source), "--whole", "--examples", "10", "--json",
                      "--no-progress", "--out", str(tmp_path / "out")])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["exit_code"] == 0 and data["ok"]
    assert "divergence" not in data["campaign"] and data["campaign"]["examples"] >= 10
    summary = data["progress_properties"]["summary"]
    assert all(row["failed"] == 0 and row["not_supported"] == 0 for row in summary.values()), summary


def test_the_command_fails_the_pre_fix_minimum_with_the_deadlock(whole_cli, tmp_path, capsys):
    source = _source(tmp_path, ["pre-fix-minimum"])
    out = tmp_path / "out"
    code = whole_cli(["check", "trtllm", "--source", str(source), "--whole", "--examples", "10", "--no-shrink",
                      "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    text = captured.out
    assert "field: pool_totals" in text  # the campaign: upstream's pools below the reference's, right after building
    assert ("DEADLOCK: a lone request runs out at resize('r0', capacity=5, history=4) (operation 10, history 4): "
            "pool group 0 (1 slots): life cycle 0 (swa, window 4, 0 sink blocks)") in text
    assert "check trtllm: progress properties" in captured.err
    saved = sorted(p.name for p in out.iterdir())
    assert any(name.startswith("progress-quota-below-minimum-") for name in saved), saved


def test_whole_refuses_options_of_the_source_level_check_in_one_line(whole_cli, tmp_path, capsys):
    source = _source(tmp_path, [])
    for argv, message in [
        (["--whole", "--expect-rule", "post-fix"], "--expect-rule applies to the source-level check"),
        (["--whole", "--examples", "0"], "--examples=0"),
        (["--out", str(tmp_path / "o")], "--out applies to --whole only"),
    ]:
        assert whole_cli(["check", "trtllm", "--source", str(source), *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err


def test_each_property_names_catalogue_theorems_that_state_it():
    from swafloor.proofs.catalogue import by_name
    from swafloor.proofs.theorem import Expected

    for name, theorems in progress.THEOREMS.items():
        for theorem in theorems:
            expected = Expected.REFUTED if name == "resume-gate" else Expected.PROVED
            assert by_name(theorem).expected is expected, (name, theorem)
    # the last two have none: the reference's raise to the minimum is max(asked, minimum) by construction
    assert progress.THEOREMS["quota-below-minimum"] == progress.THEOREMS["initial-pool-ratio"] == ()
