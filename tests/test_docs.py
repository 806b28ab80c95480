"""The docs: generated files are current, every example runs, links resolve, everything is covered.

`swafloor docs build` regenerates what these tests compare; when one fails, run it and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from swafloor.docs import build, checks, markdown

ROOT = Path(__file__).resolve().parents[1]


def _fresh_clone(tmp_path: Path) -> Path:
    """A fresh clone of this checkout's HEAD (what CI checks out): no ignored or untracked file."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=300)
    return clone


def test_generated_files_are_current_on_a_fresh_clone(tmp_path):
    """Sections, transcripts (all but the measured ones: long timed runs), pictures and
    theorems.md equal what `swafloor docs build --check` makes now, on a fresh clone of HEAD: generated
    pages come only from the code and committed files (CI's checkout is such a clone; locally, commit
    first)."""
    clone = _fresh_clone(tmp_path)
    result = build(clone, check=True, measured=False)
    assert "docs/theorems.md" in result.files and "docs/comparison.md" in result.files
    assert "## Solver times" in result.files["docs/theorems.md"]
    assert "Not measured yet" not in result.files["docs/theorems.md"], "docs/solver_times.json was not read"
    assert not result.changed, f"out of date (run: swafloor docs build, and commit): {list(result.changed)}"


def test_stored_data_is_read_from_the_root_being_built(tmp_path, monkeypatch):
    """Issue 28 §6: a build of another root reads that root's stored JSON (models, solver times), not
    the data beside the installed package (a non-editable install has none)."""
    from swafloor.proofs import runner

    clone = _fresh_clone(tmp_path)
    models = json.loads((clone / "docs" / "models.json").read_text(encoding="utf-8"))
    models["models"] = models["models"][:1] if isinstance(models, dict) and "models" in models else models[:1]
    (clone / "docs" / "models.json").write_text(json.dumps(models, indent=1), encoding="utf-8")
    changed = build(clone, check=True, theorems=False, measured=False, only=("docs/models.md",)).changed
    assert changed == ("docs/models.md",), changed  # the clone's one-model table, not ROOT's
    (clone / "docs" / "solver_times.json").unlink()
    monkeypatch.setattr(runner, "prove", lambda *args, **kwargs: [])  # the page's tail is what is read here
    made = build(clone, check=True, measured=False, only=("docs/theorems.md",)).files["docs/theorems.md"]
    assert "Not measured yet" in made, made[-600:]


def test_the_index_map_quotes_pages_as_this_build_makes_them(tmp_path, monkeypatch):
    """The map in docs/index.md quotes each page's first sentence; theorems.md is rendered in the
    same build, so one build must quote the theorems.md it makes, not the one on disk before it (CI
    once failed on a fresh clone because a single build left the map one build behind)."""
    import swafloor.docs as docs_build

    clone = _fresh_clone(tmp_path)
    (clone / "docs" / "theorems.md").write_text("# Theorems\n\nThe stale first sentence. More.\n", encoding="utf-8")

    def fake_theorems(files):
        files["docs/theorems.md"] = "# Theorems\n\nThe sentence this build makes. More.\n"

    monkeypatch.setattr(docs_build, "_theorem_files", fake_theorems)
    made = build(clone, check=True, measured=False, only=("docs/index.md", "docs/theorems.md")).files
    assert "The sentence this build makes." in made["docs/index.md"]
    assert "The stale first sentence." not in made["docs/index.md"]


def test_measured_transcripts_name_the_machine_and_run_real_commands():
    found = 0
    for page in checks.doc_files(ROOT):
        text = page.read_text(encoding="utf-8")
        lines = text.split("\n")
        for tr in markdown.transcripts(text):
            f = tr.fence
            if f.start == 0 or lines[f.start - 1] != markdown.MEASURED:
                body = [line for _, out in tr.commands for line in out]
                assert not any(markdown.TIMING.search(line) for line in body), (
                    f"{page.name}:{f.start + 1}: a transcript with timings must be marked measured")
                continue
            found += 1
            assert lines[f.end + 1].startswith(markdown.MEASURED_LINE), f"{page.name}:{f.end + 2}: no machine line"
            for command, _ in tr.commands:
                markdown.argv_of(command)  # a swafloor command, or DocsError
    assert found >= 2  # fuzzing.md: the campaign transcripts and the benchmark


def test_every_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = checks.code_blocks(ROOT, "python")
    assert len(blocks) >= 4
    for where, code in blocks:
        exec(compile(code, where, "exec"), {"__name__": f"docs_example_{len(where)}"})


def test_json_examples_parse_and_traces_load():
    assert checks.json_problems(ROOT) == []
    assert checks.code_blocks(ROOT, "json"), "fuzzing.md shows a trace"


def test_synopses_name_real_commands_and_options():
    assert checks.synopsis_problems(ROOT) == []


def test_synopsis_check_catches_a_wrong_option():
    subs = checks._subparsers()
    assert checks._check_command("swafloor replay T.json [--backend NAME]", "x", subs, set()) == []
    assert checks._check_command("swafloor replay T.json [--nonsense]", "x", subs, set())
    assert checks._check_command("swafloor frobnicate", "x", subs, set())
    assert checks._check_command("rm -rf /", "x", subs, set())


def test_relative_links_and_anchors_resolve():
    assert checks.link_problems(ROOT) == []


def test_link_check_catches_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Top\n[ok](docs/a.md#part) [bad](docs/none.md) [anchor](docs/a.md#nope)\n")
    (tmp_path / "docs" / "a.md").write_text("# A\n## Part\n")
    problems = checks.link_problems(tmp_path)
    assert len(problems) == 2 and "none.md" in problems[0] and "#nope" in problems[1]


def test_every_theorem_command_and_backend_is_in_the_docs():
    assert checks.coverage_problems(ROOT) == []


def _printed_adapter_commands(page: str) -> list[str]:
    """The shell lines of a page that run the toy adapter, exactly as printed, in order."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    lines = []
    for f in markdown.fences(text):
        if f.info == "sh":
            lines += [line for line in f.body if "toy_adapter:make" in line]
    return lines


def _run_printed(command: str, folder: Path) -> subprocess.CompletedProcess:
    """``command`` run by a shell in ``folder`` as a user runs it: the venv's scripts first on PATH,
    no PYTHONPATH, nothing of this checkout on the path but the installed package."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=900)


def _toy_folders(tmp_path: Path) -> tuple[Path, Path]:
    """Two folders holding docs/backends.md's toy_adapter.py: as printed, and with the in-flight-token
    +1 dropped (the change the pages describe)."""
    text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    code = next(code for _, code in checks.code_blocks(ROOT, "python") if "toy_adapter.py" in code)
    assert code in text
    broken = code.replace("(b + 1) * t > h + 1 - window", "(b + 1) * t > h - window")
    assert broken != code and "(b + 1) * t > h - window" in text
    assert "change `h + 1 - window` to `h - window`" in (ROOT / "docs" / "tutorial.md").read_text()
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder, source in ((good, code), (bad, broken)):
        folder.mkdir()
        (folder / "toy_adapter.py").write_text(source)
    return good, bad


def _expect(command: str, folder: Path, code: int) -> subprocess.CompletedProcess:
    done = _run_printed(command, folder)
    assert done.returncode == code, (command, folder.name, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


def _assert_released_late(report: str) -> None:
    """The divergence the pages describe: at a commit (where the window moves and stale blocks are
    released), the broken toy holds more slots than the reference (released one token late, not early)."""
    m = re.search(r"^divergence at step (\d+): (\w+)\(.*\n  field: (\w+)\[\d+\] \((\w+)\)\n"
                  r"  reference: (\d+)\n  backend:   (\d+)$", report, re.M)
    assert m, report[-3000:]
    _, op, part, mode, reference, backend = m.groups()
    assert (op, part, mode) == ("commit", "pool_used", "exact"), m.group(0)
    assert int(backend) > int(reference), f"released early, not late: {m.group(0)}"


def test_adapter_commands_in_backends_md_run_as_printed(tmp_path):
    """The complete adapter of docs/backends.md, saved as toy_adapter.py in a folder, passes every
    command the page prints (the swafloor console script and pytest's plugin, run from that folder,
    no PYTHONPATH); the same adapter with the in-flight-token +1 dropped fails them."""
    commands = _printed_adapter_commands("backends.md")
    assert any(c.startswith("swafloor fuzz") for c in commands), commands
    assert any("pytest --swafloor-backend" in c for c in commands), commands
    good, bad = _toy_folders(tmp_path)
    for command in commands:
        _expect(command, good, 0)
        done = _expect(command, bad, 1)
        if command.startswith("swafloor fuzz"):
            _assert_released_late(done.stdout)


def _shell_block(page: str, needle: str) -> list[str]:
    """The lines of the page's first ``sh`` block holding ``needle``."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return next(list(f.body) for f in markdown.fences(text) if f.info == "sh" and any(needle in x for x in f.body))


def test_tutorial_commands_run_as_printed(tmp_path):
    """docs/tutorial.md's steps, as printed: the campaign passes the toy and fails it broken, with the
    divergence the page describes (a commit, pool use, one token late); the saved trace replays as a
    divergence on the broken toy, draws, and replays clean on the fixed one with a hint on keeping it;
    the regression steps of section 7, run in that same folder, pass on the fixed toy and fail on the
    broken one."""
    commands = _printed_adapter_commands("tutorial.md")
    campaign = [c for c in commands if "fuzz-failures" not in c and "regressions/" not in c and "pytest" not in c]
    on_trace = [c for c in commands if "fuzz-failures" in c]
    assert campaign and any(c.startswith("swafloor replay") for c in on_trace), commands
    good, bad = _toy_folders(tmp_path)
    for command in campaign:
        _expect(command, good, 0)
        _assert_released_late(_expect(command, bad, 1).stdout)
    assert len(list((bad / "fuzz-failures").glob("*.json"))) == 1
    for command in on_trace:
        _expect(command, bad, 1 if command.startswith("swafloor replay") else 0)
    (good / "fuzz-failures").mkdir()
    for trace in (bad / "fuzz-failures").glob("*.json"):
        (good / "fuzz-failures" / trace.name).write_text(trace.read_text())
    for command in on_trace:
        done = _expect(command, good, 0)
        if command.startswith("swafloor replay"):
            assert "NOT as expected" in done.stdout and '"expect": "match"' in done.stdout, done.stdout
    keep = _shell_block("tutorial.md", "regressions/")
    assert any("pip install pytest" in line for line in keep), keep
    for command in keep:
        _expect(command, good, 0)
    assert list((good / "regressions").glob("*.json")) and not list((good / "fuzz-failures").glob("*.json"))
    for command in keep:
        if command.startswith("swafloor replay"):
            _expect(command.replace("regressions/", str(good / "regressions") + "/"), bad, 1)


def test_glossary_defines_the_words_the_pages_use():
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    defined = set(re.findall(r"^- \*\*([^*]+)\*\*", text, re.M))
    for word in ("slot", "block", "life cycle", "pool group", "history", "capacity", "live", "stale", "in flight",
                 "floor", "start-block `+1`", "in-flight-token `+1`",
                 "fixed minimum / legacy minimum"):
        assert word in defined, word


def test_ci_pins_the_cpu_build_of_torch():
    """A bare torch==X on PyPI is the CUDA build: the pin names the CPU build, and README says where it
    comes from."""
    constraints = (ROOT / ".ci" / "constraints.txt").read_text(encoding="utf-8")
    assert re.search(r"^torch==[\d.]+\+cpu$", constraints, re.M), constraints
    assert "download.pytorch.org/whl/cpu" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_no_page_installs_swafloor_from_pypi():
    """swafloor is not on PyPI: every pip install of it names a path."""
    for page in checks.doc_files(ROOT):
        for line in page.read_text(encoding="utf-8").splitlines():
            for m in re.finditer(r"pip install ([^&;|#`]*)", line):
                names = [w.strip("'\"") for w in m.group(1).split() if not w.startswith("-")]
                assert not any(re.fullmatch(r"swafloor(\[.*\])?([=<>!~].*)?", n) for n in names), (page.name, line)


def test_ideas_are_sentences():
    from swafloor.proofs.ideas import IDEAS

    for name, idea in IDEAS.items():
        assert 40 <= len(idea) <= 500 and idea.endswith("."), name


@pytest.mark.parametrize("section", sorted(__import__("swafloor.docs.sections", fromlist=["SECTIONS"]).SECTIONS))
def test_every_section_is_used_by_a_page(section):
    pages = "\n".join(p.read_text(encoding="utf-8") for p in checks.doc_files(ROOT))
    assert f"<!-- begin generated: {section} -->" in pages


def test_comparison_numbers_come_from_the_reference():
    """Spot values of the generated table against the reference formulas and the facts."""
    from swafloor.reference import floors, peers

    text = (ROOT / "docs" / "comparison.md").read_text(encoding="utf-8")
    row = re.search(r"^\| 32 \| 4097 \| (\d+) \| (\d+) \| \*\*1\*\* \| \*\*(\d+)\*\* \|", text, re.M)
    assert row, "the t = 32, W = 4097 row"
    assert int(row.group(1)) == floors.swa_floor(32, 4097, 0) == 129
    assert int(row.group(2)) == peers.upstream_swa_floor(32, 4097, 0)
    assert int(row.group(3)) == peers.trtllm_cpp_blocks(32, 4097) == 130
    for t in (16, 32, 64, 128):  # SGLang's long-request budget is the C++ manager's number
        for w in (128, 1024, 4096, 4097):
            assert peers.sglang_request_pages(t, w, 10 * w) == peers.trtllm_cpp_blocks(t, w)


def test_every_picture_is_well_formed_svg_and_linked():
    import xml.etree.ElementTree as ET

    pictures = sorted((ROOT / "docs" / "img").rglob("*.svg"))
    assert len(pictures) >= 10
    linked = "\n".join(p.read_text(encoding="utf-8") for p in checks.doc_files(ROOT))
    for path in pictures:
        root = ET.fromstring(path.read_text(encoding="utf-8"))
        assert root.tag.endswith("svg") and float(root.get("width")) <= 4000, path.name
        assert path.relative_to(ROOT / "docs").as_posix() in linked, f"{path.name} is linked from no page"


def test_readme_test_command_is_what_ci_runs():
    """README's test command and the last line of .ci/run are the same command, and the constraints
    file they name is there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = next(line.split("   #")[0].strip() for line in readme.splitlines() if line.endswith("# the tests"))
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert ci[-1].strip() == command
    constraints = re.search(r"-c (\S+)", command).group(1)
    assert (ROOT / constraints).is_file(), constraints


def test_readme_starts_with_the_two_commands():
    """README's first block, right under its title, is the main job (`swafloor prove`) and the tests."""
    lines = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert lines[0].startswith("# ") and lines[1] == "```sh" and lines[4] == "```", lines[:5]
    assert "swafloor prove" in lines[2] and lines[3].endswith("# the tests"), lines[2:4]


def test_the_backend_table_is_built_from_the_registry():
    """docs/backends.md's table has one row per name the registry resolves (and the dataplane:NAME
    wrappers): what it compares, what it needs installed, its status."""
    from swafloor.docs.sections import backends_table
    from swafloor.fuzz.backends import REGISTRY, backend_rows, resolve

    rows = backend_rows()
    assert [row["name"] for row in rows] == [*REGISTRY, "dataplane:NAME"]
    table = backends_table()
    lines = {line.split(" | ")[0].strip("| `"): line for line in table.splitlines()[2:]}
    for row in rows:
        assert row["needs"] in lines[row["name"]] and row["status"] in lines[row["name"]], row["name"]
    assert lines["trtllm"].endswith("| never run on a GPU |")
    assert "at-least" not in lines["trtllm"] and "every part, exact" in lines["oracle"]
    assert "(no docstring)" not in table, "a backend's factory has no docstring the table can read"
    assert resolve("reference").status == REGISTRY["reference"].status
    assert table in (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")


def test_docs_check_with_a_relative_root_runs_its_transcripts():
    """``--root .`` once linked tests -> tests inside the scratch folder ("Too many levels of symbolic
    links": docs/models.md's transcript reads docs/models/); a relative root is resolved first."""
    done = subprocess.run([sys.executable, "-m", "swafloor", "docs", "build", "--check", "--root", ".",
                           "--only", "docs/models.md", "--no-theorems", "--no-measured"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def test_comparison_rows_name_the_release_or_commit():
    """Every engine row of comparison.md names what it was read from or run against; vLLM's names the
    release scripts/vllm-venv pins."""
    from swafloor.docs.sections import PEERS, comparison_sizings

    pinned = re.search(r"vllm==([\w.]+)", (ROOT / "scripts" / "vllm-venv").read_text()).group(1)
    table = comparison_sizings()
    assert all(p.get("release") for p in PEERS)
    assert f"vLLM {pinned}, pinned" in table and "52fc8f465b" in table and "sglang 0.5.23" in table


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_rule_card_opens_readme_and_index(page):
    """The normative rule comes before any other section of the page, and before any install step
    but README's two opening commands (the brief: README starts with them)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    card = text.index("A paged KV-cache manager MUST give every pool group at least the sum")
    first_section = text.index("\n## ")
    before = text[:card]
    if page == "README.md":
        before = before[before.index("```\n", before.index("```sh")) :]
    assert card < first_section and ("pip install" not in before)


def test_backends_md_names_every_capabilities_flag_and_part():
    import attrs

    from swafloor.fuzz.protocol import Capabilities, Part

    text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    for field in attrs.fields(Capabilities):
        assert f"| `{field.name}` |" in text, field.name
    for part in Part:
        assert f"| `{part.value}` |" in text, part.value
