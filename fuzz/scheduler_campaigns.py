"""The scheduler campaigns: the serving loop (``swafloor.reference.scheduler``, ``swafloor serve-sim``)
driven over small grids of workloads, each check with its own oracle, never the admission formula's
claim about itself.

- :func:`lone_requests`: a lone request, admitted by the ``reference`` gate, must (a) finish in a pool of
  exactly what the gate charges (the charge suffices: a request that runs out of slots alone preempts
  itself, forever) and (b), for a run long enough to sweep every history, be admitted and finish in a
  pool of the peak the reference manager itself measured for that run in a roomy pool (the charge is
  never above what the run holds).
- :func:`kept_resumes`: a lone request suspended with its slots kept after every step and resumed through
  the rule's resume gate (``scheduler.kept_run``) must finish in a pool of what the rule charges.
- :func:`preemptions`: requests that cannot all grow to their end together, first-come-first-served
  preemption (victim ``newest``): every one finishes within the loop's step limit.
- :func:`fcfs_bound`: the bound ``fcfs-pair-finishes`` model-checks for two requests (all done by step
  sum(P + O)), checked on the loop itself for more requests.

Each returns the failures it found (one line each); :func:`run` all of them. The seeded bugs of the
admission rule (``swafloor.reference.seeded_bugs``, campaign ``scheduler``) are caught here with the
formula's patch applied (``swafloor.proofs.mutations.applied``).
"""

from __future__ import annotations

import itertools

from swafloor.reference import AttentionLayer, Config, FloorRule, build_layout
from swafloor.reference.manager import Manager
from swafloor.reference.scheduler import Arrival, Victim, gate_charge, kept_run, serve

__all__ = ["lone_requests", "kept_resumes", "preemptions", "fcfs_bound", "run"]

#: (t, W, S, P, O, C, k): small, and a few long enough to sweep every history of the window.
LONE = [g for g in itertools.product((1, 2, 3), (1, 2, 5), (0, 1), (1, 4, 30), (1, 20), (1, 3), (0, 1))]


def _config(t: int, W: int, S: int, pool: int) -> Config:
    layers = [AttentionLayer(window=W, sink_tokens=S * t)]
    below = pool < build_layout(Config(tokens_per_block=t, layers=layers)).min_slots[0]
    return Config(tokens_per_block=t, layers=layers, slots=(pool,), floor_rule=FloorRule.LEGACY if below else FloorRule.FIXED)


def _measured_peak(t: int, W: int, S: int, P: int, O: int, C: int, k: int) -> int:
    """The most slots the run holds at once, measured by the reference manager in a roomy pool."""
    m = Manager(_config(t, W, S, S + (P + O + k) // t + 2))
    m.create("r0")
    m.resume("r0")
    h = 0
    while h < P + O:
        n = min(C, P - h) if h < P else 1 + k
        if not m.resize("r0", h + n, h):
            raise AssertionError(f"the run did not fit in a roomy pool: {(t, W, S, P, O, C, k)}")
        done = n if h < P else 1
        m.commit("r0", done)
        h += done
    return m.peak_used(0)


def lone_requests(gate: str = "reference") -> list[str]:
    failures = []
    for t, W, S, P, O, C, k in LONE:
        point = f"t={t} W={W} S={S} P={P} O={O} C={C} k={k}"
        base = Config(tokens_per_block=t, layers=[AttentionLayer(window=W, sink_tokens=S * t)])
        (charge,) = gate_charge(gate, base, P, O, C, k)
        arrivals = [Arrival("r0", 0, P, O)]
        limit = 4 * (P + O + 2)
        result = serve(_config(t, W, S, charge), arrivals, gate=gate, chunk=C, lookahead=k, max_steps=limit)
        if not result.completed:
            failures.append(f"{point}: not finished in the {charge} slots the {gate} gate charges "
                            f"({'deadlock' if result.deadlock else 'livelock'})")
        # a run whose largest steps sweep every history of the window: its measured peak is the worst case
        sweep = (S + 2) * t + W + k + 1  # one-token steps (k = 0) or decode steps (k > 0) over this many histories
        if C == 1 and (O >= sweep or (k == 0 and P + O >= sweep)):
            peak = _measured_peak(t, W, S, P, O, C, k)
            result = serve(_config(t, W, S, peak), arrivals, gate=gate, chunk=C, lookahead=k, max_steps=limit)
            if not result.completed:
                failures.append(f"{point}: the run fits in {peak} slots (measured) but the {gate} gate charges "
                                f"{charge}: {'deadlock' if result.deadlock else 'livelock'}")
    return failures


def kept_resumes() -> list[str]:
    failures = []
    for t, W, S, P, O, C, k in LONE:
        base = Config(tokens_per_block=t, layers=[AttentionLayer(window=W, sink_tokens=S * t)])
        (charge,) = gate_charge("reference", base, P, O, C, k)
        run = kept_run(_config(t, W, S, charge), P, O, chunk=C, lookahead=k, gate="reference")
        if not run.completed:
            where = (f"the resume gate refused it after the step at h={run.refused_at} (use {list(run.used)} of "
                     f"{list(run.total)})" if run.refused_at is not None else f"a step ran out after {run.steps} steps")
            failures.append(f"t={t} W={W} S={S} P={P} O={O} C={C} k={k}, pool {charge}: {where}")
    return failures


#: (t, W, requests, P, O, C, pool): growing requests (an SWA layer and full attention) in a pool too small
#: for all of them to reach their end together.
GROWING = [(4, 8, 3, 20, 10, 4, 12), (4, 8, 2, 20, 10, 4, 12), (2, 4, 3, 9, 6, 3, 10), (1, 3, 2, 6, 6, 2, 14)]


def preemptions(victim: Victim | str = Victim.NEWEST) -> list[str]:
    failures = []
    for t, W, n, P, O, C, pool in GROWING:
        config = Config(tokens_per_block=t, layers=[AttentionLayer(window=W), AttentionLayer()], slots=(pool, pool))
        result = serve(config, [Arrival(f"r{i}", 0, P, O) for i in range(n)], chunk=C, victim=victim)
        if not result.completed:
            failures.append(f"t={t} W={W} {n} requests P={P} O={O} C={C} pool {pool}: "
                            f"{len(result.finished)} finished ({'deadlock' if result.deadlock else 'livelock'}, "
                            f"{result.preemptions} preemptions)")
    return failures


def run() -> list[str]:
    return lone_requests() + kept_resumes() + preemptions()


def fcfs_bound(requests: int = 3, victim: Victim | str = Victim.NEWEST) -> list[str]:
    """Past the model check (``fcfs-pair-finishes``, two requests): ``requests`` requests arriving together
    on one full-attention pool group at one token per block, chunk 1, in pools up to 2 slots above the
    largest's need; under FCFS preemption all must be done by step sum(P + O)."""
    failures = []
    sizes = [(1, 1), (1, 3), (3, 1), (2, 2), (3, 3)]
    for lens in itertools.product(sizes, repeat=requests):
        for extra in range(3):
            pool = max(p + o for p, o in lens) + extra
            total = sum(p + o for p, o in lens)
            config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
            result = serve(config, [Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(lens)], chunk=1,
                           victim=victim, max_steps=4 * total)
            last = max(result.finished_at.values(), default=-1)
            if not result.completed or last > total:
                failures.append(f"{requests} requests {lens}, pool {pool}: "
                                f"{'not all finished' if not result.completed else f'last done at step {last}'} "
                                f"(bound {total})")
    return failures
