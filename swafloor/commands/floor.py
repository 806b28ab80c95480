"""``swafloor floor``: the SWA floor of one window and its terms; with ``--hf-config``, the life cycles
and pool-group minimum of a Hugging Face model's ``config.json`` (:mod:`swafloor.hfconfig`), beside
what TensorRT-LLM V2, vLLM and SGLang reserve."""

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

from ._common import int_at_least, print_json

#: Tokens per block with --hf-config when none is given (TensorRT-LLM's usual 32).
HF_TOKENS_PER_BLOCK = 32


def register(subparsers) -> None:
    p = subparsers.add_parser("floor", help="the minimum slots of one sliding-window life cycle, or of a "
                                            "Hugging Face model's config.json (--hf-config)")
    p.add_argument("--window", type=int_at_least(1), default=None, help="window W in tokens (sinks excluded)")
    p.add_argument("--tokens-per-block", type=int_at_least(1), default=None,
                   help=f"tokens per block t (required with --window; default {HF_TOKENS_PER_BLOCK} with --hf-config)")
    p.add_argument("--sink-tokens", type=int_at_least(0), default=None, help="sink tokens (default 0)")
    p.add_argument("--hf-config", default=None, metavar="PATH",
                   help="instead of --window: a Hugging Face config.json; prints its life cycles, floors, "
                        "the pool-group minimum and what TensorRT-LLM V2, vLLM and SGLang reserve")
    p.add_argument("--reader", default="auto", choices=("auto", "transformers", "built-in"),
                   help="how --hf-config is read: transformers' config class (the hf extra), the built-in "
                        "reader, or auto (transformers where installed)")
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
    from ..cli import UsageError

    if args.hf_config is not None:
        for name in ("window", "sink_tokens", "step_tokens"):
            if getattr(args, name) is not None:
                raise UsageError(f"swafloor floor: --{name.replace('_', '-')} cannot be combined with --hf-config "
                                 "(the window comes from the config)")
        return run_hf(args)
    if args.window is None:
        raise UsageError("swafloor floor: the following arguments are required: --window (or --hf-config PATH)")
    if args.tokens_per_block is None:
        raise UsageError("swafloor floor: the following arguments are required: --tokens-per-block")
    args.sink_tokens = args.sink_tokens or 0
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


def _cell(value) -> str:
    return "-" if value is None else str(value)


def run_hf(args) -> int:
    from .. import hfconfig

    t = args.tokens_per_block or HF_TOKENS_PER_BLOCK
    k = args.in_flight
    model = hfconfig.load(args.hf_config, args.reader)
    f = {"reader": model.reader, **hfconfig.floors(model, t, k)}
    if args.json:
        print_json({"config": str(args.hf_config), **f})
        return 0
    counts = ", ".join(f"{n} {kind}" for kind, n in f["layer_counts"].items())
    print(f"{f['model_type'] or '(no model_type)'}: {f['layers']} layers ({counts}), read by {f['rule']} "
          f"(reader: {f['reader']})")
    print(f"t = {t} tokens per block, {k} token{'' if k == 1 else 's'} in flight, no sink tokens")
    head = ["life cycle", "layers", "floor", "TRT-LLM V2", "V2 pre-fix", "vLLM", "SGLang"]
    rows = []
    for r in f["life_cycles"]:
        what = f"swa W={r['window']}" if r["kind"] == "swa" else r["kind"]
        kinds = "/".join(r["layer_kinds"])
        rows.append([what, f"{len(r['layers'])} ({kinds})", str(r["floor"]), _cell(r["trtllm_v2"]),
                     _cell(r["trtllm_v2_pre_fix"]), _cell(r["vllm"]), _cell(r["sglang"])])
    rows.append(["one pool group", str(sum(len(r["layers"]) for r in f["life_cycles"])), str(f["pool_group_one"]),
                 str(f["trtllm_v2_one"]), str(f["trtllm_v2_pre_fix_one"]), "-", "-"])
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    for row in [head] + rows:
        print("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    print(f"pool-group minimum: {f['pool_groups_separate']} with one pool group per life cycle, "
          f"{f['pool_group_one']} with all in one")
    floor = "S + ceil((W-1+k)/t) + 1" if k else "S + ceil((W-1)/t) + 1"
    print(f"floor: SWA {floor}; full attention max(1, largest SWA floor); SSM 1; a pool group the sum")
    print("TRT-LLM V2: S + (W+t-2)//t + 1 (PR #15588), no tokens in flight; pre-fix 1 per life cycle")
    print(f"vLLM: ceil((W-1+max(1,k))/t) + 1 per request; SGLang: ceil(min(L,W)/t) + 1 per request of "
          f"L >= W tokens, its pool a user ratio; '-': no per-window figure (full attention holds the "
          f"whole sequence, a state is one page)")
    for note in f["notes"]:
        print(f"note: {note}")
    return 0
