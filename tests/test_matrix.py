"""``swafloor matrix vllm``'s parts that need no vLLM: release selection and order, the bisection, the
domain line, and bad arguments (exit 2, one line). The command on real releases is tested in
tests/test_vllm_releases.py, in the vLLM venv."""

from __future__ import annotations

import subprocess
import sys

import pytest

from swafloor.fuzz import matrix


def test_release_order():
    ordered = ["0.8.3", "0.8.5", "0.8.5.post1", "0.8.6", "0.9.0", "0.9.0.1", "0.10.1", "0.10.1.1", "0.33.0"]
    assert sorted(reversed(ordered), key=matrix.release_key) == ordered
    assert list(matrix.RELEASES) == sorted(matrix.RELEASES, key=matrix.release_key)


def test_supported_releases_span_every_minor_line_from_the_first_with_a_sliding_window_manager():
    minors = {tuple(matrix.release_key(r)[:2]) for r in matrix.RELEASES}
    assert minors == {(0, m) for m in range(8, 34)}
    assert matrix.RELEASES[0] == "0.8.3" and matrix.RELEASES[-1] == "0.33.0"


def test_select_releases():
    assert matrix.select_releases(None) == matrix.RELEASES
    assert matrix.select_releases("0.9..0.11.2") == ("0.9.2", "0.10.2", "0.11.2")
    assert matrix.select_releases("0.32.0..") == ("0.32.0", "0.33.0")
    assert matrix.select_releases("..0.8.5.post1") == ("0.8.3", "0.8.5.post1")
    assert matrix.select_releases("0.10.1.1,0.9.2,0.9.2") == ("0.9.2", "0.10.1.1")  # any release, sorted, once
    for bad in ("x", "0.9.2,", "1..0.5", "0.7.3", "0.9.2;rm", "0.1..0.2"):
        with pytest.raises(matrix.MatrixError):
            matrix.select_releases(bad)


def test_bisect_finds_the_first_change_in_few_tries():
    releases = matrix.RELEASES
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
    line = matrix.domain()
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

    venv = matrix.VllmVenv(tmp_path, tmp_path / "python", "0.33.0")
    monkeypatch.setattr(matrix, "find_venv", lambda option=None: venv)
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
    assert "interrupted after 2 of 4 cells" in out.err and "0.9.2" in out.err and "pass (3 ex.)" in out.err
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


def test_bisect_skips_releases_that_cannot_run_the_trace():
    releases = matrix.RELEASES[:10]
    verdicts = {r: ("divergence:outcome" if i < 6 else "match") for i, r in enumerate(releases)}
    verdicts[releases[4]] = verdicts[releases[5]] = "unsupported (a module is missing)"
    found = matrix.bisect(releases, verdicts.__getitem__)
    assert found["changes"] and found["first"] == releases[6] and found["before"] == releases[3]
    assert set(found["skipped"]) <= {releases[4], releases[5]} and found["skipped"]
