"""A serving loop over the reference manager: admission and preemption, one scheduler step at a time.

A layer on the manager (it calls only its public operations): requests arrive, wait, are admitted
by a *gate* (what a scheduler charges a waiting request per pool group against the free slots),
then run their steps (:mod:`.admission`'s chunked prefill and decode with draft slots). A step that
runs out of slots preempts a victim (``newest`` or ``oldest`` of the running requests: recompute, as
vLLM preempts: every slot freed, its tokens recomputed from 0 when it is admitted again, ahead of new
arrivals) and retries; with no victim left it preempts itself.

Gates: ``reference`` (the rule: :func:`.admission.swa_admission_blocks` per SWA life cycle,
:func:`.admission.full_admission_blocks` for full attention, one slot per SSM life cycle), vLLM's
(two questions of the free slots, each summed over a pool group: :func:`.peers.vllm_full_sequence_blocks`,
the full-sequence gate, with or without its cap, then :func:`.peers.vllm_first_step_blocks`, the first
step's own check), SGLang's (its SWA budget,
:func:`.peers.sglang_admission_blocks`) and TensorRT-LLM V2's resume gate (``trtllm``: admitted while
every pool group's use is at most ``max_util_for_resume`` of it, :func:`.peers.trtllm_resume_admits`,
nothing reserved); full attention and SSM as the rule's.

Two ends that are not completion: a **deadlock**, a step at which nothing runs and the first waiting
request is refused (no slot is in use, so none will ever be freed: it waits forever), reported with
what the gate charged, what the rule charges and what was free; and a **livelock**, no request
finishing within ``max_steps`` although requests run (they preempt each other in turn).
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Hashable, Sequence

import attrs

from . import admission, peers
from .arith import ite
from .config import Config, SuspendMode, build_layout
from .errors import ConfigError, RequestError
from .lifecycle import LifeCycle, LifeCycleKind
from .manager import Manager

__all__ = ["Arrival", "Victim", "victim_index", "pick_victim", "GATES", "UTILISATION_GATES", "gate_charge", "Deadlock", "ServeResult", "serve", "RESUME_GATES", "KeptRun", "kept_run", "loop_start", "loop_step", "loop_moves", "EMPTY"]


@attrs.frozen
class Arrival:
    """A request: it arrives at scheduler step ``at`` with ``prompt`` tokens and wants ``output`` more."""

    request_id: Hashable
    at: int
    prompt: int
    output: int

    def __attrs_post_init__(self) -> None:
        for field, least in (("at", 0), ("prompt", 1), ("output", 1)):
            value = getattr(self, field)
            if type(value) is not int or value < least:
                raise RequestError(self.request_id, field, value, f"must be an integer >= {least}")


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


def pick_victim(running: Sequence[Hashable], requester: Hashable, victim: "Victim") -> Hashable:
    """The request a step of ``requester`` that ran out of slots preempts, ``running`` in admission order."""
    return running[victim_index(len(running), list(running).index(requester), victim)]


def _charge_reference(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
    if lc.kind is LifeCycleKind.SWA:
        return admission.swa_admission_blocks(t, lc.window, lc.sink_blocks, p, c, k)
    if lc.kind is LifeCycleKind.FULL:
        return admission.full_admission_blocks(t, p, k)
    return 1  # an SSM life cycle's one state page


def _charge_vllm(capped: bool) -> Callable[[LifeCycle, int, int, int, int, int], tuple[int, int]]:
    def charge(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> tuple[int, int]:
        # two questions of the free blocks: the full-sequence gate, then the first step's own check
        # (max_num_batched_tokens = C, no model-length cap); an SSM life cycle as the rule's
        if lc.kind is LifeCycleKind.SSM:
            one = _charge_reference(lc, t, p, o, c, k)
            return one, one
        window = lc.window if lc.kind is LifeCycleKind.SWA else None
        return (peers.vllm_full_sequence_blocks(t, window, p, c, None, capped),
                peers.vllm_first_step_blocks(t, p, c, k))

    return charge


def _charge_sglang(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
    if lc.kind is LifeCycleKind.SWA:  # its SWA budget in free pages (no sinks: SGLang has none)
        return peers.sglang_admission_blocks(t, lc.window, p, c)
    return _charge_reference(lc, t, p, o, c, k)


def _charge_nothing(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
    return 0  # a utilisation gate reserves nothing for the request (UTILISATION_GATES)


#: gate name -> per life cycle ``charge(lc, t, prompt, output, chunk, lookahead)`` in blocks: an int, or
#: a tuple when the gate asks the free slots several questions (vLLM: its gate, then its first step),
#: each summed over a pool group's life cycles and all of them asked (:func:`gate_charge`).
GATES: dict[str, Callable[[LifeCycle, int, int, int, int, int], Any]] = {
    "reference": _charge_reference,
    "vllm": _charge_vllm(True),
    "vllm-uncapped": _charge_vllm(False),
    "sglang": _charge_sglang,
    "trtllm": _charge_nothing,
}

#: Gates that admit on the pools' use rather than a charge: gate name -> ``max_util_for_resume`` as a
#: fraction; a request is admitted when every pool group's use is at most that share of its slots
#: (:func:`.peers.trtllm_resume_admits`), whatever it will need.
UTILISATION_GATES: dict[str, tuple[int, int]] = {"trtllm": peers.TRTLLM_MAX_UTIL_FOR_RESUME}


def gate_charge(gate: str, config: Config, prompt: int, output: int, chunk: int, lookahead: int) -> tuple[int, ...]:
    """What ``gate`` charges a waiting request, per pool group: the sum over its life cycles (of each
    question the gate asks, the largest sum: the free slots must cover every one)."""
    if gate not in GATES:
        raise ConfigError("gate", gate, f"not one of {', '.join(GATES)}")
    layout = build_layout(config)
    charge = GATES[gate]
    questions: list[list[int]] = [[] for _ in range(layout.num_pool_groups)]
    for i, lc in enumerate(layout.life_cycles):
        got = charge(lc, layout.block_sizes[i], prompt, output, chunk, lookahead)
        got = got if isinstance(got, tuple) else (got,)
        sums = questions[layout.pool_group_of[i]]
        sums.extend([0] * (len(got) - len(sums)))
        for j, blocks in enumerate(got):
            sums[j] += blocks
    return tuple(max(sums, default=0) for sums in questions)


@attrs.frozen
class Deadlock:
    """The first waiting request refused at a step where nothing runs: it waits forever."""

    step: int
    request_id: Hashable
    charged: tuple[int, ...]  # what the gate charged, per pool group
    needed: tuple[int, ...]  # what the rule charges
    free: tuple[int, ...]


@attrs.frozen
class ServeResult:
    steps: int
    finished: tuple[Hashable, ...]  # in finishing order
    finished_at: dict  # request -> step it finished
    waited: dict  # request -> steps spent waiting (before admission and after preemptions)
    preemptions: int
    deadlock: Deadlock | None = None
    livelock_at: int | None = None  # max_steps reached with requests unfinished

    @property
    def completed(self) -> bool:
        return self.deadlock is None and self.livelock_at is None


def serve(config: Config, arrivals: Sequence[Arrival], *, gate: str = "reference", chunk: int = 1,
          lookahead: int = 0, victim: Victim | str = Victim.NEWEST, max_steps: int | None = None,
          progress: Callable[[int, int, int], Any] | None = None) -> ServeResult:
    """Run ``arrivals`` to completion, a deadlock or a livelock (see the module docstring).
    ``progress(step, finished, total)``, when given, is called every 1024 steps."""
    for field, value, least in (("chunk", chunk, 1), ("lookahead", lookahead, 0)):
        if type(value) is not int or value < least:
            raise ConfigError(field, value, f"must be an integer >= {least}")
    victim = Victim(victim) if not isinstance(victim, Victim) else victim
    ids = [a.request_id for a in arrivals]
    if len(set(ids)) != len(ids):
        raise ConfigError("arrivals", sorted({str(i) for i in ids if ids.count(i) > 1}), "request ids must be unique")
    config = attrs.evolve(config, semantics=attrs.evolve(config.semantics, suspend=SuspendMode.RECOMPUTE))
    manager = Manager(config)
    work = sum(a.prompt + a.output for a in arrivals)
    limit = max_steps if max_steps is not None else 4 * (work + 1) * max(1, len(arrivals)) + max(
        (a.at for a in arrivals), default=0)
    pending = sorted(arrivals, key=lambda a: a.at)
    by_id = {a.request_id: a for a in arrivals}
    waiting: list[Hashable] = []
    running: list[Hashable] = []  # in admission order
    created: set[Hashable] = set()
    finished: list[Hashable] = []
    finished_at: dict = {}
    waited = {a.request_id: 0 for a in arrivals}
    preemptions = 0

    def free() -> tuple[int, ...]:
        return tuple(p.free for p in manager.snapshot().pools)

    def preempt(rid: Hashable) -> None:
        nonlocal preemptions
        manager.suspend(rid)
        running.remove(rid)
        waiting.insert(0, rid)  # preempted requests go back ahead of new arrivals
        preemptions += 1

    step = 0
    while len(finished) < len(arrivals):
        if step >= limit:
            return ServeResult(step, tuple(finished), finished_at, waited, preemptions, livelock_at=step)
        if progress is not None and not step % 1024:
            progress(step, len(finished), len(arrivals))
        while pending and pending[0].at <= step:
            waiting.append(pending.pop(0).request_id)
        for rid in list(running):  # each running request's next step
            if rid not in running:
                continue  # preempted earlier in this step
            a = by_id[rid]
            h = manager.history_of(rid)
            capacity = h + admission.step_tokens(h, a.prompt, chunk, lookahead)
            while not manager.resize(rid, capacity, h):
                preempt(pick_victim(running, rid, victim))
                if rid not in running:
                    break
            if rid not in running:
                continue
            done = admission.advance(h, a.prompt, chunk)
            manager.commit(rid, done)
            if h + done >= admission.run_length(a.prompt, a.output):
                manager.close(rid)
                running.remove(rid)
                finished.append(rid)
                finished_at[rid] = step
        while waiting:  # admission, first come first served
            rid = waiting[0]
            a = by_id[rid]
            charged = gate_charge(gate, config, a.prompt, a.output, chunk, lookahead)
            available = free()
            refused = any(c > f for c, f in zip(charged, available))
            if gate in UTILISATION_GATES:
                num, den = UTILISATION_GATES[gate]
                refused = not all(peers.trtllm_resume_admits(p.total - p.free, p.total, num, den)
                                  for p in manager.snapshot().pools)
            if refused:
                if not running:
                    needed = gate_charge("reference", config, a.prompt, a.output, chunk, lookahead)
                    return ServeResult(step, tuple(finished), finished_at, waited, preemptions,
                                       deadlock=Deadlock(step, rid, charged, needed, available))
                break
            if rid not in created:
                manager.create(rid)
                created.add(rid)
            if not manager.resume(rid):
                break
            waiting.pop(0)
            running.append(rid)
        for rid in waiting:
            waited[rid] += 1
        step += 1
    return ServeResult(step, tuple(finished), finished_at, waited, preemptions)


def _resume_reference(total: int, used: int, held: int, needed: int) -> Any:
    return admission.resume_admits(total, used, held, needed)


def _resume_trtllm(total: int, used: int, held: int, needed: int) -> Any:
    num, den = peers.TRTLLM_MAX_UTIL_FOR_RESUME
    return peers.trtllm_resume_admits(used, total, num, den)


#: resume gate name -> ``admits(total, used, held, needed)`` for one pool group: the rule's
#: (:func:`.admission.resume_admits`) and TensorRT-LLM V2's (``max_util_for_resume``).
RESUME_GATES: dict[str, Callable[[int, int, int, int], Any]] = {
    "reference": _resume_reference,
    "trtllm": _resume_trtllm,
}


@attrs.frozen
class KeptRun:
    """A lone request suspended (its slots kept) after every step and resumed through a resume gate.
    ``refused_at``: the history of the step after which the gate refused it (nothing else runs, so it
    waits forever) with ``used``/``total`` per pool group then; ``steps`` the steps run."""

    steps: int
    completed: bool
    refused_at: int | None = None
    used: tuple[int, ...] = ()
    total: tuple[int, ...] = ()


def kept_run(config: Config, prompt: int, output: int, *, chunk: int = 1, lookahead: int = 0,
             gate: str = "reference", gate_from: int = 0) -> KeptRun:
    """Run one request its scheduler's way on the reference manager with a suspend that keeps its slots
    (TensorRT-LLM V2 with GPU memory only): after each step's resize it is suspended and resumed through
    ``gate`` (:data:`RESUME_GATES`), asked per pool group with what it holds (all the pool uses: it is
    alone) and needs (the same: a kept resume asks nothing new). A gate refusal ends the run: nothing
    else runs, so nothing will ever free a slot. Steps before history ``gate_from`` resume through the
    rule's gate. The manager's own resume must succeed where the gate admits (else
    :class:`~.errors.RequestError`: the rule and the manager disagree)."""
    if gate not in RESUME_GATES:
        raise ConfigError("gate", gate, f"not one of {', '.join(RESUME_GATES)}")
    config = attrs.evolve(config, semantics=attrs.evolve(config.semantics, suspend=SuspendMode.KEEP))
    manager = Manager(config)
    rid = "r0"
    manager.create(rid)
    if not manager.resume(rid):
        return KeptRun(0, False)
    h, steps = 0, 0
    while h < admission.run_length(prompt, output):
        if not manager.resize(rid, h + admission.step_tokens(h, prompt, chunk, lookahead), h):
            return KeptRun(steps, False)
        steps += 1
        manager.suspend(rid)
        pools = manager.snapshot().pools
        used = tuple(p.total - p.free for p in pools)
        total = tuple(p.total for p in pools)
        admits = RESUME_GATES[gate if h >= gate_from else "reference"]
        if not all(admits(n, u, u, u) for n, u in zip(total, used)):
            return KeptRun(steps, False, h, used, total)
        if not manager.resume(rid):
            raise RequestError(rid, "resume", h, "the gate admitted a kept resume the manager refused")
        done = admission.advance(h, prompt, chunk)
        manager.commit(rid, done)
        h += done
    manager.close(rid)
    return KeptRun(steps, True)


# ----------------------------------------------------------------------------- the loop as a transition system
#: A request's status in :func:`pair_step`'s state.
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


def loop_moves(pool: Any, prompts: tuple, outputs: tuple, victim: "Victim") -> tuple:
    """:func:`loop_step` as its sequence of moves, each a function of the loop's working state
    ``(histories, running, waiting, snapshot, stopped)`` (``snapshot``: the running list at the step's
    start, the order phase 1 takes the requests in; ``stopped``: admission refused this step). In order:
    take the snapshot; per snapshot place, N tries (out of slots: preempt the victim) then the step; N
    admissions. A model check may name the working state between moves (it stays small)."""
    count = len(prompts)
    lengths = tuple(admission.run_length(p, o) for p, o in zip(prompts, outputs))
    charges = tuple(admission.full_admission_blocks(1, p, 0) for p in prompts)

    def free(hs: tuple, running: tuple) -> Any:
        used: Any = 0
        for i in range(count):
            used = used + ite(_holds(running, i), hs[i], 0)
        return pool - used

    def snapshot(w: tuple) -> tuple:
        hs, running, waiting, _, _ = w
        return hs, running, waiting, running, False

    def attempt(place: int) -> Callable[[tuple], tuple]:
        def move(w: tuple) -> tuple:  # out of slots: preempt the victim (itself when it is the pick)
            hs, running, waiting, snap, stopped = w
            rid = snap[place]
            short = _and(rid != EMPTY, _holds(running, rid), free(hs, running) < 1)
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
            go = _and(rid != EMPTY, _holds(running, rid), free(hs, running) >= 1)
            hs2 = tuple(ite(_and(go, rid == i), hs[i] + 1, hs[i]) for i in range(count))
            done = _and(go, _of(hs2, rid) >= _of(lengths, rid))
            running2 = tuple(ite(done, x, y) for x, y in zip(_remove(running, rid), running))
            return hs2, running2, waiting, snap, stopped

        return move

    def admit(w: tuple) -> tuple:  # first come first served; a refusal ends admission for the step
        hs, running, waiting, snap, stopped = w
        front = waiting[0]
        ok = _and(stopped == False, front != EMPTY, _of(charges, front) <= free(hs, running))  # noqa: E712
        running2 = tuple(ite(ok, x, y) for x, y in zip(_append(running, front), running))
        waiting2 = tuple(ite(ok, x, y) for x, y in zip((*waiting[1:], EMPTY), waiting))
        return hs, running2, waiting2, snap, _or(stopped, ok == False)  # noqa: E712

    moves: list[Callable[[tuple], tuple]] = [snapshot]
    for place in range(count):  # at most N preemptions a request: each removes a running request
        moves += [attempt(place)] * count + [advance(place)]
    return (*moves, *[admit] * count)


def loop_step(state: tuple, pool: Any, prompts: tuple, outputs: tuple, victim: "Victim") -> tuple:
    """One step of :func:`serve` for ``N = len(prompts)`` requests that all arrive at step 0, on one
    full-attention pool group of ``pool`` slots at one token per block, prefill chunk 1, no draft slots,
    the ``reference`` gate: the loop as a transition system on the arithmetic kernel (bounded model
    checking unrolls it on solver terms, move by move: :func:`loop_moves`). ``state = (histories,
    running, waiting)``: each request's history (its slots in use while it runs: one a token), the
    running requests in admission order and the waiting queue, each a list of ``N`` places of request
    numbers padded with :data:`EMPTY`. A request is done when its history reaches ``P + O`` (it is then
    in neither list). :func:`loop_start` is the state before step 0."""
    hs, running, waiting = state
    w = (tuple(hs), tuple(running), tuple(waiting), tuple(running), False)
    for move in loop_moves(pool, prompts, outputs, victim):
        w = move(w)
    return w[:3]
