"""The data plane on a CUDA machine, in one run: ``python -m swafloor.fuzz.engines.dataplane.gpu_check`` (or
``scripts/gpu-dataplane-check``, which also runs it from a checkout that is not installed).

It runs ``dataplane:reference`` against the reference for ``SWAFLOOR_GPU_EXAMPLES`` examples (default
300, seed 0) on CUDA; the two data-caught seeded bugs (release-inflight-block, shared-slot) on CUDA;
then ``swafloor bench dataplane``'s figures on cpu and on cuda (``SWAFLOOR_GPU_BENCH_EXAMPLES``
examples, default 100). Exit 0: the campaign passed and both bugs were caught; 1: not; 2: no CUDA or
a missing module. The figures also go to ``$OUT/dataplane-gpu.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

__all__ = ["main", "DATA_CAUGHT"]

#: The seeded bugs only the data catches (a ``data[...]`` field diverges first).
DATA_CAUGHT = ("dataplane:mutant:release-inflight-block", "dataplane:mutant:shared-slot")


def main() -> int:
    missing = [m for m in ("torch", "attrs", "hypothesis") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"gpu-dataplane-check: missing modules: {', '.join(missing)}", file=sys.stderr)
        return 2
    import torch

    print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}", flush=True)
    if not torch.cuda.is_available():
        print("gpu-dataplane-check: torch sees no CUDA device", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name(0)}", flush=True)

    from . import bench
    from ...runner import format_report, run_campaign

    examples = int(os.environ.get("SWAFLOOR_GPU_EXAMPLES", "300"))
    bench_examples = int(os.environ.get("SWAFLOOR_GPU_BENCH_EXAMPLES", "100"))
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    ok = True

    os.environ["SWAFLOOR_DEVICE"] = "cuda"
    result = run_campaign("dataplane:reference", examples=examples, seed=0, out_dir=os.environ.get("OUT") or None)
    print(format_report(result), flush=True)
    report["campaign"] = result.to_dict()
    ok &= result.divergence is None
    for name in DATA_CAUGHT:
        found = run_campaign(name, examples=400, seed=0, shrink=False, out_dir=None)
        caught = found.divergence is not None and found.divergence.field.startswith("data[")
        print(f"{name}: {'caught by data' if caught else 'NOT caught by data'} at example "
              f"{found.first_failure_example}", flush=True)
        report[name] = {"caught": caught, "example": found.first_failure_example,
                        "field": None if found.divergence is None else found.divergence.field}
        ok &= caught

    for device in ("cpu", "cuda"):
        os.environ["SWAFLOOR_DEVICE"] = device
        figures = bench.run(examples=bench_examples)
        print(bench.format(figures), flush=True)
        report[f"bench_{device}"] = figures

    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "dataplane-gpu.json"), "w") as f:
            json.dump(report, f, indent=2, default=str)
    print("gpu-dataplane-check: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
