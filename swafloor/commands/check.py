"""``swafloor check trtllm``: TensorRT-LLM KVCacheManagerV2's own sources against the reference.

Exit codes: 0 the source agrees with the reference (under the floor rule it implements, which is
reported) and every comparison ran; 1 a mismatch or an exception raised by upstream code (each
printed with its whole input), a minimum below the floor (the pre-fix rule included; the lone
request that runs out is printed) unless ``--expect-rule pre-fix`` holds it to the old rule, or the
rule is not the one ``--expect-rule`` names (an undetermined rule included): whatever a later phase
did, a mismatch is exit 1; 2 the check cannot run: the source cannot be loaded, its files do not fit
together, or a comparison failed on an error of ours, with no mismatch found (one stderr line).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ._common import int_at_least, print_json, writable_dir

CHECK_NAMES = {
    "stale": "stale ranges",
    "scratch": "scratch ranges",
    "registry": "life-cycle registry",
    "min_slots": "minimum slots per pool group",
    "batch_slots": "slot counts per batch",
    "accounting": "storage-manager slot accounting",
}


def register(subparsers) -> None:
    p = subparsers.add_parser("check", help="check an upstream implementation's own sources against the reference")
    t = p
    t.add_argument("target", choices=("trtllm",),
                   help="trtllm: TensorRT-LLM KVCacheManagerV2 (its CPU-safe Python modules)")
    t.add_argument("--source", default=None, metavar="PATH",
                   help="a TensorRT-LLM checkout or its tensorrt_llm/runtime/kv_cache_manager_v2 folder "
                        "(default: $SWAFLOOR_TRTLLM_SOURCE)")
    t.add_argument("--examples", type=int_at_least(0), default=None,
                   help="Hypothesis examples per comparison beyond the grid (default 200; 0: grid only); "
                        "with --whole, the campaign's examples (default: the ci profile's, 2000)")
    t.add_argument("--seed", type=int_at_least(0), default=0, help="Hypothesis seed (default 0)")
    t.add_argument("--grid", choices=("small", "tiny"), default="small", help="exhaustive grid size (default small)")
    t.add_argument("--expect-rule", choices=("post-fix", "pre-fix"), default=None,
                   help="also fail (exit 1) unless the source implements this floor rule (undetermined fails); "
                        "pre-fix holds upstream's minimum to the old rule instead of the floor")
    t.add_argument("--whole", action="store_true",
                   help="the whole manager instead of its arithmetic: the ci campaign of the trtllm-v2 backend "
                        "against the reference on PATH (a Python-era kv_cache_manager_v2 folder; needs "
                        "cuda-bindings) and the progress properties; exit 1 on a divergence or a failed property")
    t.add_argument("--no-shrink", action="store_true", help="with --whole: report the campaign's first divergence unshrunk")
    t.add_argument("--out", type=writable_dir, default=Path("fuzz-failures"), metavar="DIR",
                   help="with --whole: where failing traces go (default ./fuzz-failures)")
    t.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(handler=run)


class _Progress:
    def __init__(self, enabled: bool, every: float = 2.0):
        self.enabled = enabled
        self.every = every
        self.last = 0.0
        self.phase = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if phase != self.phase or now - self.last >= self.every or done == total:
            if phase != self.phase or now - self.last >= self.every:
                print(f"check trtllm: {phase}: {done}/{total}", file=sys.stderr, flush=True)
                self.last = now
            self.phase = phase


def run(args) -> int:
    if args.whole:
        from .check_whole import run_whole

        return run_whole(args, _Progress(not args.no_progress))
    if args.out != Path("fuzz-failures") or args.no_shrink:
        from ..cli import UsageError

        raise UsageError(f"{'--out' if args.out != Path('fuzz-failures') else '--no-shrink'} applies to --whole only")
    if args.examples is None:
        args.examples = 200
    from swafloor.fuzz.engines.trtllm.compare import CHECKS, RULE_TEXT, Checker
    from swafloor.fuzz.engines.trtllm.loader import load

    from ..cli import one_line

    upstream = load(args.source)  # LoadError -> one line, exit 2 (swafloor.cli)
    progress = _Progress(not args.no_progress)
    # The floor is the spec: upstream's minimum is held to it (post-fix) unless the caller expects the
    # pre-fix rule, so a pre-fix source is exit 1 by default (its lone request runs out; shown).
    hold_to = "pre-fix" if args.expect_rule == "pre-fix" else "post-fix"
    report = Checker(upstream, examples=args.examples, seed=args.seed, grid=args.grid, progress=progress,
                     hold_to=hold_to).run()
    data = report.to_dict()
    rule_ok = args.expect_rule is None or report.rule == args.expect_rule
    data["expected_rule"] = args.expect_rule
    data["held_to"] = hold_to
    data["ok"] = report.ok and rule_ok and report.complete
    if not report.ok or not rule_ok:
        code = 1  # a finding: a mismatch (whatever else happened), or not the expected rule (undetermined too)
    elif not report.complete:
        code = 2  # nothing found, but the check could not run in full
    else:
        code = 0
    data["exit_code"] = code
    cannot = None
    if not report.complete:
        if report.fatal is not None:
            cannot = f"swafloor check trtllm: could not run in full: {report.fatal}"
        else:
            first = report.not_run[0]
            cannot = (f"swafloor check trtllm: {report.not_run_count} comparisons could not run; first "
                      f"({CHECK_NAMES.get(first['check'], first['check'])}): {first['error']} at {first['where']}, "
                      f"input {json.dumps(first['input'])}")
    if code == 2 and report.fatal is not None and not args.json and rule_ok:
        print(one_line(cannot), file=sys.stderr)  # nothing was found: the one line says why it stopped
        return 2
    if args.json:
        print_json(data)
        if code == 2:
            print(one_line(cannot), file=sys.stderr)
        return code
    verdicts = data["verdicts"]
    print(f"swafloor check trtllm: {data['source']}")
    print(f"  loaded: rawref, _common, _config, _exceptions, _utils, _life_cycle_registry, _storage_manager")
    print(f"  stand-ins: tensorrt_llm, tensorrt_llm.runtime, tensorrt_llm.envs (synthetic), "
          f"{', '.join(data['stand_ins'])} (imported by _storage_manager, not driven)")
    print(f"  rawref: {data['rawref']}")
    votes = data["min_slots_votes"]
    print(f"  rule: {RULE_TEXT.get(report.rule, report.rule)}")
    print(f"        (configs whose minimum matched post-fix only: {votes['post-fix']}, pre-fix only: "
          f"{votes['pre-fix']}, both: {votes['both']}, neither: {votes['neither']})")
    print("  upstream's own verdicts (upstream's functions compute each value; the reference's is compared):")
    for check in CHECKS:
        raised = verdicts["upstream"]["raised"][check]
        print(f"    {CHECK_NAMES[check]:<34} {data['comparisons'][check]:>10} comparisons, "
              f"{data['mismatches'][check]} mismatches" + (f" ({raised} raised)" if raised else ""))
    print(f"    {'total':<34} {data['total_comparisons']:>10} comparisons, {sum(data['mismatches'].values())} mismatches")
    print("      (slot accounting: upstream's new_gpu_slots, release_slot, get_statistics, driven by the "
          "reference's plan: which blocks to release and allocate, release first)")
    ref = verdicts["reference"]
    print("  the reference's verdict on upstream's numbers (the reference run on pools of upstream's own minimum):")
    print(f"    a lone request decoding: {ref['lone_decode_out_of_slots']} of {ref['lone_decode_runs']} runs ran out "
          f"of slots; of those without full attention, {ref['windowed_lone_decode_out_of_slots']} of "
          f"{ref['windowed_lone_decode_runs']}")
    if ref["runs_below_one_slot_per_life_cycle"]:
        print(f"    {ref['runs_below_one_slot_per_life_cycle']} runs had pools below one slot per life cycle "
              f"(the reference's required blocks counted against them)")
    if ref["first_windowed_out_of_slots"] is not None:
        print(f"    first such: {json.dumps(ref['first_windowed_out_of_slots'])}")
    for m in data["first_mismatches"]:
        kind = "RAISED" if isinstance(m["upstream"], dict) and "raised" in m["upstream"] else "MISMATCH"
        print(f"{kind} ({CHECK_NAMES[m['check']]}): input {json.dumps(m['input'])}")
        print(f"  upstream:  {json.dumps(m['upstream'])}")
        print(f"  reference: {json.dumps(m['reference'])}")
        if m.get("detail"):
            print(f"  detail:    {json.dumps(m['detail'])}")
        runs_out = (m.get("detail") or {}).get("on upstream's minimum")
        if m["check"] == "min_slots" and isinstance(runs_out, dict) and runs_out.get("ran_out_at"):
            cycles = ", ".join(f"life cycle {c['index']} ({c['kind']}, window {c['window']}, {c['sink_blocks']} sink "
                               f"blocks) in pool group {c['pool_group']}" for c in runs_out.get("life_cycles", []))
            print(f"BELOW THE FLOOR: a lone request on upstream's minimum {runs_out['slots']} runs out at "
                  f"{runs_out['ran_out_at']} (history {runs_out.get('history')}): {cycles}; the reference "
                  f"manager says {runs_out.get('reference_outcome')}")
    if cannot is not None:
        print(f"COULD NOT RUN: {cannot.removeprefix('swafloor: ')}")
        for item in data["not_run"][1:]:
            print(f"  also ({CHECK_NAMES.get(item['check'], item['check'])}): {item['error']}, input {json.dumps(item['input'])}")
    if not rule_ok:
        print(f"RULE: expected {args.expect_rule}, the source implements {report.rule}")
    if not report.ok:
        verdict = "DISAGREES with the reference"
    elif not report.complete:
        verdict = "no mismatch found, but the check did not run in full"
    elif not rule_ok:
        verdict = f"agrees with the reference, but implements the {report.rule} rule, not {args.expect_rule}"
    else:
        verdict = "agrees with the reference"
    print(f"  result: {verdict} ({data['seconds']} s)")
    if code == 2:
        print(one_line(cannot), file=sys.stderr)
    return code
