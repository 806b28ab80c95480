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

from ..hfconfig import DTYPE_BYTES, ENGINE_BLOCK_SIZES
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
    p.add_argument("--kv-dtype", default=None, choices=sorted(DTYPE_BYTES),
                   help="with --hf-config: the KV cache's dtype (default: the config's dtype / torch_dtype)")
    p.add_argument("--max-model-len", type=int_at_least(1), default=None, metavar="L",
                   help="with --hf-config: KV per request of L tokens, beside each engine at its default block size")
    p.add_argument("--requests", type=int_at_least(1), default=None, metavar="N",
                   help="with --max-model-len: also the KV of N such requests (default 1)")
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
        if args.window is not None:
            raise UsageError("swafloor floor: --window cannot be combined with --hf-config "
                             "(the window comes from the config)")
        if args.requests is not None and args.max_model_len is None:
            raise UsageError(f"swafloor floor: --requests={args.requests} needs --max-model-len")
        return run_hf(args)
    for name in ("kv_dtype", "max_model_len", "requests"):
        if getattr(args, name) is not None:
            raise UsageError(f"swafloor floor: --{name.replace('_', '-')}={getattr(args, name)} needs --hf-config")
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


def size(n: int | None) -> str:
    """Bytes as GiB (1024**3) at and above one GiB, else MiB (1024**2), two decimals."""
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.2f} MiB"


def run_hf(args) -> int:
    from .. import hfconfig

    t = args.tokens_per_block or HF_TOKENS_PER_BLOCK
    k = args.in_flight
    sinks = args.sink_tokens or 0
    model = hfconfig.load(args.hf_config, args.reader)
    f = {"reader": model.reader, **hfconfig.floors(model, t, k, step_tokens=args.step_tokens, sink_tokens=sinks,
                                                   kv_dtype=args.kv_dtype, max_model_len=args.max_model_len,
                                                   requests=args.requests or 1)}
    if args.json:
        print_json({"config": str(args.hf_config), **f})
        return 0
    counts = ", ".join(f"{n} {kind}" for kind, n in f["layer_counts"].items())
    print(f"{f['model_type'] or '(no model_type)'}: {f['layers']} layers ({counts}), read by {f['rule']} "
          f"(reader: {f['reader']})")
    step = f", {args.step_tokens}-token steps" if args.step_tokens else ""
    print(f"t = {t} tokens per block, {k} token{'' if k == 1 else 's'} in flight{step}, "
          + (f"{sinks} sink tokens" if sinks else "no sink tokens"))
    b = f["bytes"]
    head = ["life cycle", "layers", "floor", "KV bytes", "TRT-LLM V2", "V2 pre-fix", "vLLM", "SGLang"]
    rows = []
    for r in f["life_cycles"]:
        what = f"swa W={r['window']}" if r["kind"] == "swa" else r["kind"]
        kinds = "/".join(r["layer_kinds"])
        rows.append([what, f"{len(r['layers'])} ({kinds})", str(r["floor"]), size(r["bytes"]), _cell(r["trtllm_v2"]),
                     _cell(r["trtllm_v2_pre_fix"]), _cell(r["vllm"]), _cell(r["sglang"])])
    rows.append(["one pool group", str(sum(len(r["layers"]) for r in f["life_cycles"])), str(f["pool_group_one"]),
                 size(b["pool_group_one"]), str(f["trtllm_v2_one"]), str(f["trtllm_v2_pre_fix_one"]), "-", "-"])
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    for row in [head] + rows:
        print("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    print(f"pool-group minimum: {f['pool_groups_separate']} with one pool group per life cycle, "
          f"{f['pool_group_one']} with all in one")
    if b["per_token_per_layer"] is None:
        print(f"KV bytes: unknown: {b['unknown']} (--kv-dtype sets the dtype)")
    else:
        print(f"KV bytes: 2 (K, V) x {b['kv_heads']} kv heads x {b['head_dim']} head_dim x {b['dtype_bytes']} "
              f"({b['kv_dtype']}) = {b['per_token_per_layer']} bytes per token per layer; a block t tokens of "
              f"each layer of its life cycle: {b['pool_group_one']:,} bytes in one pool group")
    if args.step_tokens:
        steps = ", ".join(f"W={r['window']}: {r['step_floor']}" for r in f["life_cycles"] if r["kind"] == "swa")
        print(f"{args.step_tokens}-token step floor S + ceil((W+n-2)/t) + 1: {steps or '-'} "
              f"(the layout sizes each step with n-1 lookahead slots)")
    floor = "S + ceil((W-1+k)/t) + 1" if k else "S + ceil((W-1)/t) + 1"
    print(f"floor: SWA {floor}; full attention max(1, largest SWA floor); SSM 1; a pool group the sum")
    print("TRT-LLM V2: S + (W+t-2)//t + 1 (PR #15588), no tokens in flight; pre-fix 1 per life cycle")
    print(f"vLLM: ceil((W-1+T)/t) + 1 per request, T = {max(1, k, args.step_tokens or 1)}; SGLang: ceil(min(L,W)/t) + 1 "
          f"per request of L >= W tokens, its pool a user ratio; '-': no per-window figure (full attention holds "
          f"the whole sequence, a state is one page)")
    if "workload" in f:
        w = f["workload"]
        n = w["requests"]
        print(f"{n} request{'' if n == 1 else 's'} of L = {w['max_model_len']} tokens (full attention holds L "
              f"tokens, SWA min(ceil(L/t), floor) blocks; engines at their default block size):")
        names = {"reference": "floor", "vllm": "vLLM", "sglang": "SGLang", "trtllm": "TRT-LLM"}
        table = [["", "t", "blocks per life cycle", "per request", "total"]]
        for who, name in names.items():
            blocks = ", ".join(str(r["request_blocks"][who]) for r in f["life_cycles"])
            table.append([name, str(w["block_sizes"][who]), blocks, size(w[who]["request_bytes"]),
                          size(w[who]["total_bytes"])])
        widths = [max(len(x[i]) for x in table) for i in range(len(table[0]))]
        for row in table:
            print("  " + "  ".join(c.ljust(wd) if i in (0, 2) else c.rjust(wd) for i, (c, wd) in enumerate(zip(row, widths))))
        print(f"vLLM SWA: ceil(min(W-1+T, L)/{ENGINE_BLOCK_SIZES['vllm']}) + 1; SGLang SWA: ceil(min(L,W)/P) + 1 "
              f"(P = {ENGINE_BLOCK_SIZES['sglang']}, its default page); TRT-LLM SWA: min(ceil(L/t), ceil(W/t) + 1) "
              "(its C++ manager per sequence); full attention ceil(L/t) everywhere; a state 1")
    for note in f["notes"]:
        print(f"note: {note}")
    return 0
