"""Progress of N requests through the serving loop, proved by an inductive invariant and a ranking
function (base + step) on :func:`~swafloor.reference.transitions.loop_step` itself, instead of a long
unroll.

The transition system is the reference's (``loop_step``: N requests arriving together, one pool group at
one token per block serving full attention or one sliding-window life cycle, chunk 1, the reference gate,
recompute preemption);
this module adds only what a proof by induction needs beside it:

- :func:`invariant`, a property of one state: every place holds a request number or ``EMPTY``,
  ``EMPTY`` only at a list's tail, no request in two places; a running request holds ``0 <= h < L``, a
  waiting one ``h = 0`` (recompute), one in neither list is done (``h >= L``); and something runs
  unless nothing waits.
- :func:`rank`, a natural number of one state: the tokens of the requests not done, less the history
  of the oldest running request (under FCFS preemption it is never the victim while another runs).

A goal (:func:`ranked_finish`) has three parts: **base**, the state after step 0 meets the invariant
with rank at most ``sum(L)``; **step**, from *any* state meeting the invariant with a request not done,
one ``loop_step`` keeps the invariant and lowers the rank by at least 1; **bound**, such a state has
rank at least 1. Together: every request is done by step ``sum(L)``, for every prompt, output and pool
at least the largest request's need (unbounded), not only the small ones a model check unrolls. On
solver terms the state of the step and bound parts is fresh constants (universally quantified); on
ints and numpy arrays (the bounded concrete check) the same parts are evaluated at every state the run
from the start reaches, one step past ``sum(L)`` at the bounded ranges' largest lengths.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

from swafloor.reference import admission, arith, transitions

from .symbolic import all_of, any_of, implies, negate

__all__ = ["invariant", "rank", "not_done", "ranked_finish", "lengths_and_pool", "pools_of", "ranked_finish_blocks", "unroll", "same_state", "no_lasso"]


def _solver_api(like: Any) -> Any:
    """z3 or cvc5's pythonic API when ``like`` is one of their terms, else None (ints, numpy)."""
    module = type(like).__module__
    if module.startswith("cvc5"):
        from cvc5 import pythonic

        return pythonic
    if module.startswith("z3"):
        import z3

        return z3
    return None


def lengths_and_pool(prompts: Sequence[Any], outputs: Sequence[Any], extra: Any, window: Any = None,
                     sink_blocks: Any = 0) -> tuple[tuple, Any]:
    """Each request's run length ``L = P + O`` and a pool ``extra`` slots above the largest request's need at
    one token per block: its whole run (:func:`~swafloor.reference.admission.full_run_blocks`) for full
    attention, the rule's chunk floor (:func:`~swafloor.reference.admission.swa_admission_blocks`, chunk 1)
    for a sliding window (``window`` not None)."""
    def need_of(p: Any, o: Any) -> Any:
        if window is None:
            return admission.full_run_blocks(1, p, o, 0)
        return admission.swa_admission_blocks(1, window, sink_blocks, p, 1, 0)

    lengths = tuple(admission.run_length(p, o) for p, o in zip(prompts, outputs))
    need = need_of(prompts[0], outputs[0])
    for p, o in zip(prompts[1:], outputs[1:]):
        need = arith.imax(need, need_of(p, o))
    return lengths, need + extra


def pools_of(prompts: Sequence[Any], outputs: Sequence[Any], extra: Any, window: Any, sink_blocks: Any,
             tokens_per_block: Any, chunk: Any, full_beside: bool) -> tuple[tuple, Any, Any]:
    """Each request's run length and the pools of :func:`~swafloor.reference.transitions.loop_step` with blocks of
    ``tokens_per_block`` tokens and prefill chunks of ``chunk``: the sliding-window group ``extra`` slots above the
    largest request's chunk floor (:func:`~swafloor.reference.admission.swa_admission_blocks`); with
    ``full_beside``, a full-attention group ``extra`` slots above the largest request's whole run
    (:func:`~swafloor.reference.admission.full_run_blocks`), and never below the sliding-window pool (the
    manager's least full-attention group beside a window is that window's one-token floor: a smaller one is not
    a pool it builds). Returns ``(lengths, swa_pool, full_pool)``, ``full_pool`` None without ``full_beside``."""
    t, p0 = tokens_per_block, prompts[0]
    lengths = tuple(admission.run_length(p, o) for p, o in zip(prompts, outputs))
    swa = admission.swa_admission_blocks(t, window, sink_blocks, p0, chunk, 0)
    run = admission.full_run_blocks(t, p0, outputs[0], 0)
    for p, o in zip(prompts[1:], outputs[1:]):
        swa = arith.imax(swa, admission.swa_admission_blocks(t, window, sink_blocks, p, chunk, 0))
        run = arith.imax(run, admission.full_run_blocks(t, p, o, 0))
    swa = swa + extra
    return lengths, swa, (arith.imax(run + extra, swa) if full_beside else None)


def not_done(state: tuple, lengths: tuple) -> Any:
    hs = state[0]
    return any_of(*(h < L for h, L in zip(hs, lengths)))


def invariant(state: tuple, lengths: tuple) -> Any:
    """See the module doc."""
    return all_of(*invariant_facts(state, lengths))


def invariant_facts(state: tuple, lengths: tuple) -> list:
    """:func:`invariant` as its list of conjuncts."""
    hs, running, waiting = state
    n = len(hs)
    empty = transitions.EMPTY
    places = (*running, *waiting)
    facts = [all_of(x >= empty, x <= n - 1) for x in places]
    for row in (running, waiting):
        facts += [implies(row[j] == empty, row[j + 1] == empty) for j in range(n - 1)]
    for a in range(len(places)):
        for b in range(a + 1, len(places)):
            facts.append(implies(all_of(places[a] != empty, places[b] != empty), places[a] != places[b]))
    for i in range(n):
        runs = any_of(*(x == i for x in running))
        waits = any_of(*(x == i for x in waiting))
        facts.append(implies(runs, all_of(hs[i] >= 0, hs[i] < lengths[i])))
        facts.append(implies(waits, hs[i] == 0))
        facts.append(implies(all_of(negate(runs), negate(waits)), hs[i] >= lengths[i]))
    facts.append(any_of(running[0] != empty, waiting[0] == empty))
    return facts


def rank(state: tuple, lengths: tuple) -> Any:
    """See the module doc."""
    hs, running, _ = state
    out: Any = 0
    for h, L in zip(hs, lengths):
        out = out + arith.ite(h < L, L, 0)
    for i, h in enumerate(hs):
        out = out - arith.ite(running[0] == i, h, 0)
    return out


def _fresh(api: Any, like: Any, n: int, tag: str) -> tuple:
    ctx = like.ctx
    return (tuple(api.Int(f"{tag}_h{i}", ctx) for i in range(n)),
            tuple(api.Int(f"{tag}_run{j}", ctx) for j in range(n)),
            tuple(api.Int(f"{tag}_wait{j}", ctx) for j in range(n)))


def _named_step(api: Any, like: Any, state: tuple, pool: Any, prompts: tuple, outputs: tuple,
                victim: transitions.Victim, tag: str = "step", window: Any = None,
                sink_blocks: Any = 0, *more: Any) -> tuple[tuple, list]:
    """``loop_step`` of ``state`` move by move (:func:`~swafloor.reference.transitions.loop_moves`), the
    working state after each move named by fresh constants equal to it: the links, and the state after
    the step. The same terms as ``loop_step``'s, each move's written over the names of the one before
    (a term per move, not one term nested sixteen moves deep). ``tag`` keeps each step's names apart: a
    name used by two steps would equate their states (and make an unroll vacuous). ``more``: ``loop_moves``'s
    further arguments (tokens per block, chunk, full-attention pool)."""
    ctx, n = like.ctx, len(prompts)
    work = (*state, state[1], api.BoolVal(False, ctx))
    links: list = []
    for m, move in enumerate(transitions.loop_moves(pool, prompts, outputs, victim, window, sink_blocks, *more)):
        work = move(work)
        names = (*_fresh(api, like, n, f"{tag}_m{m}"), tuple(api.Int(f"{tag}_m{m}_snap{j}", ctx) for j in range(n)),
                 api.Bool(f"{tag}_m{m}_stopped", ctx))
        for named, value in zip(names[:4], work[:4]):
            links += [x == y for x, y in zip(named, value)]
        links.append(names[4] == work[4])
        work = names
    return work[:3], links


def ranked_finish(prompts: Sequence[Any], outputs: Sequence[Any], extra: Any, victim: transitions.Victim,
                  steps: int, window: Any = None, sink_blocks: Any = 0) -> tuple:
    """The three parts (base, step, bound; module doc) for ``len(prompts)`` requests under ``victim``.
    ``steps``: how many steps the concrete run takes (past ``sum(L)`` at the largest bounded lengths).
    ``window``, ``sink_blocks``: the pool group serves a sliding-window life cycle, the pool ``extra`` slots
    above its chunk floor (:func:`lengths_and_pool`), instead of full attention."""
    prompts, outputs = tuple(prompts), tuple(outputs)
    lengths, pool = lengths_and_pool(prompts, outputs, extra, window, sink_blocks)
    return _ranked_parts(prompts, outputs, lengths, pool, victim, steps, window, sink_blocks, (), "step", False)


def _ranked_parts(prompts: tuple, outputs: tuple, lengths: tuple, pool: Any, victim: transitions.Victim, steps: int,
                  window: Any, sink_blocks: Any, more: tuple, tag: str, split: bool) -> tuple:
    """Base, step and bound (module doc) of ``loop_step`` with ``pool`` and ``more`` (its further arguments:
    tokens per block, chunk, full-attention pool). On solver terms the step's moves are named under ``tag``;
    ``split``: the step part is given as its cases (:func:`_step_cases`), each its own part."""
    total = lengths[0]
    for L in lengths[1:]:
        total = total + L
    first = transitions.loop_step(transitions.loop_start(len(prompts)), pool, prompts, outputs, victim, window,
                                  sink_blocks, *more)
    base = all_of(invariant(first, lengths), rank(first, lengths) <= total)

    def step_holds(state: tuple, after: tuple) -> Any:
        return implies(all_of(invariant(state, lengths), not_done(state, lengths)),
                       all_of(invariant(after, lengths), rank(after, lengths) <= rank(state, lengths) - 1))

    def bound_holds(state: tuple) -> Any:
        return implies(all_of(invariant(state, lengths), not_done(state, lengths)), rank(state, lengths) >= 1)

    api = _solver_api(prompts[0])
    if api is not None:  # any state: fresh constants, universally quantified
        state = _fresh(api, prompts[0], len(prompts), "s")
        after, links = _named_step(api, prompts[0], state, pool, prompts, outputs, victim, tag, window,
                                   sink_blocks, *more)
        step = implies(all_of(*links), step_holds(state, after))
        if not split:
            return base, step, bound_holds(state)
        cases = _step_cases(state, prompts)
        return (base, *(implies(case, step) for case in cases), implies(negate(any_of(*cases)), step),
                bound_holds(state))
    step_parts, bound_parts, state = [], [], first
    for _ in range(steps):  # every state the run reaches (ints or numpy arrays)
        after = transitions.loop_step(state, pool, prompts, outputs, victim, window, sink_blocks, *more)
        step_parts.append(step_holds(state, after))
        bound_parts.append(bound_holds(state))
        state = after
    return base, all_of(*step_parts), all_of(*bound_parts)


# ----------------------------------------------------------------------------- a livelock as a lasso
def same_state(a: tuple, b: tuple) -> Any:
    """Two states of ``loop_step`` are equal: every history and every place of both lists."""
    return all_of(*(x == y for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b)))


def unroll(prompts: tuple, outputs: tuple, pool: Any, victim: transitions.Victim, steps: int) -> tuple[list, list]:
    """The states of the loop from :func:`~swafloor.reference.transitions.loop_start` through ``steps`` steps of
    ``loop_step`` (``states[k]``: after ``k`` steps), and the links that define them: on solver terms each
    step's state (and each move's) is named by fresh constants equal to the step of the one before (bounded
    model checking's relational form, :func:`_named_step`), on ints and numpy arrays it is computed (no links)."""
    state = transitions.loop_start(len(prompts))
    states, links = [state], []
    api = _solver_api(prompts[0])
    for k in range(steps):
        if api is not None:
            state, named = _named_step(api, prompts[0], state, pool, prompts, outputs, victim, tag=f"u{k}")
            links += named
        else:
            state = transitions.loop_step(state, pool, prompts, outputs, victim)
        states.append(state)
    return states, links


def no_lasso(states: Sequence[tuple], lengths: tuple) -> list:
    """For each pair of steps ``i < j``: the state after ``j`` steps is not the state after ``i`` with a request
    not done. Its negation is a lasso: ``loop_step`` is a function of the state, so the run repeats the steps
    ``i .. j`` forever, and a request not done at ``j`` is done at none of them (a done request is in neither
    list and its history never changes again): it never finishes."""
    return [implies(same_state(states[i], states[j]), negate(not_done(states[j], lengths)))
            for j in range(1, len(states)) for i in range(j)]


# ----------------------------------------------------------------------------- blocks of t tokens, chunks, two groups
def _parts(prompts: tuple, outputs: tuple, extra: Any, victim: transitions.Victim, steps: int, window: Any,
           sink_blocks: Any, t: Any, chunk: Any, full_beside: bool, tag: str) -> tuple:
    """:func:`ranked_finish`'s parts for the loop with blocks of ``t`` tokens (an int, or numpy array
    elementwise), prefill chunks of ``chunk`` and, with ``full_beside``, a full-attention group beside the
    sliding-window one (pools: :func:`pools_of`); on solver terms the step part split into its cases."""
    lengths, pool, full_pool = pools_of(prompts, outputs, extra, window, sink_blocks, t, chunk, full_beside)
    return _ranked_parts(prompts, outputs, lengths, pool, victim, steps, window, sink_blocks, (t, chunk, full_pool),
                         tag, True)


def _step_cases(state: tuple, prompts: tuple) -> list:
    """The step part's cases, each its own check (cvc5 decides them one by one where it does not decide their
    conjunction): who holds the running list's first two places (a request or EMPTY) and, per request, whether
    its history is in the prompt (prefill) or past it (decode). The last part of :func:`_parts` is the step under
    none of them (a place out of range: the invariant fails there), so together they are the whole step."""
    hs, running, _ = state
    n = len(prompts)
    cases = []
    for places in itertools.product(range(transitions.EMPTY, n), repeat=min(2, n)):
        for phases in itertools.product((True, False), repeat=n):
            cases.append(all_of(*(x == v for x, v in zip(running, places)),
                                *((h < p) if pre else (h >= p) for h, p, pre in zip(hs, prompts, phases))))
    return cases


def ranked_finish_blocks(prompts: Sequence[Any], outputs: Sequence[Any], extra: Any, victim: transitions.Victim,
                         steps: int, window: Any, sink_blocks: Any, tokens_per_block: Any, chunk: Any,
                         full_beside: bool, t_max: int) -> tuple:
    """:func:`ranked_finish`'s base, step and bound (the same invariant and rank: they count tokens, and a step
    commits :func:`~swafloor.reference.admission.advance` >= 1 of them) for the loop with blocks of
    ``tokens_per_block`` tokens, prefill chunks of ``chunk`` tokens and a sliding-window group of ``window``
    tokens and ``sink_blocks`` sinks, with ``full_beside`` a full-attention group beside it; pools
    :func:`pools_of`. The loop's slots are blocks (``lifecycle.allocated_blocks``, ``live_blocks``: they divide
    by ``t``). On solver terms ``t`` is split into the cases ``t = 1 .. t_max``, each a linear goal over every
    other variable (a symbolic ``t`` divides by a variable: nonlinear); a ``t`` above ``t_max`` is not covered.
    Chunk, window, sinks, prompts, outputs and the pool stay symbolic and unbounded. On solver terms the parts
    are ``t = k`` implies base, the step in each of its cases (:func:`_step_cases`), bound, for each ``k`` in
    turn (each its own check)."""
    prompts, outputs = tuple(prompts), tuple(outputs)
    if _solver_api(prompts[0]) is None:  # ints or numpy arrays: t is a value
        return _parts(prompts, outputs, extra, victim, steps, window, sink_blocks, tokens_per_block, chunk,
                      full_beside, "step")
    cases = [(tokens_per_block == k, _parts(prompts, outputs, extra, victim, steps, window, sink_blocks, k, chunk,
                                            full_beside, f"t{k}"))
             for k in range(1, t_max + 1)]
    return tuple(implies(case, part) for case, parts in cases for part in parts)
