"""``swafloor check trtllm --whole``: TensorRT-LLM KVCacheManagerV2's whole Python manager, loaded from a
source folder (the CUDA driver stood in where no device is), held to the reference two ways: the ci
campaign of the ``trtllm-v2`` backend against the reference, and the progress properties of
:mod:`swafloor.fuzz.engines.trtllm.progress`.

Exit codes: 0 no divergence and every property held; 1 a divergence (its whole input, the saved trace
and the replay command are printed) or a failed property (the config, where the lone request ran out:
its operation, history and the life cycles of the pool group short of slots, and the saved trace);
2 the source cannot be loaded (one stderr line). Progress goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ._common import print_json

#: What a failing property's first line says it is.
HEADLINE = {
    "lone-completes": "a lone request on pools of the rule's minimum did not complete",
    "suspended-resumes": "a lone request suspended and resumed (gate off) did not go on",
    "suspended-resumes-host": "a lone request suspended and resumed with a host tier (gate off) did not go on",
    "resume-gate": "upstream's resume gate disagreed with the modelled gate",
    "quota-below-minimum": "a quota below the minimum left a pool below the floor",
    "initial-pool-ratio": "an initial_pool_ratio left a pool below the floor",
}


def _cycles(items: list[dict]) -> str:
    return "; ".join(
        f"pool group {g['pool_group']} ({g['slots']} slots" + (f", floor {g['floor']}" if "floor" in g else "") + "): "
        + ", ".join(f"life cycle {c['index']} ({c['kind']}"
                    + (f", window {c['window']}, {c['sink_blocks']} sink blocks" if c["window"] is not None else "")
                    + ")" for c in g["life_cycles"])
        for g in items)


def _failure_lines(result: Any, saved: Path | None) -> list[str]:
    d = result.detail
    lines = [f"FAILED ({result.name}): {HEADLINE[result.name]}",
             f"  config: {json.dumps(result.config.to_dict())}"]
    if "below_the_floor" in d:
        lines.append(f"  upstream's pools {d['upstream_totals']}, the rule's minimum {d['rule_minimum']}; below the "
                     f"floor: {_cycles(d['below_the_floor'])}")
        out = d.get("lone_request_runs_out")
        if out:
            lines.append(f"  DEADLOCK: a lone request runs out at {out['at']} (operation {out['step_index']}, history "
                         f"{out['history']}): {_cycles(out.get('short', []))}")
        else:
            lines.append("  a lone request on those pools still completed its run")
    elif "at" in d:
        lines.append(f"  at {d['at']} (operation {d['step_index']}, history {d['history']}): {d['why']}")
        if d.get("short"):
            lines.append(f"  out of slots: {_cycles(d['short'])}")
    else:
        lines.append(f"  {d.get('why', '')}: upstream's pools {d.get('upstream_totals')}, the rule's minimum "
                     f"{d.get('rule_minimum')}")
    if saved is not None:
        lines.append(f"  trace: {saved}  (replay: SWAFLOOR_TRTLLM_SOURCE=PATH swafloor replay {saved} --backend trtllm-v2)")
    return lines


def run_whole(args: Any, progress: Any) -> int:
    from swafloor.fuzz.engines.trtllm import progress as props
    from swafloor.fuzz.engines.trtllm.loader import resolve_source
    from swafloor.fuzz.engines.trtllm.v2 import SOURCE_ENV, _load_real
    from swafloor.fuzz.runner import format_report, run_campaign
    from swafloor.fuzz.trace import Step, Trace, save, to_dict

    from ..cli import UsageError

    if args.expect_rule is not None:
        raise UsageError("--expect-rule applies to the source-level check, not --whole")
    if args.examples == 0:
        raise UsageError("--examples=0: the campaign needs at least one example")
    from swafloor.fuzz.runner import PROFILES

    examples = args.examples if args.examples is not None else PROFILES["ci"].examples
    folder = resolve_source(args.source)  # LoadError -> one line, exit 2
    path = str(folder.resolve())
    os.environ[SOURCE_ENV] = path  # the registered trtllm-v2 backend loads the same folder
    v2, stream = _load_real(path)  # LoadError -> one line, exit 2
    from swafloor.fuzz.engines.trtllm.whole import standin_in_use

    driver = "the CPU stand-in" if standin_in_use() is not None else "the real CUDA driver"
    started = time.perf_counter()

    def campaign_progress(stats: Any) -> None:
        if progress.enabled:
            progress("campaign (trtllm-v2 vs reference)", stats.examples, examples)

    result = run_campaign("trtllm-v2", "reference", profile="ci", examples=examples, seed=args.seed,
                          shrink=not args.no_shrink, out_dir=args.out, progress=campaign_progress)
    results = props.run_progress(v2, stream, progress=progress)
    seconds = round(time.perf_counter() - started, 2)
    saved: dict[int, Path] = {}
    traces: dict[int, Trace] = {}
    for i, r in enumerate(results):
        if r.ok is False and r.operations is not None:
            traces[i] = Trace(r.config, tuple(Step(**s) for s in r.operations), backend="trtllm-v2", expect=r.expect)
            args.out.mkdir(parents=True, exist_ok=True)
            saved[i] = save(traces[i], args.out / f"progress-{r.name}-{i}.json")
    failed = [i for i, r in enumerate(results) if r.ok is False]
    code = 1 if result.divergence is not None or failed else 0
    if args.json:
        data = {
            "source": path, "mode": "whole", "cuda_driver": driver, "seconds": seconds,
            "campaign": result.to_dict(),
            "progress_properties": {"summary": props.summary(results),
                                    "results": [dict(r.to_dict(), trace=to_dict(traces[i]) if i in traces else None,
                                                     trace_file=str(saved[i]) if i in saved else None)
                                                for i, r in enumerate(results)]},
            "ok": code == 0, "exit_code": code,
        }
        print_json(data)
        return code
    print(f"swafloor check trtllm --whole: {path}")
    print(f"  loaded: the whole package (its own __init__.py), CUDA driver: {driver}")
    print("  campaign: " + format_report(result).replace("\n", "\n  "))
    print(f"  progress properties ({len(props.CONFIGS)} configs, a lone request each):")
    for name, row in props.summary(results).items():
        theorems = ", ".join(props.THEOREMS[name]) or "none (the reference's raise is max(asked, minimum))"
        print(f"    {name:<24} {row['held']} held, {row['failed']} failed, {row['not_supported']} not supported"
              f"  [theorems: {theorems}]")
    refused = [r for r in results if r.name == "resume-gate" and r.ok and r.detail.get("refused_at_history") is not None]
    if refused:
        print(f"    resume-gate: upstream's gate refused {len(refused)} of {len(props.CONFIGS)} lone requests at 0.97, each "
              f"where the modelled gate does (theorem trtllm-resume-gate-admits-kept-lone-request is refuted)")
    for reason in sorted({r.detail.get("reason") for r in results if r.ok is None}):
        print(f"    not supported: {reason}")
    for i in failed:
        for line in _failure_lines(results[i], saved.get(i)):
            print(line)
    verdict = "agrees with the reference and every property held" if code == 0 else "DISAGREES with the reference"
    print(f"  result: {verdict} ({seconds} s)")
    sys.stdout.flush()
    return code
