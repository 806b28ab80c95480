"""A serving loop over the reference manager: admission and preemption, one scheduler step at a time.

A layer on the manager (it calls only its public operations): requests arrive, wait, are admitted
by a *gate* (what a scheduler charges a waiting request per pool group against the free slots),
then run their steps (:mod:`.admission`'s chunked prefill and decode with draft slots). A step that
runs out of slots preempts a victim (``newest`` or ``oldest`` of the running requests: recompute, as
vLLM preempts: every slot freed, its tokens recomputed from 0 when it is admitted again, ahead of new
arrivals) and retries; with no victim left it preempts itself.

Gates: ``reference`` (the rule: :func:`.admission.swa_admission_blocks` per SWA life cycle,
:func:`.admission.full_admission_blocks` for full attention, one slot per SSM life cycle) and vLLM's
(:func:`.peers.vllm_admission_blocks`, with or without its cap; full attention and SSM as the rule).

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
from .config import Config, SuspendMode, build_layout
from .errors import ConfigError, RequestError
from .lifecycle import LifeCycle, LifeCycleKind
from .manager import Manager

__all__ = ["Arrival", "Victim", "pick_victim", "GATES", "gate_charge", "Deadlock", "ServeResult", "serve"]


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


def pick_victim(running: Sequence[Hashable], requester: Hashable, victim: "Victim") -> Hashable:
    """The request a step of ``requester`` that ran out of slots preempts, ``running`` in admission order."""
    if victim is Victim.NEWEST:
        return running[-1]
    if victim is Victim.OLDEST:
        return running[0]
    others = [r for r in running if r != requester]
    return others[-1] if others else requester


def _charge_reference(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
    if lc.kind is LifeCycleKind.SWA:
        return admission.swa_admission_blocks(t, lc.window, lc.sink_blocks, p, c, k)
    if lc.kind is LifeCycleKind.FULL:
        return admission.full_admission_blocks(t, p, k)
    return 1  # an SSM life cycle's one state page


def _charge_vllm(capped: bool) -> Callable[[LifeCycle, int, int, int, int, int], int]:
    def charge(lc: LifeCycle, t: int, p: int, o: int, c: int, k: int) -> int:
        if lc.kind is LifeCycleKind.SWA:  # max_num_batched_tokens = C, no model-length cap
            return peers.vllm_admission_blocks(t, lc.window, p, k, c, None, capped)
        return _charge_reference(lc, t, p, o, c, k)

    return charge


#: gate name -> per life cycle ``charge(lc, t, prompt, output, chunk, lookahead)`` in blocks.
GATES: dict[str, Callable[[LifeCycle, int, int, int, int, int], int]] = {
    "reference": _charge_reference,
    "vllm": _charge_vllm(True),
    "vllm-uncapped": _charge_vllm(False),
}


def gate_charge(gate: str, config: Config, prompt: int, output: int, chunk: int, lookahead: int) -> tuple[int, ...]:
    """What ``gate`` charges a waiting request, per pool group: the sum over its life cycles."""
    if gate not in GATES:
        raise ConfigError("gate", gate, f"not one of {', '.join(GATES)}")
    layout = build_layout(config)
    charge = GATES[gate]
    totals = [0] * layout.num_pool_groups
    for i, lc in enumerate(layout.life_cycles):
        totals[layout.pool_group_of[i]] += charge(lc, layout.block_sizes[i], prompt, output, chunk, lookahead)
    return tuple(totals)


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
            if any(c > f for c, f in zip(charged, available)):
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
