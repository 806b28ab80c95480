"""The docs generator: ``swafloor docs build`` (or ``python -m swafloor.docs``) regenerates every
generated page, section, transcript and picture from the code, so the docs cannot drift from it.

What it makes, under the repository root:

- in README.md and every ``docs/*.md``: each generated section (:mod:`.sections`) and each command
  transcript (:mod:`.markdown`); a picture linked right after an ``explain`` transcript
  (``![...](img/NAME.svg)``) is drawn by that very command with ``--svg``;
- ``docs/theorems.md``: the catalogue run and rendered by :func:`swafloor.proofs.docs.render`, and
  ``docs/img/theorems/NAME.svg`` for each refutation (:mod:`.pictures`).

``build(root, check=True)`` writes nothing and reports which files differ from what it would make
(figures of measured transcripts and machine lines masked); the tests call it so.
"""

from __future__ import annotations

import contextvars
import re
import tempfile
from pathlib import Path
from typing import Callable

import attrs

from . import markdown
from .sections import SECTIONS

__all__ = ["BuildResult", "build", "repository_root", "data_root", "pages"]

HISTORY_PICTURE = "docs/img/held-vs-history.svg"
IMAGE_AFTER = re.compile(r"^!\[[^\]]*\]\(([^)\s]+\.svg)\)\s*$")


@attrs.frozen
class BuildResult:
    """What a build made (path relative to the root -> text) and which of those differ on disk."""

    files: dict[str, str]
    changed: tuple[str, ...]


def repository_root() -> Path:
    """The checkout this package lives in, if it has docs/; else the current folder."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "docs").is_dir() and (here / "pyproject.toml").exists() else Path.cwd()


_BUILD_ROOT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("swafloor_docs_build_root", default=None)


_BUILT_FILES: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("swafloor_docs_built", default=None)


def page_text(rel: str) -> str:
    """A page as this build makes it (a section that quotes other pages, as the index's map does,
    must read them as built, not as they were on disk before the build), else as it is on disk."""
    built = _BUILT_FILES.get()
    if built is not None and rel in built:
        return built[rel]
    return (data_root() / rel).read_text(encoding="utf-8")


def data_root() -> Path:
    """Where generated sections read their stored data (matrices, models, regression traces, solver
    times): the root being built, never the folder the package happens to be installed in (a
    non-editable install has no docs/; a build of another checkout reads that checkout's data)."""
    return _BUILD_ROOT.get() or repository_root()


def pages(root: Path) -> list[Path]:
    """The markdown pages the generator refreshes (theorems.md is rendered whole, separately)."""
    found = [root / "README.md"] if (root / "README.md").exists() else []
    found += sorted(p for p in (root / "docs").glob("*.md") if p.name != "theorems.md")
    return found


def _svg_runner(root: Path, page: Path, text: str, files: dict[str, str]) -> Callable[[str, Path], list[str]]:
    """A transcript runner that also draws the picture linked right after an explain transcript."""
    lines = text.split("\n")
    picture_of: dict[str, str] = {}
    for tr in markdown.transcripts(text):
        j = tr.fence.end + 1
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith(markdown.MEASURED_LINE)):
            j += 1
        m = IMAGE_AFTER.match(lines[j]) if j < len(lines) else None
        explains = [c for c, _ in tr.commands if c.split()[:2] == ["swafloor", "explain"]]
        if m and len(explains) == 1:
            picture_of[explains[0]] = m.group(1)

    def run(command: str, root_: Path) -> list[str]:
        target = picture_of.get(command)
        if target is None:
            return markdown.run_transcript(command, root_)
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "picture.svg"
            result = markdown.run_transcript(f"{command} --svg {out}", root_)
            rel = (page.parent / target).resolve().relative_to(root.resolve()).as_posix()
            files[rel] = out.read_text(encoding="utf-8")
        return result

    return run


def _theorem_files(files: dict[str, str]) -> None:
    from swafloor.proofs import catalogue, runner
    from swafloor.proofs.docs import render

    from .pictures import refutation_svg

    results = runner.prove(catalogue.CATALOGUE, jobs=2)
    files["docs/theorems.md"] = render(results, times_file=data_root() / "docs" / "solver_times.json")
    for r in results:
        if r.discharge.counterexample is not None:
            trace = r.replay.trace if r.replay is not None else None
            files[f"docs/img/theorems/{r.theorem.name}.svg"] = refutation_svg(
                r.theorem.name, dict(r.discharge.counterexample), trace
            )


def build(root: Path | str | None = None, check: bool = False, theorems: bool = True,
          only: tuple[str, ...] = (), measured: bool = True) -> BuildResult:
    """Regenerate everything (or only the pages named in ``only``, paths relative to the root);
    write the files that changed unless ``check``. ``measured=False`` leaves the transcripts marked
    measured (timings: long benchmark and campaign runs) as they are."""
    root = Path(root).resolve() if root is not None else repository_root()
    token = _BUILD_ROOT.set(root)
    try:
        return _build(root, check, theorems, only, measured)
    finally:
        _BUILD_ROOT.reset(token)


INDEX_PAGE = "docs/index.md"  # quotes every other page (its map): built after them


def _build(root: Path, check: bool, theorems: bool, only: tuple[str, ...], measured: bool) -> BuildResult:
    files: dict[str, str] = {}
    originals: dict[str, str] = {}
    outputs: dict[tuple[str, str], list[str]] = {}  # (page, command) -> its output, run once
    token = _BUILT_FILES.set(files)
    try:
        return _build_into(root, check, theorems, only, measured, files, originals, outputs)
    finally:
        _BUILT_FILES.reset(token)


def _build_into(root: Path, check: bool, theorems: bool, only: tuple[str, ...], measured: bool,
                files: dict[str, str], originals: dict[str, str],
                outputs: dict[tuple[str, str], list[str]]) -> BuildResult:

    def refresh(page: Path, rel: str, text: str) -> str:
        new = markdown.refresh_regions(text, SECTIONS, rel)
        runner = _svg_runner(root, page, new, files)

        def cached(command: str, root_: Path) -> list[str]:
            if (rel, command) not in outputs:
                outputs[(rel, command)] = runner(command, root_)
            return outputs[(rel, command)]

        return markdown.refresh_transcripts(new, root, cached, measured)

    def make(page: Path) -> None:
        rel = page.relative_to(root).as_posix()
        if only and rel not in only:
            return
        originals[rel] = page.read_text(encoding="utf-8")
        files[rel] = refresh(page, rel, originals[rel])

    ordered = pages(root)
    for page in ordered:
        if page.relative_to(root).as_posix() != INDEX_PAGE:
            make(page)
    if theorems and (not only or "docs/theorems.md" in only):
        _theorem_files(files)
    for page in ordered:  # last: its map quotes the pages just made
        if page.relative_to(root).as_posix() == INDEX_PAGE:
            make(page)
    from .pictures import held_vs_history_svg

    files[HISTORY_PICTURE] = held_vs_history_svg()  # the rule card's picture (README, docs/index.md)
    changed = []
    for rel in list(files):
        path = root / rel
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if rel in originals and old is not None and old != originals[rel]:
            # Someone edited the page while the commands ran (a shared working tree): refresh what is
            # there now, reusing the outputs already made, so their edit is kept.
            files[rel] = refresh(path, rel, old)
        text = files[rel]
        same = old is not None and (markdown.normalise(old) == markdown.normalise(text)
                                    if rel.endswith(".md") else old == text)
        if not same:
            changed.append(rel)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        elif not check and old != text and rel.endswith(".md"):
            path.write_text(text, encoding="utf-8")  # new figures of measured transcripts
    if not only and theorems:  # a picture no page makes any more is stale
        for path in sorted((root / "docs" / "img").rglob("*.svg")) if (root / "docs" / "img").is_dir() else []:
            rel = path.relative_to(root).as_posix()
            if rel not in files:
                changed.append(rel)
                if not check:
                    path.unlink()
    return BuildResult(files, tuple(changed))
