"""``swafloor serve-sim``: a workload through an engine's admission gate over the reference manager.

Requests arrive, wait, are admitted by the gate of ``--engine`` (what that scheduler charges a waiting
request per pool group) and run chunked prefill then decode steps on the reference manager; a step
that runs out of slots preempts a victim (recompute). See :mod:`swafloor.reference.scheduler`.

Exit 0: every request finished. Exit 4: a deadlock (a step where nothing runs and the first waiting
request is refused: printed with the blocks the gate charged against those the rule charges) or a
livelock (no end within ``--max-steps``). Exit 2: bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from swafloor.reference import AttentionLayer, Config, FloorRule, build_layout
from swafloor.reference.scheduler import GATES, RESUME_GATES, Arrival, Victim, gate_charge, kept_run, serve

from ._common import int_at_least, print_json

#: The exit code of a workload that deadlocked or livelocked.
STUCK_EXIT = 4


def register(subparsers) -> None:
    p = subparsers.add_parser("serve-sim", help="a workload through an engine's admission gate on the reference "
                                                f"manager (exit {STUCK_EXIT} on a deadlock or livelock)")
    p.add_argument("--window", type=int_at_least(1), default=None, help="window W in tokens (one SWA layer)")
    p.add_argument("--tokens-per-block", type=int_at_least(1), default=None, help="tokens per block t")
    p.add_argument("--sink-tokens", type=int_at_least(0), default=0, help="sink tokens (default 0)")
    p.add_argument("--full-attention", action="store_true",
                   help="with --window: also a full-attention layer (its own pool group)")
    p.add_argument("--hf-config", default=None, metavar="PATH",
                   help="instead of --window: a Hugging Face config.json (t defaults to 32)")
    p.add_argument("--reader", default="auto", choices=("auto", "transformers", "built-in"),
                   help="how --hf-config is read (see swafloor floor)")
    p.add_argument("--engine", default="reference", choices=sorted(GATES),
                   help="whose admission gate: reference (the rule: each SWA life cycle its largest step's floor), "
                        "vllm (0.33's gate with the recycling-aware cap), vllm-uncapped (the full sequence, as "
                        "before the cap), sglang (SGLang 0.5.21-0.5.23, the pinned release: its SWA reservation "
                        "max(min(P', C) - (W - 1), 0) + min(P' + O, W - 1) + a page for the page-rounded prompt P', "
                        "strictly below the SWA tokens left, or, where it never fits the pool, its chunk cut to the "
                        "pages above min(O, W - 1) + a page; C must be whole pages), sglang-0.5.15 (0.5.13.post1-"
                        "0.5.15.post1: max(min(P, C), W - 1) + a page, strictly below the SWA tokens left), trtllm (V2's resume gate: admitted while every pool group's use "
                        "is at most max_util_for_resume = 0.97, nothing reserved)")
    p.add_argument("--pool", type=int_at_least(1), default=None, metavar="N",
                   help="slots of every pool group (default: what the reference rule charges the largest request)")
    p.add_argument("--chunk", type=int_at_least(1), default=256, metavar="C",
                   help="prefill chunk: most prompt tokens a step computes (default 256)")
    p.add_argument("--lookahead", type=int_at_least(0), default=0, metavar="K", help="draft slots per decode step")
    p.add_argument("--victim", default=Victim.NEWEST.value, choices=[v.value for v in Victim],
                   help="which running request a step that runs out of slots preempts (default newest)")
    p.add_argument("--requests", default=None, metavar="FILE",
                   help='a JSON list of requests: [{"id": "r0", "at": 0, "prompt": 100, "output": 20}, ...]')
    p.add_argument("--generate", type=int_at_least(1), default=None, metavar="N",
                   help="instead of --requests: N requests of --prompt and --output tokens, one every --every steps")
    p.add_argument("--prompt", type=int_at_least(1), default=128, help="with --generate: prompt tokens (default 128)")
    p.add_argument("--output", type=int_at_least(1), default=32, help="with --generate: output tokens (default 32)")
    p.add_argument("--every", type=int_at_least(0), default=0, help="with --generate: steps between arrivals")
    p.add_argument("--max-steps", type=int_at_least(1), default=None,
                   help="a livelock after this many steps (default: 4 x (tokens + 1) x requests)")
    p.add_argument("--kept-resume", action="store_true",
                   help="instead of serving: one request suspended with its slots kept after every step (TensorRT-LLM "
                        "V2 with GPU memory only) and resumed through the engine's resume gate (reference or trtllm)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _arrivals(args) -> list[Arrival]:
    from ..cli import UsageError

    if args.requests is not None and args.generate is not None:
        raise UsageError("--requests and --generate cannot be combined")
    if args.requests is None:
        n = args.generate or 1
        return [Arrival(f"r{i}", i * args.every, args.prompt, args.output) for i in range(n)]
    path = Path(args.requests)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--requests={args.requests}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--requests={args.requests}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, list) or not data:
        raise UsageError(f"--requests={args.requests}: a non-empty JSON list of requests is needed")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or set(item) - {"id", "at", "prompt", "output"}:
            raise UsageError(f"--requests={args.requests}: request {i} must be an object with id, at, prompt, output")
        for key in ("prompt", "output"):
            if key not in item:
                raise UsageError(f"--requests={args.requests}: request {i} has no {key!r}")
        out.append(Arrival(item.get("id", f"r{i}"), item.get("at", 0), item["prompt"], item["output"]))
    return out


def _layers(args):
    from ..cli import UsageError

    if args.hf_config is not None:
        if args.window is not None:
            raise UsageError("--window cannot be combined with --hf-config (the window comes from the config)")
        from .. import hfconfig

        model = hfconfig.load(args.hf_config, args.reader)
        layers = [layer for _, layer in model.reference_layers(args.sink_tokens)]
        if not layers:
            raise UsageError(f"--hf-config={args.hf_config}: the model has no layer that keeps a KV cache")
        return layers, args.tokens_per_block or 32
    if args.window is None or args.tokens_per_block is None:
        raise UsageError("the following arguments are required: --window and --tokens-per-block (or --hf-config PATH)")
    layers = [AttentionLayer(window=args.window, sink_tokens=args.sink_tokens)]
    if args.full_attention:
        layers.append(AttentionLayer())
    return layers, args.tokens_per_block


def run(args) -> int:
    arrivals = _arrivals(args)
    layers, t = _layers(args)
    base = Config(tokens_per_block=t, layers=layers)
    groups = build_layout(base).num_pool_groups
    charges = [gate_charge("reference", base, a.prompt, a.output, args.chunk, args.lookahead) for a in arrivals]
    rule_pool = tuple(max(c[g] for c in charges) for g in range(groups))
    pool = rule_pool if args.pool is None else (args.pool,) * groups
    minimum = build_layout(base).min_slots
    below = any(p < m for p, m in zip(pool, minimum))
    # a pool below the fixed rule's minimum may be simulated (the manager only validates slots): legacy rule
    config = Config(tokens_per_block=t, layers=layers, slots=pool, floor_rule=FloorRule.LEGACY if below else FloorRule.FIXED)

    if args.kept_resume:
        return _kept(args, arrivals, config, t, pool, rule_pool, minimum)

    def progress(step: int, finished: int, total: int) -> None:
        if step:
            print(f"serve-sim: step {step:,}, {finished} of {total} requests finished", file=sys.stderr, flush=True)

    result = serve(config, arrivals, gate=args.engine, chunk=args.chunk, lookahead=args.lookahead,
                   victim=args.victim, max_steps=args.max_steps, progress=progress)
    waits = list(result.waited.values())
    out = {
        "engine": args.engine, "tokens_per_block": t, "pool": list(pool), "min_slots": list(minimum),
        "rule_pool": list(rule_pool), "chunk": args.chunk, "lookahead": args.lookahead, "victim": args.victim,
        "requests": len(arrivals), "finished": len(result.finished), "steps": result.steps,
        "preemptions": result.preemptions, "max_wait": max(waits), "mean_wait": sum(waits) / len(waits),
        "completed": result.completed, "deadlock": None, "livelock_at": result.livelock_at,
    }
    if result.deadlock is not None:
        d = result.deadlock
        out["deadlock"] = {"step": d.step, "request": str(d.request_id), "charged": list(d.charged),
                           "needed": list(d.needed), "free": list(d.free)}
    code = 0 if result.completed else STUCK_EXIT
    if args.json:
        print_json(out)
        return code
    print(f"{args.engine} gate, t = {t}, pool {list(pool)} (rule's charge {list(rule_pool)}, minimum {list(minimum)}), "
          f"chunk {args.chunk}, lookahead {args.lookahead}, victim {args.victim}, {len(arrivals)} requests")
    if result.completed:
        print(f"ok: all {len(arrivals)} requests finished in {result.steps} steps; {result.preemptions} preemptions; "
              f"wait at most {out['max_wait']} steps (mean {out['mean_wait']:.1f})")
    elif result.deadlock is not None:
        d = out["deadlock"]
        print(f"DEADLOCK at step {d['step']}: nothing runs and {d['request']} is refused: the gate charges "
              f"{d['charged']} blocks, the rule {d['needed']}, and {d['free']} are free: it waits forever")
    else:
        print(f"LIVELOCK: {len(result.finished)} of {len(arrivals)} requests finished by step {result.livelock_at} "
              f"({result.preemptions} preemptions)")
    return code


def _kept(args, arrivals, config, t, pool, rule_pool, minimum) -> int:
    from ..cli import UsageError

    if args.engine not in RESUME_GATES:
        raise UsageError(f"--kept-resume: --engine must be one of {', '.join(RESUME_GATES)} (a resume gate), "
                         f"not {args.engine}")
    if len(arrivals) != 1:
        raise UsageError(f"--kept-resume runs one request, not {len(arrivals)}")
    a = arrivals[0]
    run = kept_run(config, a.prompt, a.output, chunk=args.chunk, lookahead=args.lookahead, gate=args.engine)
    out = {"engine": args.engine, "tokens_per_block": t, "pool": list(pool), "min_slots": list(minimum),
           "rule_pool": list(rule_pool), "chunk": args.chunk, "lookahead": args.lookahead, "steps": run.steps,
           "completed": run.completed, "refused_at": run.refused_at, "used": list(run.used), "total": list(run.total)}
    code = 0 if run.completed else STUCK_EXIT
    if args.json:
        print_json(out)
        return code
    print(f"{args.engine} resume gate, t = {t}, pool {list(pool)} (rule's charge {list(rule_pool)}, minimum "
          f"{list(minimum)}), chunk {args.chunk}, lookahead {args.lookahead}, one request suspended (kept) after "
          "every step")
    if run.completed:
        print(f"ok: resumed after each of its {run.steps} steps and finished")
    elif run.refused_at is not None:
        print(f"DEADLOCK after the step at history {run.refused_at}: its resume is refused with use {list(run.used)} "
              f"of {list(run.total)}, its own kept slots: nothing else runs, it waits forever")
    else:
        print(f"STUCK: a step ran out of slots after {run.steps} steps")
    return code
