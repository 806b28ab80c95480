"""Fuzzing figures (never pass/fail): how fast each seeded bug is caught, and how fast the harness runs.

- Per mutant, over 5 seeds: the median number of examples and seconds until the first divergence
  (no shrinking; seconds include Hypothesis's start-up), and how many seeds caught it within budget.
- Differential steps per second, reference vs oracle: operations applied to both sides and compared,
  inside a campaign (Hypothesis included) of the ``ci`` profile and of the ``standard`` one
  (``swafloor fuzz``'s default: longer runs, more compared steps per Hypothesis draw), and replaying
  a fixed decode-heavy trace (the lockstep alone).

``swafloor bench fuzz`` prints :func:`format` of :func:`run`; ``python -m swafloor.fuzz.bench`` too.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Sequence

from swafloor.reference import AttentionLayer, Config, SsmLayer

__all__ = ["run", "format", "decode_workload"]

SEEDS = (0, 1, 2, 3, 4)


def decode_workload(requests: int = 4, tokens: int = 400):
    """A fixed trace: a mixed config (SWA with sinks, full attention, SSM) and ``requests`` requests
    decoding ``tokens`` tokens each, round-robin, with ample slots."""
    from .trace import Step, Trace

    config = Config(
        tokens_per_block=16,
        layers=[AttentionLayer(window=100, sink_tokens=4), AttentionLayer(window=None), SsmLayer()],
        slots=(requests * 12, requests * ((tokens + 16) // 16 + 1), requests),
    )
    steps = []
    ids = [f"r{i}" for i in range(requests)]
    for rid in ids:
        steps += [Step.create(rid), Step.resume(rid)]
    for h in range(tokens):
        for rid in ids:
            steps += [Step.resize(rid, h + 1, h), Step.commit(rid, 1)]
    steps += [Step.close(rid) for rid in ids]
    return Trace(config=config, steps=tuple(steps), backend="oracle")


def workers_figures(workers: Sequence[int] = (1, 2), examples: int = 1000) -> list[dict[str, Any]]:
    """Reference vs oracle with ``swafloor fuzz --workers N --profile ci`` for each N: the same total
    examples, steps per second across workers over the wall time (the workers' start-up included)."""
    import tempfile

    from .workers import run_workers

    rows = []
    for n in workers:
        with tempfile.TemporaryDirectory() as db:
            result = run_workers("oracle", workers=n, profile="ci", examples=examples, seed=0, database=db,
                                 out_dir=None)
        rows.append({"workers": n, "profile": result.profile, "examples": result.examples, "steps": result.steps,
                     "seconds": round(result.seconds, 3),
                     "steps_per_second": round(result.steps / result.seconds, 1), "result": result.result})
    return rows


def run(seeds: Sequence[int] = SEEDS, budget: int = 5000, campaign_examples: int = 500) -> dict[str, Any]:
    """Measure; returns JSON-ready figures."""
    from .backends import MUTANT_NAMES
    from .replay import replay
    from .runner import run_campaign

    mutants = {}
    for name in MUTANT_NAMES:
        examples, seconds, caught = [], [], 0
        for seed in seeds:
            result = run_campaign(name, examples=budget, seed=seed, shrink=False, out_dir=None)
            if result.divergence is not None:
                caught += 1
                examples.append(result.first_failure_example)
                seconds.append(result.first_failure_seconds)
        mutants[name] = {
            "seeds": len(seeds),
            "caught": caught,
            "median_examples": statistics.median(examples) if examples else None,
            "median_seconds": round(statistics.median(seconds), 3) if seconds else None,
            "max_examples": max(examples) if examples else None,
        }

    campaigns = {
        profile: run_campaign("oracle", examples=campaign_examples, seed=0, out_dir=None, profile=profile)
        for profile in ("ci", "standard")
    }
    workload = decode_workload()
    start = time.perf_counter()
    replayed = replay(workload, "oracle", "reference")
    elapsed = time.perf_counter() - start
    return {
        "seeds": list(seeds),
        "budget_examples": budget,
        "mutants": mutants,
        "campaigns": [
            {
                "backend": "oracle",
                "against": "reference",
                "profile": profile,
                "examples": campaign.examples,
                "steps": campaign.steps,
                "seconds": round(campaign.seconds, 3),
                "steps_per_second": round(campaign.steps / campaign.seconds, 1),
                "result": campaign.result,
            }
            for profile, campaign in campaigns.items()
        ],
        "lockstep": {
            "workload": "4 requests x 400 decode steps, t=16, SWA W=100 + 4 sinks, full attention, SSM",
            "steps": replayed.steps_run,
            "seconds": round(elapsed, 3),
            "steps_per_second": round(replayed.steps_run / elapsed, 1),
            "result": "divergence" if replayed.diverged else "match",
        },
        "workers": workers_figures(),
    }


def format(figures: dict[str, Any]) -> str:  # noqa: A001 - the name the bench command expects
    """A table of the figures."""
    lines = [
        f"fuzz: seeded bugs, {len(figures['seeds'])} seeds, budget {figures['budget_examples']} examples each",
        f"  {'mutant':34s} {'caught':>7s} {'median examples':>16s} {'median s':>9s} {'max examples':>13s}",
    ]
    for name, m in figures["mutants"].items():
        med_e = "-" if m["median_examples"] is None else f"{m['median_examples']:g}"
        med_s = "-" if m["median_seconds"] is None else f"{m['median_seconds']:.2f}"
        max_e = "-" if m["max_examples"] is None else str(m["max_examples"])
        lines.append(f"  {name:34s} {m['caught']:>3d}/{m['seeds']:<3d} {med_e:>16s} {med_s:>9s} {max_e:>13s}")
    for c in figures["campaigns"]:
        lines.append(
            f"fuzz: reference vs oracle campaign, profile {c['profile']}: {c['steps_per_second']:.0f} steps/s "
            f"({c['steps']} steps, {c['examples']} examples, {c['seconds']:.1f} s, {c['result']})"
        )
    w = figures["lockstep"]
    lines.append(
        f"fuzz: reference vs oracle lockstep replay: {w['steps_per_second']:.0f} steps/s "
        f"({w['steps']} steps in {w['seconds']:.2f} s; {w['workload']}; {w['result']})"
    )
    for row in figures.get("workers", ()):
        lines.append(
            f"fuzz: reference vs oracle, --workers {row['workers']}, profile {row['profile']}: "
            f"{row['steps_per_second']:.0f} steps/s "
            f"({row['steps']} steps, {row['examples']} examples, {row['seconds']:.1f} s wall, {row['result']})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format(run()))
