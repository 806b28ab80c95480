"""SVG pictures of blocks and traces, written with the standard library alone.

:func:`block_svg` draws ``swafloor explain``'s picture (a dict from
:func:`swafloor.picture.picture`): blocks as boxes, tokens as cells (or, for blocks of many
tokens, runs as proportional bars), one colour per token mark, the live window bracketed, elided runs
of blocks as dashed boxes. :func:`trace_svg` draws a trace replayed on the reference manager (a dict
from :func:`swafloor.picture.trace_rows`): one row per step, per pool group its slots coloured by the
request holding them. Output is deterministic
(same input, same bytes), so generated pictures can be compared with committed ones.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from .picture import LITERAL_TOKENS, count_noun, render_text

__all__ = ["COLOURS", "block_svg", "trace_svg", "lines_svg", "write"]

# Fill colour of each token mark (see swafloor.picture.LEGEND); chosen to stay apart for common colour blindness.
COLOURS = {
    "S": "#7b52ab",  # sink: purple
    "-": "#ececec",  # released: pale grey
    "x": "#d7301f",  # stale, held until the call returns: red
    "o": "#9ecae1",  # held outside the window: light blue
    "+": "#fd8d3c",  # held because tokens are in flight: orange
    "W": "#31a354",  # inside the window: green
    "*": "#08519c",  # computed by this step (in flight): dark blue
    ".": "#ffffff",  # past the capacity: white
    "c": "#e7298a",  # a first resume's private copy: magenta
}
REQUEST_COLOURS = ("#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#8c6d31", "#d6616b", "#17becf")
FONT = "font-family='DejaVu Sans, Arial, Helvetica, sans-serif'"
TEXT = "#222222"


def write(path: str | Path, text: str) -> None:
    Path(path).write_text(text, encoding="utf-8")


def _text(x: float, y: float, s: str, size: int = 13, anchor: str = "start", weight: str = "normal",
          fill: str = TEXT) -> str:
    return (f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' font-weight='{weight}' "
            f"fill='{fill}' {FONT}>{escape(s)}</text>")


def _rect(x: float, y: float, w: float, h: float, fill: str, stroke: str = "#555555", width: float = 1.0,
          dash: str | None = None) -> str:
    d = f" stroke-dasharray='{dash}'" if dash else ""
    return (f"<rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{h:.1f}' fill='{fill}' stroke='{stroke}' "
            f"stroke-width='{width}'{d}/>")


def _document(width: float, height: float, body: list[str], title: str) -> str:
    return "\n".join([
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
        f"viewBox='0 0 {width:.0f} {height:.0f}' role='img'>",
        f"<title>{escape(title)}</title>",
        f"<rect x='0' y='0' width='{width:.0f}' height='{height:.0f}' fill='#ffffff'/>",
        *body,
        "</svg>",
        "",
    ])


def _label_x(centre: float, label: str, left: float) -> float:
    """Where a bold 12px label centred at ``centre`` starts, kept right of the margin."""
    return max(left, centre - 3.7 * len(label))


def _cell_width(t: int) -> float:
    if t <= 8:
        return 22.0
    if t <= 16:
        return 14.0
    if t <= 32:
        return 4.0
    return 2.5


def block_svg(pic: dict, caption: str | None = None) -> str:
    """The block picture of one step as an SVG document, with an optional caption under the title."""
    t = pic["tokens_per_block"]
    literal = t <= LITERAL_TOKENS
    pad, left = 10.0, 20.0
    top, box_h = 78.0, 34.0
    body: list[str] = []
    head = render_text(pic)
    body.append(_text(left, 24, head[0], 15, weight="bold"))
    info = head[1:next(i for i, line in enumerate(head) if line.startswith("block "))]
    if caption:
        info = [caption, *info]
    for i, line in enumerate(info):
        body.append(_text(left, 44 + 18 * i, line, 13, weight="bold" if caption and i == 0 else "normal",
                          fill="#b2182b" if caption and i == 0 else TEXT))
    top += 18 * (len(info) - 1)

    spans: list[tuple[int, int, float, float]] = []  # token positions [p0, p1) drawn over x [x0, x1)
    x = left
    for it in pic["blocks"]:
        if it.get("gap"):
            p0, p1 = it["first"] * t, (it["last"] + 1) * t
            fill = COLOURS[it["mark"]]
            label = f"… {it['tokens_elided']:,} tokens …"
            index_label = f"{it['first']:,} … {it['last']:,}"
            gap_w = max(150.0, 6.4 * max(len(label), len(index_label)) + 16)
            body.append(_rect(x, top, gap_w, box_h, fill, "#777777", 1.2, "6 4"))
            body.append(_text(x + gap_w / 2, top + box_h / 2 + 4, label, 11, "middle",
                              fill="#ffffff" if it["mark"] in "S*Wx" else TEXT))
            body.append(_text(x + gap_w / 2, top - 8, index_label, 11, "middle"))
            body.append(_text(x + gap_w / 2, top + box_h + 18,
                              f"{'held' if it['held'] else 'free'} ×{it['blocks']:,}", 11, "middle"))
            spans.append((p0, p1, x, x + gap_w))
            x += gap_w + pad
            continue
        b = it["block"]
        p = b * t
        block_label = f"copy {b:,}" if it.get("copy") else f"block {b:,}"
        # A copy is as wide as the block it copies: the width comes from the block's own label.
        block_w = max(t * _cell_width(t) if literal else 220.0, 6.4 * len(f"block {b:,}") + 10)
        if literal:
            cell = block_w / t
            cx = x
            for mark, n in it["runs"]:
                for _ in range(n):
                    body.append(_rect(cx, top, cell, box_h, COLOURS[mark], "#ffffff", 0.6))
                    if cell >= 13:
                        body.append(_text(cx + cell / 2, top + box_h / 2 + 4, mark, 11, "middle",
                                          fill="#ffffff" if mark in "S*Wxc" else TEXT))
                    cx += cell
            if not it.get("copy"):
                spans.append((p, p + t, x, x + block_w))
        else:
            total = sum(n for _, n in it["runs"])
            minimum = 26.0
            widths = [max(minimum, block_w * n / total) for _, n in it["runs"]]
            scale = block_w / sum(widths)
            cx, q = x, p
            for (mark, n), wd in zip(it["runs"], widths):
                wd *= scale
                body.append(_rect(cx, top, wd, box_h, COLOURS[mark], "#ffffff", 0.6))
                label = mark if n == 1 else f"{mark}×{n:,}"
                if len(label) * 6.5 < wd:
                    body.append(_text(cx + wd / 2, top + box_h / 2 + 4, label, 10, "middle",
                                      fill="#ffffff" if mark in "S*Wxc" else TEXT))
                spans.append((q, q + n, cx, cx + wd))
                cx += wd
                q += n
        held = it["held"]
        body.append(_rect(x, top, block_w, box_h, "none", "#222222" if held else "#999999", 2.0 if held else 1.2,
                          None if held else "5 3"))
        body.append(_text(x + block_w / 2, top - 8, block_label, 11, "middle"))
        body.append(_text(x + block_w / 2, top + box_h + 18, "held" if held else "free", 12, "middle",
                          "bold" if held else "normal", TEXT if held else "#777777"))
        x += block_w + pad
    width = max(x + left, 560.0)

    def at(pos: float) -> float:
        for p0, p1, x0, x1 in spans:
            if p0 <= pos <= p1:
                return x0 + (x1 - x0) * (pos - p0) / max(1, p1 - p0)
        return spans[-1][3] if pos > spans[-1][1] else spans[0][2]

    # The live window [h+1-W, h] bracketed under the cells (and the kept range for tokens in flight).
    lo, hi = pic["window_tokens"]
    by = top + box_h + 30
    xa, xb = at(max(lo, 0)), at(hi + 1)
    body.append(f"<path d='M{xa:.1f},{by - 6:.1f} L{xa:.1f},{by:.1f} L{xb:.1f},{by:.1f} L{xb:.1f},{by - 6:.1f}' "
                f"fill='none' stroke='{COLOURS['W']}' stroke-width='2.5'/>")
    wlabel = f"live window [{lo:,}, {hi:,}]: W = {count_noun(pic['window'], 'token')}"
    body.append(_text(_label_x((xa + xb) / 2, wlabel, left), by + 16, wlabel, 12, "start", "bold", COLOURS["W"]))
    width = max(width, _label_x((xa + xb) / 2, wlabel, left) + 7.4 * len(wlabel) + left)
    ly = by + 34
    if pic["in_flight_tokens"]:
        ka = at(max(pic["kept_from"], 0))
        body.append(f"<path d='M{ka:.1f},{ly - 6:.1f} L{ka:.1f},{ly:.1f} L{xb:.1f},{ly:.1f} L{xb:.1f},{ly - 6:.1f}' "
                    f"fill='none' stroke='{COLOURS['+']}' stroke-width='2.5'/>")
        klabel = (f"kept: W + k = {pic['window'] + pic['in_flight_tokens']:,} tokens "
                  f"(k = {pic['in_flight_tokens']:,} in flight)")
        body.append(_text(_label_x((ka + xb) / 2, klabel, left), ly + 16, klabel, 12, "start", "bold", "#c4570c"))
        width = max(width, _label_x((ka + xb) / 2, klabel, left) + 7.4 * len(klabel) + left)
        ly += 34
    verdict = head[-2]
    body.append(_text(left, ly + 8, verdict, 13, weight="bold"))
    ly += 30
    for mark, text in pic["legend"].items():
        body.append(_rect(left, ly - 11, 14, 14, COLOURS[mark], "#555555", 0.8))
        body.append(_text(left + 22, ly, f"{mark}  {text}", 12))
        ly += 20
    width = max(width, left + 8.8 * len(head[0]), left + 7.4 * max(len(line) for line in info),
                left + 8.0 * len(verdict), left + 42 + 6.9 * max(len(text) + 3 for text in pic["legend"].values()))
    title = head[0]
    return _document(width, ly + 4, body, title)


def trace_svg(tr: dict) -> str:
    """A trace replayed on the reference manager: one row per step, slots per pool group."""
    cell, row_h, left = 16.0, 24.0, 20.0
    top = 70.0
    groups = len(tr["slots"])
    shown = tr.get("backend_shown")
    widths = list(tr["slots"])
    if shown:  # the backend's own slots in use may exceed the reference's totals
        for row in tr["rows"]:
            for g, u in enumerate(row.get("backend", {}).get("pool_used") or []):
                if g < groups:
                    widths[g] = max(widths[g], u)
    col_x, other_x = [], []
    x = left + 40
    for g in range(groups):
        col_x.append(x)
        x += max(tr["slots"][g] * cell, 6.0 * len(f"group {g}: reference")) + 16
        if shown:
            other_x.append(x)
            x += max(widths[g] * cell, 6.0 * len("backend")) + 30
    text_x = x + 6
    requests: list[str] = []
    for row in tr["rows"]:
        for holders in row["pool_groups"]:
            for rid, _ in holders:
                if rid not in requests:
                    requests.append(rid)
    colour = {rid: REQUEST_COLOURS[i % len(REQUEST_COLOURS)] for i, rid in enumerate(requests)}
    body = [_text(left, 24, f"{tr['file']}: {len(tr['rows'])} steps replayed on the reference manager", 15,
                  weight="bold"),
            _text(left, 44, f"backend {tr['backend']} vs {tr['against']}; slots per pool group {tr['slots']} "
                  f"(minimum {tr['min_slots']}); one row per step, a cell per slot", 12)]
    for g in range(groups):
        body.append(_text(col_x[g], top - 8, f"group {g}" + (": reference" if shown else ""), 11))
        if shown:
            body.append(_text(other_x[g], top - 8, "backend", 11))
    longest = 0
    for i, row in enumerate(tr["rows"]):
        y = top + i * row_h
        diverged = row["step"] == tr["divergence_step"]
        if diverged:
            body.append(_rect(left - 6, y - 3, 1, row_h, "#fde0dd", "#fde0dd", 0.0).replace(
                "width='1.0'", "width='100%'"))
        body.append(_text(left + 28, y + 13, str(row["step"]), 12, "end"))
        for g, holders in enumerate(row["pool_groups"]):
            cx = col_x[g]
            owners = [rid for rid, n in holders for _ in range(n)]
            for k in range(tr["slots"][g]):
                fill = colour[owners[k]] if k < len(owners) else "#ffffff"
                body.append(_rect(cx + k * cell, y, cell - 2, row_h - 6, fill, "#777777", 0.8))
            theirs = (row.get("backend") or {}).get("pool_used")
            if shown and theirs is not None and g < len(theirs):
                for k in range(widths[g]):
                    fill = "#636363" if k < theirs[g] else "#ffffff"
                    body.append(_rect(other_x[g] + k * cell, y, cell - 2, row_h - 6, fill, "#777777", 0.8))
        label = f"{row['operation']}  →  {row['outcome']}"
        if shown and "backend" in row and row["backend"]["outcome"] != ("ok" if row["outcome"] in ("ok", "done")
                                                                         else row["outcome"]):
            label += f"  (backend: {row['backend']['outcome']})"
        if diverged:
            label += f"   ← the backend diverged here ({tr['divergence_field']})"
        longest = max(longest, len(label))
        body.append(_text(text_x, y + 13, label, 12, weight="bold" if diverged else "normal",
                          fill="#b2182b" if diverged or not row["outcome"].startswith(("ok", "done")) else TEXT))
    ly = top + len(tr["rows"]) * row_h + 20
    if tr.get("divergence_note"):
        body.append(_text(left, ly, tr["divergence_note"], 12, fill="#b2182b"))
        longest = max(longest, int(len(tr["divergence_note"]) * 0.9) - int((text_x - left) / 7))
        ly += 26
    x = left
    for rid in requests:
        body.append(_rect(x, ly - 11, 14, 14, colour[rid], "#555555", 0.8))
        body.append(_text(x + 20, ly, f"slot held by {rid}", 12))
        x += 140
    if shown:
        body.append(_rect(x, ly - 11, 14, 14, "#636363", "#555555", 0.8))
        body.append(_text(x + 20, ly, f"slot in use on {shown}", 12))
        x += 60 + 7 * len(f"slot in use on {shown}")
    body.append(_rect(x, ly - 11, 14, 14, "#ffffff", "#555555", 0.8))
    body.append(_text(x + 20, ly, "free slot", 12))
    title = f"{tr['file']}: {len(tr['rows'])} steps replayed on the reference manager"
    width = max(text_x + 7.0 * longest + left, x + 120, 640, left + 8.6 * len(title))
    return _document(width, ly + 14, body, f"trace {tr['file']}")


def lines_svg(title: str, lines: list[str]) -> str:
    """Lines of text, one per row (a replay's calls); lines reporting a failure in red."""
    left, row_h = 20.0, 20.0
    body = [_text(left, 24, title, 14, weight="bold")]
    for i, line in enumerate(lines):
        failed = "out of slots" in line or "exceeds" in line
        body.append(_text(left, 52 + i * row_h, line, 12, weight="bold" if failed else "normal",
                          fill="#b2182b" if failed else TEXT))
    width = max(left + 8.4 * len(title), left + 7.0 * max(len(line) for line in lines) + left, 480)
    return _document(width, 52 + len(lines) * row_h, body, title)
