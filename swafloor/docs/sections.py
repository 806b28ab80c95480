"""The generated sections of the hand-written pages: each a function returning markdown, computed
from the code (reference formulas, the theorem catalogue, the backend registry, the CLI parser),
so the pages cannot drift from it. Pages name a section with
``<!-- begin generated: NAME -->`` ... ``<!-- end generated: NAME -->``.
"""

from __future__ import annotations

import argparse

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


# Each peer: name, its sizing in one notation, what it holds for (t, W, sink tokens), or None where it
# does not apply, and the theorems relating it to the floor (names checked against the catalogue).
PEERS: tuple[dict, ...] = (
    {
        "key": "floor",
        "name": "the floor (swafloor's reference)",
        "sizing": "`S + ceil((W-1)/t) + 1`",
        "source": "`floors.swa_floor`",
        "blocks": lambda t, w, k: floors.swa_floor(t, w, sink_blocks_for(k, t)),
        "theorems": ("decode-sufficient", "decode-tight"),
    },
    {
        "key": "v2-post",
        "name": "TensorRT-LLM V2, after PR #15588",
        "sizing": "`S + (W + t - 2) // t + 1`",
        "source": "`peers.upstream_swa_floor`",
        "blocks": lambda t, w, k: peers.upstream_swa_floor(t, w, sink_blocks_for(k, t)),
        "theorems": ("ceil-identity", "ceil-identity-at-zero"),
    },
    {
        "key": "v2-pre",
        "name": "TensorRT-LLM V2, before PR #15588",
        "sizing": "`1` per life cycle (then raised by any described batch)",
        "source": "`floors.legacy_floor`",
        "blocks": lambda t, w, k: floors.legacy_floor(),
        "theorems": ("legacy-floor-insufficient",),
    },
    {
        "key": "cpp",
        "name": "TensorRT-LLM's older C++ manager",
        "sizing": "`ceil(W/t) + 1` (rejects sink tokens)",
        "source": "`peers.trtllm_cpp_blocks`",
        "blocks": lambda t, w, k: None if k else peers.trtllm_cpp_blocks(t, w),
        "theorems": ("cpp-sizing-covers",),
    },
    {
        "key": "vllm",
        "name": "vLLM v1, synchronous scheduling",
        "sizing": "`ceil((W-1+T)/t) + 1`, `T = 1` for decode (no sink term)",
        "source": "`peers.vllm_blocks_per_request`",
        "blocks": lambda t, w, k: None if k else peers.vllm_blocks_per_request(t, w, 1),
        "theorems": ("vllm-sizing-covers",),
    },
    {
        "key": "vllm-async",
        "name": f"vLLM v1, {IN_FLIGHT} token in flight (asynchronous scheduling)",
        "sizing": "`ceil((W-1+max(1,k))/t) + 1`; the need is `S + ceil((W-1+k)/t) + 1`",
        "source": "`peers.vllm_blocks_per_request`, `floors.in_flight_floor`",
        "blocks": lambda t, w, k: None if k else peers.vllm_blocks_per_request(t, w, max(1, IN_FLIGHT)),
        "theorems": ("vllm-sizing-covers",),
    },
    {
        "key": "sglang",
        "name": "SGLang",
        "sizing": "`ceil(min(L, W)/t) + 1` per request of `L` tokens; the pool is a user ratio, no floor",
        "source": "`peers.sglang_request_pages`",
        "blocks": lambda t, w, k: None if k else peers.sglang_request_pages(t, w, w),
        "theorems": ("cpp-sizing-covers",),
    },
    {
        "key": "sglang-evict",
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


def comparison_sizings() -> str:
    lines = ["| system | blocks per SWA life cycle and request | in swafloor | theorems |", "|---|---|---|---|"]
    for p in PEERS:
        lines.append(f"| {p['name']} | {p['sizing']} | {p['source']} | "
                     f"{', '.join(_link(n) for n in peer_theorems(p))} |")
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


def seeded_bugs_table() -> str:
    """The one list of seeded bugs (swafloor.reference.seeded_bugs): each bug, the theorems it flips
    (seeded in the formulas, proofs/mutations.py) and the campaigns that catch it (seeded as a
    backend, fuzz/backends/mutants.py, or in the reference itself for the oracle,
    fuzz/backends/reference_mutants.py), with the part of the spec a bug of the reference breaks."""
    from swafloor.reference.seeded_bugs import DATA_PLANE, ORACLE, SEEDED_BUGS, TABLE_ONLY

    shown = {TABLE_ONLY: "table-only (`mutant:{}`)", DATA_PLANE: "data plane (`dataplane:mutant:{}`)",
             ORACLE: "the oracle (`reference-mutant:{}`)"}
    lines = ["| bug | what it changes | theorems it flips | campaigns that catch it |", "|---|---|---|---|"]
    for bug in SEEDED_BUGS:
        theorems = ", ".join(_link(name) for name in bug.theorems) or "-"
        campaigns = ", ".join(shown[c].format(bug.name) for c in bug.campaigns) or "-"
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
    return "(no docstring)"


def semantics_options() -> str:
    """The reference's Semantics fields: default and allowed values, read from the class."""
    import enum

    from swafloor.reference import config

    lines = ["| option | default (the spec) | values |", "|---|---|---|"]
    for field in attrs.fields(config.Semantics):
        default = field.default
        kind = type(default)
        if isinstance(default, enum.Enum):
            values = ", ".join(f"`{m.value}`" for m in kind)
            shown = default.value
        elif isinstance(default, bool):
            values, shown = "`true`, `false`", str(default).lower()
        else:
            try:  # the least value the class accepts (0 or 1), read from its validator
                config.Semantics(**{field.name: 0})
                least = 0
            except config.ConfigError:
                least = 1
            values, shown = f"an integer >= {least}", default
        lines.append(f"| `{field.name}` | `{shown}` | {values} |")
    return "\n".join(lines)


def pages_table() -> str:
    """Every page under docs/ with its title and first sentence, so a new page is on the map."""
    import re

    from . import repository_root

    lines = ["| page | what it holds |", "|---|---|"]
    for page in sorted((repository_root() / "docs").glob("*.md")):
        if page.name == "index.md":
            continue
        text = page.read_text(encoding="utf-8")
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


def write_vllm_matrix(report: dict) -> str:
    """Store a ``swafloor matrix vllm`` report (the measured table) where :func:`vllm_matrix` reads it.
    The rows of the releases it ran replace those stored; other rows stay, with the run that made
    them (a run with another profile, seed, example count or pinned release starts the table anew)."""
    import json
    import os
    import platform
    import time

    from . import repository_root

    path = repository_root() / VLLM_MATRIX
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

    backends = list(dict.fromkeys(old["backends"] + list(report["backends"])))
    data = {
        **{k: report[k] for k in same},
        "domain": domain(backends),
        "backends": backends,
        "releases": sorted(set(old["releases"]) | set(report["releases"]), key=release_key),
        "runs": [r for r in old["runs"] if set(r["releases"]) - set(report["releases"])] + [run],
        "cells": sorted(cells, key=lambda c: (release_key(c["release"]), c["backend"])),
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return str(path)


def _release_traces() -> list[tuple[str, dict]]:
    """The regression traces that pin a release's divergence: ``tests/regressions/vllm-X.Y.Z-*.json``."""
    import json

    from . import repository_root

    out = []
    for path in sorted((repository_root() / "tests" / "regressions").glob("vllm-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if (data.get("found") or {}).get("release"):
            out.append((path.name, data))
    return out


def vllm_domain() -> str:
    """The vLLM backends' generated domain, from their capabilities."""
    from swafloor.fuzz.matrix import domain

    text = domain()
    return f"**{text[0].upper()}{text[1:]}.** Everything else the reference does is compared, exactly."


def vllm_matrix() -> str:
    """The release x backend table ``swafloor matrix vllm --write-docs`` stored, with each divergence
    class's verdict read from the regression traces that pin it."""
    import json

    from . import repository_root

    path = repository_root() / VLLM_MATRIX
    if not path.exists():
        return "Not measured yet: `swafloor matrix vllm --write-docs`."
    data = json.loads(path.read_text(encoding="utf-8"))
    backends = data["backends"]
    cells = {(c["release"], c["backend"]): c for c in data["cells"]}

    def show(c: dict | None) -> str:
        if c is None:
            return "-"
        if c["result"] == "pass":
            discard = c.get("discard_rate") or 0
            return "pass" + (f" ({discard:.0%} of configs refused)" if discard >= 0.05 else "")
        if c["result"] == "divergence":
            return f"**divergence**: `{c.get('part')}` at step {c.get('step_index')}"
        return f"{c['result']}: {str(c.get('why', '')).replace('|', '/')}"

    runs = "; ".join(f"`{r['command']}` on {r['measured']} ({r['machine']}, {r['seconds']:.0f} s)" for r in data["runs"])
    lines = [
        f"{data['domain'][0].upper()}{data['domain'][1:]}.",
        "",
        f"Measured by {runs}: profile {data['profile']}, seed {data['seed']}, {data['examples']} examples per cell; "
        f"the pinned release is {data['pinned']}.",
        "",
        "| release | " + " | ".join(f"`{b}`" for b in backends) + " |",
        "|---|" + "---|" * len(backends),
    ]
    for release in data["releases"]:
        lines.append(f"| {release} | " + " | ".join(show(cells.get((release, b))) for b in backends) + " |")
    traces = _release_traces()
    if traces:
        lines += ["", "| divergence class | release | backend | verdict | trace |", "|---|---|---|---|---|"]
        for name, t in traces:
            found = t["found"]
            lines.append(f"| {found.get('class', '?')} | {found['release']} | `{t.get('backend')}` | "
                         f"{str(found.get('verdict', '?')).replace('|', '/')} | `{name}` (expects {t.get('expect')}) |")
    return "\n".join(lines)


SECTIONS: dict[str, Callable[[], str]] = {
    "pages": pages_table,
    "semantics-options": semantics_options,
    "comparison-sizings": comparison_sizings,
    "comparison-numbers": comparison_numbers,
    "comparison-summary": comparison_summary,
    "commands": commands_table,
    "backends": backends_table,
    "seeded-bugs": seeded_bugs_table,
    "vllm-domain": vllm_domain,
    "vllm-matrix": vllm_matrix,
}
