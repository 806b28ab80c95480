"""Checks of the docs that need no rebuilding: links, code examples, synopses, coverage. Each returns
a list of problems (empty when all is well), one line each, so a test can show them all at once.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

from . import markdown

__all__ = [
    "doc_files",
    "link_problems",
    "slug",
    "code_blocks",
    "synopsis_problems",
    "coverage_problems",
]

LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    inside = _fenced_lines(text)
    return {slug(line.lstrip("#")) for i, line in enumerate(text.split("\n"))
            if line.startswith("#") and i not in inside}


def _fenced_lines(text: str) -> set[int]:
    lines: set[int] = set()
    for f in markdown.fences(text):
        lines.update(range(f.start, f.end + 1))
    return lines


def link_problems(root: Path) -> list[str]:
    """Every relative link and image resolves to a file, and every #anchor to a heading there."""
    problems = []
    for page in doc_files(root):
        text = page.read_text(encoding="utf-8")
        inside = _fenced_lines(text)
        for i, line in enumerate(text.split("\n")):
            if i in inside:
                continue
            for _, _, target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                path_part, _, anchor = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                where = f"{page.relative_to(root)}:{i + 1}: {target}"
                if not dest.exists():
                    problems.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                    problems.append(f"{where}: no heading with anchor #{anchor}")
    return problems


def code_blocks(root: Path, info: str) -> list[tuple[str, str]]:
    """``(where, code)`` of every fenced block whose info string is ``info`` (README and docs)."""
    out = []
    for page in doc_files(root):
        text = page.read_text(encoding="utf-8")
        for f in markdown.fences(text):
            if f.info == info:
                out.append((f"{page.relative_to(root)}:{f.start + 1}", "\n".join(f.body)))
    return out


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from ..cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _plugin_options() -> set[str]:
    from swafloor.fuzz import plugin

    names: set[str] = set()

    class Group:
        def addoption(self, *opts, **kwargs):
            names.update(opts)

    class Parser:
        def getgroup(self, *args, **kwargs):
            return Group()

        def addoption(self, *opts, **kwargs):
            names.update(opts)

    plugin.pytest_addoption(Parser())
    return names


def synopsis_lines(code: str) -> list[str]:
    """The command lines of a shell or synopsis block, continuation lines joined, comments dropped."""
    lines: list[str] = []
    for raw in code.split("\n"):
        if raw.startswith((" ", "\t")) and lines:
            lines[-1] += " " + raw.strip()
        elif raw.strip():
            lines.append(raw.strip())
    return [line.split(" #", 1)[0].strip() for line in lines if not line.startswith("#")]


SETUP = ("pip install", "pip ", "python3 -m venv", "python -m venv", ". ", "source ", "cd ", "export ", "git ",
         "apt-get ", "mkdir ", "cp ", "ls ", "cat ", "mv ", "sed ")


def synopsis_problems(root: Path) -> list[str]:
    """In every block that is not a transcript, a program or data: each ``swafloor CMD ...`` line
    names a command that exists and only options it has; each ``pytest --swafloor-...`` line only
    options the plugin registers; anything else is a known setup command."""
    subs = _subparsers()
    plugin_opts = _plugin_options()
    problems = []
    for page in doc_files(root):
        text = page.read_text(encoding="utf-8")
        for f in markdown.fences(text):
            if f.info in ("python", "json") or (f.body and f.body[0].startswith("$ ")):
                continue
            if f.info not in ("", "sh", "bash", "console"):
                continue
            where = f"{page.relative_to(root)}:{f.start + 1}"
            for line in synopsis_lines("\n".join(f.body)):
                for part in (p.strip() for p in line.split("&&")):
                    problems += _check_command(part, where, subs, plugin_opts)
    return problems


def _check_command(part: str, where: str, subs: dict, plugin_opts: set[str]) -> list[str]:
    words = part.replace("[", " ").replace("]", " ").replace("|", " ").split()
    if not words:
        return []
    if words[0].endswith("python") and words[1:3] == ["-m", "swafloor"]:  # a venv's python running swafloor
        words = ["swafloor", *words[3:]]
    if words[0].endswith("/bin/swafloor"):  # a venv's swafloor (e.g. the vLLM venv's)
        words = ["swafloor", *words[1:]]
    if words[0].startswith("scripts/"):  # a script of this repository
        root = Path(__file__).resolve().parents[2]
        return [] if (root / words[0]).exists() else [f"{where}: {part!r}: no script {words[0]}"]
    opts = {w.split("=")[0] for w in words if w.startswith("--")}
    if words[0] == "swafloor":
        if len(words) < 2 or words[1] not in subs:
            return [f"{where}: {part!r}: no such command"]
        unknown = sorted(opts - _options(subs[words[1]]))
        return [f"{where}: {part!r}: swafloor {words[1]} has no option {o}" for o in unknown]
    if words[0].endswith("python") and words[1:3] == ["-m", "pytest"]:  # pytest run by a python
        words = ["pytest", *words[3:]]
    if words[0] == "pytest" or words[:2] == ["hypothesis", "fuzz"]:  # HypoFuzz passes -- ARGS to pytest
        unknown = sorted(o for o in opts if o not in plugin_opts and o.startswith("--swafloor"))
        return [f"{where}: {part!r}: the pytest plugin has no option {o}" for o in unknown]
    if part.startswith(SETUP):
        return []
    # A shell line that is neither: a program output or a sketch; it must at least parse.
    try:
        shlex.split(part)
    except ValueError as exc:
        return [f"{where}: {part!r}: {exc}"]
    return [f"{where}: {part!r}: not a swafloor command, a pytest line or a known setup command"]


def coverage_problems(root: Path) -> list[str]:
    """Every theorem in theorems.md with its idea and (if refuted) its picture; every CLI command
    and every registered backend named somewhere in README.md or docs/."""
    from ..cli import COMMANDS
    from swafloor.fuzz.backends import REGISTRY
    from swafloor.proofs.catalogue import CATALOGUE
    from swafloor.proofs.ideas import IDEAS

    problems = []
    theorems = (root / "docs" / "theorems.md").read_text(encoding="utf-8")
    for t in CATALOGUE:
        if f"\n## {t.name}\n" not in theorems:
            problems.append(f"docs/theorems.md: theorem {t.name} missing (run: swafloor docs build)")
        if t.name not in IDEAS:
            problems.append(f"proofs/ideas.py: theorem {t.name} has no proof idea")
        if t.expected.value == "refuted" and not (root / "docs" / "img" / "theorems" / f"{t.name}.svg").exists():
            problems.append(f"docs/img/theorems/{t.name}.svg: the refutation's picture is missing")
    for name in IDEAS:
        if name not in {t.name for t in CATALOGUE}:
            problems.append(f"proofs/ideas.py: {name} is not a theorem of the catalogue")
    everything = "\n".join(p.read_text(encoding="utf-8") for p in doc_files(root))
    for name in COMMANDS:
        if f"swafloor {name}" not in everything:
            problems.append(f"command swafloor {name} appears nowhere in README.md or docs/")
    for name in REGISTRY:
        if f"`{name}`" not in everything:
            problems.append(f"backend {name} appears nowhere in README.md or docs/")
    return problems


def json_problems(root: Path) -> list[str]:
    """Every JSON example parses; a trace example also loads as a trace."""
    from swafloor.fuzz.trace import from_dict

    problems = []
    for where, code in code_blocks(root, "json"):
        try:
            data = json.loads(code)
        except ValueError as exc:
            problems.append(f"{where}: not JSON: {exc}")
            continue
        if isinstance(data, dict) and str(data.get("schema", "")).startswith("swafloor-trace/"):
            try:
                from_dict(data)
            except ValueError as exc:
                problems.append(f"{where}: not a valid trace: {exc}")
    return problems
