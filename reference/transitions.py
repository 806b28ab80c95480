"""The serving loop as a transition system, on the arithmetic kernel (ints, or Z3 terms for the proofs'
bounded model checks): which running request a step that ran out of slots preempts
(:func:`victim_index`), a step of two requests (:func:`pair_step`) and of N (:func:`loop_step`, move by
move: :func:`loop_moves`), each equal to :func:`.scheduler.serve`'s step on the cases the tests
enumerate. :mod:`.scheduler` runs the same loop over the manager and re-exports these names.
"""

from __future__ import annotations

import enum
from typing import Any, Callable

from . import admission, lifecycle
from .arith import ite
from .errors import ConfigError

__all__ = ["Victim", "victim_index", "WAITING", "RUNNING", "DONE", "pair_step", "pair_start", "EMPTY",
           "loop_start", "loop_moves", "loop_step"]


class Victim(str, enum.Enum):
    """Which running request a step that ran out of slots preempts (the request itself among them)."""

    NEWEST = "newest"  # the last admitted, the requester itself if it is (vLLM's FCFS: the lowest priority)
    OLDEST = "oldest"  # the first admitted, the requester itself if it is
    #: the last admitted other than the requester (itself only when alone): two requests that both grow
    #: preempt each other in turn and neither finishes (a livelock; a seeded bug of issue 32)
    NEWEST_OTHER = "newest-other"


def victim_index(running: Any, requester: Any, victim: "Victim") -> Any:
    """The position, in admission order, of the request that a step of the request at position
    ``requester`` preempts when it runs out of slots, ``running`` requests running (``0 <= requester <
    running``). On the arithmetic kernel, so the proofs evaluate it on Z3 terms."""
    if victim is Victim.NEWEST:
        return running - 1
    if victim is Victim.OLDEST:
        return 0 * running
    return ite(requester == running - 1, ite(running >= 2, running - 2, requester), running - 1)


WAITING, RUNNING, DONE = 0, 1, 2


def _and(*xs: Any) -> Any:
    out: Any = True
    for x in xs:
        out = ite(out, x, False)
    return out


def _or(*xs: Any) -> Any:
    out: Any = False
    for x in xs:
        out = ite(out, True, x)
    return out


def _pick(cond: Any, a: tuple, b: tuple) -> tuple:
    return tuple(ite(cond, x, y) for x, y in zip(a, b))


def _run_phase(h: list, s: list, order: tuple[int, int], pool: Any, lengths: tuple, victim: "Victim"):
    """Phase 1 of a step, the running requests in admission order ``order``: each resizes to one token
    more (one full-attention block at t = 1); out of slots, it preempts :func:`victim_index`'s pick
    (recompute: history 0, to the front of the queue) and retries. Returns h, s and the queue's front
    (None: unchanged)."""
    h, s, front = list(h), list(s), None
    for pos_hint, i in enumerate(order):
        j = order[1 - pos_hint]
        runs = s[i] == RUNNING
        other = s[j] == RUNNING
        n_running = ite(other, 2, 1)
        position = ite(other, pos_hint, 0) if pos_hint else 0 * n_running
        free = pool - h[i] - ite(other, h[j], 0)
        fits = free >= 1
        v = victim_index(n_running, position, victim)
        evict = _and(runs, fits == False, other, v != position)  # noqa: E712 (a solver term)
        fits_after = pool - h[i] >= 1
        advance = _and(runs, _or(fits, _and(evict, fits_after)))
        itself = _and(runs, advance == False)  # noqa: E712
        grown = h[i] + 1
        s[i] = ite(advance, ite(grown >= lengths[i], DONE, RUNNING), ite(itself, WAITING, s[i]))
        h[i] = ite(advance, grown, ite(itself, 0, h[i]))
        s[j] = ite(evict, WAITING, s[j])
        h[j] = ite(evict, 0, h[j])
        front = ite(itself, i, ite(evict, j, front if front is not None else -1))
    return h, s, front


def _admit_phase(h: list, s: list, order: tuple[int, int], pool: Any, charges: tuple):
    """Phase 2: the waiting requests in queue order ``order``, first come first served: each admitted when
    what the gate charges is at most the free slots (admitting allocates nothing yet); a refusal ends it."""
    s = list(s)
    x, y = order
    free = pool - ite(s[x] == RUNNING, h[x], 0) - ite(s[y] == RUNNING, h[y], 0)
    x_waits = s[x] == WAITING
    x_in = _and(x_waits, charges[x] <= free)
    y_in = _and(s[y] == WAITING, _or(x_waits == False, x_in), charges[y] <= free)  # noqa: E712
    s[x] = ite(x_in, RUNNING, s[x])
    s[y] = ite(y_in, RUNNING, s[y])
    return s, x_in, y_in


def pair_step(state: tuple, pool: Any, prompts: tuple, outputs: tuple, victim: "Victim") -> tuple:
    """One step of :func:`serve` for two requests that both arrive at step 0, on one full-attention pool
    group of ``pool`` slots at one token per block, prefill chunk 1, no draft slots, the ``reference``
    gate (:func:`.admission.full_admission_blocks`): the loop as a transition system, on the arithmetic
    kernel (so the proofs unroll it on Z3 terms: bounded model checking). ``state = (h0, h1, s0, s1,
    first, front)``: histories, statuses (:data:`WAITING`, :data:`RUNNING`, :data:`DONE`), the running
    request admitted first, the waiting request at the queue's front. :func:`pair_start` is step 0's."""
    h0, h1, s0, s1, first, front = state
    lengths = tuple(admission.run_length(p, o) for p, o in zip(prompts, outputs))
    charges = tuple(admission.full_admission_blocks(1, p, 0) for p in prompts)
    runs = []
    for order in ((0, 1), (1, 0)):
        h, s, new_front = _run_phase([h0, h1], [s0, s1], order, pool, lengths, victim)
        runs.append((h[0], h[1], s[0], s[1], ite(new_front == -1, front, new_front)))
    h0, h1, s0, s1, front = _pick(first == 0, runs[0], runs[1])
    both = _and(s0 == RUNNING, s1 == RUNNING)
    first = ite(both, first, ite(s0 == RUNNING, 0, 1))
    admits = []
    for order in ((0, 1), (1, 0)):
        s, x_in, y_in = _admit_phase([h0, h1], [s0, s1], order, pool, charges)
        x, y = order
        already = _or(s0 == RUNNING, s1 == RUNNING)
        admits.append((s[0], s[1], ite(already, first, ite(x_in, x, y))))
    both_wait = _and(s0 == WAITING, s1 == WAITING)
    queue_front = ite(both_wait, front, ite(s0 == WAITING, 0, 1))
    s0, s1, first = _pick(queue_front == 0, admits[0], admits[1])
    return (h0, h1, s0, s1, first, front)


def pair_start() -> tuple:
    """:func:`pair_step`'s state before step 0: both waiting, r0 first in the queue."""
    return (0, 0, WAITING, WAITING, 0, 0)


# ----------------------------------------------------------------------------- the loop for N requests
#: An empty place in :func:`loop_step`'s running list and waiting queue.
EMPTY = -1


def _at(places: tuple, position: Any) -> Any:
    """The entry at ``position`` of a list of places (EMPTY past the end)."""
    out: Any = EMPTY
    for j, entry in enumerate(places):
        out = ite(position == j, entry, out)
    return out


def _position(places: tuple, request: Any) -> Any:
    """Where ``request`` (never EMPTY) stands in ``places``; ``len(places)`` when it is not there."""
    out: Any = len(places)
    for j in reversed(range(len(places))):
        out = ite(places[j] == request, j, out)
    return out


def _holds(places: tuple, request: Any) -> Any:
    return _or(*(entry == request for entry in places))


def _count(places: tuple) -> Any:
    out: Any = 0
    for entry in places:
        out = out + ite(entry == EMPTY, 0, 1)
    return out


def _remove(places: tuple, request: Any) -> tuple:
    at = _position(places, request)
    return tuple(ite(j < at, places[j], places[j + 1] if j + 1 < len(places) else EMPTY) for j in range(len(places)))


def _push_front(places: tuple, request: Any) -> tuple:
    return (request, *places[:-1])  # the last place is EMPTY: N places hold every request


def _append(places: tuple, request: Any) -> tuple:
    end = _count(places)
    return tuple(ite(end == j, request, entry) for j, entry in enumerate(places))


def _of(values: tuple, request: Any) -> Any:
    out: Any = values[0]
    for i in range(1, len(values)):
        out = ite(request == i, values[i], out)
    return out


def loop_start(count: int) -> tuple:
    """:func:`loop_step`'s state before step 0: every history 0, nothing running, the requests waiting in
    arrival order."""
    return (0,) * count, (EMPTY,) * count, tuple(range(count))


def loop_moves(pool: Any, prompts: tuple, outputs: tuple, victim: "Victim", window: Any = None,
               sink_blocks: Any = 0, tokens_per_block: Any = 1, chunk: Any = 1, full_pool: Any = None) -> tuple:
    """:func:`loop_step` as its sequence of moves, each a function of the loop's working state
    ``(histories, running, waiting, snapshot, stopped)`` (``snapshot``: the running list at the step's
    start, the order phase 1 takes the requests in; ``stopped``: admission refused this step). In order:
    take the snapshot; per snapshot place, N tries (out of slots: preempt the victim) then the step; N
    admissions. A model check may name the working state between moves (it stays small).

    The pool group serves one attention life cycle of ``tokens_per_block`` (``t``) tokens per block: full
    attention (``window`` None: a request at history ``h`` holds :func:`.lifecycle.allocated_blocks` ``(h)``,
    its step the blocks up to its new capacity) or sliding-window attention of ``window`` tokens and
    ``sink_blocks`` sinks (it holds :func:`.lifecycle.live_blocks` ``(h, h)``, what is live once the stale
    blocks are released, and its step the difference to ``live_blocks(h, h + n)``; the gate charges
    :func:`.admission.swa_admission_blocks`, the chunk floor). A step of the request at ``h`` holds ``n =``
    :func:`.admission.step_tokens` (prefill chunks of at most ``chunk`` tokens, no draft slots) and commits
    :func:`.admission.advance`. ``full_pool`` (with a window): a full-attention pool group of that many slots
    beside the SWA one (serve's layer order: full attention first), gated by
    :func:`.admission.full_admission_blocks`; a step or an admission must fit in both."""
    count = len(prompts)
    t = tokens_per_block
    lengths = tuple(admission.run_length(p, o) for p, o in zip(prompts, outputs))
    if full_pool is not None and window is None:
        raise ConfigError("full_pool", full_pool, "a full-attention group beside a sliding-window one needs a window")
    groups = ((full_pool, None),) if full_pool is not None else ()
    groups += ((pool, window),)

    def charge(p: Any, w: Any) -> Any:
        if w is None:
            return admission.full_admission_blocks(t, p, 0)
        return admission.swa_admission_blocks(t, w, sink_blocks, p, chunk, 0)

    charges = tuple(tuple(charge(p, w) for p in prompts) for _, w in groups)

    def step_of(h: Any, p: Any) -> Any:  # tokens the step at h holds and commits (chunk 1: one, as written)
        return 1 if type(chunk) is int and chunk == 1 else admission.step_tokens(h, p, chunk, 0)

    def blocks(w: Any, h: Any, capacity: Any) -> Any:  # slots a request at history h and that capacity holds
        if w is None:
            return capacity if type(t) is int and t == 1 else lifecycle.allocated_blocks(capacity, t)
        return lifecycle.live_blocks(h, capacity, t, w, sink_blocks)

    def held(w: Any, h: Any) -> Any:  # slots a running request at history h holds in a group
        return blocks(w, h, h)

    def need(w: Any, h: Any, p: Any) -> Any:  # slots its step takes beyond those
        if w is None and type(t) is int and t == 1:
            return step_of(h, p)  # one slot a token
        return blocks(w, h, h + step_of(h, p)) - held(w, h)

    def used(w: Any, hs: tuple, running: tuple) -> Any:
        out: Any = 0
        for i in range(count):
            out = out + ite(_holds(running, i), held(w, hs[i]), 0)
        return out

    def short_of(hs: tuple, running: tuple, rid: Any) -> Any:  # its step fits in no group's free slots
        h, p = _of(hs, rid), _of(prompts, rid)
        return _or(*(g_pool - used(w, hs, running) < need(w, h, p) for g_pool, w in groups))

    def fits_of(hs: tuple, running: tuple, rid: Any) -> Any:  # its step fits in every group's free slots
        h, p = _of(hs, rid), _of(prompts, rid)
        return _and(*(g_pool - used(w, hs, running) >= need(w, h, p) for g_pool, w in groups))

    def snapshot(w: tuple) -> tuple:
        hs, running, waiting, _, _ = w
        return hs, running, waiting, running, False

    def attempt(place: int) -> Callable[[tuple], tuple]:
        def move(w: tuple) -> tuple:  # out of slots: preempt the victim (itself when it is the pick)
            hs, running, waiting, snap, stopped = w
            rid = snap[place]
            short = _and(rid != EMPTY, _holds(running, rid), short_of(hs, running, rid))
            v = _at(running, victim_index(_count(running), _position(running, rid), victim))
            running2 = tuple(ite(short, x, y) for x, y in zip(_remove(running, v), running))
            waiting2 = tuple(ite(short, x, y) for x, y in zip(_push_front(waiting, v), waiting))
            hs2 = tuple(ite(_and(short, v == i), 0, hs[i]) for i in range(count))
            return hs2, running2, waiting2, snap, stopped

        return move

    def advance(place: int) -> Callable[[tuple], tuple]:
        def move(w: tuple) -> tuple:  # the step: one token, done at P + O
            hs, running, waiting, snap, stopped = w
            rid = snap[place]
            go = _and(rid != EMPTY, _holds(running, rid), fits_of(hs, running, rid))
            hs2 = tuple(ite(_and(go, rid == i), hs[i] + step_of(hs[i], prompts[i]), hs[i]) for i in range(count))
            done = _and(go, _of(hs2, rid) >= _of(lengths, rid))
            running2 = tuple(ite(done, x, y) for x, y in zip(_remove(running, rid), running))
            return hs2, running2, waiting, snap, stopped

        return move

    def admit(w: tuple) -> tuple:  # first come first served; a refusal ends admission for the step
        hs, running, waiting, snap, stopped = w
        front = waiting[0]
        fits = _and(*(_of(charged, front) <= g_pool - used(w, hs, running)
                      for charged, (g_pool, w) in zip(charges, groups)))
        ok = _and(stopped == False, front != EMPTY, fits)  # noqa: E712
        running2 = tuple(ite(ok, x, y) for x, y in zip(_append(running, front), running))
        waiting2 = tuple(ite(ok, x, y) for x, y in zip((*waiting[1:], EMPTY), waiting))
        return hs, running2, waiting2, snap, _or(stopped, ok == False)  # noqa: E712

    moves: list[Callable[[tuple], tuple]] = [snapshot]
    for place in range(count):  # at most N preemptions a request: each removes a running request
        moves += [attempt(place)] * count + [advance(place)]
    return (*moves, *[admit] * count)


def loop_step(state: tuple, pool: Any, prompts: tuple, outputs: tuple, victim: "Victim", window: Any = None,
              sink_blocks: Any = 0, tokens_per_block: Any = 1, chunk: Any = 1, full_pool: Any = None) -> tuple:
    """One step of :func:`serve` for ``N = len(prompts)`` requests that all arrive at step 0, on one
    full-attention pool group of ``pool`` slots at one token per block, prefill chunk 1, no draft slots,
    the ``reference`` gate: the loop as a transition system on the arithmetic kernel (bounded model
    checking unrolls it on solver terms, move by move: :func:`loop_moves`). ``state = (histories,
    running, waiting)``: each request's history (with full attention, its slots in use while it runs: one
    a token), the running requests in admission order and the waiting queue, each a list of ``N`` places of
    request numbers padded with :data:`EMPTY`. A request is done when its history reaches ``P + O`` (it is then
    in neither list). :func:`loop_start` is the state before step 0. ``window``, ``sink_blocks``: a
    sliding-window life cycle instead of full attention; ``tokens_per_block``, ``chunk``: blocks of ``t`` tokens and
    prefill chunks of ``C``; ``full_pool``: a full-attention group beside the SWA one (:func:`loop_moves`)."""
    hs, running, waiting = state
    w = (tuple(hs), tuple(running), tuple(waiting), tuple(running), False)
    for move in loop_moves(pool, prompts, outputs, victim, window, sink_blocks, tokens_per_block, chunk, full_pool):
        w = move(w)
    return w[:3]
