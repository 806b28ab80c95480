"""Seeded bugs in the reference formulas, applied as temporary patches of reference functions.

The catalogue's goals look reference functions up through their modules at call time, so inside
:func:`applied` every goal is built from the mutated formula. A patch replaces the formula in its
defining module and in every loaded swafloor module that bound the same function under the same name
(``from .floors import swa_floor``), so a mutation reaches every user of the formula, the manager
included. Which bugs there are, and the theorems each is expected to flip, is the one list of seeded
bugs (:mod:`swafloor.reference.seeded_bugs`, shared with the fuzz harness's mutants); here each gets
its patch. :func:`flips` reports which theorems change outcome, :func:`score` the share of mutations
that flip at least one.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator, Sequence

import attrs

from swafloor.reference import (admission, arith, cache_hit, cadence, draft_return, execution, floors, lifecycle, peers,
                                preallocation, scheduler, sharing)
from swafloor.reference.seeded_bugs import SEEDED_BUGS, seeded_bug

from .discharge import DEFAULT_TIMEOUT_S, UNKNOWN, discharge
from .symbolic import all_of
from .theorem import Theorem

__all__ = ["Mutation", "MUTATIONS", "PATCHES", "applied", "flips", "score"]

Patch = tuple[Any, str, Callable[..., Any]]


@attrs.frozen
class Mutation:
    """``expected``: the theorems this bug must flip (each one is checked, not only the first)."""

    name: str
    description: str
    patches: Callable[[], list[Patch]] = attrs.field(eq=False)  # (module, attribute, replacement)
    expected: tuple[str, ...] = attrs.field(default=(), converter=tuple)


def _no_inflight_token() -> list[Patch]:
    real = lifecycle.stale_range

    def stale_range(h, t, window, sink_blocks):  # the window ends at h - 1: [h - W, h - 1]
        return real(h, t, None if window is None else window + 1, sink_blocks)

    return [(lifecycle, "stale_range", stale_range)]


def _floor_division() -> list[Patch]:
    def window_span_blocks(length, t):
        return arith.fdiv(length - 1, t) + 1

    return [(floors, "window_span_blocks", window_span_blocks)]


def _ignore_sinks() -> list[Patch]:
    real = floors.step_floor

    def step_floor(t, window, sink_blocks, n):
        return real(t, window, 0, n)

    return [(floors, "step_floor", step_floor)]


def _legacy_floor() -> list[Patch]:
    def swa_floor(t, window, sink_blocks):
        return floors.legacy_floor()

    return [(floors, "swa_floor", swa_floor)]


def _cpp_floor() -> list[Patch]:
    def swa_floor(t, window, sink_blocks):
        return sink_blocks + peers.trtllm_cpp_blocks(t, window)

    return [(floors, "swa_floor", swa_floor)]


def _full_attention_one() -> list[Patch]:
    def full_attention_floor(largest_swa_floor):
        return 1

    return [(floors, "full_attention_floor", full_attention_floor)]


def _ssm_zero() -> list[Patch]:
    real = floors.life_cycle_min_slots

    def life_cycle_min_slots(life_cycle, t, rule, all_life_cycles, *args, **kwargs):
        if life_cycle.kind is lifecycle.LifeCycleKind.SSM and rule is floors.FloorRule.FIXED:
            return 0
        return real(life_cycle, t, rule, all_life_cycles, *args, **kwargs)

    return [(floors, "life_cycle_min_slots", life_cycle_min_slots)]


def _release_one_too_many() -> list[Patch]:
    real = lifecycle.stale_range

    def stale_range(h, t, window, sink_blocks):  # one live block more counted stale
        start, end = real(h, t, window, sink_blocks)
        if window is None:
            return start, end
        return start, arith.imax(start, end + 1)

    return [(lifecycle, "stale_range", stale_range)]


def _hold_as_release() -> list[Patch]:
    real = lifecycle.resize_peak

    def resize_peak(h0, c0, h1, c1, t, window, sink_blocks, hold_stale):  # the held blocks forgotten
        return real(h0, c0, h1, c1, t, window, sink_blocks, False)

    return [(lifecycle, "resize_peak", resize_peak)]


def _no_copy_slot() -> list[Patch]:
    def first_resume_peak(h, capacity, t, window, sink_blocks):
        return lifecycle.live_blocks(h, capacity, t, window, sink_blocks)

    return [(lifecycle, "first_resume_peak", first_resume_peak)]


def _worst_case_late() -> list[Patch]:
    real = floors.worst_case_history

    def worst_case_history(t, window, sink_blocks, in_flight=0):
        return real(t, window, sink_blocks, in_flight) + 1

    return [(floors, "worst_case_history", worst_case_history)]


def _in_flight_ignored() -> list[Patch]:
    def in_flight_floor(t, window, sink_blocks, in_flight):
        return floors.swa_floor(t, window, sink_blocks)

    return [(floors, "in_flight_floor", in_flight_floor)]


def _first_floor_at_worst() -> list[Patch]:
    def first_floor_history(t, window, sink_blocks, in_flight=0):  # issue 12's "reached first at"
        return floors.worst_case_history(t, window, sink_blocks, in_flight)

    return [(floors, "first_floor_history", first_floor_history)]


def _shared_freed_early() -> list[Patch]:
    def batch_gap(gaps):  # the union of the holders' gaps: a block freed when stale for any holder
        gaps = list(gaps)
        lo, hi = gaps[0]
        for g_lo, g_hi in gaps[1:]:
            lo, hi = arith.imin(lo, g_lo), arith.imax(hi, g_hi)
        return lo, hi

    return [(sharing, "batch_gap", batch_gap)]


def _shared_per_holder() -> list[Patch]:
    def shared_live(p, gaps):  # each holder's live prefix blocks counted: once per holder
        total = 0
        for gap in gaps:
            total = total + p - sharing.gap_size(gap)
        return total

    return [(sharing, "shared_live", shared_live)]


def _hit_holds_null_blocks() -> list[Patch]:
    def prefix_gap(h, t, window, sink_blocks, p):  # a hit holds every prefix block, in window or not
        return (p, p)

    return [(sharing, "prefix_gap", prefix_gap)]


def _eagle_pops_first_block() -> list[Patch]:
    def run_hit(r0, r1, t, window, a, eagle, M):  # the EAGLE pop drops the run's first block, not its last
        kept = arith.imax(arith.imin(r1, arith.fdiv(M, t)), 0)
        L = t * (a * arith.fdiv(kept, a))
        ok = arith.ite(L > 0, cache_hit.hit_first_needed(L, t, window) >= r0 + eagle, False)
        return arith.ite(ok, L, 0)

    return [(cache_hit, "run_hit", run_hit)]


def _align_after_pop() -> list[Patch]:
    def run_hit(r0, r1, t, window, a, eagle, M):  # pop, match the window, and only then align down
        popped = arith.imax(arith.imin(r1, arith.fdiv(M, t)) - eagle, 0)
        ok = arith.ite(popped > 0, cache_hit.hit_first_needed(t * popped, t, window) >= r0, False)
        return arith.ite(ok, t * (a * arith.fdiv(popped, a)), 0)

    return [(cache_hit, "run_hit", run_hit)]


def _align_before_pop() -> list[Patch]:
    def run_hit(r0, r1, t, window, a, eagle, M):  # align the matched prefix, then pop one block
        popped = arith.imax(a * arith.fdiv(arith.imin(r1, arith.fdiv(M, t)), a) - eagle, 0)
        L = t * popped
        return arith.ite(arith.ite(L > 0, cache_hit.hit_first_needed(L, t, window) >= r0, False), L, 0)

    return [(cache_hit, "run_hit", run_hit)]


def _null_counted_free() -> list[Patch]:
    def pool_free_blocks(pool_blocks, used):  # the shared null block counted among the free ones
        return pool_blocks - used

    return [(cache_hit, "pool_free_blocks", pool_free_blocks)]


def _eviction_floor_without_block() -> list[Patch]:
    def eviction_floor(t, window, sink_blocks, in_flight, interval):  # max(e, t) read as e
        return sink_blocks + arith.cdiv(window - 1 + in_flight + interval, t)

    return [(floors, "eviction_floor", eviction_floor)]


def _full_share_same_size_only() -> list[Patch]:
    real = floors.life_cycle_min_slots

    def life_cycle_min_slots(life_cycle, t, rule, all_life_cycles, *args, **kwargs):
        if life_cycle.kind is lifecycle.LifeCycleKind.FULL:  # SWA life cycles of another block size dropped
            t_full = life_cycle.block_size(t)
            all_life_cycles = [lc for lc in all_life_cycles if lc.block_size(t) == t_full]
        return real(life_cycle, t, rule, all_life_cycles, *args, **kwargs)

    return [(floors, "life_cycle_min_slots", life_cycle_min_slots)]


def _admission_charges_prompt() -> list[Patch]:
    def swa_admission_blocks(t, window, sink_blocks, prompt, chunk, lookahead):  # the prompt's blocks
        return arith.cdiv(prompt, t)

    return [(admission, "swa_admission_blocks", swa_admission_blocks)]


def _resume_gate_at_full_utilisation() -> list[Patch]:
    real = admission.resume_admits

    def resume_admits(total, used, held, needed):  # a full pool group refuses, whatever the request holds
        return all_of(real(total, used, held, needed), used < total)

    return [(admission, "resume_admits", resume_admits)]


def _preempt_newest_other() -> list[Patch]:
    real = scheduler.victim_index

    def victim_index(running, requester, victim):  # newest reads as newest-other: never itself while others run
        return real(running, requester, scheduler.Victim.NEWEST_OTHER if victim is scheduler.Victim.NEWEST else victim)

    return [(scheduler, "victim_index", victim_index)]


def _names_trusted_before_execution() -> list[Patch]:
    def named_only(named_end, written, t):  # what is named, written or not
        return execution.named_blocks(named_end, t)

    return [(execution, "hit_blocks", named_only), (execution, "names_after_drop", named_only)]


def _draft_write_without_block() -> list[Patch]:
    def step_capacity(end, drafts):
        return end

    return [(execution, "step_capacity", step_capacity)]


def _worker_mask_one_late() -> list[Patch]:
    def mask_start(h, window):
        return lifecycle.window_start(h, window) - 1

    return [(execution, "mask_start", mask_start)]


def _preallocation_in_tokens() -> list[Patch]:
    def preallocation_blocks(tokens, t):  # the pre-allocated tokens taken as that many blocks
        return tokens

    return [(preallocation, "preallocation_blocks", preallocation_blocks)]


def _drafts_kept_at_commit() -> list[Patch]:
    def returned_capacity(history, capacity):  # the step's capacity kept: nothing given back
        return capacity

    return [(draft_return, "returned_capacity", returned_capacity)]


#: The patch of each seeded bug (swafloor.reference.seeded_bugs) that is seeded in the formulas.
def _decode_clock_from_zero() -> list[Patch]:
    def decode_clock_due(decodes, interval):  # d % e == 0 read for d % e == 1
        return arith.fmod(decodes, interval) == 0

    return [(cadence, "decode_clock_due", decode_clock_due)]


PATCHES: dict[str, Callable[[], list[Patch]]] = {
    "no-inflight-token": _no_inflight_token,
    "floor-division": _floor_division,
    "ignore-sinks": _ignore_sinks,
    "legacy-floor": _legacy_floor,
    "cpp-floor": _cpp_floor,
    "full-attention-floor-one": _full_attention_one,
    "ssm-minimum-zero": _ssm_zero,
    "release-one-too-many": _release_one_too_many,
    "resize-peak-hold-as-release": _hold_as_release,
    "first-resume-no-copy": _no_copy_slot,
    "worst-case-history-late": _worst_case_late,
    "in-flight-floor-ignores-k": _in_flight_ignored,
    "first-floor-at-worst-case": _first_floor_at_worst,
    "shared-freed-when-stale-for-one": _shared_freed_early,
    "shared-counted-per-holder": _shared_per_holder,
    "hit-holds-null-blocks": _hit_holds_null_blocks,
    "eagle-pops-first-block": _eagle_pops_first_block,
    "align-after-pop": _align_after_pop,
    "align-before-pop": _align_before_pop,
    "null-counted-free": _null_counted_free,
    "eviction-floor-without-block": _eviction_floor_without_block,
    "decode-clock-from-zero": _decode_clock_from_zero,
    "full-share-same-size-only": _full_share_same_size_only,
    "admission-charges-prompt": _admission_charges_prompt,
    "resume-gate-at-full-utilisation": _resume_gate_at_full_utilisation,
    "preempt-newest-other": _preempt_newest_other,
    "names-trusted-before-execution": _names_trusted_before_execution,
    "draft-write-without-block": _draft_write_without_block,
    "worker-mask-one-late": _worker_mask_one_late,
    "preallocation-in-tokens": _preallocation_in_tokens,
    "drafts-kept-at-commit": _drafts_kept_at_commit,
}


def _mutation(name: str) -> Mutation:
    bug = seeded_bug(name)
    return Mutation(bug.name, bug.description, PATCHES[name], bug.theorems)


#: Every seeded bug that names theorems it flips, in the seeded-bug list's order, with its patch.
MUTATIONS: tuple[Mutation, ...] = tuple(_mutation(bug.name) for bug in SEEDED_BUGS if bug.theorems)


def _users(module: Any, attribute: str) -> list[Any]:
    """``module`` and every loaded swafloor module that bound the same object as ``attribute``."""
    real = getattr(module, attribute)
    users = [module]
    for name, other in list(sys.modules.items()):
        if other is None or other is module or not name.startswith("swafloor"):
            continue
        if getattr(other, attribute, None) is real:
            users.append(other)
    return users


@contextlib.contextmanager
def applied(mutation: Mutation) -> Iterator[None]:
    """Patch the reference with ``mutation`` for the duration of the block."""
    originals = []
    try:
        for module, attribute, replacement in mutation.patches():
            for user in _users(module, attribute):
                originals.append((user, attribute, getattr(user, attribute)))
                setattr(user, attribute, replacement)
        yield
    finally:
        for module, attribute, original in reversed(originals):
            setattr(module, attribute, original)


def flips(
    mutation: Mutation,
    theorems: Sequence[Theorem],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    seed: int = 0,
    first_only: bool = False,
    solver: str = "z3",
    encoding: str | None = None,
) -> dict[str, tuple[str, str, dict[str, int] | None]]:
    """Theorems whose outcome under ``mutation`` (by ``solver`` on ``encoding``, default Z3 on its own)
    is the opposite of their expected one: ``{name: (expected, mutated result, counterexample)}``;
    unknown answers are not flips. With ``first_only`` it stops at the first flip."""
    changed = {}
    with applied(mutation):
        for theorem in theorems:
            d = discharge(theorem, timeout_s=timeout_s, seed=seed, minimise=False, attempts=False, solver=solver,
                          encoding=encoding)
            if d.result != UNKNOWN and d.result != theorem.expected.value:
                changed[theorem.name] = (theorem.expected.value, d.result, d.counterexample)
                if first_only:
                    break
    return changed


_SCORE_WORK: tuple[Any, ...] = ()


def _score_one(index: int) -> dict[str, Any]:
    mutations, theorems, timeout_s, seed = _SCORE_WORK
    return flips(mutations[index], theorems, timeout_s=timeout_s, seed=seed)


def score(
    mutations: Sequence[Mutation],
    theorems: Sequence[Theorem],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    seed: int = 0,
    jobs: int = 1,
) -> dict[str, Any]:
    """Which theorems each mutation flips over the whole ``theorems``, and the share of mutations that
    flip at least one (the mutation score). ``jobs > 1``: one forked worker per mutation at a time."""
    global _SCORE_WORK
    _SCORE_WORK = (tuple(mutations), tuple(theorems), timeout_s, seed)
    try:
        if jobs > 1:
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                all_flips = pool.map(_score_one, range(len(mutations)), chunksize=1)
        else:
            all_flips = [_score_one(i) for i in range(len(mutations))]
    finally:
        _SCORE_WORK = ()
    rows = []
    for mutation, flipped in zip(mutations, all_flips):
        rows.append({
            "mutation": mutation.name,
            "description": mutation.description,
            "flipped": sorted(flipped),
            "expected": list(mutation.expected),
            "missing": sorted(set(mutation.expected) - set(flipped)),
        })
    caught = sum(1 for r in rows if r["flipped"])
    return {"mutations": rows, "caught": caught, "total": len(rows),
            "score": round(100.0 * caught / len(rows), 1) if rows else 0.0}
