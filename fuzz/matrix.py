"""The release matrix: an engine's backends on every supported release of that engine, ``swafloor
matrix ENGINE``, one machinery for every engine. What differs per engine is data, an :class:`Engine`
in the engine's room: its releases, backends, the modules some releases need beside it, its pinned
venv and the function that imports it (vLLM's: :mod:`swafloor.fuzz.engines.vllm.matrix`, SGLang's:
:mod:`swafloor.fuzz.engines.sglang.matrix`; :data:`ENGINES` names them, so this module imports neither).

Each release is installed once (``pip install --no-deps --target``) into a cache folder,
``~/.cache/swafloor/ENGINE/X`` (``$SWAFLOOR_CACHE`` or ``$XDG_CACHE_HOME`` move it; ``--cache`` too),
beside the pinned venv's dependencies. A module the release's import path needs and the pinned venv
lacks is added to the same folder from the engine's ``extra_modules`` (pinned), found by trying the
import, not by release.

Every cell (release x backend) runs in a subprocess of the pinned venv's python with the release's
folder first on ``PYTHONPATH`` (the pinned release itself runs without one): the same bounded campaign
for each (the ci profile unless ``--profile`` names another of :data:`~swafloor.fuzz.runner.PROFILES`, a
fixed seed, ``examples`` examples; each cell records its profile), then one of

- ``pass``;
- ``divergence``: the first differing part, with the shrunk trace saved under the output folder;
- ``unsupported``: one line saying which piece the release lacks (from the backend's ``Unsupported``);
- ``off-target``: no divergence, but more than :data:`~swafloor.fuzz.runner.MAX_DISCARD_RATE` of the
  examples were discarded (the backend refused their config): the campaign saw too little to pass
  (:func:`cell_result`; stored cells are read through it too).

An exception raised inside the engine's own code while a cell's backend is built or driven is not
``unsupported``: it is a divergence with its input (the build, or the step; the trace is saved). Only an
import or a signature the adapter cannot find is ``unsupported``.

The pinned venv is found from ``--ENGINE-venv``, else the engine's ``$SWAFLOOR_..._VENV``, else its
folder (``.venv-vllm``, ``.venv-sglang``) in the checkout this swafloor runs from (where its script puts
it), so the command runs from the main venv and from the engine's venv alike. The venv's own swafloor
must be this checkout (the script re-points it when run again).

``python -m swafloor.fuzz.matrix cell|replay|probe --engine ENGINE ...`` is what runs inside a cell's subprocess.
"""

from __future__ import annotations

import fcntl
import importlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import attrs

from swafloor.reference import SwafloorError

__all__ = [
    "DEFAULT_EXAMPLES", "MatrixError", "Cell", "EngineVenv", "Engine", "ENGINES", "engine_named", "probe_engine",
    "release_key", "select_releases", "cache_root", "install", "find_venv", "run_cell", "run_release", "replay_cell", "replay_traces",
    "bisect", "domain", "cell_result", "OFF_TARGET", "check_profile",
]

DEFAULT_EXAMPLES = 150
SEED = 0
PROFILE = "ci"
CLASSES = 4  # divergence classes a cell reports (swafloor.fuzz.classes): one class masks nothing else
CELL_TIMEOUT = 1800  # seconds for one cell's subprocess: a hang still ends


@attrs.frozen
class Engine:
    """What the matrix needs to know of one engine: its releases, backends, cache, venv and how it is
    imported. Each engine's lives in its room (:data:`ENGINES`)."""

    name: str  # the command's engine argument, the cache's sub-folder, the distribution on PyPI
    title: str  # for messages: vLLM, SGLang
    releases: tuple[str, ...]
    backends: tuple[str, ...]
    default_backends: tuple[str, ...]
    extra_modules: dict[str, str]
    first_why: str  # why releases[0] is the first supported release
    venv_script: str
    venv_env: str
    venv_dir: str
    load: str  # "module:function" importing the engine's pieces (raises Unsupported; run in the cell's process)
    release_examples: str  # two release numbers of the engine, for a message: "0.9.2 or 0.8.5.post1"
    strip_compiled: bool = False  # delete the release's compiled modules after installing it
    #: packages to add when the import fails on something no module of extra_modules gives (the folder,
    #: what was already added, the probe's error) -> packages, or None
    fallback: Callable[[Path, list[str], str], list[str] | None] | None = None
    #: packages installed with every release, in one pip run after it (the folder) -> packages
    with_release: Callable[[Path], list[str]] | None = None
    #: "module:function": the release's profile, (release, capabilities) -> capabilities with the
    #: semantics that release has (a cell compares the release with its own profile); "" for none
    profile: str = ""
    #: "module:function": (release, backend) -> the changes of that release the reference cannot
    #: express (each with ``name`` and ``class_key``), named beside a red cell's classes; "" for none
    unmodelled: str = ""
    #: "module:function": (release, backend, class key) -> the names of the known behaviours (bugs with
    #: their fix, unmodelled changes) that show as that class there, given to each class a cell met; "" for none
    classify: str = ""

    @property
    def venv_marker(self) -> str:
        return f".swafloor-{self.name}-complete"

    @property
    def marker(self) -> str:
        """Written into an installed release's folder once it is complete; names :attr:`recipe`."""
        return f".swafloor-{self.name}-release"

    @property
    def recipe(self) -> str:
        return f"swafloor-{self.name}-release/1"


#: Every engine of ``swafloor matrix``, by where its record lives (each engine's room builds on this
#: module, so it is found by name, not imported: the import graph stays one-way).
ENGINES = {"vllm": "swafloor.fuzz.engines.vllm.matrix:VLLM", "sglang": "swafloor.fuzz.engines.sglang.matrix:SGLANG",
           "lmdeploy": "swafloor.fuzz.engines.lmdeploy.matrix:LMDEPLOY",
           "transformers": "swafloor.fuzz.engines.transformers.matrix:TRANSFORMERS"}


def engine_named(name: str) -> Engine:
    """The engine of ``swafloor matrix NAME``."""
    if name not in ENGINES:
        raise MatrixError(f"engine={name[:40]!r}: one of {', '.join(ENGINES)}")
    module, _, attribute = ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)

_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,3}(\.?post[0-9]+)?$")


class MatrixError(SwafloorError):
    """The matrix cannot run (bad release list, no engine venv, an install that failed)."""


def check_profile(name: Any) -> str:
    """``name`` when it is a campaign profile (:data:`~swafloor.fuzz.runner.PROFILES`), else
    :class:`MatrixError` naming the field, the value and the choices."""
    from .runner import PROFILES

    if not isinstance(name, str) or name not in PROFILES:
        shown = name[:40] if isinstance(name, str) else name
        raise MatrixError(f"--profile={shown!r}: one of {', '.join(sorted(PROFILES))}")
    return name


def release_key(version: str) -> tuple[int, ...]:
    """Sort key: 0.8.5.post1 after 0.8.5, before 0.8.6."""
    main, _, post = version.partition("post")
    numbers = [int(x) for x in main.strip(".").split(".") if x]
    return tuple(numbers + [0] * (4 - len(numbers))) + (int(post) if post else -1,)


def _check_version(text: str, field: str, engine: Engine) -> str:
    if not isinstance(text, str) or not _VERSION.match(text) or len(text) > 30:
        raise MatrixError(f"{field}={text[:40]!r}: not a {engine.title} release number (like {engine.release_examples})")
    return text


def select_releases(spec: str | None, engine: Engine) -> tuple[str, ...]:
    """``A..B`` (the engine's supported releases from A to B, either end may be left out), a
    comma-separated list (any release numbers), or None (every supported release)."""
    RELEASES = engine.releases  # noqa: N806
    if spec is None or spec == "..":
        return RELEASES
    if ".." in spec.replace("...", "\0"):
        low, _, high = spec.partition("..")
        lo = release_key(_check_version(low, "--releases", engine)) if low else (0,)
        hi = release_key(_check_version(high, "--releases", engine)) if high else (10**9,)
        chosen = tuple(r for r in RELEASES if lo <= release_key(r) <= hi)
        if not chosen:
            raise MatrixError(f"--releases={spec!r}: no supported release in that range ({RELEASES[0]}..{RELEASES[-1]})")
        return chosen
    items = [item.strip() for item in spec.split(",")]
    if not all(items):
        raise MatrixError(f"--releases={spec[:60]!r}: an empty item")
    for item in items:
        _check_version(item, "--releases", engine)
        if release_key(item) < release_key(RELEASES[0]):
            raise MatrixError(f"--releases={item!r}: before {RELEASES[0]}, {engine.first_why}")
    return tuple(sorted(dict.fromkeys(items), key=release_key))


def domain(names: Iterable[str]) -> str:
    """The generated domain of the backends, in one line (what their campaigns never exercise):
    what every one keeps out, then what only some do."""
    from .backends import resolve
    from .runner import domain_of

    lines = {name: (domain_of(resolve(name).capabilities) or "domain: ")[len("domain: "):].split(", ") for name in names}
    common = [p for p in next(iter(lines.values())) if p and all(p in parts for parts in lines.values())]
    extra = [f"{p} under {name}" for name, parts in lines.items() for p in parts if p and p not in common]
    return "domain: " + ", ".join(common + extra)


# ----------------------------------------------------------------------------- the pinned venv
def _checkout() -> Path:
    return Path(__file__).resolve().parent.parent


@attrs.frozen
class EngineVenv:
    """An engine's pinned venv: where it is, its python, the release it holds."""

    path: Path
    python: Path
    pinned: str  # the release the venv holds
    engine: str  # whose venv: a name of ENGINES

    @property
    def spec(self) -> Engine:
        return engine_named(self.engine)


def find_venv(option: str | Path | None, engine: Engine) -> EngineVenv:
    """The engine's pinned venv: ``option``, else its ``$SWAFLOOR_..._VENV``, else this checkout's
    ``engine.venv_dir``. Raises :class:`MatrixError` (one line) when it is missing, incomplete, or runs
    another checkout."""
    where = Path(option or os.environ.get(engine.venv_env) or _checkout() / engine.venv_dir)
    python = where / "bin" / "python"
    if not python.exists() or not (where / engine.venv_marker).exists():
        raise MatrixError(f"the {engine.title} venv {where} is missing or incomplete: make it with {engine.venv_script} "
                          f"(or name one with --{engine.name}-venv)")
    probe = ("import importlib.metadata as m, os, swafloor.fuzz.matrix as x; "
             f"print(m.version({engine.name!r})); print(os.path.realpath(x.__file__))")
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=_env(None), cwd="/",
                         timeout=300)
    if out.returncode != 0:
        raise MatrixError(f"the {engine.title} venv {where} does not run swafloor: {_last_line(out.stderr)}")
    pinned, module = out.stdout.split("\n")[:2]
    here = os.path.realpath(__file__)
    if module.strip() != here:
        raise MatrixError(f"the {engine.title} venv {where} runs swafloor from {Path(module).parent.parent}, not this "
                          f"checkout ({_checkout()}): run {engine.venv_script} here to re-point it")
    return EngineVenv(where, python, pinned.strip(), engine.name)


def _env(release_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if release_dir is not None:
        env["PYTHONPATH"] = str(release_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


# ----------------------------------------------------------------------------- installing a release
def cache_root(option: str | Path | None, engine: str) -> Path:
    """Where the engine named ``engine`` keeps its installed releases."""
    if option:
        return Path(option)
    if os.environ.get("SWAFLOOR_CACHE"):
        return Path(os.environ["SWAFLOOR_CACHE"]) / engine
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "swafloor" / engine


def _probe(venv: EngineVenv, folder: Path) -> dict[str, Any]:
    out = subprocess.run([str(venv.python), "-m", "swafloor.fuzz.matrix", "probe", "--engine", venv.engine],
                         capture_output=True, text=True,
                         env=_env(folder), cwd=str(folder), timeout=600)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": f"the import probe failed: {_last_line(out.stderr)}"}


def _pip(venv: EngineVenv, target: Path, packages: Sequence[str]) -> None:
    command = [str(venv.python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
               "--no-compile", "--target", str(target), *packages]
    out = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise MatrixError(f"pip install {' '.join(packages)} failed: {_last_line(out.stderr)}")


def _marker(folder: Path, engine: Engine) -> list[str] | None:
    marker = folder / engine.marker
    if not marker.exists():
        return None
    lines = marker.read_text(encoding="utf-8").split("\n")
    return lines if lines[0] == engine.recipe else None


def _extras(lines: list[str]) -> list[str]:
    """The packages a marker lists as added beside the release."""
    return [x for x in lines[2:] if x and not x.startswith(("probe: ", "table: "))]


def _table(engine: Engine) -> str:
    modules = engine.extra_modules
    return "table: " + hashlib.sha256(json.dumps(modules, sort_keys=True).encode()).hexdigest()[:12]


def _stale(lines: list[str], engine: Engine) -> bool:
    """Whether an install whose import failed was made with other ``extra_modules`` (or recorded
    no probe): it is then completed in place."""
    probe = next((line for line in lines if line.startswith("probe: ")), None)
    return probe is None or (probe != "probe: ok" and _table(engine) not in lines)


def installed(release: str, cache: Path, engine: Engine) -> Path | None:
    """The release's folder when it is installed and complete."""
    lines = _marker(cache / release, engine)
    return cache / release if lines is not None and not _stale(lines, engine) else None


def install(release: str, venv: EngineVenv, cache: Path, progress: Callable[[str], None] = lambda s: None) -> Path | None:
    """The folder holding ``release`` (None: it is the venv's own). Installed once into ``cache``; an
    install whose import wanted a module the engine's ``extra_modules`` now give is completed in place."""
    if release == venv.pinned:
        return None
    engine = venv.spec
    done = installed(release, cache, engine)
    if done is not None:
        return done
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{release}.lock", "w") as lock:  # one install of a release at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = installed(release, cache, engine)
        if done is not None:
            return done
        lines = _marker(cache / release, engine)
        if lines is not None:  # complete it in place
            extras = _extras(lines)
            return _add_extras(release, venv, cache / release, extras, progress)
        return _install(release, venv, cache, progress)


def _add_extras(release: str, venv: EngineVenv, folder: Path, extras: list[str], progress: Callable[[str], None]) -> Path:
    """Add the modules the release's import wants from the engine's ``extra_modules``, then write the marker."""
    engine = venv.spec
    modules = engine.extra_modules
    outcome = "ok"
    for _ in range(len(modules) + 3):
        found = _probe(venv, folder)
        if found.get("ok"):
            outcome = "ok"
            break
        module = found.get("missing")
        outcome = f"missing {module}" if module else "fails"
        if module in modules and modules[module] not in extras:
            adding = modules[module]
        else:
            more = engine.fallback(folder, extras, str(found.get("error", ""))) if engine.fallback is not None else None
            if not more:
                break
            adding = " ".join(more)
        progress(f"{engine.title} {release} imports {module or 'fails'}: adding {adding}")
        _pip(venv, folder, adding.split())
        extras.append(adding)
    (folder / engine.marker).write_text("\n".join([engine.recipe, f"{engine.name}=={release}", *extras,
                                                   f"probe: {outcome}", _table(engine)]) + "\n", encoding="utf-8")
    return folder


def _install(release: str, venv: EngineVenv, cache: Path, progress: Callable[[str], None]) -> Path:
    engine = venv.spec
    folder = cache / release
    partial = cache / f".{release}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    progress(f"installing {engine.title} {release} into {folder}")
    try:
        _pip(venv, partial, [f"{engine.name}=={release}"])
        if engine.strip_compiled:
            for so in (partial / engine.name).rglob("*.so"):  # compiled kernels: never loaded by the managers driven
                so.unlink()
        first = engine.with_release(partial) if engine.with_release is not None else []
        if first:
            _pip(venv, partial, first)
        _add_extras(release, venv, partial, list(first), progress)
        if _marker(folder, engine) is None:  # a complete folder only ever appears by this rename
            shutil.rmtree(folder, ignore_errors=True)
            partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    extras = _extras(_marker(folder, engine) or [])
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6
    progress(f"installed {engine.title} {release} in {time.perf_counter() - started:.0f} s ({size:.0f} MB)"
             + (f" (with {', '.join(extras)})" if extras else ""))
    return folder


# ----------------------------------------------------------------------------- one cell
OFF_TARGET = "off-target"


def cell_result(result: str, discard_rate: float | None) -> str:
    """A cell's result given the campaign's (pass, divergence, ...) and the share of examples it
    discarded: a pass with more than :data:`~swafloor.fuzz.runner.MAX_DISCARD_RATE` discarded is
    :data:`OFF_TARGET`, never a pass. (Stored cells, measured before this rule, are read through it.)"""
    from .runner import MAX_DISCARD_RATE

    if result == "pass" and discard_rate is not None and discard_rate > MAX_DISCARD_RATE:
        return OFF_TARGET
    return result


@attrs.frozen
class Cell:
    """One release x backend: ``result`` pass, divergence, unsupported, off-target or error."""

    release: str
    backend: str
    result: str
    why: str | None = None  # unsupported / error: one line
    part: str | None = None  # divergence: the first differing part
    step_index: int | None = None
    trace_file: str | None = None
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    discard_rate: float | None = None
    vllm: str | None = None  # the version the cell imported (vLLM)
    sglang: str | None = None  # the version the cell imported (SGLang)
    lmdeploy: str | None = None  # the version the cell imported (LMDeploy)
    transformers: str | None = None  # the version the cell imported (transformers)
    campaign: str | None = None  # the campaign profile the cell ran (runner.PROFILES: ci, pages, ...)
    # every divergence class the cell met (class, field, step_index, trace_file), the first one first;
    # ``limited``: the cell stopped at its class limit, more may remain. (A differential's cell, such as
    # vllm-admission's, holds its classes' counts here instead: class -> cases.)
    classes: list | dict | None = None
    limited: bool | None = None
    class_limit: int | None = None  # the --classes limit the cell ran with (a divergence's; None: CLASSES)
    # the release's profile where it differs from the pinned semantics the backend claims (option ->
    # the release's value), and the changes of that release the reference cannot express (names)
    profile: dict | None = None
    unmodelled: list | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    def describe(self) -> str:
        if self.result == "pass":  # a differential's pass names its classes (each traced, with a verdict)
            return f"pass ({self.examples} ex.)" + (f": {self.why}" if self.why else "")
        if self.result == "divergence":
            if self.step_index is None:  # a differential's: the class, and every class's count
                return f"divergence: {self.part} ({self.why})"
            classes = self.classes if isinstance(self.classes, list) else []

            def named(c: dict) -> str:  # the known behaviours the class shows (the engine's classify)
                return f" = {' or '.join(c['named'])}" if c.get("named") else ""

            more = [c["class"] + named(c) for c in classes[1:]]
            limit = f"; limit {self.class_limit or CLASSES} reached" if self.limited else ""
            return (f"divergence: {self.part} at step {self.step_index}" + (named(classes[0]) if classes else "")
                    + (f" (+{len(more)} classes: {', '.join(more)}{limit})" if more else ""))
        if self.result == OFF_TARGET:
            return f"{OFF_TARGET}: {self.discard_rate or 0:.0%} of examples discarded ({self.examples} ex.)"
        return f"{self.result}: {self.why}"


def _run_child(venv: EngineVenv, folder: Path | None, args: list[str], timeout: int = CELL_TIMEOUT) -> tuple[dict | None, str]:
    proc = subprocess.Popen([str(venv.python), "-m", "swafloor.fuzz.matrix", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(folder), cwd=str(folder or _checkout()))
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:  # Ctrl-C or a timeout: the child goes too
        proc.kill()
        proc.wait()
        raise
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line), stderr
            except ValueError:
                break
    return None, stderr


def run_cell(release: str, backend: str, venv: EngineVenv, cache: Path, out_dir: Path, *, examples: int = DEFAULT_EXAMPLES,
             seed: int = SEED, classes: int = CLASSES, profile: str = PROFILE,
             progress: Callable[[str], None] = lambda s: None) -> Cell:
    """Install ``release`` if needed and run the bounded campaign of ``backend`` on it."""
    return run_release(release, [backend], venv, cache, out_dir, examples=examples, seed=seed, classes=classes,
                       profile=profile, progress=progress)[0]


def run_release(release: str, backends: Sequence[str], venv: EngineVenv, cache: Path, out_dir: Path, *,
                examples: int = DEFAULT_EXAMPLES, seed: int = SEED, classes: int = CLASSES, profile: str = PROFILE,
                progress: Callable[[str], None] = lambda s: None) -> list[Cell]:
    """Install ``release`` if needed and run the bounded campaign (campaign profile ``profile``) of each
    backend on it, one after the other in one subprocess (the engine imported once); each reports up to
    ``classes`` divergence classes."""
    check_profile(profile)
    started = time.perf_counter()
    try:
        folder = install(release, venv, cache, progress)
    except (MatrixError, subprocess.SubprocessError, OSError) as exc:
        return [Cell(release, b, "error", why=f"install failed: {exc}"[:300]) for b in backends]
    cell_out = out_dir / release
    cell_out.mkdir(parents=True, exist_ok=True)
    args = ["cell", "--engine", venv.engine, "--release", release, "--examples", str(examples), "--seed", str(seed),
            "--classes", str(classes), "--profile", profile, "--out", str(cell_out.resolve())]
    for backend in backends:
        args += ["--backend", backend]
    data, stderr = _run_child(venv, folder, args)
    seconds = round(time.perf_counter() - started, 1)
    if data is None:
        return [Cell(release, b, "error", why=f"the cell's process failed: {_last_line(stderr)}", seconds=seconds)
                for b in backends]
    fields = attrs.fields_dict(Cell)
    return [Cell(**{k: v for k, v in d.items() if k in fields}) for d in data["cells"]]


def replay_cell(release: str, trace_file: Path, venv: EngineVenv, cache: Path, backend: str | None = None,
                progress: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Replay a trace on ``release``: ``{"verdict": "match" | "divergence:PART" | "unsupported" | "error", ...}``."""
    return replay_traces(release, [trace_file], venv, cache, backend, progress)[0]


def replay_traces(release: str, trace_files: Sequence[Path], venv: EngineVenv, cache: Path, backend: str | None = None,
                  progress: Callable[[str], None] = lambda s: None, profile: bool = False) -> list[dict[str, Any]]:
    """:func:`replay_cell` for several traces, in one subprocess (the engine imported once); ``profile``:
    each trace's semantics as the release's profile has them (the engine's ``profile``)."""
    try:
        folder = install(release, venv, cache, progress)
    except (MatrixError, subprocess.SubprocessError, OSError) as exc:
        return [{"release": release, "verdict": "error", "why": f"install failed: {exc}"[:300]} for _ in trace_files]
    args = ["replay", "--engine", venv.engine, "--release", release, *(str(Path(t).resolve()) for t in trace_files)]
    if backend:
        args += ["--backend", backend]
    if profile:
        args.append("--profile")
    data, stderr = _run_child(venv, folder, args)
    if data is None:
        why = f"the replay's process failed: {_last_line(stderr)}"
        return [{"release": release, "verdict": "error", "why": why} for _ in trace_files]
    return data["replays"]


def _undecided(verdict: str) -> bool:
    return verdict.startswith(("unsupported", "error"))


def bisect(releases: Sequence[str], verdict_of: Callable[[str], str]) -> dict[str, Any]:
    """The first release whose verdict differs from the first release's (binary search; assumes the
    verdict changes once over the range). ``verdict_of`` is called on O(log n) releases; a release in
    between that cannot run the trace (unsupported, error) is skipped and listed."""
    seen: dict[str, str] = {}

    def verdict(release: str) -> str:
        if release not in seen:
            seen[release] = verdict_of(release)
        return seen[release]

    candidates = list(releases)
    lo, hi = 0, len(candidates) - 1
    first, last = verdict(candidates[lo]), verdict(candidates[hi])
    if first == last:
        return {"changes": False, "verdict": first, "tried": seen}
    skipped = []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = verdict(candidates[mid])
        if _undecided(found) and not _undecided(first):
            skipped.append(candidates.pop(mid))
            hi -= 1
        elif found == first:
            lo = mid
        else:
            hi = mid
    return {"changes": True, "before": candidates[lo], "verdict_before": seen[candidates[lo]],
            "first": candidates[hi], "verdict": seen[candidates[hi]], "skipped": skipped, "tried": seen}


# ----------------------------------------------------------------------------- inside a cell's process
def _imported_release(release: str, engine: str) -> str | None:
    """None when the engine imported here is ``release``; else what is wrong (one line)."""
    import importlib
    import importlib.metadata

    module = importlib.import_module(engine)
    got = importlib.metadata.version(engine)
    if got != release:
        return f"imported {engine_named(engine).title} {got} from {Path(module.__path__[0]).parent}, not {release}"
    return None


def _cells_main(args) -> dict[str, Any]:
    check_profile(args.profile)
    cells = []
    for backend in args.backend:
        started = time.perf_counter()
        cell = _cell_main(args.release, backend, args)
        cells.append({**cell, "seconds": round(time.perf_counter() - started, 1)})
    return {"cells": cells}


def _cell_main(release: str, backend: str, args) -> dict[str, Any]:
    from swafloor.reference import SwafloorError as Error

    from .backends import resolve
    from .protocol import Unsupported
    from .classes import run_classes
    from .retired import MAX_RETIRED_SHARE
    from .runner import CampaignError

    base = {"release": release, "backend": backend}
    resolved = resolve(backend)
    try:
        resolved.run_prepare()
    except Unsupported as exc:
        return {**base, "result": "unsupported", "why": str(exc)}
    wrong = _imported_release(release, args.engine)
    if wrong:
        return {**base, "result": "error", "why": wrong}
    resolved, profile, unmodelled = _profiled(engine_named(args.engine), release, resolved)
    if profile:
        base["profile"] = profile
    if unmodelled:
        base["unmodelled"] = unmodelled
    differential = getattr(getattr(resolved.factory, "__wrapped__", resolved.factory), "differential", None)
    if callable(differential):  # a differential of one decision per case (vllm-admission), not a campaign
        try:
            found = differential(args.examples, args.seed, args.out)
        except Unsupported as exc:
            return {**base, "result": "unsupported", "why": str(exc)[:300]}
        return {**base, **found, "why": ", ".join(f"{k} {n}" for k, n in found["classes"].items())[:300],
                args.engine: release}
    try:
        found = run_classes(resolved, limit=args.classes, profile=args.profile, examples=args.examples, seed=args.seed,
                            out_dir=args.out)
    except CampaignError as exc:
        return {**base, "result": "unsupported" if "Unsupported" in str(exc) else "error", "why": str(exc)[:300]}
    except Error as exc:
        return {**base, "result": "error", "why": f"{type(exc).__name__}: {exc}"[:300]}
    result = found.found[0] if found.found else found.last
    engine = engine_named(args.engine)
    classify = _function(engine.classify) if engine.classify else (lambda *_: [])
    data = {**base, "result": cell_result(found.result, result.discard_rate), "campaign": result.profile,
            "examples": result.examples,
            "steps": result.steps, "discard_rate": round(result.discard_rate, 4), args.engine: release}
    if data["result"] == "too-many-retired":  # a failure of a one-sided outcome: say how many were retired
        data["why"] = (f"{result.retired} of {result.requests} requests retired (more than "
                       f"{MAX_RETIRED_SHARE:.0%}: the outcome differed that often)")
    if result.divergence is not None:
        d = result.divergence
        data.update(part=d.field.split("[")[0], step_index=d.step_index,
                    trace_file=None if result.trace_file is None else str(result.trace_file),
                    classes=[{**{k: row[k] for k in ("class", "field", "step_index", "trace_file")},
                              **({"named": named} if (named := classify(release, backend, row["class"])) else {})}
                             for row in found.class_rows()],
                    limited=found.limited, class_limit=args.classes)
    return data


def _function(spec: str) -> Callable[..., Any]:
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _profiled(engine: Engine, release: str, record: Any) -> tuple[Any, dict, list]:
    """The backend's record with the semantics ``release`` has (the engine's ``profile``), what the
    profile changed (option -> the release's value) and the names of the release's changes the reference
    cannot express on this backend, each with its class (``NAME (part@op)``)."""
    profile: dict = {}
    if engine.profile:
        caps = _function(engine.profile)(release, record.capabilities)
        if caps.semantics != record.capabilities.semantics:
            from swafloor.reference.semantics import options

            claimed = record.capabilities.semantics
            profile = {o.name: o.serialised(getattr(caps.semantics, o.name)) for o in options(type(claimed))
                       if getattr(caps.semantics, o.name) != getattr(claimed, o.name)}
        if caps.tokens_per_block != record.capabilities.tokens_per_block:  # the block sizes the release serves
            profile["tokens_per_block"] = list(caps.tokens_per_block)
        if caps != record.capabilities:
            record = attrs.evolve(record, capabilities=caps)
    unmodelled = []
    if engine.unmodelled:
        unmodelled = [f"{c.name} ({c.class_key})" for c in _function(engine.unmodelled)(release, record.name)]
    return record, profile, unmodelled


def _replays_main(args) -> dict[str, Any]:
    replays = [_replay_main(args, path) for path in args.trace]
    return {**replays[0], "replays": replays} if len(replays) == 1 else {"replays": replays}


def _replay_main(args, path: Path) -> dict[str, Any]:
    from .protocol import Unsupported
    from .backends import resolve
    from .replay import replay
    from .trace import load

    trace = load(path)
    name = args.backend or trace.backend
    engine = engine_named(args.engine)
    if args.profile and engine.profile:  # the trace's semantics as the release has them
        semantics = _function(engine.profile)(args.release, attrs.evolve(
            resolve(name).capabilities, semantics=trace.config.semantics)).semantics
        trace = attrs.evolve(trace, config=attrs.evolve(trace.config, semantics=semantics))
    try:
        resolve(name).run_prepare()
    except Unsupported as exc:
        return {"release": args.release, "verdict": "unsupported", "why": str(exc)}
    wrong = _imported_release(args.release, args.engine)
    if wrong:
        return {"release": args.release, "verdict": "error", "why": wrong}
    try:
        found = replay(trace, name)
    except Unsupported as exc:
        return {"release": args.release, "verdict": "unsupported", "why": str(exc)}
    d = found.divergence
    return {"release": args.release, "verdict": "match" if d is None else f"divergence:{d.field.split('[')[0]}",
            "step_index": None if d is None else d.step_index, "steps_run": found.steps_run}


def probe_engine(engine: Engine) -> dict[str, Any]:
    """Import the engine here (its ``load``): ``{"ok": True}``, or ``{"ok": False, "error": ...}`` with
    ``missing``, the module it lacks, where the refusal names one (a ``module`` attribute)."""
    from .protocol import Unsupported

    module, _, function = engine.load.partition(":")
    try:
        getattr(importlib.import_module(module), function)()
    except Unsupported as exc:
        missing = getattr(exc, "module", None)
        return {"ok": False, **({"missing": missing} if isinstance(missing, str) else {}), "error": str(exc)}
    return {"ok": True}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.matrix")
    sub = parser.add_subparsers(dest="what", required=True)
    cell = sub.add_parser("cell")
    cell.add_argument("--engine", required=True, choices=tuple(ENGINES))
    cell.add_argument("--release", required=True)
    cell.add_argument("--backend", required=True, action="append")
    cell.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    cell.add_argument("--seed", type=int, default=SEED)
    cell.add_argument("--classes", type=int, default=CLASSES)
    cell.add_argument("--profile", default=PROFILE, help="the campaign profile (runner.PROFILES)")
    cell.add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("replay")
    rep.add_argument("--engine", required=True, choices=tuple(ENGINES))
    rep.add_argument("--release", required=True)
    rep.add_argument("--backend")
    rep.add_argument("--profile", action="store_true", help="the trace's semantics as the release's profile has them")
    rep.add_argument("trace", type=Path, nargs="+")
    probe = sub.add_parser("probe")
    probe.add_argument("--engine", required=True, choices=tuple(ENGINES))
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent reports an interruption
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # some releases log to stdout on import: keep stdout for the one JSON line
    try:
        if args.what == "cell":
            data = _cells_main(args)
        elif args.what == "replay":
            data = _replays_main(args)
        else:
            data = probe_engine(engine_named(args.engine))
    finally:
        sys.stdout = real_stdout
    print(json.dumps(data), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
