"""``swafloor explain``: a text picture of one SWA life cycle's blocks at a history."""

from __future__ import annotations

from swafloor.reference import (
    allocated_blocks,
    live_blocks,
    sink_blocks_for,
    stale_range,
    swa_floor,
    worst_case_history,
)

from ._common import add_window_arguments, int_at_least, print_json

LEGEND = {
    "S": "sink token (never released)",
    "-": "released: a stale block past the sinks",
    "o": "computed token in a held block, outside the window",
    "W": "computed token inside the live window [h+1-W, h-1]",
    "*": "the in-flight token at position h (always attended)",
    ".": "slot space past the capacity in the last block",
}


def register(subparsers) -> None:
    p = subparsers.add_parser("explain", help="picture the blocks a window holds at a history")
    add_window_arguments(p)
    p.add_argument("--history", type=int_at_least(0), default=None, help="history h (default: a worst case)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def picture(window: int, t: int, sink_tokens: int, h: int) -> dict:
    """Per block: its tokens marked with LEGEND's symbols, and whether it holds a slot."""
    s = sink_blocks_for(sink_tokens, t)
    capacity = h + 1  # a decode step
    start, end = stale_range(h, t, window, s)
    blocks = []
    for b in range(allocated_blocks(capacity, t)):
        released = start <= b < end
        marks = []
        for p in range(b * t, b * t + t):
            if p >= capacity:
                marks.append(".")
            elif released:
                marks.append("-")
            elif p < sink_tokens:
                marks.append("S")
            elif p == h:
                marks.append("*")
            elif p >= h + 1 - window:
                marks.append("W")
            else:
                marks.append("o")
        blocks.append({"block": b, "tokens": "".join(marks), "held": not released})
    return {
        "window": window,
        "tokens_per_block": t,
        "sink_tokens": sink_tokens,
        "sink_blocks": s,
        "history": h,
        "capacity": capacity,
        "live_blocks": live_blocks(h, capacity, t, window, s),
        "floor_blocks": swa_floor(t, window, s),
        "blocks": blocks,
    }


def run(args) -> int:
    t, w = args.tokens_per_block, args.window
    s = sink_blocks_for(args.sink_tokens, t)
    h = worst_case_history(t, w, s) if args.history is None else args.history
    pic = picture(w, t, args.sink_tokens, h)
    if args.json:
        print_json(pic)
        return 0
    print(f"W = {w}, t = {t}, {args.sink_tokens} sink tokens (S = {s}); decode step at history h = {h}")
    print(f"live window: tokens [{h + 1 - w}, {h}] ({w} tokens, the last one in flight)")
    width = max(t, len(str(len(pic["blocks"]))) + 1)
    print("block " + " ".join(str(b["block"]).rjust(width) for b in pic["blocks"]))
    print("token " + " ".join(b["tokens"].rjust(width) for b in pic["blocks"]))
    print("slot  " + " ".join(("held" if b["held"] else "free")[:width].rjust(width) for b in pic["blocks"]))
    verdict = "= the floor" if pic["live_blocks"] == pic["floor_blocks"] else "<= the floor"
    print(f"held blocks: {pic['live_blocks']} {verdict} S + ceil((W-1)/t) + 1 = {pic['floor_blocks']}")
    print("legend: " + "; ".join(f"{k} {v}" for k, v in LEGEND.items()))
    return 0
