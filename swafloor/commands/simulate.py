"""``swafloor simulate``: one request decodes on the reference manager with a pool of N slots.

Exit 0 when every step ran; exit 4 (:data:`DEADLOCK_EXIT`) when a step ran out of slots: the lone
request deadlocked (the result asked for, not a failed check: that is exit 1 elsewhere)."""

from __future__ import annotations

import sys
import time

from swafloor.reference import AttentionLayer, Config, FloorRule, Manager, ReleaseOrder, build_layout

from ._common import (
    add_semantics_arguments, add_window_arguments, format_duration, int_at_least, print_json, semantics_from_args,
)


#: The exit code of a simulation whose request deadlocked.
DEADLOCK_EXIT = 4


def register(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="decode one request on the reference manager "
                                               f"(exit {DEADLOCK_EXIT} on a deadlock)")
    add_window_arguments(p)
    p.add_argument("--slots", type=int_at_least(1), default=None,
                   help="pool slots, any number >= 1, even below the minimum (default: the rule's minimum)")
    p.add_argument("--steps", type=int_at_least(1), default=None, help="decode steps, at least 1 (default: 10 windows)")
    p.add_argument("--floor-rule", choices=[r.value for r in FloorRule], default=FloorRule.FIXED.value,
                   help="the rule the pool's minimum (the 'fixed minimum' or 'legacy minimum' printed) comes from: "
                        "fixed, TensorRT-LLM after PR #15588, the floor S + ceil((W-1)/t) + 1 (default); legacy, "
                        "before it, one slot per life cycle")
    p.add_argument(
        "--history-in-resize",
        action="store_true",
        help="advance history inside each resize (resize(h+1, h) from (h, h-1)) instead of by commit",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_semantics_arguments(p)
    p.set_defaults(handler=run)


def decode(
    manager: Manager, request_id, steps: int, history_in_resize: bool = False, progress=None
) -> tuple[int | None, str]:
    """Decode ``steps`` one-token steps from the request's history: ``resize(h+1, h)`` then
    ``commit(1)``, or with ``history_in_resize`` the resize itself moves history from ``h-1`` to ``h``.
    Returns the history of the first step that ran out of slots (None if all ran) and why.
    ``progress(steps_done, history)``, when given, is called every 4096 steps."""
    outcome = manager.resume(request_id)
    if not outcome:
        return manager.history_of(request_id), outcome.describe()
    h = manager.history_of(request_id)
    for done in range(steps):
        if progress is not None and not done & 0xFFF:
            progress(done, h)
        outcome = manager.resize(request_id, h + 1, h)
        if not outcome:
            return h, outcome.describe()
        if not history_in_resize:
            manager.commit(request_id, 1)
        h += 1
    return None, "ok"


class _Progress:
    """Progress of a long simulation on stderr: once the first 4096 steps are timed, an estimate of
    the total time when it exceeds ``estimate_above`` seconds; a line after the first second, then
    every 5 s."""

    def __init__(self, steps: int, first: float = 1.0, every: float = 5.0, estimate_above: float = 2.0):
        self.steps, self.done, self.history = steps, 0, None
        self.started = time.perf_counter()
        self.next_report = self.started + first
        self.every = every
        self.estimate_above = estimate_above
        self.estimated = False

    def __call__(self, done: int, history: int) -> None:
        self.done, self.history = done, history
        now = time.perf_counter()
        if done and not self.estimated:
            self.estimated = True
            rate = done / max(now - self.started, 1e-9)
            total = self.steps / rate
            if total > self.estimate_above:
                print(f"simulate: {self.steps:,} steps at about {rate:,.0f} steps/s (the first {done:,} timed): "
                      f"about {format_duration(total)} in all; progress every {self.every:g} s, Ctrl-C stops",
                      file=sys.stderr, flush=True)
        if now >= self.next_report:
            self.next_report = now + self.every
            print(f"simulate: {done:,} of {self.steps:,} steps ({100 * done / self.steps:.1f}%), "
                  f"history {history:,}, {now - self.started:.1f} s", file=sys.stderr, flush=True)


def run(args) -> int:
    layers = [AttentionLayer(window=args.window, sink_tokens=args.sink_tokens)]
    semantics = semantics_from_args(args)
    rule = FloorRule(args.floor_rule)
    rule_min = build_layout(Config(tokens_per_block=args.tokens_per_block, layers=layers, floor_rule=rule,
                                   semantics=semantics)).min_slots[0]
    # Any pool may be simulated, even one below the rule's minimum (that is how one sees the deadlock):
    # the manager ignores the rule but for validating slots, so such a pool is built under the legacy rule.
    below = args.slots is not None and args.slots < rule_min
    config = Config(
        tokens_per_block=args.tokens_per_block,
        layers=layers,
        slots=None if args.slots is None else [args.slots],
        floor_rule=FloorRule.LEGACY if below else rule,
        semantics=semantics,
    )
    layout = build_layout(config)
    steps = 10 * args.window if args.steps is None else args.steps
    manager = Manager(config)  # in the release order its semantics name
    manager.create("r0")
    progress = _Progress(steps)
    try:
        failed_at, why = decode(manager, "r0", steps, args.history_in_resize, progress)
    except KeyboardInterrupt:
        # Ctrl-C: the user stopped long work they asked for; say what was done (counted every 4096 steps).
        seconds = time.perf_counter() - progress.started
        where = "-" if progress.history is None else f"{progress.history:,}"
        print(f"simulate: interrupted after at least {progress.done:,} of {steps:,} steps "
              f"(history {where}, {seconds:.1f} s): "
              f"no deadlock so far; at most {manager.peak_used(0):,} of {layout.slots[0]:,} slots in use",
              file=sys.stderr)
        return 130
    result = {
        "ok": failed_at is None,
        "failed_at_history": failed_at,
        "reason": why,
        "slots": layout.slots[0],
        "min_slots": rule_min,
        "below_minimum": below,
        "floor_rule": rule.value,
        "release_order": manager.release_order.value,
        "steps": steps,
        "steps_run": steps if failed_at is None else failed_at,
        "history_in_resize": args.history_in_resize,
        "peak_used": manager.peak_used(0),
    }
    code = 0 if result["ok"] else DEADLOCK_EXIT
    if args.json:
        print_json(result)
        return code
    print(
        f"W = {args.window}, t = {args.tokens_per_block}, {args.sink_tokens} sink tokens, "
        f"{result['slots']} slots ({rule.value} minimum {rule_min}{', below it' if below else ''}), "
        f"{steps} decode steps, {result['release_order']}"
    )
    if result["ok"]:
        print(f"ok: all {steps} steps ran; at most {result['peak_used']} slots in use")
    else:
        print(f"DEADLOCK at history {failed_at}: {why}")
        print(f"  see: {explain_hint(args, failed_at)}")
    return code


def explain_hint(args, failed_at: int) -> str:
    """The ``swafloor explain`` command that draws the step that ran out of slots, with the release
    order when the resize itself advanced history and held what it made stale (only then does the
    order change the step's blocks)."""
    hint = (f"swafloor explain --window {args.window} --tokens-per-block {args.tokens_per_block}"
            f" --sink-tokens {args.sink_tokens} --history {failed_at}")
    if args.history_in_resize and args.semantics_release_order == ReleaseOrder.HOLD_UNTIL_RETURN.value:
        hint += f" --release-order {args.semantics_release_order}"
    return hint
