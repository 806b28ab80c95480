"""Markdown handling for the docs generator: fenced blocks, command transcripts, generated regions.

A **transcript** is a fenced block whose first line starts with ``$ ``: each ``$ COMMAND`` line is
followed by what the command prints on stdout. The generator reruns every command and rewrites its
output, so a transcript cannot drift from the command. A transcript whose output holds timings is
**measured**: the generator marks it with ``<!-- transcript: measured -->`` before the fence and
writes the machine it ran on in a line after it; comparisons mask its figures.

A **generated region** is the text between ``<!-- begin generated: NAME -->`` and
``<!-- end generated: NAME -->``; the generator replaces it with what the section ``NAME`` renders.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Mapping

import attrs

__all__ = [
    "Fence",
    "fences",
    "Transcript",
    "transcripts",
    "run_transcript",
    "refresh_transcripts",
    "refresh_regions",
    "normalise",
    "machine",
    "MEASURED",
    "MEASURED_LINE",
    "DocsError",
]

FENCE = re.compile(r"^(\s*)(```+)(.*)$")
MEASURED = "<!-- transcript: measured -->"
MEASURED_LINE = "Measured by `swafloor docs build` on"
TIMING = re.compile(r"\b\d[\d,]*(?:\.\d+)? ?(?:s|ms|steps/s)\b")
REGION = re.compile(r"<!-- begin generated: ([\w./-]+) -->\n(.*?)<!-- end generated: \1 -->", re.S)


#: Exit codes of a command that printed its result: 0, 1 (a check failed) and 4 (simulate's deadlock).
RESULT_EXITS = (0, 1, 4)


class DocsError(Exception):
    """A page cannot be generated: a transcript command that is not swafloor's, an unknown section."""


@attrs.frozen
class Fence:
    """A fenced code block: its info string, its body lines, and where it sits (line indices of the
    opening and closing fences)."""

    info: str
    body: tuple[str, ...]
    start: int
    end: int


def fences(text: str) -> Iterator[Fence]:
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            ticks = m.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(ticks):
                j += 1
            yield Fence(m.group(3).strip(), tuple(lines[i + 1:j]), i, j)
            i = j + 1
        else:
            i += 1


@attrs.frozen
class Transcript:
    """The ``$ command`` lines of a transcript block, each with its recorded output lines."""

    fence: Fence
    commands: tuple[tuple[str, tuple[str, ...]], ...]


def transcripts(text: str) -> Iterator[Transcript]:
    for fence in fences(text):
        if not fence.body or not fence.body[0].startswith("$ "):
            continue
        commands: list[tuple[str, list[str]]] = []
        for line in fence.body:
            if line.startswith("$ "):
                commands.append((line[2:], []))
            else:
                commands[-1][1].append(line)
        yield Transcript(fence, tuple((c, tuple(_strip_blank_tail(out))) for c, out in commands))


def _strip_blank_tail(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def argv_of(command: str) -> list[str]:
    """The argv a transcript command runs: ``swafloor ...`` and ``python -m swafloor...`` only."""
    words = shlex.split(command, comments=True)
    if words[:1] == ["swafloor"]:  # the installed console script, as users run it
        script = Path(sys.executable).parent / "swafloor"
        return [str(script), *words[1:]] if script.exists() else [sys.executable, "-m", "swafloor", *words[1:]]
    if words[:2] == ["python", "-m"] and len(words) > 2 and words[2].split(".")[0] == "swafloor":
        return [sys.executable, "-m", *words[2:]]
    raise DocsError(f"transcript command {command!r}: only 'swafloor ...' and 'python -m swafloor...' are run")


def is_swafloor(command: str) -> bool:
    """Whether a transcript command is one the generator runs (see :func:`argv_of`)."""
    try:
        argv_of(command)
    except (DocsError, ValueError):
        return False
    return True


def run_transcript(command: str, root: Path, timeout: float = 900.0) -> list[str]:
    """Run one transcript command in a scratch folder (``tests`` and ``docs`` of ``root`` reachable
    there) and return its stdout lines."""
    argv = argv_of(command)
    root = Path(root).resolve()  # a relative root would link tests -> tests inside the scratch folder
    with tempfile.TemporaryDirectory(prefix="swafloor-docs-") as scratch:
        for name in ("tests", "docs"):
            if (root / name).exists():
                os.symlink(root / name, Path(scratch) / name)
        env = dict(os.environ, COLUMNS="100", PYTHONHASHSEED="0")
        env.pop("CI", None)
        done = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
    out = done.stdout.rstrip("\n")
    if done.returncode not in RESULT_EXITS or (not out and done.returncode):
        raise DocsError(f"transcript command {command!r} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return out.split("\n") if out else []


def machine() -> str:
    """The machine figures were measured on, in words."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{cpu}, {cores} cores available, Python {platform.python_version()}, "
            f"{platform.system()} {platform.machine()}")


def refresh_transcripts(text: str, root: Path, run: Callable[[str, Path], list[str]] = run_transcript,
                        measured: bool = True) -> str:
    """``text`` with every transcript's outputs rerun; measured ones marked and given the machine.
    With ``measured=False`` transcripts already marked measured are left as they are (not rerun)."""
    lines = text.split("\n")
    out: list[str] = []
    cursor = 0
    for tr in transcripts(text):
        f = tr.fence
        if not measured and f.start > 0 and lines[f.start - 1] == MEASURED:
            continue  # copied verbatim with the text around it
        if not all(is_swafloor(command) for command, _ in tr.commands):
            continue  # a shell session (setup, CI recipe): shown, not run
        out.extend(lines[cursor:f.start])
        body: list[str] = []
        for i, (command, _) in enumerate(tr.commands):
            if i:
                body.append("")
            body.append("$ " + command)
            body.extend(run(command, root))
        timed = any(TIMING.search(line) for line in body if not line.startswith("$ "))
        while out and out[-1] == MEASURED:
            out.pop()
        if timed:
            out.append(MEASURED)
        out.append(lines[f.start])
        out.extend(body)
        out.append(lines[f.end])
        cursor = f.end + 1
        # An old machine line right after the fence is replaced.
        if cursor < len(lines) and lines[cursor].startswith(MEASURED_LINE):
            cursor += 1
        if timed:
            out.append(f"{MEASURED_LINE} {machine()}.")
    out.extend(lines[cursor:])
    return "\n".join(out)


def refresh_regions(text: str, sections: Mapping[str, Callable[[], str]], page: str) -> str:
    def replace(m: re.Match) -> str:
        name = m.group(1)
        if name not in sections:
            raise DocsError(f"{page}: unknown generated section {name!r} (known: {', '.join(sorted(sections))})")
        body = sections[name]().rstrip("\n") + "\n"
        return f"<!-- begin generated: {name} -->\n{body}<!-- end generated: {name} -->"

    return REGION.sub(replace, text)


def mask_timings(line: str) -> str:
    """``line`` with its timings masked: figures with a time unit or ``steps/s``, every decimal figure
    (seconds and shares), and everything after a ``steps/s`` or ``wall`` figure's label (rates);
    whole numbers elsewhere are kept, but on a line about parallel workers, whose counts depend on
    how the processes interleave."""
    if "workers" in line:
        return " ".join(re.sub(r"\d[\d,.]*", "#", line).split())
    line = TIMING.sub("#", line)
    line = re.sub(r"\d[\d,]*\.\d+", "#", line)
    line = re.sub(r"(steps/s:?)(.*)$", lambda m: m.group(1) + re.sub(r"\d[\d,]*", "#", m.group(2)), line)
    return " ".join(line.split())


def normalise(text: str) -> str:
    """``text`` with what legitimately varies between runs masked: the timings of measured
    transcripts (:func:`mask_timings`) and the machine lines. Their counts (examples, steps, runs)
    are compared: a seeded campaign reproduces them."""
    lines = text.split("\n")
    measured_starts = {f.start for f in fences(text) if f.start > 0 and lines[f.start - 1] == MEASURED}
    for f in fences(text):
        if f.start in measured_starts:
            for i in range(f.start + 1, f.end):
                if not lines[i].startswith("$ "):
                    lines[i] = mask_timings(lines[i])
    return "\n".join(MEASURED_LINE + " ..." if line.startswith(MEASURED_LINE) else line for line in lines)
