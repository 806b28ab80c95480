"""``swafloor check trtllm``: exit codes and the loader's mechanics, on a fake source folder we
write ourselves (tests/trtllm_fake.py), so no upstream code is needed."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from swafloor.cli import main
from swafloor.fuzz.trtllm.loader import ENV_VAR, LoadError, load

from .trtllm_fake import write_fake

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


def test_a_pre_fix_source_agrees_under_the_old_rule_and_fails_an_expected_post_fix(tmp_path, capsys):
    root = write_fake(tmp_path / "co", post_fix=False)
    assert main(["check", "trtllm", "--source", str(root), "--json"] + FAST) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rule"] == "pre-fix"
    assert data["windowed_lone_decode_out_of_slots"] > 0  # the deadlock the fix removed
    assert main(["check", "trtllm", "--source", str(root), "--expect-rule", "post-fix"] + FAST) == 1
    assert "RULE: expected post-fix" in capsys.readouterr().out


def test_a_wrong_stale_range_exits_1_printing_the_whole_input(tmp_path, capsys):
    root = write_fake(tmp_path / "co", inflight=0)  # forgets the in-flight token
    assert main(["check", "trtllm", "--source", str(root)] + FAST) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("MISMATCH (stale ranges)"))
    data = json.loads(line.split("input ", 1)[1])
    assert set(data) == {"tokens_per_block", "window", "sink_tokens", "history"}
    assert "DISAGREES" in out


def test_json_mismatch_report_and_exit_code(tmp_path, capsys):
    root = write_fake(tmp_path / "co", inflight=0)
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
