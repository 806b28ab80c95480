"""``swafloor check trtllm``: exit codes and the loader's mechanics, on a fake source folder we
write ourselves (tests/trtllm_fake.py), so no upstream code is needed."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from swafloor.cli import main
from swafloor.fuzz.engines.trtllm.loader import ENV_VAR, LoadError, load

from .trtllm_fake import BUGS, write_fake

FAST = ["--grid", "tiny", "--examples", "5", "--no-progress"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("SWAFLOOR_CACHE_DIR", str(tmp_path / "cache"))
    yield
    for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
        del sys.modules[name]


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_without_a_source_exits_2_with_one_line(capsys):
    assert main(["check", "trtllm"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "source" in line and ENV_VAR in line


def test_a_folder_missing_modules_exits_2_naming_them(tmp_path, capsys):
    root = write_fake(tmp_path / "co", omit=("_storage_manager.py", "_utils.py"))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 2
    line = _one_line(capsys.readouterr().err)
    assert "_storage_manager.py" in line and "_utils.py" in line


def test_a_path_without_the_package_exits_2(tmp_path, capsys):
    assert main(["check", "trtllm", "--source", str(tmp_path)] + FAST) == 2
    assert "kv_cache_manager_v2" in _one_line(capsys.readouterr().err)


def test_a_correct_post_fix_source_agrees_and_the_rule_is_detected(tmp_path, capsys):
    root = write_fake(tmp_path / "co")
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["rule"] == "post-fix"
    assert all(n > 0 for n in data["comparisons"].values()), data["comparisons"]
    assert data["windowed_lone_decode_out_of_slots"] == 0
    assert "_gpu_only" in data["stand_ins"]  # what the storage manager imports beyond the pure modules


def test_the_package_folder_itself_and_the_environment_variable_work(tmp_path, capsys, monkeypatch):
    root = write_fake(tmp_path / "co")
    monkeypatch.setenv(ENV_VAR, str(root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2"))
    assert main(["check", "trtllm"] + FAST) == 0
    assert "agrees with the reference" in capsys.readouterr().out


def test_a_pre_fix_source_is_exit_1_naming_the_lone_request_that_runs_out(tmp_path, capsys):
    """Issue 28 §4: the pre-fix rule (1 slot per life cycle) used to exit 0 unless --expect-rule was
    given. Its minimum is below the floor: exit 1, with the lone request that runs out (config, step,
    history, life cycle), reproduced on the reference manager at upstream's minimum."""
    root = write_fake(tmp_path / "co", post_fix=False)
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["rule"] == "pre-fix" and data["held_to"] == "post-fix" and not data["ok"]
    assert data["windowed_lone_decode_out_of_slots"] > 0  # the deadlock the fix removed
    m = next(m for m in data["first_mismatches"] if m["check"] == "min_slots")
    runs_out = m["detail"]["on upstream's minimum"]
    assert m["upstream"] == runs_out["slots"] == m["reference"]["pre-fix"]
    assert all(a < b for a, b in zip(m["upstream"], m["reference"]["post-fix"]))  # one pool group, below the floor
    assert runs_out["ran_out_at"] == f"resize(capacity={runs_out['history'] + 1}, history={runs_out['history']})"
    assert runs_out["reference_outcome"].startswith("out of slots: pool group 0")
    assert [c["kind"] for c in runs_out["life_cycles"]] == ["swa"]
    assert m["detail"]["on the reference's minimum"]["ran_out_at"] is None  # the floor's pools do not run out
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("BELOW THE FLOOR"))
    assert "runs out at resize(capacity=" in line and "life cycle 0 (swa, window" in line and "pool group 0" in line
    assert "DISAGREES" in out


def test_expecting_the_pre_fix_rule_holds_the_minimum_to_it(tmp_path, capsys):
    root = write_fake(tmp_path / "co", post_fix=False)
    assert main(["check", "trtllm", "--source", str(root), "--expect-rule", "pre-fix", "--json"] + FAST) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["rule"] == "pre-fix" and data["held_to"] == "pre-fix"
    assert main(["check", "trtllm", "--source", str(root), "--expect-rule", "post-fix"] + FAST) == 1
    assert "RULE: expected post-fix" in capsys.readouterr().out
    post = write_fake(tmp_path / "post")
    assert main(["check", "trtllm", "--source", str(post), "--expect-rule", "pre-fix"] + FAST) == 1
    assert "RULE: expected pre-fix, the source implements post-fix" in capsys.readouterr().out


def test_an_expected_rule_left_undetermined_is_exit_1(tmp_path, capsys, monkeypatch):
    """Issue 28 §4: --expect-rule with an undetermined rule used to pass as "could not run" (exit 2)."""
    from swafloor.fuzz.engines.trtllm.compare import Checker

    def broken(self, *args, **kwargs):
        raise RuntimeError("an error of ours")

    monkeypatch.setattr(Checker, "min_slots", broken)  # no minimum compared: the rule stays undetermined
    root = write_fake(tmp_path / "co")
    assert main(["check", "trtllm", "--source", str(root), "--expect-rule", "post-fix", "--json"] + FAST) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["rule"] == "undetermined" and data["exit_code"] == 1 and not data["ok"]
    assert main(["check", "trtllm", "--source", str(root), "--expect-rule", "post-fix"] + FAST) == 1
    assert "RULE: expected post-fix, the source implements undetermined" in capsys.readouterr().out
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 2  # without it: could not run in full


def test_a_wrong_stale_range_exits_1_printing_the_whole_input(tmp_path, capsys):
    root = write_fake(tmp_path / "co", bugs=("stale_one_token_late",))  # forgets the in-flight token
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("MISMATCH (stale ranges)"))
    data = json.loads(line.split("input ", 1)[1])
    assert set(data) == {"tokens_per_block", "window", "sink_tokens", "history"}
    assert "DISAGREES" in out


def test_json_mismatch_report_and_exit_code(tmp_path, capsys):
    root = write_fake(tmp_path / "co", bugs=("stale_one_token_late",))
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    data = json.loads(capsys.readouterr().out)
    assert not data["ok"] and data["mismatches"]["stale"] > 0
    first = next(m for m in data["first_mismatches"] if m["check"] == "stale")
    assert first["upstream"] != first["reference"]


def test_loading_twice_replaces_the_synthetic_packages(tmp_path):
    a = load(write_fake(tmp_path / "a"))
    b = load(write_fake(tmp_path / "b", post_fix=False))
    assert a.source != b.source
    assert sys.modules["tensorrt_llm.runtime.kv_cache_manager_v2._storage_manager"] is b["_storage_manager"]


def test_a_real_tensorrt_llm_already_imported_is_refused(tmp_path, monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, "tensorrt_llm", types.ModuleType("tensorrt_llm"))
    with pytest.raises(LoadError, match="clean interpreter"):
        load(write_fake(tmp_path / "co"))


C_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_rawref", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__rawref(void) {
    PyObject *m = PyModule_Create(&def);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "BUILT", 7) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
"""


def test_rawref_extension_is_built_into_the_cache_not_the_checkout(tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.fail("no C compiler: rawref's extension cannot be built here")
    root = write_fake(tmp_path / "co")
    rawref = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" / "rawref"
    (rawref / "rawrefmodule.c").write_text(C_SOURCE)
    (rawref / "__init__.py").write_text(
        "from ._rawref import BUILT\nclass ref:\n    is_valid = False\nNULL = ref()\n")
    before = sorted(p.name for p in rawref.iterdir())
    up = load(root)
    assert up["rawref"].BUILT == 7
    assert "built from" in up.rawref_origin and str(tmp_path / "cache") in up.rawref_origin
    assert sorted(p.name for p in rawref.iterdir()) == before  # nothing written into the checkout
    again = load(root)
    assert again.rawref_origin.startswith("cached build")


def test_rawref_source_missing_is_named(tmp_path):
    root = write_fake(tmp_path / "co")
    rawref = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" / "rawref"
    (rawref / "__init__.py").write_text("from ._rawref import NULL\n")
    with pytest.raises(LoadError, match="rawrefmodule.c"):
        load(root)


def test_the_whole_manager_backend_says_why_it_cannot_run(monkeypatch):
    from swafloor.fuzz.backends import resolve
    from swafloor.fuzz.protocol import Unsupported
    from swafloor.reference import AttentionLayer, Config

    resolved = resolve("trtllm")
    assert resolved.capabilities.needs_gpu
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)  # import fails as where it is not installed
    with pytest.raises(Unsupported, match="tensorrt_llm is not importable"):
        resolved.factory(Config(tokens_per_block=4, layers=[AttentionLayer(window=5)]))


def test_a_source_lacking_a_driven_name_exits_2_naming_it(tmp_path, capsys):
    root = write_fake(tmp_path / "co")
    sm = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" / "_storage_manager.py"
    sm.write_text(sm.read_text().replace("def _compute_slots_for_batch", "def _slots_for_batch"))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 2
    assert "StorageManager._compute_slots_for_batch" in _one_line(capsys.readouterr().err)



# ---------------------------------------------------------------- planted upstream bugs (issue 16)

#: Per planted bug: the exit code, and the kinds of finding expected among the first ones printed
#: (MISMATCH or RAISED, with the comparison).
PLANTED = {
    "floor_without_plus_one": (1, {("MISMATCH", "min_slots")}),
    "ssm_floor_zero": (1, {("MISMATCH", "min_slots")}),
    "full_at_one": (1, {("MISMATCH", "min_slots")}),
    "sinks_ignored": (1, {("MISMATCH", "min_slots")}),
    "stale_one_token_early": (1, {("MISMATCH", "stale"), ("MISMATCH", "scratch"), ("MISMATCH", "batch_slots")}),
    "stale_one_token_late": (1, {("MISMATCH", "stale"), ("MISMATCH", "scratch")}),
    "stale_end_off_by_one_block": (1, {("MISMATCH", "stale"), ("MISMATCH", "batch_slots")}),
    "floor_division_floor": (1, {("MISMATCH", "min_slots")}),
    "loose_floor": (1, {("MISMATCH", "min_slots")}),
    "system_prompt_per_request": (1, {("MISMATCH", "batch_slots")}),
    "scratch_includes_history": (1, {("MISMATCH", "scratch")}),
    "assert_in_upstream": (1, {("RAISED", "batch_slots")}),
    "no_out_of_slots_check": (1, {("RAISED", "accounting")}),
    "release_leaks": (1, {("MISMATCH", "accounting")}),
    "inconsistent_source": (1, {("RAISED", "registry")}),
    "stand_in_called_wrongly": (1, {("RAISED", "accounting")}),
}


def test_every_planted_bug_has_an_expectation():
    assert set(PLANTED) == set(BUGS)


def _kind(m: dict) -> str:
    return "RAISED" if isinstance(m["upstream"], dict) and "raised" in m["upstream"] else "MISMATCH"


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_each_planted_upstream_bug_is_found(bug, tmp_path, capsys):
    code, kinds = PLANTED[bug]
    root = write_fake(tmp_path / "co", bugs=(bug,))
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == code
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["exit_code"] == code and not data["ok"]
    found = {(_kind(m), m["check"]) for m in data["first_mismatches"]}
    assert kinds <= found, found
    if code == 1:
        assert captured.err == ""
        for m in data["first_mismatches"]:  # the whole input of each
            assert "tokens_per_block" in m["input"] or "case" in m["input"]


def test_the_correct_fake_finds_nothing_even_with_more_examples(tmp_path, capsys):
    root = write_fake(tmp_path / "co")
    assert main(["check", "trtllm", "--source", str(root), "--json", "--grid", "tiny", "--examples", "40",
                 "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["complete"] and data["exit_code"] == 0


def _checker(root):
    from swafloor.fuzz.engines.trtllm.compare import Checker

    return Checker(load(root), examples=0, grid="tiny")


def test_a_floor_without_its_plus_one_is_a_finding_not_a_config_error(tmp_path):
    """Upstream's SWA floor without the +1 gives W = 1 a pool of 0 slots: the accounting phase used
    to raise ConfigError (exit 2); now the lone request runs out on those pools, on upstream's own
    verdict and on the reference's, and the minimum's mismatch shows where."""
    from swafloor.reference import AttentionLayer, Config

    checker = _checker(write_fake(tmp_path / "co", bugs=("floor_without_plus_one",)))
    config = Config(tokens_per_block=2, layers=[AttentionLayer(window=1)])
    ok, registry, tl = checker.registry(config)
    assert ok
    assert checker.accounting(config, registry, tl, 0, 10)  # upstream and the reference agree: out of slots
    r = checker.report
    assert r.below_reference_model == 1 and r.decode_out_of_slots == 1 and r.windowed_out_of_slots == 1
    assert r.first_out_of_slots["slots"] == [0] and r.first_out_of_slots["history"] == 0
    checker.min_slots(config, registry, tl)
    checker._decide_rule()
    m = next(m for m in r.mismatches if m.check == "min_slots")
    assert m.upstream == [0] and m.reference["post-fix"] == [1]
    assert m.detail["undersized_pool_groups"] == [0]
    assert m.detail["on upstream's minimum"]["ran_out_at"] == "resize(capacity=1, history=0)"
    assert m.detail["on upstream's minimum"]["upstream_ran_out_at"] == "resize(capacity=1, history=0)"
    assert m.detail["on the reference's minimum"]["ran_out_at"] is None


def test_an_ssm_floor_of_zero_is_a_finding_not_a_config_error(tmp_path):
    from swafloor.reference import AttentionLayer, Config, SsmLayer

    checker = _checker(write_fake(tmp_path / "co", bugs=("ssm_floor_zero",)))
    config = Config(tokens_per_block=4, layers=[AttentionLayer(window=5), SsmLayer()], pool_groups=(0, 1))
    ok, registry, tl = checker.registry(config)
    assert ok
    assert checker.accounting(config, registry, tl, 0, 10)
    assert checker.report.below_reference_model == 1
    assert checker.report.decode_out_of_slots == 1  # the SSM page does not fit at resume


def test_a_mismatch_stays_exit_1_when_a_later_phase_fails_on_an_error_of_ours(tmp_path, capsys, monkeypatch):
    from swafloor.fuzz.engines.trtllm.compare import Checker

    def broken(self, *args, **kwargs):
        raise RuntimeError("an error of ours")

    monkeypatch.setattr(Checker, "accounting", broken)
    root = write_fake(tmp_path / "co", bugs=("stale_one_token_late",))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    assert "MISMATCH (stale ranges)" in out
    assert "COULD NOT RUN" in out and "RuntimeError: an error of ours" in out


def test_an_error_of_ours_without_a_mismatch_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    from swafloor.fuzz.engines.trtllm.compare import Checker

    def broken(self, *args, **kwargs):
        raise RuntimeError("an error of ours")

    monkeypatch.setattr(Checker, "accounting", broken)
    root = write_fake(tmp_path / "co")
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert "could not run" in line and "RuntimeError: an error of ours" in line and "tokens_per_block" in line
    assert "did not run in full" in captured.out


def test_an_assert_inside_upstream_code_is_a_failure_with_its_input(tmp_path, capsys):
    """Only the Hypothesis phase describes batches of three requests: the assert used to end the
    property silently (exit 0)."""
    root = write_fake(tmp_path / "co", bugs=("assert_in_upstream",))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("RAISED (slot counts per batch)"))
    the_input = json.loads(line.split("input ", 1)[1])
    assert len(the_input["requests"]) == 3
    raised = json.loads(next(x for x in out.splitlines() if x.startswith("  upstream:")
                             and "raised" in x).split("upstream:", 1)[1])
    assert raised["raised"] == "AssertionError" and "_storage_manager.py" in raised["where"]
    assert "_compute_slots_for_batch" in raised["where"]


def test_a_stand_in_refusing_upstream_is_upstreams_failure(tmp_path, capsys):
    root = write_fake(tmp_path / "co", bugs=("no_out_of_slots_check",))
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    data = json.loads(capsys.readouterr().out)
    m = next(m for m in data["first_mismatches"] if m["check"] == "accounting")
    assert m["upstream"]["raised"] == "StandInMisuse"
    assert "standins.py" in m["upstream"]["where"] and "called from _storage_manager.py" in m["upstream"]["where"]
    assert m["input"]["steps"][-1].endswith("upstream raised StandInMisuse")


def test_an_attribute_error_across_modules_is_upstreams_failure_with_its_input(tmp_path, capsys):
    """Issue 28 §4: an AttributeError one upstream module raises reading another's class used to end
    the run as SourceInconsistent (exit 2, "could not run"); it is upstream's failure, exit 1."""
    root = write_fake(tmp_path / "co", bugs=("inconsistent_source",))
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["complete"] and data["fatal"] is None and captured.err == ""
    m = next(m for m in data["first_mismatches"] if m["check"] == "registry")
    assert m["upstream"]["raised"] == "AttributeError" and "cache_domain" in m["upstream"]["message"]
    assert "_life_cycle_registry.py" in m["upstream"]["where"]
    assert "tokens_per_block" in m["input"] and "layers" in m["input"]


def test_a_type_error_upstream_raises_calling_a_stand_in_is_upstreams_failure(tmp_path, capsys):
    """Issue 28 §4: upstream calling a stand-in with arguments it does not take used to be a LoadError
    (exit 2); the TypeError is raised in upstream's frame: exit 1 with its input."""
    root = write_fake(tmp_path / "co", bugs=("stand_in_called_wrongly",))
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["complete"] and captured.err == ""
    m = next(m for m in data["first_mismatches"] if m["check"] == "accounting")
    assert m["upstream"]["raised"] == "TypeError" and "allocate_multiple" in m["upstream"]["message"]
    assert m["upstream"]["where"].startswith("_storage_manager.py:")
    assert m["upstream"]["where"].endswith("(a call to one of the check's stand-ins)")
    assert "slots" in m["input"] and "layers" in m["input"]


def test_an_exception_raised_in_our_stand_in_is_could_not_run_naming_it(tmp_path, capsys, monkeypatch):
    """The other side: an exception raised in our own stand-in (upstream's frames above it) is ours:
    could not run (exit 2) naming where, never an upstream failure."""
    from swafloor.fuzz.engines.trtllm import standins

    def broken(self):
        raise ValueError("a stand-in of ours broke")

    monkeypatch.setattr(standins._PoolGroup, "num_free_slots", property(broken))
    root = write_fake(tmp_path / "co")
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 2
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert not any(data["mismatches"].values()) and not data["complete"] and data["not_run_count"] > 0
    assert data["not_run"][0]["error"] == "ValueError: a stand-in of ours broke"
    assert data["not_run"][0]["check"] == "accounting" and "layers" in data["not_run"][0]["input"]
    assert "could not run" in _one_line(captured.err)
def test_a_mismatch_found_before_upstream_raises_midway_stays_exit_1(tmp_path, capsys, monkeypatch):
    from swafloor.fuzz.engines.trtllm.compare import Checker

    monkeypatch.setattr(Checker, "_preflight", lambda self: None)  # met midway instead, after the stale ranges
    root = write_fake(tmp_path / "co", bugs=("inconsistent_source", "stale_one_token_late"))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    assert "MISMATCH (stale ranges)" in out and "RAISED (life-cycle registry)" in out and "cache_domain" in out


def test_upstreams_verdicts_and_the_references_are_reported_apart(tmp_path, capsys):
    root = write_fake(tmp_path / "co", post_fix=False)
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    data = json.loads(capsys.readouterr().out)
    upstream, reference = data["verdicts"]["upstream"], data["verdicts"]["reference"]
    assert set(upstream["comparisons"]) == {"stale", "scratch", "registry", "min_slots", "batch_slots", "accounting"}
    assert "reference's plan" in upstream["what"] and "release first" in upstream["what"]
    assert reference["windowed_lone_decode_out_of_slots"] > 0 and "lone_decode_out_of_slots" not in upstream
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    assert "upstream's own verdicts" in out and "the reference's verdict on upstream's numbers" in out
    assert out.index("upstream's own verdicts") < out.index("storage-manager slot accounting") < out.index(
        "the reference's verdict") < out.index("ran out of slots")


# ---------------------------------------------------------------- the fake itself

def test_the_fake_imports_nothing_of_swafloor():
    import ast
    from pathlib import Path

    from . import trtllm_fake

    tree = ast.parse(Path(trtllm_fake.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("swafloor") for a in node.names)
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("swafloor") and node.level == 0


def test_the_fake_gives_upstreams_documented_figures(tmp_path):
    """Figures from upstream's own tests and PR (shared facts §1), not from the reference."""
    from swafloor.fuzz.engines.trtllm.standins import storage_manager
    from swafloor.reference import AttentionLayer, Config

    checker = _checker(write_fake(tmp_path / "co"))
    up = checker.up
    lcr, sm = up["_life_cycle_registry"], up["_storage_manager"].StorageManager

    def floor(config):
        ok, registry, tl = checker.registry(config)
        return sm._compute_min_slots_from_constraints(storage_manager(up, tl, registry), [], 32, None)

    assert floor(Config(tokens_per_block=32, layers=[AttentionLayer(window=128, sink_tokens=1)])) == [6]
    assert floor(Config(tokens_per_block=32, layers=[AttentionLayer(window=32)])) == [2]
    assert floor(Config(tokens_per_block=32, layers=[AttentionLayer(window=32), AttentionLayer()],
                        pool_groups=(0, 0))) == [4]
    lc = lcr.AttnLifeCycle.make(32, None, 32)
    assert range(*lcr.compute_scratch_range(lc, 0, 256, 32, 0)) == range(0, 7)
    assert range(*lcr.compute_scratch_range(lc, 0, 256, 32, 64)) == range(0, 5)


def _raised_line(out: str) -> dict:
    return json.loads(next(x for x in out.splitlines() if x.startswith("  upstream:")
                           and "raised" in x).split("upstream:", 1)[1])


def test_a_field_the_check_does_not_set_on_the_storage_manager_is_exit_1_naming_it(tmp_path, capsys):
    """The check builds StorageManager without its constructor: an AttributeError upstream raises
    reading a field the check does not set is raised inside upstream code: exit 1 with its input
    (issue 28 §4; it used to be "could not run", exit 2), the note naming the check's part."""
    root = write_fake(tmp_path / "co")
    sm = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" / "_storage_manager.py"
    sm.write_text(sm.read_text().replace("        lcs = self._life_cycles.get()\n",
                                         "        lcs = self._life_cycles.get()\n        scale = self._resume_headroom\n", 1))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    raised = _raised_line(capsys.readouterr().out)
    assert raised["raised"] == "AttributeError" and raised["where"].startswith("_storage_manager.py:")
    assert "StorageManager._resume_headroom; the check builds StorageManager without its constructor" in raised["where"]


def test_a_field_upstream_reads_of_the_checks_layer_list_is_exit_1_naming_it(tmp_path, capsys):
    root = write_fake(tmp_path / "co")
    reg = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" / "_life_cycle_registry.py"
    reg.write_text(reg.read_text().replace("        self._ids = {}\n", "        self._ids = {}\n        config.enable_partial_reuse\n", 1))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    raised = _raised_line(capsys.readouterr().out)
    assert raised["raised"] == "AttributeError" and raised["where"].startswith("_life_cycle_registry.py:")
    assert "_LayerList.enable_partial_reuse of an object the check supplies" in raised["where"]


def test_an_undersized_minimum_shows_a_lone_request_that_runs_out_only_on_upstreams_pools(tmp_path, capsys):
    root = write_fake(tmp_path / "co", bugs=("ssm_floor_zero",))
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 1
    data = json.loads(capsys.readouterr().out)
    m = next(m for m in data["first_mismatches"] if m["check"] == "min_slots" and "constraint" not in m["input"])
    theirs, ours = m["detail"]["on upstream's minimum"], m["detail"]["on the reference's minimum"]
    assert theirs["ran_out_at"] is not None and theirs["upstream_ran_out_at"] == theirs["ran_out_at"]
    assert ours["ran_out_at"] is None and ours["slots"] == m["reference"]["post-fix"]
    assert any(lc["kind"] == "ssm" for lc in m["input"]["layers"])


def test_upstream_calling_a_stand_in_with_other_arguments_is_exit_1_naming_it(tmp_path, capsys):
    root = write_fake(tmp_path / "co")
    sm = root / "tensorrt_llm" / "runtime" / "kv_cache_manager_v2" / "_storage_manager.py"
    text = sm.read_text()
    assert "storage.get_num_free_slots(g)" in text
    sm.write_text(text.replace("storage.get_num_free_slots(g)", "storage.get_num_free_slots(g, GPU_LEVEL)"))
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    raised = _raised_line(out)
    assert raised["raised"] == "TypeError" and "SlotStore.get_num_free_slots" in raised["message"]
    assert raised["where"].startswith("_storage_manager.py:") and "stand-ins" in raised["where"]
