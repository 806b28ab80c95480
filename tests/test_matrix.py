"""``swafloor matrix vllm``'s parts that need no vLLM: release selection and order, the bisection, the
domain line, and bad arguments (exit 2, one line). The command on real releases is tested in
tests/test_vllm_releases.py, in the vLLM venv."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from swafloor.fuzz import matrix
from swafloor.fuzz.engines.vllm.matrix import DEFAULT_BACKENDS, RELEASES, VLLM


def test_release_order():
    ordered = ["0.8.3", "0.8.5", "0.8.5.post1", "0.8.6", "0.9.0", "0.9.0.1", "0.10.1", "0.10.1.1", "0.33.0"]
    assert sorted(reversed(ordered), key=matrix.release_key) == ordered
    assert list(RELEASES) == sorted(RELEASES, key=matrix.release_key)


def test_supported_releases_span_every_minor_line_from_the_first_with_a_sliding_window_manager():
    minors = {tuple(matrix.release_key(r)[:2]) for r in RELEASES}
    assert minors == {(0, m) for m in range(8, 34)}
    assert RELEASES[0] == "0.8.3" and RELEASES[-1] == "0.33.0"


def test_select_releases():
    assert matrix.select_releases(None, VLLM) == RELEASES
    assert matrix.select_releases("0.9..0.11.2", VLLM) == ("0.9.2", "0.10.2", "0.11.2")
    assert matrix.select_releases("0.32.0..", VLLM) == ("0.32.0", "0.33.0")
    assert matrix.select_releases("..0.8.5.post1", VLLM) == ("0.8.3", "0.8.5.post1")
    assert matrix.select_releases("0.10.1.1,0.9.2,0.9.2", VLLM) == ("0.9.2", "0.10.1.1")  # any release, sorted, once
    for bad in ("x", "0.9.2,", "1..0.5", "0.7.3", "0.9.2;rm", "0.1..0.2"):
        with pytest.raises(matrix.MatrixError):
            matrix.select_releases(bad, VLLM)


def test_bisect_finds_the_first_change_in_few_tries():
    releases = RELEASES
    for change in range(1, len(releases)):
        calls = []

        def verdict(release, change=change, calls=calls):
            calls.append(release)
            return "match" if releases.index(release) < change else "divergence:tables"

        found = matrix.bisect(releases, verdict)
        assert found["changes"] and found["first"] == releases[change] and found["before"] == releases[change - 1]
        assert found["verdict"] == "divergence:tables" and found["verdict_before"] == "match"
        assert len(calls) <= 2 + len(releases).bit_length()
    same = matrix.bisect(releases, lambda r: "match")
    assert same == {"changes": False, "verdict": "match", "tried": {releases[0]: "match", releases[-1]: "match"}}


def test_domain_names_every_restriction():
    line = matrix.domain(DEFAULT_BACKENDS)
    for part in ("no sinks", "no SSM", "one pool group", "no capacity cuts", "no reused history under vllm-async"):
        assert part in line, line
    assert "under vllm," not in line and matrix.domain(["vllm"]).count("reused history") == 0


@pytest.mark.parametrize("argv, needle", [
    (["--releases", "bad"], "--releases='bad'"),
    (["--releases", "0.7.0"], "before 0.8.3"),
    (["--backends", "vllm,nope"], "--backends="),
    (["--examples", "0"], "--examples"),
    (["--bisect", "/nonexistent/trace.json"], "--bisect"),
    (["--vllm-venv", "/nonexistent/venv"], "make it with scripts/vllm-venv"),
    (["--profile", "nope"], "--profile='nope': one of ci, nightly, pages, standard"),
])
def test_bad_arguments_exit_2_with_one_line(argv, needle, tmp_path):
    out = subprocess.run([sys.executable, "-m", "swafloor", "matrix", "vllm", *argv], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert out.stdout == ""


def test_a_campaign_report_states_a_restricted_domain_first():
    """A backend whose capabilities keep configs or operations out says so at the top of its report
    (text and JSON); one that keeps nothing out says nothing."""
    from swafloor.fuzz.backends import ResolvedBackend
    from swafloor.fuzz.backends.reference import reference
    from swafloor.fuzz.protocol import Capabilities, factory
    from swafloor.reference import LifeCycleKind
    from swafloor.fuzz.runner import format_report, run_campaign

    caps = Capabilities(sinks=False, layer_kinds=[LifeCycleKind.SWA, LifeCycleKind.FULL], capacity_cuts=False)
    narrow = factory(caps)(lambda config: reference(config))
    result = run_campaign(ResolvedBackend("narrow", narrow, caps), examples=20, out_dir=None)
    assert result.domain == "domain: no sinks, no SSM, no capacity cuts"
    assert format_report(result).splitlines()[0] == result.domain and result.to_dict()["domain"] == result.domain
    full = run_campaign("reference", examples=5, out_dir=None)
    assert full.domain is None and format_report(full).startswith("reference vs reference")


def test_ctrl_c_prints_the_cells_done_and_exits_130(monkeypatch, capsys, tmp_path):
    """The handler's own logic, with the venv and the cells stood in for: the first release's cells come
    back, Ctrl-C arrives during the second."""
    from swafloor import cli

    venv = matrix.EngineVenv(tmp_path, tmp_path / "python", "0.33.0", "vllm")
    monkeypatch.setattr(matrix, "find_venv", lambda option, engine: venv)
    calls = []

    def run_release(release, backends, *args, **kwargs):
        calls.append(release)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return [matrix.Cell(release, b, "pass", examples=3, seconds=1.0) for b in backends]

    monkeypatch.setattr(matrix, "run_release", run_release)
    code = cli.main(["matrix", "vllm", "--releases", "0.9.2,0.11.2", "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 130 and calls == ["0.9.2", "0.11.2"]
    # the default backends: vllm, vllm-async, vllm-prefix
    assert "interrupted after 3 of 6 cells" in out.err and "0.9.2" in out.err and "pass (3 ex.)" in out.err
    assert out.out == ""


def test_write_docs_replaces_the_rows_of_the_releases_run(monkeypatch, tmp_path):
    import json

    import swafloor.docs as docs
    from swafloor.docs import sections

    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(docs, "repository_root", lambda: tmp_path)
    base = dict(profile="ci", seed=0, examples=40, pinned="0.33.0", domain="domain: ...", seconds=10,
                backends=["vllm"])
    sections.write_vllm_matrix({**base, "command": "first", "releases": ["0.9.2", "0.14.1"], "cells": [
        {"release": "0.9.2", "backend": "vllm", "result": "pass"},
        {"release": "0.14.1", "backend": "vllm", "result": "unsupported", "why": "no module"}]})
    sections.write_vllm_matrix({**base, "command": "second", "releases": ["0.14.1"], "cells": [
        {"release": "0.14.1", "backend": "vllm", "result": "divergence", "part": "tables", "step_index": 1}]})
    data = json.loads((tmp_path / "docs" / "vllm-matrix.json").read_text())
    assert [(c["release"], c["result"]) for c in data["cells"]] == [("0.9.2", "pass"), ("0.14.1", "divergence")]
    assert [r["command"] for r in data["runs"]] == ["first", "second"]
    text = sections.vllm_matrix()
    assert "| 0.9.2 | pass |" in text and "| 0.14.1 | **divergence**: `tables` at step 1 |" in text
    assert text.startswith(matrix.domain(["vllm"]).replace("domain", "Domain", 1) + ".")
    assert "`first`" in text and "`second`" in text
    sections.write_vllm_matrix({**base, "examples": 99, "command": "third", "releases": ["0.9.2"], "cells": [
        {"release": "0.9.2", "backend": "vllm", "result": "pass"}]})
    data = json.loads((tmp_path / "docs" / "vllm-matrix.json").read_text())
    assert data["releases"] == ["0.9.2"] and [r["command"] for r in data["runs"]] == ["third"]  # a new table


def test_profile_reaches_every_cell_and_its_table_is_its_own(monkeypatch, capsys, tmp_path):
    """``--profile pages``: the handler passes the profile to each release's cells, the report and its
    command say it; ``--write-docs`` stores it beside the ci table (docs/ENGINE-pages-matrix.json), which
    stays as it was; each table lists only the traces found under its profile."""
    import json

    import swafloor.docs as docs
    from swafloor import cli
    from swafloor.docs import sections

    venv = matrix.EngineVenv(tmp_path, tmp_path / "python", "0.5.23", "sglang")
    seen = []

    def run_release(release, backends, *args, profile="ci", **kwargs):
        seen.append(profile)
        return [matrix.Cell(release, b, "pass", examples=2, campaign=profile, sglang=release) for b in backends]

    monkeypatch.setattr(matrix, "find_venv", lambda option, engine: venv)
    monkeypatch.setattr(matrix, "run_release", run_release)
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests" / "regressions").mkdir(parents=True)
    monkeypatch.setattr(docs, "repository_root", lambda: tmp_path)
    ci_table = tmp_path / "docs" / "sglang-matrix.json"
    ci_table.write_text('{"untouched": true}')
    code = cli.main(["matrix", "sglang", "--releases", "0.5.22,0.5.23", "--backends", "sglang", "--examples", "2",
                     "--profile", "pages", "--json", "--write-docs", "--out", str(tmp_path / "out")])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and seen == ["pages", "pages"]
    assert report["profile"] == "pages" and report["command"].endswith("--examples 2 --profile pages")
    assert [c["campaign"] for c in report["cells"]] == ["pages", "pages"]
    assert ci_table.read_text() == '{"untouched": true}'
    stored = json.loads((tmp_path / "docs" / "sglang-pages-matrix.json").read_text())
    assert stored["profile"] == "pages" and [c["release"] for c in stored["cells"]] == ["0.5.22", "0.5.23"]
    for profile in ("pages", "ci"):
        trace = {"backend": "sglang", "expect": "divergence",
                 "found": {"release": "0.5.22", "profile": profile, "class": f"class-{profile}", "verdict": "v"}}
        (tmp_path / "tests" / "regressions" / f"sglang-0.5.22-{profile}.json").write_text(json.dumps(trace))
    text = sections.sglang_pages_matrix()
    assert "profile pages, seed 0, 2 examples per cell" in text and "| 0.5.23 | pass |" in text
    assert "class-pages" in text and "class-ci" not in text
    assert "--profile pages --write-docs" in sections.vllm_matrix("vllm", "pages")  # not measured yet


def test_a_cell_that_retired_too_many_requests_exits_1(monkeypatch, capsys, tmp_path):
    """A cell whose one-sided outcome retired more than 5% of its requests (``too-many-retired``) fails
    the command (it exited 0 before issue 33: only divergence, error and off-target did)."""
    from swafloor import cli

    venv = matrix.EngineVenv(tmp_path, tmp_path / "python", "0.5.23", "sglang")
    monkeypatch.setattr(matrix, "find_venv", lambda option, engine: venv)
    monkeypatch.setattr(matrix, "run_release", lambda release, backends, *a, **k: [
        matrix.Cell(release, b, "too-many-retired", why="3 of 20 requests retired", examples=5) for b in backends])
    code = cli.main(["matrix", "sglang", "--releases", "0.5.7", "--backends", "sglang-radix", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "too-many-retired: 3 of 20 requests retired" in out


def test_write_docs_keeps_each_cells_own_class_limit(monkeypatch, tmp_path):
    """A run with another --classes joins the table (the limit is the cell's, not the table's) and each
    cell says the limit it reached; a cell whose search ended by itself says none."""
    import json

    import swafloor.docs as docs
    from swafloor.docs import sections

    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(docs, "repository_root", lambda: tmp_path)
    base = dict(profile="ci", seed=0, examples=20, pinned="0.33.0", domain="domain: ...", seconds=10,
                backends=["vllm"])
    two = [{"class": "tables@resize"}, {"class": "outcome@resume"}]
    sections.write_vllm_matrix({**base, "command": "first", "releases": ["0.9.2", "0.14.1"], "cells": [
        {"release": r, "backend": "vllm", "result": "divergence", "part": "tables", "step_index": 1, "classes": two,
         "limited": True} for r in ("0.9.2", "0.14.1")]})
    sections.write_vllm_matrix({**base, "classes": 10, "command": "second --classes 10", "releases": ["0.14.1"],
                                "cells": [{"release": "0.14.1", "backend": "vllm", "result": "divergence",
                                           "part": "tables", "step_index": 1, "classes": two, "limited": False,
                                           "class_limit": 10}]})
    data = json.loads((tmp_path / "docs" / "vllm-matrix.json").read_text())
    assert [r["command"] for r in data["runs"]] == ["first", "second --classes 10"]  # merged, not a new table
    rows = {line.split(" | ")[0]: line for line in sections.vllm_matrix().splitlines() if line.startswith("| 0.")}
    assert rows["| 0.9.2"].endswith("(+ `outcome@resume`; limit 4 reached) |")
    assert rows["| 0.14.1"].endswith("(+ `outcome@resume`) |")
    assert "`second --classes 10`" in sections.vllm_matrix()


def test_bisect_skips_releases_that_cannot_run_the_trace():
    releases = RELEASES[:10]
    verdicts = {r: ("divergence:outcome" if i < 6 else "match") for i, r in enumerate(releases)}
    verdicts[releases[4]] = verdicts[releases[5]] = "unsupported (a module is missing)"
    found = matrix.bisect(releases, verdicts.__getitem__)
    assert found["changes"] and found["first"] == releases[6] and found["before"] == releases[3]
    assert set(found["skipped"]) <= {releases[4], releases[5]} and found["skipped"]


# ----------------------------------------------------------------------------- swafloor matrix sglang
def test_sglang_releases_and_selection():
    from swafloor.fuzz.engines.sglang import matrix as sglang_matrix

    sg = matrix.engine_named("sglang")
    assert sg.releases == sglang_matrix.RELEASES
    assert sg.default_backends == ("sglang", "sglang-lazy", "sglang-radix")  # the others asked by name
    assert sg.backends == (*sg.default_backends, "sglang-eagle", "sglang-eagle-v1", "sglang-admission", "dataplane:sglang",
                           "dataplane:sglang-lazy")
    assert sg.releases[0] == "0.5.7" and sg.releases[-1] == "0.5.23"
    assert list(sg.releases) == sorted(sg.releases, key=matrix.release_key)
    # one per patch line, 0.5.14 .. 0.5.23, and one of each older eviction path (0.5.7, 0.5.13.post1)
    assert sorted({matrix.release_key(r)[2] for r in sg.releases}) == [7, 13, *range(14, 24)]
    assert matrix.select_releases(None, sg) == sg.releases
    assert matrix.select_releases("0.5.20..", sg) == ("0.5.20", "0.5.21", "0.5.22", "0.5.23")
    assert matrix.select_releases("..0.5.15.post1", sg) == ("0.5.7", "0.5.13.post1", "0.5.14", "0.5.15.post1")
    assert matrix.select_releases("0.5.15,0.5.14", sg) == ("0.5.14", "0.5.15")
    with pytest.raises(matrix.MatrixError, match="chunked local attention"):
        matrix.select_releases("0.5.6.post2", sg)
    with pytest.raises(matrix.MatrixError, match="SGLang release number"):
        matrix.select_releases("x", sg)
    assert matrix.select_releases(None, matrix.engine_named("vllm")) == RELEASES  # each engine its own releases
    assert matrix.cache_root(None, "sglang").name == "sglang" and matrix.cache_root(None, "vllm").name == "vllm"
    with pytest.raises(matrix.MatrixError):
        matrix.engine_named("trt")


@pytest.mark.parametrize("argv, needle", [
    (["--releases", "0.5.6"], "before 0.5.7"),
    (["--releases", "bad"], "--releases='bad'"),
    (["--backends", "sglang,vllm"], "each must be one of sglang, sglang-lazy"),
    (["--vllm-venv", "/x"], "--vllm-venv is for swafloor matrix vllm"),
    (["--sglang-venv", "/nonexistent/venv"], "make it with scripts/sglang-venv"),
])
def test_sglang_bad_arguments_exit_2_with_one_line(argv, needle, tmp_path):
    out = subprocess.run([sys.executable, "-m", "swafloor", "matrix", "sglang", *argv], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert out.stdout == ""


def test_sglang_json_report(monkeypatch, capsys, tmp_path):
    """The handler's JSON, with the venv and the cells stood in for: the engine, its default backends,
    its venv and cache, and exit 1 on a divergence."""
    from swafloor import cli

    venv = matrix.EngineVenv(tmp_path, tmp_path / "python", "0.5.23", "sglang")
    seen = {}

    def find_venv(option=None, engine=None):
        seen["venv"] = (option, engine.name)
        return venv

    def run_release(release, backends, venv_, cache, out_dir, **kwargs):
        seen.setdefault("cache", cache)
        if release == "0.5.23":
            return [matrix.Cell(release, b, "divergence", part="tables", step_index=3, trace_file="t.json", sglang=release)
                    for b in backends]
        return [matrix.Cell(release, b, "pass", examples=7, sglang=release) for b in backends]

    monkeypatch.setattr(matrix, "find_venv", find_venv)
    monkeypatch.setattr(matrix, "run_release", run_release)
    code = cli.main(["matrix", "sglang", "--releases", "0.5.22,0.5.23", "--examples", "7", "--json",
                     "--sglang-venv", str(tmp_path), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert code == 1 and seen["venv"] == (str(tmp_path), "sglang") and seen["cache"].name == "sglang"
    assert report["engine"] == "sglang" and report["backends"] == ["sglang", "sglang-lazy", "sglang-radix"]
    assert report["releases"] == ["0.5.22", "0.5.23"] and report["pinned"] == "0.5.23" and report["examples"] == 7
    assert report["command"] == "swafloor matrix sglang --releases 0.5.22,0.5.23 --examples 7"
    assert report["domain"] == matrix.domain(["sglang", "sglang-lazy", "sglang-radix"])
    assert [(c["release"], c["backend"], c["result"]) for c in report["cells"]] == [
        ("0.5.22", "sglang", "pass"), ("0.5.22", "sglang-lazy", "pass"), ("0.5.22", "sglang-radix", "pass"),
        ("0.5.23", "sglang", "divergence"), ("0.5.23", "sglang-lazy", "divergence"),
        ("0.5.23", "sglang-radix", "divergence")]
    assert report["cells"][3]["sglang"] == "0.5.23" and "vllm" not in report["cells"][3]


def test_sglang_eviction_flags_follow_the_function_signature():
    """No prefix sharing, said as each release's ``free_swa_out_of_window_slots`` takes it; the interval
    only where the function has one (else ``sglang-lazy`` is unsupported, naming it)."""
    from swafloor.fuzz.engines.sglang.compat import Evictor
    from swafloor.fuzz.protocol import Unsupported

    def v14(req, pre_len, *, sliding_window_size, page_size, req_to_token_pool, token_to_kv_pool_allocator,
            drop_page_margin=False):
        return None

    def v18(req, pre_len, *, sliding_window_size, page_size, req_to_token_pool, token_to_kv_pool_allocator,
            is_chunk_cache=False, retain_floor=None):
        return None

    def v23(req, pre_len, *, sliding_window_size, page_size, req_to_token_pool, token_to_kv_pool_allocator,
            supports_prefix_sharing=True, retain_floor=None, eviction_interval=1):
        return None

    assert Evictor(v14, 1).flags == {"drop_page_margin": True}
    assert Evictor(v18, 1).flags == {"is_chunk_cache": True}
    assert Evictor(v23, 128).flags == {"supports_prefix_sharing": False, "eviction_interval": 128}
    for old in (v14, v18):
        with pytest.raises(Unsupported, match="no eviction_interval"):
            Evictor(old, 128)


def test_sglang_install_recipe(tmp_path):
    """What goes with a release: the extra modules and the release's own transformers pin (from its
    METADATA); a transformers range check adds that requirement once."""
    from swafloor.fuzz.engines.sglang import matrix as sglang_matrix

    meta = tmp_path / "sglang-0.5.14.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: sglang\nRequires-Dist: transformers==5.8.1\nRequires-Dist: torch\n")
    first = sglang_matrix._with_release(tmp_path)
    assert first[-1] == "transformers==5.8.1" and "openai==2.8.0" in first and len(first) == len(set(first))
    assert not any(x.startswith("xgrammar") for x in first)  # large: only when the import asks for it
    error = "ImportError: tokenizers>=0.22.0,<=0.23.0 is required for a normal functioning of this module"
    assert sglang_matrix._fallback(tmp_path, first, error) == ["tokenizers>=0.22.0,<=0.23.0"]
    assert sglang_matrix._fallback(tmp_path, first + ["tokenizers>=0.22.0,<=0.23.0"], error) is None
    assert sglang_matrix._fallback(tmp_path, first, "ImportError: something else") is None


# ----------------------------------------------------------------------------- issue 28: what a cell may claim
def test_a_pass_with_more_than_five_percent_discarded_is_off_target():
    """Before issue 28 a cell passed whatever its discard rate (0.8.5.post1 vllm-no-reuse: 40%)."""
    assert matrix.cell_result("pass", 0.4028) == "off-target"
    assert matrix.cell_result("pass", 0.0501) == "off-target"
    assert matrix.cell_result("pass", 0.05) == "pass" and matrix.cell_result("pass", 0.0) == "pass"
    assert matrix.cell_result("divergence", 0.4) == "divergence"  # a divergence stays one
    cell = matrix.Cell("0.8.5.post1", "vllm-no-reuse", "off-target", examples=150, discard_rate=0.4028)
    assert cell.describe().startswith("off-target: 40% of examples discarded")


def _refusing(share: float):
    """A backend (the reference) that refuses about ``share`` of the configs, by a digest of each."""
    import hashlib

    from swafloor.fuzz.backends import ResolvedBackend
    from swafloor.fuzz.backends.reference import reference
    from swafloor.fuzz.protocol import REFERENCE_CAPABILITIES
    from swafloor.fuzz.protocol import Unsupported

    def build(config):
        digest = hashlib.sha256(repr(config.to_dict()).encode()).digest()[0]
        if digest < 256 * share:
            raise Unsupported("this adapter cannot give that config")
        return reference(config)

    return ResolvedBackend("refusing", build, REFERENCE_CAPABILITIES)


@pytest.mark.parametrize("share, expected", [(0.5, "off-target"), (0.0, "pass")])
def test_a_cell_that_discards_much_is_off_target_and_exits_1(monkeypatch, tmp_path, share, expected):
    import argparse

    import swafloor.fuzz.backends as backends

    monkeypatch.setattr(backends, "resolve", lambda name, *a: _refusing(share))
    monkeypatch.setattr(matrix, "_imported_release", lambda release, engine="vllm": None)
    args = argparse.Namespace(engine="vllm", release="0.8.5.post1", examples=40, seed=0, classes=2, out=tmp_path,
                              profile="ci")
    data = matrix._cell_main("0.8.5.post1", "vllm-no-reuse", args)
    assert data["result"] == expected, data
    assert (data["discard_rate"] > 0.05) == (expected == "off-target")


def test_stored_cells_are_read_with_the_off_target_rule(tmp_path):
    """A stored table measured before the rule (a pass that discarded 40% of its examples, as the tables
    of 2026-12-01 held) still loads, and its high-discard passes show off-target, never pass."""
    from swafloor import docs as docs_package
    from swafloor.docs import sections

    data = json.loads((matrix._checkout() / "docs" / "vllm-matrix.json").read_text())
    witness = next(c for c in data["cells"] if c["result"] == "pass")
    witness["discard_rate"] = 0.4
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "vllm-matrix.json").write_text(json.dumps(data))
    token = docs_package._BUILD_ROOT.set(tmp_path)
    try:
        text = sections.vllm_matrix()
    finally:
        docs_package._BUILD_ROOT.reset(token)
    high = [c for c in data["cells"] if c["result"] == "pass" and (c.get("discard_rate") or 0) > 0.05]
    assert high == [witness]
    for c in high:
        row = next(line for line in text.splitlines() if line.startswith(f"| {c['release']} |"))
        column = data["backends"].index(c["backend"])
        assert "off-target" in row.split(" | ")[1 + column], row


def _engine_module(tmp_path, monkeypatch):
    """A stand-in engine package outside swafloor (as vLLM's is): its constructor is monkeypatched below."""
    package = tmp_path / "fake_engine"
    package.mkdir()
    (package / "__init__.py").write_text("def make_manager(config):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    monkeypatch.delitem(sys.modules, "fake_engine", raising=False)

    return importlib.import_module("fake_engine")


def _adapter(engine, style: str):
    """An adapter as vLLM's was: it calls the engine, calling what it raises Unsupported (``style``
    wrap), or refuses a config itself (``absent``: a signature it cannot find)."""
    from swafloor.fuzz.backends import ResolvedBackend
    from swafloor.fuzz.backends.reference import reference
    from swafloor.fuzz.protocol import REFERENCE_CAPABILITIES
    from swafloor.fuzz.protocol import Unsupported

    def build(config):
        if len(config.layers) > 1:
            if style == "absent":
                raise Unsupported("the engine's make_manager takes no 'layers', which this adapter cannot give")
            try:
                engine.make_manager(config)
            except AssertionError as exc:
                raise Unsupported(f"the engine refuses this config: {exc}") from None
        return reference(config)

    return ResolvedBackend("adapted", build, REFERENCE_CAPABILITIES)


def test_an_exception_inside_the_engine_is_a_divergence_with_its_input(tmp_path, monkeypatch):
    """Before issue 28 the engine's own AssertionError, made Unsupported by its adapter, discarded the
    config (vLLM's KVCacheManager on 0.8.5.post1)."""
    from swafloor.fuzz.runner import run_campaign
    from swafloor.fuzz.trace import load

    engine = _engine_module(tmp_path, monkeypatch)

    def refuse(config):
        assert len(config.layers) == 1, "one KV-cache group only"

    monkeypatch.setattr(engine, "make_manager", refuse)
    result = run_campaign(_adapter(engine, "wrap"), examples=60, out_dir=tmp_path / "out")
    assert result.result == "divergence" and result.divergence.field == "build", result.divergence
    assert "AssertionError" in str(result.divergence.backend) and "one KV-cache group" in str(result.divergence.backend)
    assert result.trace_file is not None and len(load(result.trace_file).config.layers) > 1  # its input


def test_an_api_the_adapter_cannot_find_stays_unsupported(tmp_path, monkeypatch):
    from swafloor.fuzz.runner import run_campaign

    engine = _engine_module(tmp_path, monkeypatch)
    result = run_campaign(_adapter(engine, "absent"), examples=60, out_dir=tmp_path / "out")
    assert result.result == "pass" and result.unsupported > 0  # discarded, not a divergence
    # the engine's import failing (a package that cannot initialize here) is absence too
    def broken(config):
        import fake_engine_missing  # noqa: F401

    monkeypatch.setattr(engine, "make_manager", broken)
    from swafloor.fuzz.backends import ResolvedBackend
    from swafloor.fuzz.backends.reference import reference
    from swafloor.fuzz.protocol import REFERENCE_CAPABILITIES
    from swafloor.fuzz.protocol import Unsupported

    def build(config):
        if len(config.layers) > 1:
            try:
                engine.make_manager(config)
            except ImportError as exc:
                raise Unsupported(f"not importable: {exc}") from None
        return reference(config)

    result = run_campaign(ResolvedBackend("imports", build, REFERENCE_CAPABILITIES), examples=60, out_dir=None)
    assert result.result == "pass" and result.unsupported > 0
