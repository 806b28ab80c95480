"""The block picture: one SWA life cycle's blocks at a step, as a model (a dict), as text; and a saved
trace's steps replayed on the reference manager, one row per step. ``swafloor explain`` prints them,
:mod:`swafloor.svg` draws them, and the docs draw the theorem catalogue's refutations with them.

The picture is computed from block boundaries and a handful of breakpoints (sinks, window start,
history, capacity, stale ranges), never token by token, so histories like ``10**12`` or blocks of
``10**9`` tokens give a bounded picture at once: long uniform runs of blocks are elided into one
gap ("... 999,999,872 tokens ..."), and blocks of more than 64 tokens print as runs ("o×999").
Every count (released history, held blocks, the bound) is the reference's own function.
"""

from __future__ import annotations

from typing import Any

from swafloor.reference import (
    allocated_blocks,
    first_resume_peak,
    live_blocks,
    partial_block,
    sink_blocks_for,
    stale_range,
    step_floor,
    in_flight_floor,
    swa_floor,
    transition_peak,
    worst_case_history,
)
from swafloor.reference.lifecycle import released_history

__all__ = ["LEGEND", "LITERAL_TOKENS", "picture", "render_text", "count_noun", "worst_history",
           "trace_rows", "render_trace_text"]

# Token marks, in the order a legend lists them.
LEGEND = {
    "S": "sink token (its block is never released)",
    "-": "released: a stale block past the sinks holds no slot",
    "x": "stale, yet held until the call returns (hold-until-return)",
    "o": "computed token in a held block, outside the window",
    "+": "outside the window, still held: freeing lags the tokens in flight",
    "W": "computed token inside the live window [h+1-W, h-1]",
    "*": "token this step computes: the in-flight token at h (always attended), up to c-1",
    ".": "slot space past the capacity in the last block",
    "c": "private copy of a reused partial block, held beside its source (first resume)",
}

LITERAL_TOKENS = 64  # blocks of at most this many tokens print every token; larger ones print runs
ELIDE_ABOVE = 4  # a uniform run of more blocks than this shows its first and last block around a gap
SMALL_PICTURE = 16  # pictures of at most this many blocks are never elided


# ----------------------------------------------------------------------------- the block picture
def _mark(p: int, g: dict) -> str:
    """The mark of token position ``p`` (inside the allocated blocks)."""
    t = g["t"]
    b = p // t
    if p >= g["capacity"]:
        return "."
    s1, e1 = g["stale"]
    if s1 <= b < e1:
        s0, e0 = g["stale_before"]
        return "x" if g["hold"] and not s0 <= b < e0 else "-"
    if p < g["sink_tokens"]:
        return "S"
    if p >= g["h"]:
        return "*"
    if p >= g["h"] + 1 - g["window"]:
        return "W"
    if p >= g["h"] + 1 - g["window"] - g["k"]:
        return "+"
    return "o"


def _runs(lo: int, hi: int, cuts: list[int], g: dict) -> list[list[Any]]:
    """Runs ``[mark, count]`` of positions ``[lo, hi)``; marks only change at ``cuts``."""
    points = [lo] + [c for c in cuts if lo < c < hi] + [hi]
    runs: list[list[Any]] = []
    for a, z in zip(points, points[1:]):
        m = _mark(a, g)
        if runs and runs[-1][0] == m:
            runs[-1][1] += z - a
        else:
            runs.append([m, z - a])
    return runs


def _token_text(runs: list[list[Any]], t: int) -> str:
    if t <= LITERAL_TOKENS:
        return "".join(m * n for m, n in runs)
    return " ".join(m if n == 1 else f"{m}×{n:,}" for m, n in runs)


def picture(
    window: int,
    t: int,
    sink_tokens: int,
    h: int,
    step_tokens: int = 1,
    in_flight: int = 0,
    hold: bool = False,
    first_resume: bool = False,
) -> dict:
    """The blocks of one SWA life cycle at a step ``(h, c = h + step_tokens)``: per block its tokens
    marked with :data:`LEGEND`'s symbols (as runs) and whether it holds a slot; uniform runs of many
    blocks elided into gaps. Blocks are stale at ``max(0, h - in_flight)``; with ``hold`` the step's
    resize advanced history from ``h - 1`` and still holds the blocks it made stale. With
    ``first_resume`` the step is a request's first resume after reusing ``h`` committed tokens
    (capacity ``h``), holding a private copy of a partially filled last block beside its source."""
    s = sink_blocks_for(sink_tokens, t)
    if first_resume:
        step_tokens = 0
    capacity = h + step_tokens
    blocks = allocated_blocks(capacity, t)
    h1 = released_history(h, in_flight)  # stale blocks are computed on this history
    h0 = released_history(h - 1, in_flight) if hold and h > 0 else h1  # ... and were on this one before the call
    stale = stale_range(h1, t, window, s)
    stale_before = stale_range(h0, t, window, s)
    g = {"t": t, "capacity": capacity, "stale": stale, "stale_before": stale_before, "hold": hold,
         "sink_tokens": sink_tokens, "h": h, "window": window, "k": in_flight}
    end = blocks * t
    cuts = sorted({p for p in (sink_tokens, h + 1 - window - in_flight, h + 1 - window, h, capacity,
                               stale[0] * t, stale[1] * t, stale_before[0] * t, stale_before[1] * t)
                   if 0 < p < end})
    # Block-level segments: a block holding a cut inside it stands alone; between, blocks are uniform.
    bounds = {0, blocks}
    for p in cuts:
        bounds.add(p // t)
        if p % t:
            bounds.add(p // t + 1)
    bounds_sorted = sorted(b for b in bounds if 0 <= b <= blocks)
    elide = blocks > SMALL_PICTURE
    items: list[dict] = []

    def block_item(b: int) -> dict:
        runs = _runs(b * t, b * t + t, cuts, g)
        return {"block": b, "tokens": _token_text(runs, t), "runs": runs, "held": runs[0][0] not in "-"}

    for b0, b1 in zip(bounds_sorted, bounds_sorted[1:]):
        n = b1 - b0
        if elide and n > ELIDE_ABOVE:
            mark = _mark(b0 * t, g)
            items.append(block_item(b0))
            items.append({"gap": True, "first": b0 + 1, "last": b1 - 2, "blocks": n - 2, "tokens_elided": (n - 2) * t,
                          "mark": mark, "held": mark != "-"})
            items.append(block_item(b1 - 1))
        else:
            items.extend(block_item(b) for b in range(b0, b1))
    # Holding until return, the blocks stale now but not before the call stay held.
    held = transition_peak(h0, h1, capacity, t, window, s, hold)
    if first_resume and partial_block(h, t):
        items.append({"block": h // t, "copy": True, "tokens": "c" * (h % t) + "." * (t - h % t),
                      "runs": [["c", h % t], [".", t - h % t]], "held": True})
        # the private copy of the partially filled block, held beside its source
        held += first_resume_peak(h, capacity, t, window, s) - live_blocks(h, capacity, t, window, s)
    bound, bound_name = _bound(window, t, s, max(1, step_tokens), in_flight)
    marks = {m for it in items for m in ([it["mark"]] if it.get("gap") else [r[0] for r in it["runs"]])}
    return {
        "window": window,
        "tokens_per_block": t,
        "sink_tokens": sink_tokens,
        "sink_blocks": s,
        "history": h,
        "capacity": capacity,
        "step_tokens": step_tokens,
        "in_flight_tokens": in_flight,
        "release_order": "hold-until-return" if hold else "release-first",
        "first_resume": first_resume,
        "window_tokens": [h + 1 - window, h],
        "kept_from": h + 1 - window - in_flight,
        "allocated_blocks": blocks,
        "live_blocks": held,
        "floor_blocks": bound,
        "bound": bound_name,
        "blocks": items,
        "legend": {m: text for m, text in LEGEND.items() if m in marks},
    }


def _bound(window: int, t: int, s: int, n: int, k: int) -> tuple[int, str]:
    """The reference's bound on the blocks of this kind of step, and how it is written."""
    if k:
        if n == 1:
            return in_flight_floor(t, window, s, k), "the in-flight floor S + ceil((W-1+k)/t) + 1"
        return step_floor(t, window + k, s, n), "the step need with k in flight S + ceil((W+k+n-2)/t) + 1"
    if n == 1:
        return swa_floor(t, window, s), "the floor S + ceil((W-1)/t) + 1"
    return step_floor(t, window, s, n), "the n-token step need S + ceil((W+n-2)/t) + 1"


def _columns(pic: dict) -> list[tuple[str, str, str]]:
    cols = []
    for it in pic["blocks"]:
        if it.get("gap"):
            label = f"{it['first']:,}..{it['last']:,}"
            tokens = f"... {it['tokens_elided']:,} tokens {it['mark']} ..."
            slot = f"{'held' if it['held'] else 'free'} ×{it['blocks']:,}"
        else:
            label, tokens = f"{'copy ' if it.get('copy') else ''}{it['block']:,}", it["tokens"]
            slot = "held" if it["held"] else "free"
        cols.append((label, tokens, slot))
    return cols


def count_noun(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def render_text(pic: dict) -> list[str]:
    w, t, h = pic["window"], pic["tokens_per_block"], pic["history"]
    n, k = pic["step_tokens"], pic["in_flight_tokens"]
    step = "decode step" if n == 1 else f"{n}-token step (capacity h + {n})"
    step += f" at history h = {h:,}"
    if pic.get("first_resume"):
        step = f"first resume after reusing h = {count_noun(h, 'token')} (capacity h)"
    lines = [f"W = {w:,}, t = {t:,}, {count_noun(pic['sink_tokens'], 'sink token')} (S = {pic['sink_blocks']:,}); "
             f"{step}"]
    lo = pic["window_tokens"][0]
    lines.append(f"live window: tokens [{lo:,}, {h:,}] ({count_noun(w, 'token')}, the last one in flight)")
    if k:
        lines.append(f"{count_noun(k, 'token')} in flight: blocks are freed on history h - k = {max(0, h - k):,}, "
                     f"so tokens from {pic['kept_from']:,} stay held")
    if pic["release_order"] == "hold-until-return":
        lines.append(f"hold-until-return: the resize moved history {h - 1:,} -> {h:,} and holds what it made stale")
    cols = _columns(pic)
    widths = [max(len(a), len(b), len(c)) for a, b, c in cols]
    for title, i in (("block ", 0), ("token ", 1), ("slot  ", 2)):
        lines.append(title + " ".join(col[i].rjust(wd) for col, wd in zip(cols, widths)))
    held, bound = pic["live_blocks"], pic["floor_blocks"]
    verdict = "=" if held == bound else ("<=" if held < bound else ">")
    above = f" ({held - bound:,} above)" if held > bound else ""
    lines.append(f"held blocks: {held:,} {verdict} {pic['bound']} = {bound:,}{above}")
    lines.append("legend: " + "; ".join(f"{m} {text}" for m, text in pic["legend"].items()))
    return lines


# ----------------------------------------------------------------------------- a trace, step by step
def trace_rows(path: str, backend: str | None = None) -> dict:
    """Replay a saved trace on the reference manager: after each step, the outcome and, per pool
    group, the slots each request holds. With ``backend`` (a name or MODULE:FACTORY) the steps also
    run on it, and each row gets its outcome and, if it shows them, its slots in use."""
    from swafloor.fuzz.backends import resolve
    from swafloor.fuzz.replay import check_cost
    from swafloor.fuzz.trace import load
    from swafloor.reference import Manager, RequestError

    trace = load(path)
    sides = [resolve("reference")] + ([resolve(backend, "--backend")] if backend else [])
    check_cost(trace, *sides)  # refuses steps no side could hold in bounded memory
    other = sides[1].factory(trace.config) if backend else None
    manager = Manager(trace.config)
    totals = list(manager.layout.slots)
    rows = []
    for i, step in enumerate(trace.steps):
        try:
            result = getattr(manager, step.op.value)(step.request, **step.arguments())
            outcome = result.describe() if result is not None and hasattr(result, "describe") else "done"
        except RequestError as exc:
            outcome = f"rejected: {exc}"
        snap = manager.snapshot()
        used = []
        for g, total in enumerate(totals):
            holders = []
            for req in snap.requests:
                n = sum(table.held_count for lc, table in enumerate(req.tables) if manager.layout.pool_group_of[lc] == g)
                if n:
                    holders.append([str(req.request_id), n])
            used.append(holders)
        row = {"step": i, "operation": step.describe(), "outcome": outcome, "pool_groups": used}
        if other is not None:
            row["backend"] = _backend_row(other, step)
        rows.append(row)
    divergence = dict(trace.divergence) if trace.divergence else None
    return {
        "file": str(path),
        "config": trace.config.to_dict(),
        "backend": trace.backend,
        "backend_shown": backend,
        "against": trace.against,
        "slots": totals,
        "min_slots": list(manager.layout.min_slots),
        "divergence_step": None if divergence is None else divergence.get("step_index"),
        "divergence_field": None if divergence is None else divergence.get("field"),
        "divergence_note": None if divergence is None else _divergence_note(divergence),
        "rows": rows,
    }


def _backend_row(backend, step) -> dict:
    from swafloor.fuzz.compare import parts_of, run_step
    from swafloor.fuzz.protocol import Part

    result = run_step(backend, step)
    outcome = result.kind if result.kind != "out-of-slots" else "out of slots " + ", ".join(
        f"[pool group {g}: needed {n}, {a} free]" for g, n, a in result.shortfalls)
    try:
        used = parts_of(backend.observe()).get(Part.POOL_USED)
    except Exception as exc:  # noqa: BLE001 - a backend that cannot observe is shown as such
        outcome += f"; observe failed: {type(exc).__name__}"
        used = None
    return {"outcome": outcome, "pool_used": None if used is None else list(used)}


def _divergence_note(d: dict) -> str:
    """One line: what the trace file says each side showed at the diverging step."""
    from swafloor.reference.show import bounded

    field, mode = d.get("field", "?"), d.get("mode", "?")
    return (f"recorded at step {d.get('step_index')}: {field} ({mode}): reference {bounded(d.get('reference'), 60)}, "
            f"backend {bounded(d.get('backend'), 60)}; {bounded(d.get('reason', ''), 80)}")


def render_trace_text(tr: dict) -> list[str]:
    lines = [f"{tr['file']}: {len(tr['rows'])} steps on the reference manager; slots per pool group {tr['slots']}"
             f" (minimum {tr['min_slots']})"]
    for row in tr["rows"]:
        cells = []
        for g, holders in enumerate(row["pool_groups"]):
            bar = "".join(rid[-1] * n for rid, n in holders)
            cells.append(f"[{bar.ljust(tr['slots'][g], '.')}]")
        flag = "  <- diverged here" if row["step"] == tr["divergence_step"] else ""
        theirs = ""
        if "backend" in row:
            used = row["backend"]["pool_used"]
            shown = "" if used is None else " " + " ".join(f"[{'#' * u}{'.' * max(0, tr['slots'][g] - u)}]"
                                                           for g, u in enumerate(used))
            theirs = f"  | {tr['backend_shown']}:{shown} {row['backend']['outcome']}"
        lines.append(f"{row['step']:4d}  {' '.join(cells)}  {row['operation']}: {row['outcome']}{theirs}{flag}")
    if tr["divergence_note"]:
        lines.append(tr["divergence_note"])
    return lines


def worst_history(window: int, t: int, sink_tokens: int, in_flight: int = 0, hold: bool = False,
                  first_resume: bool = False) -> int:
    """A history where this kind of step holds the most blocks: the reference's worst case, shifted
    by the tokens in flight and the held step; for a first resume, the first reused history whose
    resume holds the most blocks (searched over a few windows' worth of histories, when that range
    is short enough to search)."""
    s = sink_blocks_for(sink_tokens, t)
    h = worst_case_history(t, window, s) + in_flight + (1 if hold else 0)
    if not first_resume:
        return h
    span = (s + 2) * t + 2 * window + 2 * t
    if span > 100_000:
        return h
    return max(range(span), key=lambda x: (first_resume_peak(x, x, t, window, s), -x))
