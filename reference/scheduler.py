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
step's own check), SGLang's (``sglang``: the pinned 0.5.23's, 0.5.21 on: its reservation
:func:`.peers.sglang_prefill_budget_parts` whole where it fits the pool group, else its chunk cut; ``sglang-0.5.15``:
the SWA budget of 0.5.13.post1-0.5.15.post1, :func:`.peers.sglang_admission_blocks`) and TensorRT-LLM V2's resume gate (``trtllm``: admitted while
every pool group's use is at most ``max_util_for_resume`` of it, :func:`.peers.trtllm_resume_admits`,
nothing reserved); full attention and SSM as the rule's.

Two ends that are not completion: a **deadlock**, a step at which nothing runs and the first waiting
request is refused (no slot is in use, so none will ever be freed: it waits forever), reported with
what the gate charged, what the rule charges and what was free; and a **livelock**, no request
finishing within ``max_steps`` although requests run (they preempt each other in turn).
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Sequence

import attrs

from . import admission, peers
from .config import Config, SuspendMode, build_layout
from .errors import ConfigError, RequestError
from .lifecycle import LifeCycle, LifeCycleKind
from .manager import Manager
from .transitions import (DONE, EMPTY, RUNNING, WAITING, Victim, loop_moves, loop_start, loop_step, pair_start,
                          pair_step, victim_index)

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


def _charge_sglang_0515(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
    if lc.kind is LifeCycleKind.SWA:  # its SWA budget in free pages (no sinks: SGLang has none)
        return peers.sglang_admission_blocks(t, lc.window, p, c)
    return _charge_reference(lc, t, p, o, c, k)


def _charge_sglang(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int, pool: int) -> int:
    """SGLang 0.5.21-0.5.23 (the pinned release): its reservation, or where that never fits the pool group's
    ``pool`` pages, its chunk cut to the pages above an empty pass's headroom (no sinks, no drafts)."""
    if lc.kind is LifeCycleKind.SWA:
        if c % t:
            raise ConfigError("chunk", c, f"SGLang takes a chunk of whole pages (chunked_prefill_size % page_size: "
                                          f"t = {t})")
        whole, shrunk = peers.sglang_prefill_budget_parts(t, lc.window, p, c, o)
        return whole if whole <= pool else shrunk
    return _charge_reference(lc, t, p, o, c, k)


def _charge_nothing(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
    return 0  # a utilisation gate reserves nothing for the request (UTILISATION_GATES)


#: Gates whose charge depends on the pool group's size (a ``pool`` keyword, its slots): SGLang cuts the chunk
#: of a request whose reservation never fits its pool.
POOL_AWARE_GATES = frozenset({"sglang"})

#: gate name -> per life cycle ``charge(lc, t, prompt, output, chunk, lookahead)`` in blocks: an int, or
#: a tuple when the gate asks the free slots several questions (vLLM: its gate, then its first step),
#: each summed over a pool group's life cycles and all of them asked (:func:`gate_charge`).
GATES: dict[str, Callable[[LifeCycle, int, int, int, int, int], Any]] = {
    "reference": _charge_reference,
    "vllm": _charge_vllm(True),
    "vllm-uncapped": _charge_vllm(False),
    "sglang": _charge_sglang,
    "sglang-0.5.15": _charge_sglang_0515,
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
        extra = {"pool": layout.slots[layout.pool_group_of[i]]} if gate in POOL_AWARE_GATES else {}
        got = charge(lc, layout.block_sizes[i], prompt, output, chunk, lookahead, **extra)
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
          progress: Callable[[int, int, int], Any] | None = None,
          on_step: Callable[[int, tuple], Any] | None = None) -> ServeResult:
    """Run ``arrivals`` to completion, a deadlock or a livelock (see the module docstring).
    ``progress(step, finished, total)``, when given, is called every 1024 steps. ``on_step(step, state)``,
    when given, is called at the end of every step with the loop's state read back from the manager and the
    lists: ``(histories, running, waiting)``, each request's history (:meth:`~.manager.Manager.history_of`;
    0 before it is created), the running requests in admission order and the waiting queue as positions in
    ``arrivals`` padded with :data:`EMPTY` to ``len(arrivals)`` places; for arrivals all at step 0 it is the
    layout of :func:`loop_step`'s state."""
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
        if on_step is not None:
            on_step(step, _loop_state(manager, ids, created, running, waiting))
        step += 1
    return ServeResult(step, tuple(finished), finished_at, waited, preemptions)


def _loop_state(manager: Manager, ids: Sequence[Hashable], created: set, running: Sequence[Hashable],
                waiting: Sequence[Hashable]) -> tuple:
    """:func:`serve`'s state for ``on_step`` (see there)."""
    index = {rid: i for i, rid in enumerate(ids)}

    def places(rids: Sequence[Hashable]) -> tuple[int, ...]:
        return tuple(index[r] for r in rids) + (EMPTY,) * (len(ids) - len(rids))

    histories = tuple(manager.history_of(rid) if rid in created else 0 for rid in ids)
    return histories, places(running), places(waiting)


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
