"""The generated sections of the hand-written pages: each a function returning markdown, computed
from the code (reference formulas, the theorem catalogue, the backend registry, the CLI parser),
so the pages cannot drift from it. Pages name a section with
``<!-- begin generated: NAME -->`` ... ``<!-- end generated: NAME -->``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
from typing import Callable

from swafloor.reference import floors, peers, sink_blocks_for

__all__ = ["SECTIONS", "PEERS", "peer_theorems", "COMPARISON_T", "COMPARISON_W", "COMPARISON_SINKS"]

COMPARISON_T = (16, 32, 64, 128)
COMPARISON_W = (128, 1024, 4096, 4097)
COMPARISON_SINKS = (0, 4)
IN_FLIGHT = 1  # tokens in flight for vLLM's asynchronous scheduling (one step ahead)
SGLANG_INTERVAL = 128  # SGLANG_SWA_EVICTION_INTERVAL's default (tokens)


def _theorem_names() -> tuple[str, ...]:
    from swafloor.proofs.catalogue import CATALOGUE

    return tuple(t.name for t in CATALOGUE)


#: Where the vLLM rows come from (the pinned release and the matrix of releases).
def VLLM_RELEASES() -> str:  # noqa: N802 - a row's value, computed
    """Where the vLLM rows come from: the pinned release and the matrix of releases (docs/vllm-matrix.json)."""
    import json

    from . import data_root

    data = json.loads((data_root() / "docs" / "vllm-matrix.json").read_text(encoding="utf-8"))
    return (f"vLLM {data['pinned']}, pinned and fuzzed in CI (`scripts/vllm-venv`); releases {data['releases'][0]} .. "
            f"{data['releases'][-1]} by `swafloor matrix vllm` ([fuzzing-engines](fuzzing-engines.md))")

# Each peer: name, its sizing in one notation, what it holds for (t, W, sink tokens), or None where it
# does not apply, and the theorems relating it to the floor (names checked against the catalogue).
PEERS: tuple[dict, ...] = (
    {
        "key": "floor",
        "release": "this repository",
        "name": "the floor (swafloor's reference)",
        "sizing": "`S + ceil((W-1)/t) + 1`",
        "source": "`floors.swa_floor`",
        "blocks": lambda t, w, k: floors.swa_floor(t, w, sink_blocks_for(k, t)),
        "theorems": ("decode-sufficient", "decode-tight"),
    },
    {
        "key": "v2-post",
        "release": "read from TensorRT-LLM's sources at PR #15588 (merged 2026-07-13 as commit 52fc8f465b); its pure functions run against the reference by `swafloor check trtllm`",
        "name": "TensorRT-LLM V2, after PR #15588",
        "sizing": "`S + (W + t - 2) // t + 1`",
        "source": "`peers.upstream_swa_floor`",
        "blocks": lambda t, w, k: peers.upstream_swa_floor(t, w, sink_blocks_for(k, t)),
        "theorems": ("ceil-identity", "ceil-identity-at-zero"),
    },
    {
        "key": "v2-pre",
        "release": "read from TensorRT-LLM's sources before PR #15588 (the parent of commit 52fc8f465b)",
        "name": "TensorRT-LLM V2, before PR #15588",
        "sizing": "`1` per life cycle (then raised by any described batch)",
        "source": "`floors.legacy_floor`",
        "blocks": lambda t, w, k: floors.legacy_floor(),
        "theorems": ("legacy-floor-insufficient",),
    },
    {
        "key": "cpp",
        "release": "read from TensorRT-LLM's `kvCacheManager.cpp`; the commit it was read at is not recorded",
        "name": "TensorRT-LLM's older C++ manager",
        "sizing": "`ceil(W/t) + 1` (rejects sink tokens)",
        "source": "`peers.trtllm_cpp_blocks`",
        "blocks": lambda t, w, k: None if k else peers.trtllm_cpp_blocks(t, w),
        "theorems": ("cpp-sizing-covers",),
    },
    {
        "key": "vllm",
        "release": VLLM_RELEASES,
        "name": "vLLM v1, synchronous scheduling",
        "sizing": "`ceil((W-1+T)/t) + 1`, `T = 1` for decode (no sink term)",
        "source": "`peers.vllm_blocks_per_request`",
        "blocks": lambda t, w, k: None if k else peers.vllm_blocks_per_request(t, w, 1),
        "theorems": ("vllm-sizing-covers",),
    },
    {
        "key": "vllm-async",
        "release": VLLM_RELEASES,
        "name": f"vLLM v1, {IN_FLIGHT} token in flight (asynchronous scheduling)",
        "sizing": "`ceil((W-1+max(1,k))/t) + 1`; the need is `S + ceil((W-1+k)/t) + 1`",
        "source": "`peers.vllm_blocks_per_request`, `floors.in_flight_floor`",
        "blocks": lambda t, w, k: None if k else peers.vllm_blocks_per_request(t, w, max(1, IN_FLIGHT)),
        "theorems": ("vllm-sizing-covers",),
    },
    {
        "key": "sglang",
        "release": "read from and run on CPU: sglang 0.5.23 (older releases 0.5.10.post1, 0.5.11 measured)",
        "name": "SGLang",
        "sizing": "`ceil(min(L, W)/t) + 1` per request of `L` tokens; the pool is a user ratio, no floor",
        "source": "`peers.sglang_request_pages`",
        "blocks": lambda t, w, k: None if k else peers.sglang_request_pages(t, w, w),
        "theorems": ("cpp-sizing-covers",),
    },
    {
        "key": "sglang-evict",
        "release": "run on CPU: sglang 0.5.23 (scripts/sglang-venv), as backends sglang and sglang-lazy",
        "name": f"SGLang's allocator, evicting every e = {SGLANG_INTERVAL} tokens (its default)",
        "sizing": "the need `S + ceil((W-1+k+max(e,t))/t)` (exclusive window `W-1`, cut at a page boundary)",
        "source": "`floors.eviction_floor`",
        "blocks": lambda t, w, k: None if k else floors.eviction_floor(t, w, 0, 0, SGLANG_INTERVAL),
        "theorems": ("eviction-floor-sufficient", "eviction-floor-tight", "eviction-interval-one"),
    },
)


def peer_theorems(peer: dict) -> tuple[str, ...]:
    """The theorems a peer's row cites, plus any catalogue theorem about tokens in flight for vLLM async."""
    names = list(peer["theorems"])
    if peer["key"] == "vllm-async":
        names += [n for n in _theorem_names() if "in-flight" in n and n not in names]
    return tuple(names)


def _link(name: str) -> str:
    return f"[`{name}`](theorems.md#{name})" if name in _theorem_names() else f"`{name}` (not in the catalogue)"


def _release(peer: dict) -> str:
    """What a peer's row was read from or run against (a test requires one per row)."""
    release = peer.get("release") or "not recorded"
    return release() if callable(release) else release


def comparison_sizings() -> str:
    lines = ["| system | blocks per SWA life cycle and request | in swafloor | theorems | release or commit |",
             "|---|---|---|---|---|"]
    for p in PEERS:
        lines.append(f"| {p['name']} | {p['sizing']} | {p['source']} | "
                     f"{', '.join(_link(n) for n in peer_theorems(p))} | "
                     f"{_release(p)} |")
    return "\n".join(lines)


def _in_flight_need(t: int, w: int, k: int) -> int:
    return floors.in_flight_floor(t, w, sink_blocks_for(k, t), IN_FLIGHT)


def comparison_numbers() -> str:
    out = []
    for sinks in COMPARISON_SINKS:
        out.append(f"**{sinks} sink tokens**" + (" (C++, vLLM and SGLang have no sink term: `-`)" if sinks else ""))
        out.append("")
        head = ["t", "W", "floor", "V2 post-fix", "V2 pre-fix", "C++", "vLLM sync",
                f"vLLM async (need with k = {IN_FLIGHT})", "SGLang", f"SGLang, e = {SGLANG_INTERVAL} (need)"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---:|" * len(head))
        for t in COMPARISON_T:
            for w in COMPARISON_W:
                floor = floors.swa_floor(t, w, sink_blocks_for(sinks, t))
                cells = [str(t), str(w)]
                for p in PEERS:
                    v = p["blocks"](t, w, sinks)
                    if v is None:
                        cells.append("-")
                        continue
                    text = str(v)
                    if p["key"] == "vllm-async":
                        text += f" ({_in_flight_need(t, w, sinks)})"
                    elif p["key"] != "floor" and v != floor:
                        text = f"**{v}**"
                    cells.append(text)
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out).rstrip("\n")


def comparison_summary() -> str:
    """Counts over the worked settings, computed: where each peer differs from the floor."""
    lines = []
    settings = [(t, w) for t in COMPARISON_T for w in COMPARISON_W]
    for p in PEERS:
        if p["key"] in ("floor", "vllm-async"):
            continue
        diffs = [(t, w) for t, w in settings if p["blocks"](t, w, 0) != floors.swa_floor(t, w, 0)]
        where = ", ".join(f"(t={t}, W={w})" for t, w in diffs) or "none"
        lines.append(f"- {p['name']}: differs from the floor (no sinks) in {len(diffs)} of {len(settings)} "
                     f"settings: {where}.")
    exact = [(t, w) for t, w in settings
             if peers.vllm_blocks_per_request(t, w, max(1, IN_FLIGHT)) == _in_flight_need(t, w, 0)]
    lines.append(f"- vLLM with {IN_FLIGHT} token in flight: its sizing equals the in-flight need in "
                 f"{len(exact)} of {len(settings)} settings.")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI and backends
def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from ..cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands_table() -> str:
    from ..cli import COMMANDS

    subs = _subparsers()
    helps = {}
    for action in build_parser_actions():
        helps[action.dest] = action.help
    lines = ["| command | what it does |", "|---|---|"]
    for name in COMMANDS:
        if name in subs:
            lines.append(f"| `swafloor {name}` | {helps.get(name) or subs[name].description or ''} |")
    return "\n".join(lines)


def build_parser_actions():
    from ..cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action._choices_actions)
    return []


def backends_table() -> str:
    """Every backend the registry resolves (swafloor.fuzz.backends.backend_rows): what it is, what it
    compares, what it needs installed, its status."""
    from swafloor.fuzz.backends import backend_rows

    lines = ["| name | factory | what it is | compares | needs | status |", "|---|---|---|---|---|---|"]
    for row in backend_rows():
        module, _, attr = row["factory"].partition(":")
        doc = _factory_doc(module, attr)
        if row["name"].startswith("mutant:"):  # a row of the one list of seeded bugs
            from swafloor.reference.seeded_bugs import seeded_bug

            doc = f"a seeded bug ([list](fuzzing.md)): {seeded_bug(row['name'].removeprefix('mutant:')).description}"
        cells = [f"`{row['name']}`", f"`{row['factory']}`", doc, row["compares"], row["needs"], row["status"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") if i > 2 else c for i, c in enumerate(cells)) + " |")
    return "\n".join(lines)


def checks_table() -> str:
    """Every ``python -m`` check of swafloor.fuzz (swafloor.fuzz.checks.CHECKS): the command, what it
    shows, where it runs, how long it takes and the test that runs it."""
    from swafloor.fuzz.checks import CHECKS

    lines = ["| command | what it shows | runs in | typical time | tested by |", "|---|---|---|---|---|"]
    for check in CHECKS:
        cells = [f"`{check.command}`", check.shows, check.runs_in, f"{check.typical} ({check.measured})",
                 f"`{check.tested_by}`" if check.tested_by else "-"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def seeded_bugs_table() -> str:
    """The one list of seeded bugs (swafloor.reference.seeded_bugs): each bug, the theorems it flips
    (seeded in the formulas, proofs/mutations.py) and the campaigns that catch it (seeded as a
    backend, fuzz/backends/mutants.py, or in the reference itself for the oracle,
    fuzz/backends/reference_mutants.py), with the part of the spec a bug of the reference breaks."""
    from swafloor.reference.seeded_bugs import (DATA_PLANE, EXECUTION, ORACLE, SCHEDULER, SEEDED_BUGS, SEEN_LATER, SHOWN,
                                                TABLE_ONLY)

    shown = {TABLE_ONLY: "table-only (`mutant:{}`)", DATA_PLANE: "data plane (`dataplane:mutant:{}`)",
             ORACLE: "the oracle (`reference-mutant:{}`)", SCHEDULER: "the scheduler campaigns (serve-sim)",
             EXECUTION: "the execution data plane (`python -m swafloor.fuzz.engines.dataplane.execution`)"}

    def campaign(bug, c: str) -> str:
        relation = SEEN_LATER.get((bug.name, c))
        text = shown[c].format(bug.name)
        if relation is None:
            return text
        when = "where its effect first shows, after it fires" if relation[0] == SHOWN else "after the step it fires"
        return f"{text[:-1]}; seen {when}: {relation[1]})"

    lines = ["| bug | what it changes | theorems it flips | campaigns that catch it |", "|---|---|---|---|"]
    for bug in SEEDED_BUGS:
        theorems = ", ".join(_link(name) for name in bug.theorems) or "-"
        campaigns = ", ".join(campaign(bug, c) for c in bug.campaigns) or "-"
        description = bug.description.replace("|", "\\|")
        covers = f" ({bug.covers})" if bug.covers else ""
        lines.append(f"| `{bug.name}` | {description}{covers} | {theorems} | {campaigns} |")
    return "\n".join(lines)


def _factory_doc(module: str, attr: str) -> str:
    """The first sentence of a factory's docstring, read from its source without importing it (a
    backend's module may import a heavy peer)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return "(module not found)"
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == attr:
            doc = ast.get_docstring(node) or ""
            first = " ".join(doc.split("\n\n")[0].split())
            return first.replace("|", "\\|") or "(no docstring)"
        # A factory made by a function: ``attr = make_factory(..., doc="...")``.
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and any(isinstance(target, ast.Name) and target.id == attr for target in node.targets)):
            for keyword in node.value.keywords:
                if keyword.arg == "doc" and isinstance(keyword.value, ast.Constant):
                    first = " ".join(str(keyword.value.value).split("\n\n")[0].split())
                    return first.replace("|", "\\|") or "(no docstring)"
    return "(no docstring)"


def semantics_options(semantics_class=None) -> str:
    """The reference's Semantics options as declared (``reference.semantics.options``): default,
    allowed values, what each needs and the engines that behave so."""
    from swafloor.reference import semantics

    def shown(value) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    lines = ["| option | what | default (the spec) | values | needs | engines that behave so |",
             "|---|---|---|---|---|---|"]
    for o in semantics.options(semantics_class):
        values = (f"an integer >= {o.minimum}" if o.values is None
                  else ", ".join(f"`{shown(v)}`" for v in o.values))
        needs = "" if o.needs is None else f"`{o.needs[0]}`" + ("" if o.needs[1] is True else f" = `{o.needs[1]}`")
        engines = "; ".join(o.engines).replace("|", "\\|")
        lines.append(f"| `{o.name}` | {o.summary} | `{shown(o.serialised(o.default))}` | {values} | {needs} | {engines} |")
    return "\n".join(lines)


def pages_table() -> str:
    """Every page under docs/ with its title and first sentence, so a new page is on the map."""
    import re

    from . import data_root, page_text

    lines = ["| page | what it holds |", "|---|---|"]
    for page in sorted((data_root() / "docs").glob("*.md")):
        if page.name == "index.md":
            continue
        text = page_text(f"docs/{page.name}")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), page.stem)
        skip = ("#", "<!--", "```", "|", "![")
        body = [p for p in re.split(r"\n\s*\n", text) if p.strip() and not p.lstrip().startswith(skip)]
        first = " ".join(body[0].split()) if body else ""
        sentence = re.split(r"(?<=\.)\s", first, maxsplit=1)[0] if first else ""
        if len(sentence) > 200:
            sentence = sentence[:197].rsplit(" ", 1)[0] + " ..."
        sentence = sentence.replace("|", "\\|")
        lines.append(f"| [{page.stem}]({page.name}) | **{title}**: {sentence} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- vLLM releases
VLLM_MATRIX = "docs/vllm-matrix.json"


def write_vllm_matrix(report: dict, engine: str = "vllm") -> str:
    """Store a ``swafloor matrix ENGINE`` report (the measured table) where :func:`vllm_matrix` (or
    :func:`sglang_matrix`) reads it: ``docs/ENGINE-matrix.json``, or ``docs/ENGINE-PROFILE-matrix.json``
    for a campaign profile other than ci (:func:`matrix_file`: a table of its own, never mixed with the
    ci table). The rows of the releases it ran replace those stored; other rows stay, with the run that made
    them (a run with another profile, seed, example count or pinned release starts the table anew)."""
    import json
    import os
    import platform
    import time

    path = matrix_file(engine, report.get("profile", "ci"))
    run = {"command": report["command"], "measured": time.strftime("%Y-%m-%d", time.gmtime()),
           "seconds": report["seconds"], "releases": report["releases"],
           "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}"}
    same = ("profile", "seed", "examples", "pinned")
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    if old is None or any(old.get(k) != report.get(k) for k in same):
        old = {**{k: report[k] for k in same}, "backends": [], "releases": [], "cells": [], "runs": []}
    ran = {(c["release"], c["backend"]) for c in report["cells"]}
    cells = [c for c in old["cells"] if (c["release"], c["backend"]) not in ran] + list(report["cells"])
    from swafloor.fuzz.matrix import domain, release_key

    from swafloor.fuzz.matrix import engine_named

    order = list(engine_named(engine).backends)  # the engine's own order of columns, whatever order runs came in
    backends = sorted(dict.fromkeys(old["backends"] + list(report["backends"])),
                      key=lambda b: (order.index(b) if b in order else len(order), b))
    data = {
        **{k: report[k] for k in same},
        "domain": domain(backends),
        "backends": backends,
        "releases": sorted(set(old["releases"]) | set(report["releases"]), key=release_key),
        "runs": [r for r in old["runs"] if not _replaced(r, report)] + [{**run, "backends": list(report["backends"])}],
        "cells": sorted(cells, key=lambda c: (release_key(c["release"]), c["backend"])),
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return str(path)


def matrix_file(engine: str, profile: str = "ci") -> Path:
    """Where ``swafloor matrix ENGINE --write-docs`` stores its table: ``docs/ENGINE-matrix.json`` for the
    ci profile, ``docs/ENGINE-PROFILE-matrix.json`` for another."""
    from . import data_root

    return data_root() / ("docs/" + (f"{engine}-matrix.json" if profile == "ci" else f"{engine}-{profile}-matrix.json"))


def _replaced(run: dict, report: dict) -> bool:
    """Whether a stored run's every cell was run again by ``report`` (its releases and its backends: a
    run stored before runs named their backends names them in its command, else ran the defaults)."""
    backends = run.get("backends")
    if backends is None:
        command = run["command"].split()
        if "--backends" in command:
            backends = command[command.index("--backends") + 1].split(",")
        else:
            from swafloor.fuzz.matrix import engine_named

            backends = list(engine_named(report["engine"]).default_backends)
    return set(run["releases"]) <= set(report["releases"]) and set(backends) <= set(report["backends"])


def _release_traces(engine: str = "vllm") -> list[tuple[str, dict]]:
    """The regression traces that pin a release's divergence: ``tests/regressions/ENGINE-X.Y.Z-*.json``."""
    import json

    from . import data_root

    out = []
    for path in sorted((data_root() / "tests" / "regressions").glob(f"{engine}-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if (data.get("found") or {}).get("release"):
            out.append((path.name, data))
    return out


def vllm_domain() -> str:
    """The vLLM backends' generated domain, from their capabilities."""
    from swafloor.fuzz.engines.vllm.matrix import DEFAULT_BACKENDS
    from swafloor.fuzz.matrix import domain

    text = domain(DEFAULT_BACKENDS)
    return f"**{text[0].upper()}{text[1:]}.** Everything else the reference does is compared, exactly."


def vllm_matrix(engine: str = "vllm", profile: str = "ci") -> str:
    """The release x backend table ``swafloor matrix vllm --write-docs`` stored, with each divergence
    class's verdict read from the regression traces that pin it (for a campaign profile other than ci,
    its own table and the traces found under that profile)."""
    import json

    path = matrix_file(engine, profile)
    if not path.exists():
        flag = "" if profile == "ci" else f" --profile {profile}"
        return f"Not measured yet: `swafloor matrix {engine}{flag} --write-docs`."
    data = json.loads(path.read_text(encoding="utf-8"))
    backends = data["backends"]
    cells = {(c["release"], c["backend"]): c for c in data["cells"]}

    from swafloor.fuzz.matrix import CLASSES, OFF_TARGET, _function, cell_result, engine_named

    spec = engine_named(engine).classify
    classify = _function(spec) if spec else None  # names each class by what is known now, not when measured

    def show(c: dict | None) -> str:
        if c is None:
            return "-"
        result = cell_result(c["result"], c.get("discard_rate"))
        if result == OFF_TARGET:
            return f"**{OFF_TARGET}**: {c['discard_rate']:.0%} of configs refused (target <= 5%; never a pass)"
        if result == "pass":
            return "pass" + _profile_note(c)
        if c["result"] == "divergence":
            classes = c.get("classes") if isinstance(c.get("classes"), list) else []

            def named(k: dict) -> str:  # a class with the known behaviours it shows (the engine's classify, now)
                names = classify(c["release"], c["backend"], k["class"]) if classify else k.get("named")
                return f" = {' or '.join(names)}" if names else ""

            more = [f"`{k['class']}`{named(k)}" for k in classes[1:]]
            # the cell's own class limit (--classes; cells stored before it was kept ran with the default)
            limit = f"; limit {c.get('class_limit') or CLASSES} reached" if c.get("limited") else ""
            text = (f"**divergence**: `{c.get('part')}` at step {c.get('step_index')}" + (named(classes[0]) if classes else "")
                    + (f" (+ {', '.join(more)}{limit})" if more else ""))
            if c.get("unmodelled"):
                text += "; unmodelled here: " + ", ".join(c["unmodelled"])
            return text + _profile_note(c)
        return f"{c['result']}: {str(c.get('why', '')).replace('|', '/')}"

    def _profile_note(c: dict) -> str:
        profile = c.get("profile")
        return ("; profile: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(profile.items()))) if profile else ""

    runs = "; ".join(f"`{r['command']}` on {r['measured']} ({r['machine']}, {r['seconds']:.0f} s)" for r in data["runs"])
    lines = [
        f"{data['domain'][0].upper()}{data['domain'][1:]}.",
        "",
        f"Measured by {runs}: profile {data['profile']}, seed {data['seed']}, {data['examples']} examples per cell, "
        f"up to {CLASSES} divergence classes each where a run's command names no `--classes N` (then up to N); "
        f"the pinned release is {data['pinned']}.",
        "",
        "| release | " + " | ".join(f"`{b}`" for b in backends) + " |",
        "|---|" + "---|" * len(backends),
    ]
    for release in data["releases"]:
        lines.append(f"| {release} | " + " | ".join(show(cells.get((release, b))) for b in backends) + " |")
    traces = [(name, t) for name, t in _release_traces(engine)
              if (t["found"].get("profile") or "ci") == profile]  # each table its profile's classes
    if traces:
        lines += ["", "| divergence class | release | backend | verdict | trace |", "|---|---|---|---|---|"]
        for name, t in traces:
            found = t["found"]
            lines.append(f"| {found.get('class', '?')} | {found['release']} | `{t.get('backend')}` | "
                         f"{str(found.get('verdict', '?')).replace('|', '/')} | `{name}` (expects {t.get('expect')}) |")
    return "\n".join(lines)


def vllm_profiles() -> str:
    """vLLM's release profiles (fuzz/engines/vllm/profiles.py): each change, its releases, what a cell
    compares (a modelled option, or a named class left red) and its evidence."""
    from swafloor.fuzz.engines.vllm.profiles import CHANGES

    lines = ["| change | releases | in the profile | evidence (diverges under the pinned semantics) | upstream |",
             "|---|---|---|---|---|"]
    for c in CHANGES:
        compared = (f"`{c.option}={str(c.value).lower()}`" if c.modelled else
                    f"not expressible yet: left red as {' and '.join(f'`{k}`' for k in c.class_keys)} on "
                    f"{', '.join(f'`{b}`' for b in c.backends)}")
        lines.append(f"| {c.name}: {c.what.replace('|', '/')} | {c.first} to before {c.since} | {compared} | "
                     f"`tests/regressions/{c.evidence}` on {c.evidence_release} | {c.upstream.replace('|', '/')} |")
    return "\n".join(lines)


def sglang_matrix() -> str:
    """The release x backend table ``swafloor matrix sglang --write-docs`` stored (docs/sglang-matrix.json),
    with each divergence class's verdict read from the regression traces that pin it."""
    return vllm_matrix("sglang")


def sglang_pages_matrix() -> str:
    """The release x backend table ``swafloor matrix sglang --profile pages --write-docs`` stored
    (docs/sglang-pages-matrix.json): SGLang's large pages (64 and 256 tokens per block) on its releases."""
    return vllm_matrix("sglang", "pages")


# ----------------------------------------------------------------------------- models
MODELS = "docs/models.json"


def model_configs() -> tuple[int, list[dict]]:
    """The models of ``docs/models.json`` with each config as ``--hf-config`` reads it (the file's
    ``layer_types_repeat`` shorthand expanded), and the tokens per block the table uses."""
    import json

    from . import data_root

    data = json.loads((data_root() / MODELS).read_text(encoding="utf-8"))
    out = []
    for model in data["models"]:
        config = json.loads(json.dumps(model["config"]))
        text = config.get("text_config") or config
        if "layer_types_repeat" in text:
            pattern = text.pop("layer_types_repeat")
            n = text["num_hidden_layers"]
            text["layer_types"] = (pattern * (n // len(pattern) + 1))[:n]
        out.append({**model, "config": config})
    return data["tokens_per_block"], out


#: Request lengths of the models table's per-request KV columns.
MODEL_LENGTHS = (8192, 32768, 131072)


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f}"


def models_table() -> str:
    """Per model of docs/models.json: its layers by kind, each life cycle's floor, the pool-group
    minimum, what TensorRT-LLM V2, vLLM and SGLang reserve for its SWA life cycle, and the KV bytes
    (GiB) at the floor and per request of 8k, 32k and 128k tokens, computed by ``swafloor floor
    --hf-config`` (:func:`swafloor.hfconfig.floors`) with the built-in reader (the page is the same
    whether transformers is installed or not)."""
    import json

    from . import repository_root
    from .. import hfconfig

    t, models = model_configs()
    unsure = json.loads((repository_root() / MODELS).read_text(encoding="utf-8")).get("sizes_unsure")
    head = ["model", "layers", "W", "floor per life cycle", "pool group: separate / one",
            "V2 / V2 pre-fix (one group)", "vLLM / SGLang (SWA, per request)", "GiB at the floor (one group)",
            "GiB per request at 8k / 32k / 128k", "source"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|---|---|---|---|---:|---|---|"]
    notes = []
    for i, model in enumerate(models, 1):
        parsed = hfconfig.parse(model["config"], "built-in")
        f = hfconfig.floors(parsed, t)
        kinds = ", ".join(f"{n} {k}" for k, n in f["layer_counts"].items())
        per = ", ".join(f"{r['kind']} {r['floor']}" for r in f["life_cycles"])
        swa = [r for r in f["life_cycles"] if r["kind"] == "swa"]
        engines = " ; ".join(f"{r['vllm']} / {r['sglang']}" for r in swa) or "-"
        window = str(f["window"]) if f["window"] else ("chunk " + str(f["attention_chunk_size"])
                                                       if f["attention_chunk_size"] else "-")
        requests = " / ".join(_gib(hfconfig.floors(parsed, t, max_model_len=n)["workload"]["reference"]["request_bytes"])
                              for n in MODEL_LENGTHS)
        mark = f" [{i}]" if model.get("unsure") else ""
        lines.append(f"| {model['name']}{mark} | {f['layers']} ({kinds}) | {window} | {per} | "
                     f"{' + '.join(map(str, f['pool_groups_separate']))} / {f['pool_group_one']} | "
                     f"{f['trtllm_v2_one']} / {f['trtllm_v2_pre_fix_one']} | {engines} | "
                     f"{_gib(f['bytes']['pool_group_one'])} {f['bytes']['kv_dtype'] or ''} | {requests} | "
                     f"[config.json]({model['source']}) |")
        if model.get("unsure"):
            notes.append(f"- [{i}] {model['name']}: unsure: {model['unsure']}.")
    return "\n".join([f"At t = {t} tokens per block, no tokens in flight, no sink tokens. KV bytes in the "
                       "config's dtype: 2 (K, V) x num_key_value_heads x head_dim x bytes per element per token "
                       "per attention layer; a request of L tokens holds ceil(L/t) blocks of full attention and "
                       "min(ceil(L/t), floor) of each SWA life cycle; SSM states are not counted."
                       + (f" Unsure: {unsure}." if unsure else ""), ""] + lines
                      + ([""] + notes if notes else []))


# ----------------------------------------------------------------------------- the rule card
def rule_card(prefix: str) -> str:
    """The whole rule on one card, for README (``prefix`` ``docs/``) and docs/index.md (``""``): the
    normative statement, what it covers, the named exceptions with their formulas and links, why
    ``+ 1``, and the picture of held blocks against history with its figures from the reference."""
    from .pictures import HISTORY_EXAMPLE, history_census

    ex = HISTORY_EXAMPLE
    c = history_census(ex["t"], ex["W"], ex["S"], ex["h_max"])
    short = c["floor"] - 1
    return "\n".join([
        "> **The rule.** A paged KV-cache manager MUST give every pool group at least the sum, over the",
        "> life cycles mapped to it, of:",
        ">",
        "> - a sliding-window life cycle (window `W` tokens, `S` sink blocks, `t` tokens per block):",
        ">   `S + ceil((W-1)/t) + 1` slots, the **floor**;",
        "> - a full-attention life cycle: `max(1, largest SWA floor)`;",
        "> - an SSM or linear-attention life cycle: `1`.",
        ">",
        "> It covers one-token decode steps of any number of requests, blocks released before a step",
        "> allocates. Named exceptions need more: an `n`-token step (draft tokens, a prefill chunk)",
        f"> `S + ceil((W+n-2)/t) + 1` ([findings 3]({prefix}findings.md#3-multi-token-steps-need-more-than-the-floor));",
        f"> `k` tokens in flight `S + ceil((W-1+k)/t) + 1` ([semantics]({prefix}semantics.md));",
        "> blocks made stale by a resize held until it returns (hold-until-return) one more when",
        f"> `(W-1) % t == 0` ([findings 4]({prefix}findings.md#4-holding-blocks-made-stale-by-the-same-call-costs-one-slot-exactly-when-w-1--t--0));",
        "> a first resume copying a reused partial block one more unless `W >= 2` and `(W-2) % t == 0`",
        f"> ([findings 5]({prefix}findings.md#5-a-first-resume-that-copies-a-reused-partial-block-needs-the-floor--1)).",
        "",
        "**Why `+ 1`.** At history `h` a window attends to the `W` tokens `[h+1-W, h]`: the token at `h`, the",
        "one the step computes, included (the **in-flight-token `+1`** of `h+1-W`). Those `W` tokens touch",
        "the block the window starts in plus at most `ceil((W-1)/t)` more for the other `W-1` tokens: the",
        "floor's `+ 1` is that **start block** (the **start-block `+1`**), not the token in flight. A pool of",
        "one slot per life cycle (TensorRT-LLM before PR #15588) deadlocks a lone request as soon as the",
        "window straddles two blocks.",
        "",
        f"![blocks held against history, W = {c['W']}, t = {c['t']}, S = {c['S']}]({prefix}img/held-vs-history.svg)",
        "",
        f"For `W = {c['W']}, t = {c['t']}, S = {c['S']}` (figures from the reference's `live_blocks`): the",
        f"floor is {c['floor']}; a decoding request first holds it at `h = {c['first']}` (`(F-1)*t`,",
        f"[`first-floor-history`]({prefix}theorems.md#first-floor-history)); `h = {c['worst']}` is the worst case",
        f"[`decode-tight`]({prefix}theorems.md#decode-tight) names (`(S+1)*t + W - 2`). From `h = {c['first']}` on it",
        f"holds the floor at {c['at_floor_per_period']} of every {c['t']} histories, so a pool of {short} slots, one",
        "short, fails at almost every step: the deadlock is the common case, not a corner.",
    ])


def seeded_bugs_caught() -> str:
    """Which campaign catches which seeded bug, from the one list of seeded bugs."""
    from swafloor.reference.seeded_bugs import DATA_PLANE, ORACLE, SEEDED_BUGS, TABLE_ONLY

    def names(campaign: str) -> str:
        found = [f"`{b.name}`" for b in SEEDED_BUGS if campaign in b.campaigns]
        return f"{len(found)}: " + ", ".join(found)

    only_formulas = [f"`{b.name}`" for b in SEEDED_BUGS if not b.campaigns]
    return "\n".join([
        f"- `swafloor fuzz --backend mutant:NAME` (table-only, compared with the reference) catches {names(TABLE_ONLY)}.",
        "  `shared-slot` keeps the reference's tables and counts: the table-only campaign sees it only through",
        "  physical identity (the `slots` part), the data plane through the data it reads.",
        f"- The data plane (`dataplane:mutant:NAME`, attention through the block tables) catches {names(DATA_PLANE)}.",
        f"- The oracle against a seeded reference (`swafloor fuzz --mutate-reference NAME`) catches {names(ORACLE)}.",
        f"- Seeded in the formulas only, caught by the theorems they flip (`swafloor prove`): {len(only_formulas)}: "
        + ", ".join(only_formulas) + ".",
    ])


def chunk_census() -> str:
    """Where a 2048-token step at t = 32, W = 128 holds 69 blocks and where 68, from the reference."""
    from swafloor.reference import live_blocks, step_floor

    t, w, n = 32, 128, 2048
    need = step_floor(t, w, 0, n)
    held = {h: live_blocks(h, h + n, t, w, 0) for h in range(0, 8 * t + w)}
    first = min(h for h, v in held.items() if v == need)
    period = range(first, first + t)
    at_need = [h for h in period if held[h] == need]
    offsets = sorted({(h + 1 - w) % t for h in period if held[h] != need})
    below = sorted({held[h] for h in period if held[h] != need})
    offset = (2048 + 1 - w) % t
    return (f"Over all histories the {n}-token step at `t = {t}, W = {w}` holds its need, {need} blocks, at "
            f"{len(at_need)} of every {t} histories from `h = {first}` on, wherever the window `[h+1-W, h]` starts "
            f"at offset {min((h + 1 - w) % t for h in at_need)} to {max((h + 1 - w) % t for h in at_need)} of a "
            f"block; it holds {', '.join(map(str, below))} only where the window starts at offset "
            f"{' or '.join(map(str, offsets))}. The second chunk of a prefill (`h = 2048`, window start "
            f"`{2048 + 1 - w} = {(2048 + 1 - w) // t}*{t} + {offset}`) is such a step: {live_blocks(2048, 2048 + n, t, w, 0)} blocks.")


def checked_where() -> str:
    """What each checking tool checks, against what, on what code, and where it runs: counts from the
    theorem catalogue, the backend registry, the TensorRT-LLM check's comparisons and the vLLM matrix."""
    import json

    from swafloor.fuzz.backends import backend_rows
    from swafloor.fuzz.engines.trtllm.compare import CHECKS
    from swafloor.fuzz.engines.trtllm.progress import CONFIGS as PROGRESS_CONFIGS, PROPERTIES
    from swafloor.proofs.catalogue import CATALOGUE
    from swafloor.proofs.theorem import Expected
    from swafloor.reference.seeded_bugs import SEEDED_BUGS

    from . import data_root

    rows = {r["name"]: r for r in backend_rows()}
    proved = sum(1 for t in CATALOGUE if t.expected is Expected.PROVED)
    refuted = len(CATALOGUE) - proved
    engines = [n for n in rows if not n.startswith("mutant:") and n not in ("reference", "dataplane:NAME")
               and rows[n]["kind"] == "campaign"]
    mutants = [n for n in rows if n.startswith("mutant:")]
    matrix_path = data_root() / VLLM_MATRIX
    matrix = json.loads(matrix_path.read_text(encoding="utf-8")) if matrix_path.exists() else None
    matrix_size = (f"{len(matrix['releases'])} releases ({matrix['releases'][0]} .. {matrix['releases'][-1]}) x "
                   f"{len(matrix['backends'])} backends, last measured {matrix['runs'][-1]['measured']}"
                   if matrix else "not measured")
    formulas = sum(1 for b in SEEDED_BUGS if b.theorems)
    lines = [
        "| tool | what it checks | against | code under test | where it runs | size |",
        "|---|---|---|---|---|---|",
        f"| `swafloor prove` | the theorem catalogue: the floors are sufficient and tight, where rules fall short "
        f"| Z3 (and cvc5) for unbounded parameters; a bounded check of the goal on ints; a token-level brute force of each statement (proofs/twins.py); each refutation replayed on the "
        f"reference manager | the reference's formulas | CI (`.ci/run`, both solvers) | {len(CATALOGUE)} theorems "
        f"({proved} proved, {refuted} refuted as expected); {formulas} seeded bugs in the formulas |",
        f"| `swafloor fuzz --backend NAME` | every operation of a request's life, part by part (outcomes, pools, "
        f"tables, lengths, slots) | the reference manager, configured to the semantics the backend claims "
        f"| {', '.join(f'`{n}`' for n in engines)} | CI ({rows['oracle']['status']}; vLLM: "
        f"{rows['vllm']['status']}); `trtllm`: {rows['trtllm']['status']} | {len(engines)} backends, "
        f"{len(mutants)} seeded-bug backends |",
        f"| data plane (`--backend dataplane:NAME`) | attention outputs read through a backend's block tables "
        f"(a freed or shared slot shows as wrong data) | the same attention on each request's dense copy "
        f"| any backend's tables, with torch | {rows['dataplane:NAME']['status']} | "
        f"{sum(1 for b in SEEDED_BUGS if 'data plane' in b.campaigns)} seeded bugs it must catch |",
        f"| `swafloor check trtllm --source PATH` | TensorRT-LLM KVCacheManagerV2's pure functions and slot "
        f"accounting: {', '.join(f'`{c}`' for c in CHECKS)} | the reference, exhaustively on a grid and by "
        f"Hypothesis | a TensorRT-LLM checkout's Python sources, on a CPU | wherever a checkout is given "
        f"(CI runs it on a planted fake source tree) | {len(CHECKS)} comparisons |",
        f"| `swafloor check trtllm --source PATH --whole` | TensorRT-LLM KVCacheManagerV2's whole Python manager: "
        f"the ci campaign of `trtllm-v2`, and the progress properties {', '.join(f'`{p}`' for p in PROPERTIES)} "
        f"| the reference manager; the theorems that state each property | a Python-era `kv_cache_manager_v2` "
        f"folder, on a CPU (the CUDA driver stood in) | wherever a source is given (CI runs it on a fake manager) "
        f"| {len(PROPERTIES)} properties x {len(PROGRESS_CONFIGS)} configs |",
        f"| `swafloor matrix vllm` | each vLLM release's block manager, fuzzed | the reference | vLLM releases "
        f"installed from PyPI | by hand; the table is in [fuzzing-engines](fuzzing-engines.md) | {matrix_size} |",
    ]
    return "\n".join(lines)


def opt_in_theorems() -> str:
    """The theorems outside the default run (``catalogue.OPT_IN``, run by name), from their catalogue data: what
    each expects, the encoding each solver gets, and the resource units per check each solver is allowed
    (the default budget, or the theorem's own allowance where it declares a larger one)."""
    from swafloor.proofs import DEFAULT_RLIMIT
    from swafloor.proofs.catalogue import OPT_IN
    from swafloor.proofs.discharge import default_encoding
    from swafloor.proofs.symbolic import BLOCK_SIZE

    def encoding(t, solver: str) -> str:  # the block encoding needs the block size first, else the goal as written
        asked = t.encodings.get(solver, default_encoding(solver))
        return "direct" if asked == "blocks" and t.variables[0].unit != BLOCK_SIZE else asked

    lines = ["| theorem | expected | encoding (z3, cvc5) | resource units per check (z3, cvc5) |", "|---|---|---|---|"]
    for t in OPT_IN:
        encodings = ", ".join(encoding(t, s) for s in ("z3", "cvc5"))
        units = ", ".join(f"{t.rlimit(s, DEFAULT_RLIMIT[s]):,}" + (" (its own)" if s in t.rlimits else "")
                          for s in ("z3", "cvc5"))
        lines.append(f"| `{t.name}` | {t.expected.value} | {encodings} | {units} |")
    return "\n".join(lines)


SECTIONS: dict[str, Callable[[], str]] = {
    "checked-where": checked_where,
    "opt-in-theorems": opt_in_theorems,
    "models": models_table,
    "rule-card-readme": lambda: rule_card("docs/"),
    "rule-card": lambda: rule_card(""),
    "seeded-bugs-caught": seeded_bugs_caught,
    "chunk-census": chunk_census,
    "pages": pages_table,
    "semantics-options": semantics_options,
    "comparison-sizings": comparison_sizings,
    "comparison-numbers": comparison_numbers,
    "comparison-summary": comparison_summary,
    "commands": commands_table,
    "backends": backends_table,
    "python-checks": checks_table,
    "seeded-bugs": seeded_bugs_table,
    "vllm-domain": vllm_domain,
    "vllm-matrix": vllm_matrix,
    "vllm-profiles": vllm_profiles,
    "sglang-matrix": sglang_matrix,
    "sglang-pages-matrix": sglang_pages_matrix,
}
