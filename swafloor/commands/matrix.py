"""``swafloor matrix vllm|sglang|lmdeploy|transformers``: an engine's backends on every supported release of it (vLLM, SGLang,
LMDeploy).

Each release is installed once into a cache (``pip install --no-deps --target``) and run, one cell per
release and backend, in a subprocess of the engine's pinned venv's python (found with ``--vllm-venv``,
``$SWAFLOOR_VLLM_VENV`` or this checkout's ``.venv-vllm``; ``--sglang-venv``, ``$SWAFLOOR_SGLANG_VENV``
or ``.venv-sglang`` for SGLang; ``--lmdeploy-venv``, ``$SWAFLOOR_LMDEPLOY_VENV`` or ``.venv-lmdeploy`` for
LMDeploy: the command runs from the main venv too),
the release's folder first on ``PYTHONPATH``: the same bounded campaign (the ci profile, or the one
``--profile`` names, seed 0, ``--examples`` examples) on each; each cell records its profile. The table says pass, divergence (the first differing part;
the shrunk trace is saved under ``--out``; an exception inside the engine's own code is one), unsupported
(one line why) or off-target (more than 5% of the examples discarded: never a pass). ``--bisect TRACE`` replays one
trace instead and finds the first release where its verdict changes.

Exit 0 when every cell passed or is unsupported (``--bisect``: when it ran), 1 when a cell diverged,
failed, was off-target or retired too many requests (``too-many-retired``), 2 on bad arguments (one line), 130 on Ctrl-C (after a summary of the cells done).
Progress goes to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..fuzz.engines.lmdeploy.matrix import BACKENDS as LMDEPLOY_BACKENDS
from ..fuzz.engines.sglang.matrix import BACKENDS as SGLANG_BACKENDS
from ..fuzz.engines.sglang.matrix import DEFAULT_BACKENDS as SGLANG_DEFAULT_BACKENDS
from ..fuzz.engines.vllm.matrix import BACKENDS as VLLM_BACKENDS, DEFAULT_BACKENDS as VLLM_DEFAULT_BACKENDS
from ._common import int_in, print_json, writable_dir


def register(subparsers) -> None:
    p = subparsers.add_parser("matrix", help="run an engine's backends on every supported release of it (vLLM, SGLang, LMDeploy, transformers)")
    p.add_argument("engine", choices=("vllm", "sglang", "lmdeploy", "transformers"),
                   help="the engine whose releases to run (vllm, sglang, lmdeploy, transformers)")
    p.add_argument("--releases", default=None, metavar="A..B|X,Y",
                   help="the supported releases from A to B (either end may be left out), or a list of release "
                        "numbers (default: every supported release)")
    p.add_argument("--backends", default=None, metavar="NAMES",
                   help=f"comma-separated; for vllm: {', '.join(VLLM_BACKENDS)} (default "
                        f"{', '.join(VLLM_DEFAULT_BACKENDS)}; the vllm-prefix ones run from 0.8.3, vllm-prefix-eagle "
                        f"from 0.8.5, the mixed ones from 0.12.0); for sglang: {', '.join(SGLANG_BACKENDS)} (default "
                        f"{', '.join(SGLANG_DEFAULT_BACKENDS)}; sglang-admission: each release's own SWA admission gate); for lmdeploy: "
                        f"{', '.join(LMDEPLOY_BACKENDS)}; for transformers: transformers-cb")
    p.add_argument("--examples", type=int_in(1, 100_000), default=None,
                   help="examples per cell (seed 0; default 150)")
    p.add_argument("--profile", default=None, metavar="NAME",
                   help="the campaign profile every cell runs (default ci; pages: SGLang's large pages, 64 and "
                        "256 tokens per block); --write-docs stores a profile other than ci in "
                        "docs/ENGINE-NAME-matrix.json")
    p.add_argument("--classes", type=int_in(1, 100), default=None, metavar="N",
                   help="divergence classes each cell reports (default 4): after each, the cell's campaign runs "
                        "again with the classes found ending their examples, so one class masks nothing else")
    p.add_argument("--bisect", default=None, metavar="TRACE",
                   help="replay a saved trace on the releases and find the first whose verdict changes")
    p.add_argument("--vllm-venv", default=None, metavar="DIR",
                   help="the pinned vLLM venv (default: $SWAFLOOR_VLLM_VENV, else .venv-vllm in this checkout)")
    p.add_argument("--sglang-venv", default=None, metavar="DIR",
                   help="the pinned SGLang venv (default: $SWAFLOOR_SGLANG_VENV, else .venv-sglang in this checkout)")
    p.add_argument("--lmdeploy-venv", default=None, metavar="DIR",
                   help="the pinned LMDeploy venv (default: $SWAFLOOR_LMDEPLOY_VENV, else .venv-lmdeploy in this checkout)")
    p.add_argument("--transformers-venv", default=None, metavar="DIR",
                   help="the pinned transformers venv (default: $SWAFLOOR_TRANSFORMERS_VENV, else .venv-transformers in "
                        "this checkout)")
    p.add_argument("--cache", type=writable_dir, default=None, metavar="DIR",
                   help="where releases are installed (default: ~/.cache/swafloor/ENGINE)")
    p.add_argument("--out", type=writable_dir, default=Path("fuzz-failures/matrix"), metavar="DIR",
                   help="where shrunk traces go, one folder per release (default ./fuzz-failures/matrix)")
    p.add_argument("--write-docs", action="store_true",
                   help="also store the table in docs/ENGINE-matrix.json (rendered by swafloor docs build)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _usage(message: str):
    from ..cli import UsageError

    return UsageError(f"swafloor matrix: {message}")


def _say(text: str) -> None:
    print(f"matrix: {text}", file=sys.stderr, flush=True)


def _table(cells, releases, backends) -> str:
    by = {(c.release, c.backend): c for c in cells}
    rows = [["release", *backends]]
    for r in releases:
        rows.append([r, *[by[(r, b)].describe() if (r, b) in by else "-" for b in backends]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def run(args) -> int:
    from swafloor.fuzz import matrix

    engine = matrix.engine_named(args.engine)
    default_backends = ",".join(engine.default_backends)
    given_backends = args.backends
    args.backends = args.backends if args.backends is not None else default_backends
    backends = tuple(b.strip() for b in args.backends.split(","))
    bad = [b for b in backends if b not in engine.backends]
    if bad or not backends:
        raise _usage(f"--backends={args.backends[:60]!r}: each must be one of {', '.join(engine.backends)}")
    try:
        releases = matrix.select_releases(args.releases, engine)
    except matrix.MatrixError as exc:
        raise _usage(str(exc)) from None
    try:
        profile = matrix.check_profile(args.profile if args.profile is not None else matrix.PROFILE)
    except matrix.MatrixError as exc:
        raise _usage(str(exc)) from None
    if args.bisect is not None:
        trace_path = Path(args.bisect)
        if not trace_path.is_file():
            raise _usage(f"--bisect={args.bisect[:80]!r}: no such file")
        from swafloor.fuzz.trace import TraceError, load

        try:
            load(trace_path)
        except TraceError as exc:
            raise _usage(f"--bisect: {exc}") from None
        if len(releases) < 2:
            raise _usage("--bisect needs at least two releases")
    if engine.name != "vllm" and args.vllm_venv is not None:
        raise _usage(f"--vllm-venv is for swafloor matrix vllm (use --{engine.name}-venv)")
    if engine.name != "sglang" and args.sglang_venv is not None:
        raise _usage(f"--sglang-venv is for swafloor matrix sglang (use --{engine.name}-venv)")
    if engine.name != "lmdeploy" and args.lmdeploy_venv is not None:
        raise _usage(f"--lmdeploy-venv is for swafloor matrix lmdeploy (use --{engine.name}-venv)")
    if engine.name != "transformers" and args.transformers_venv is not None:
        raise _usage(f"--transformers-venv is for swafloor matrix transformers (use --{engine.name}-venv)")
    try:
        venv = matrix.find_venv(getattr(args, f"{engine.name}_venv"), engine)
    except matrix.MatrixError as exc:
        raise _usage(str(exc)) from None
    cache = matrix.cache_root(args.cache, engine.name)
    examples = args.examples or matrix.DEFAULT_EXAMPLES
    classes = args.classes or matrix.CLASSES
    if args.bisect is not None:
        return _bisect(args, releases, venv, cache, matrix)
    head = matrix.domain(backends)
    _say(f"{len(releases)} releases x {len(backends)} backends, profile {profile}, seed {matrix.SEED}, "
         f"{examples} examples per cell, up to {classes} divergence classes each; {engine.title} venv {venv.path} ({engine.title} {venv.pinned}); cache {cache}")
    _say(head)
    cells = []
    started = time.perf_counter()
    try:
        for release in releases:
            for cell in matrix.run_release(release, backends, venv, cache, args.out, examples=examples,
                                             classes=classes, profile=profile, progress=_say):
                cells.append(cell)
                _say(f"{release} {cell.backend}: {cell.describe()} ({cell.seconds:.0f} s)")
    except KeyboardInterrupt:
        _say(f"interrupted after {len(cells)} of {len(releases) * len(backends)} cells in "
             f"{time.perf_counter() - started:.0f} s")
        if cells:
            print(_table(cells, releases, backends), file=sys.stderr)
        return 130
    seconds = round(time.perf_counter() - started, 1)
    report = {
        "engine": engine.name, "domain": head, "profile": profile, "seed": matrix.SEED, "examples": examples,
        "classes": classes, "pinned": venv.pinned, "releases": list(releases), "backends": list(backends), "seconds": seconds,
        "command": f"swafloor matrix {engine.name}" + (f" --releases {args.releases}" if args.releases else "")
        + (f" --backends {args.backends}" if given_backends is not None and args.backends != default_backends else "")
        + (f" --examples {examples}" if args.examples else "") + (f" --profile {profile}" if args.profile else "")
        + (f" --classes {classes}" if args.classes else ""),
        "cells": [c.to_dict() for c in cells],
    }
    if args.write_docs:
        from ..docs.sections import write_vllm_matrix

        written = write_vllm_matrix(report, engine.name)
        _say(f"stored in {written}")
    if args.json:
        print_json(report)
    else:
        print(head)
        print(f"profile {profile}, seed {matrix.SEED}, {examples} examples per cell; {seconds:.0f} s in all")
        print(_table(cells, releases, backends))
        for c in cells:
            if c.trace_file:
                print(f"{c.release} {c.backend}: trace {c.trace_file}")
    failed = any(c.result not in ("pass", "unsupported") for c in cells)  # too-many-retired too
    return 1 if failed else 0


def _bisect(args, releases, venv, cache, matrix) -> int:
    from swafloor.fuzz.trace import load

    trace = load(args.bisect)
    backends = tuple(b.strip() for b in args.backends.split(","))
    backend = trace.backend if trace.backend in venv.spec.backends else backends[0]
    _say(f"bisecting {args.bisect} on {backend} over {releases[0]}..{releases[-1]} ({len(releases)} releases)")

    def verdict_of(release: str) -> str:
        data = matrix.replay_cell(release, Path(args.bisect), venv, cache, backend, progress=_say)
        text = data["verdict"] + (f" ({data['why']})" if data.get("why") else "")
        _say(f"{release}: {text}")
        return text

    try:
        found = matrix.bisect(releases, verdict_of)
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    found = {"trace": str(args.bisect), "backend": backend, **found}
    if args.json:
        print_json(found)
    elif found["changes"]:
        skipped = f" (skipped, cannot run it: {', '.join(found['skipped'])})" if found["skipped"] else ""
        print(f"{args.bisect}: {found['verdict_before']} up to {found['before']}; {found['verdict']} from "
              f"{found['first']}{skipped}")
    else:
        print(f"{args.bisect}: {found['verdict']} on every release tried ({', '.join(found['tried'])})")
    return 0
