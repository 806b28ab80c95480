"""``swafloor floor``: the SWA floor of one window and its terms."""

from __future__ import annotations

from swafloor.reference import (
    first_floor_history,
    in_flight_floor,
    sink_blocks_for,
    step_floor,
    swa_floor,
    window_blocks,
    worst_case_history,
)

from ._common import add_window_arguments, int_at_least, print_json


def register(subparsers) -> None:
    p = subparsers.add_parser("floor", help="the minimum slots of one sliding-window life cycle")
    add_window_arguments(p)
    p.add_argument("--step-tokens", type=int_at_least(1), default=None, help="also size an N-token step")
    p.add_argument("--in-flight", type=int_at_least(0), default=0, metavar="K",
                   help="tokens in flight (asynchronous scheduling frees on history - K; default 0)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def figures(window: int, t: int, sink_tokens: int, step_tokens: int | None, in_flight: int = 0) -> dict:
    s = sink_blocks_for(sink_tokens, t)
    out = {
        "window": window,
        "tokens_per_block": t,
        "sink_tokens": sink_tokens,
        "sink_blocks": s,
        "window_blocks": window_blocks(t, window),
        "floor_blocks": swa_floor(t, window, s),
        "first_floor_history": first_floor_history(t, window, s),
        "worst_case_history": worst_case_history(t, window, s),
    }
    if step_tokens is not None:
        out["step_tokens"] = step_tokens
        out["step_floor_blocks"] = step_floor(t, window, s, step_tokens)
    if in_flight:
        out["in_flight"] = in_flight
        out["in_flight_floor_blocks"] = in_flight_floor(t, window, s, in_flight)
        out["in_flight_worst_case_history"] = worst_case_history(t, window, s, in_flight)
        out["in_flight_first_floor_history"] = first_floor_history(t, window, s, in_flight)
    return out


def run(args) -> int:
    f = figures(args.window, args.tokens_per_block, args.sink_tokens, args.step_tokens, args.in_flight)
    if args.json:
        print_json(f)
        return 0
    w, t = f["window"], f["tokens_per_block"]
    print(f"window W = {w} tokens, t = {t} tokens per block, {f['sink_tokens']} sink tokens")
    print(f"  sink blocks    S = ceil({f['sink_tokens']}/{t}) = {f['sink_blocks']}")
    print(f"  window blocks    ceil((W-1)/t) + 1 = ceil({w - 1}/{t}) + 1 = {f['window_blocks']}")
    print(f"  floor            S + ceil((W-1)/t) + 1 = {f['floor_blocks']} blocks")
    print(f"  reached first at history h = (floor-1)*t = {f['first_floor_history']} (decode step, capacity h+1; "
          f"theorem first-floor-history)")
    if "step_floor_blocks" in f:
        n = f["step_tokens"]
        print(f"  {n}-token step    S + ceil((W+n-2)/t) + 1 = {f['step_floor_blocks']} blocks")
    if "in_flight_floor_blocks" in f:
        k = f["in_flight"]
        print(f"  {k} in flight      S + ceil((W-1+k)/t) + 1 = ceil({w - 1 + k}/{t}) + 1 + S = "
              f"{f['in_flight_floor_blocks']} blocks, reached first at history h = {f['in_flight_first_floor_history']}")
    return 0
