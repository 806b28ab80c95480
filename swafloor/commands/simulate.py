"""``swafloor simulate``: one request decodes on the reference manager with a pool of N slots."""

from __future__ import annotations

from swafloor.reference import AttentionLayer, Config, FloorRule, Manager, ReleaseOrder, build_layout

from ._common import add_window_arguments, int_at_least, print_json


def register(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="decode one request on the reference manager")
    add_window_arguments(p)
    p.add_argument("--slots", type=int_at_least(0), default=None, help="pool slots (default: the rule's minimum)")
    p.add_argument("--steps", type=int_at_least(0), default=None, help="decode steps (default: 10 windows)")
    p.add_argument("--floor-rule", choices=[r.value for r in FloorRule], default=FloorRule.FIXED.value)
    p.add_argument(
        "--release-order", choices=[o.value for o in ReleaseOrder], default=ReleaseOrder.RELEASE_FIRST.value
    )
    p.add_argument(
        "--history-in-resize",
        action="store_true",
        help="advance history inside each resize (resize(h+1, h) from (h, h-1)) instead of by commit",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def decode(manager: Manager, request_id, steps: int, history_in_resize: bool = False) -> tuple[int | None, str]:
    """Decode ``steps`` one-token steps from the request's history: ``resize(h+1, h)`` then
    ``commit(1)``, or with ``history_in_resize`` the resize itself moves history from ``h-1`` to ``h``.
    Returns the history of the first step that ran out of slots (None if all ran) and why."""
    outcome = manager.resume(request_id)
    if not outcome:
        return manager.history_of(request_id), outcome.describe()
    h = manager.history_of(request_id)
    for _ in range(steps):
        outcome = manager.resize(request_id, h + 1, h)
        if not outcome:
            return h, outcome.describe()
        if not history_in_resize:
            manager.commit(request_id, 1)
        h += 1
    return None, "ok"


def run(args) -> int:
    config = Config(
        tokens_per_block=args.tokens_per_block,
        layers=[AttentionLayer(window=args.window, sink_tokens=args.sink_tokens)],
        slots=None if args.slots is None else [args.slots],
        floor_rule=args.floor_rule,
    )
    layout = build_layout(config)
    steps = 10 * args.window if args.steps is None else args.steps
    manager = Manager(config, release_order=args.release_order)
    manager.create("r0")
    failed_at, why = decode(manager, "r0", steps, args.history_in_resize)
    result = {
        "ok": failed_at is None,
        "failed_at_history": failed_at,
        "reason": why,
        "slots": layout.slots[0],
        "min_slots": layout.min_slots[0],
        "floor_rule": config.floor_rule.value,
        "release_order": manager.release_order.value,
        "steps": steps,
        "steps_run": steps if failed_at is None else failed_at,
        "history_in_resize": args.history_in_resize,
        "peak_used": manager.peak_used(0),
    }
    if args.json:
        print_json(result)
        return 0
    print(
        f"W = {args.window}, t = {args.tokens_per_block}, {args.sink_tokens} sink tokens, "
        f"{result['slots']} slots ({config.floor_rule.value} minimum {result['min_slots']}), "
        f"{steps} decode steps, {result['release_order']}"
    )
    if result["ok"]:
        print(f"ok: all {steps} steps ran; at most {result['peak_used']} slots in use")
    else:
        print(f"DEADLOCK at history {failed_at}: {why}")
        print(f"  see: swafloor explain --window {args.window} --tokens-per-block {args.tokens_per_block}"
              f" --sink-tokens {args.sink_tokens} --history {failed_at}")
    return 0
