"""Data-plane figures (never pass/fail): steps per second of ``dataplane:reference`` beside the
table-only campaign (``reference`` vs the reference), both inside a ``ci``-profile campaign with the
same seed and examples (Hypothesis included), and replaying a fixed decode workload (the lockstep
alone). The device is ``SWAFLOOR_DEVICE`` (default ``auto``).

``swafloor bench dataplane`` prints :func:`format` of :func:`run`.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["run", "format"]


def _rate(steps: int, seconds: float) -> float:
    return round(steps / seconds, 1) if seconds > 0 else 0.0


def run(examples: int = 300, seed: int = 0) -> dict[str, Any]:
    """Measure; returns JSON-ready figures (``{"skipped": why}`` when torch or the device is missing)."""
    from ...backends import UnknownBackend, resolve
    from ...bench import decode_workload
    from ...replay import replay
    from ...runner import run_campaign

    try:
        data = resolve("dataplane:reference")
    except UnknownBackend as exc:
        return {"skipped": str(exc)}
    table = resolve("reference")
    figures: dict[str, Any] = {"device": data.device, "examples": examples, "seed": seed}
    import torch

    figures["torch"] = torch.__version__
    if data.device == "cuda":
        figures["gpu"] = torch.cuda.get_device_name(0)
    campaigns = {}
    for label, backend in (("table-only", table), ("dataplane", data)):
        result = run_campaign(backend, examples=examples, seed=seed, out_dir=None)
        campaigns[label] = {
            "backend": result.backend, "steps": result.steps, "seconds": round(result.seconds, 3),
            "steps_per_second": _rate(result.steps, result.seconds), "result": result.result,
        }
    figures["campaign"] = campaigns
    workload = decode_workload()
    replays = {}
    for label, backend in (("table-only", table), ("dataplane", data)):
        start = time.perf_counter()
        replayed = replay(workload, backend, "reference")
        elapsed = time.perf_counter() - start
        replays[label] = {
            "steps": replayed.steps_run, "seconds": round(elapsed, 3),
            "steps_per_second": _rate(replayed.steps_run, elapsed),
            "result": "divergence" if replayed.diverged else "match",
        }
    figures["lockstep"] = {
        "workload": "4 requests x 400 decode steps, t=16, SWA W=100 + 4 sinks, full attention, SSM", **replays
    }
    return figures


def format(figures: dict[str, Any]) -> str:  # noqa: A001 - the name the bench command expects
    if "skipped" in figures:
        return f"dataplane: not measured: {figures['skipped']}"
    where = figures["device"] + (f" ({figures['gpu']})" if "gpu" in figures else "")
    lines = [f"dataplane: steps per second on {where}, torch {figures['torch']}"]
    c = figures["campaign"]
    lines.append(
        f"  campaign ({figures['examples']} examples, seed {figures['seed']}): dataplane:reference "
        f"{c['dataplane']['steps_per_second']:,.0f} steps/s ({c['dataplane']['steps']} steps, "
        f"{c['dataplane']['seconds']:.1f} s, {c['dataplane']['result']}); table-only reference "
        f"{c['table-only']['steps_per_second']:,.0f} steps/s ({c['table-only']['seconds']:.1f} s)"
    )
    w = figures["lockstep"]
    lines.append(
        f"  lockstep replay ({w['workload']}): dataplane:reference {w['dataplane']['steps_per_second']:,.0f} "
        f"steps/s ({w['dataplane']['result']}); table-only reference {w['table-only']['steps_per_second']:,.0f} steps/s"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format(run()))
