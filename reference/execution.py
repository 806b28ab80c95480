"""Scheduling and execution as separate events (issue 34): a layer on the manager.

An engine's scheduler *schedules* a step: it allocates the step's blocks (a resize of the manager)
and, with a prefix cache that hashes at schedule time (``cache_scheduled``), *names* every block whose
tokens all lie within the step's end, so that a later lookup can find it. The worker *executes* the
step later: only then is the step's KV written. Between the two the step can be *dropped* (the
request preempted or aborted): it never executes. Up to ``k = semantics.in_flight_tokens`` tokens can
be scheduled and not yet executed; steps execute in the order they were scheduled.

The spec's two rules, each a formula on the arithmetic kernel (ints and solver terms alike):

- :func:`hit_blocks`: a lookup takes a request's named blocks only as far as their KV is written
  (``fdiv(min(named, written), t)`` whole blocks): a hit never covers a token whose KV is unwritten,
  whatever is dropped later (theorem ``hit-covers-written-kv``);
- :func:`names_after_drop`: a drop revokes every name whose block holds a token not written, so no
  block a dropped step named is a hit afterwards (theorem ``dropped-step-names-no-hit``).

And two of what the worker does with them: a step asks for its tokens and its draft slots
(:func:`step_capacity`: the drafter writes KV only into allocated lookahead blocks, theorem
``drafts-write-allocated-blocks``), and a worker's mask starts at the reference's live window
(:func:`mask_start`, :func:`~.lifecycle.window_start`: it never reads a block the manager may have
freed, theorem ``worker-mask-reads-held-blocks``).

:class:`Execution` is the event model: it drives a :class:`~.manager.Manager` (created with
``prefix_sharing`` for lookups) through ``schedule``, ``execute`` and ``drop``, keeping per request
what is named and what is written, and the steps in flight. The manager is untouched: the manager's
history is the first token of the last scheduled step (what an engine with steps in flight counts as
computed; an executed step commits up to its end when nothing later of its request is in flight), and
its ``in_flight_tokens`` keeps every block an unexecuted step writes. Its hooks
(:class:`~.hooks.ExecutionHooks`) replace a formula where a seeded bug changes it.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from . import lifecycle
from .arith import fdiv, imin
from .config import SuspendMode
from .errors import RequestError
from .hooks import ExecutionHooks
from .values import Outcome, RequestState

__all__ = [
    "named_blocks",
    "hit_blocks",
    "names_after_drop",
    "step_capacity",
    "mask_start",
    "Step",
    "Execution",
]


# ----------------------------------------------------------------------------- the formulas
def named_blocks(scheduled_end: Any, t: Any) -> Any:
    """The whole blocks a request's scheduled steps named (``cache_scheduled``): those whose tokens all
    lie below the end of its last scheduled step."""
    return fdiv(scheduled_end, t)


def hit_blocks(named_end: Any, written: Any, t: Any) -> Any:
    """The spec's lookup: the whole blocks of a request's content a hit takes, the named ones whose
    every token's KV is written (``named_end``: the end of what is named, ``written``: of what executed)."""
    return fdiv(imin(named_end, written), t)


def names_after_drop(named_end: Any, written: Any, t: Any) -> Any:
    """The whole blocks still named after the request's steps in flight are dropped: every name whose
    block holds a token the dropped steps would have written is revoked."""
    return fdiv(imin(named_end, written), t)


def step_capacity(end: Any, drafts: Any) -> Any:
    """The capacity a step to ``end`` tokens asks for with ``drafts`` draft tokens: their lookahead
    slots too, the positions ``[end, end + drafts)`` the drafter writes."""
    return end + drafts


def mask_start(h: Any, window: Any) -> Any:
    """The first token a worker's mask lets the query at ``h`` read (sinks apart): the reference's live
    window, :func:`~.lifecycle.window_start`."""
    return lifecycle.window_start(h, window)


# ----------------------------------------------------------------------------- the event model
@attrs.frozen
class Step:
    """A scheduled step: ``number`` (in scheduling order), the request, the tokens it computes
    ``[start, end)``, the draft positions ``[end, end + drafts)`` its drafter writes, the capacity it
    asked for."""

    number: int
    request: str
    start: int
    end: int
    drafts: int
    capacity: int


@attrs.define
class _Run:
    """What the layer keeps of a request: its content's source (``share_with`` and the hit it was
    created on, tokens: whose tokens its first ones are, kept across a preemption), the end of its
    scheduled steps, of what is named and of what is written."""

    scheduled: int = 0
    named: int = 0
    written: int = 0
    source: str | None = None
    hit: int = 0


class Execution:
    """Scheduling and execution of ``manager``'s requests as separate events (see the module)."""

    def __init__(self, manager: Any, hooks: ExecutionHooks = ExecutionHooks()):
        self.manager = manager
        self.hooks = hooks
        self.t = manager.config.tokens_per_block
        self.k = manager.semantics.in_flight_tokens
        self.runs: dict[str, _Run] = {}
        self.queue: list[Step] = []  # scheduled, not executed, in order
        self.steps = 0

    # ------------------------------------------------------------------ hooks
    def _hit_blocks(self, named_end: int, written: int) -> int:
        return (self.hooks.hit_blocks or hit_blocks)(named_end, written, self.t)

    def _names_after_drop(self, named_end: int, written: int) -> int:
        return (self.hooks.names_after_drop or names_after_drop)(named_end, written, self.t)

    def capacity_of(self, end: int, drafts: int) -> int:
        return (self.hooks.step_capacity or step_capacity)(end, drafts)

    def mask_of(self, h: int, window: int) -> int:
        return (self.hooks.mask_start or mask_start)(h, window)

    # ------------------------------------------------------------------ lookups
    def lookup(self, source: str) -> int:
        """The hit, in tokens, a request created on ``source``'s content takes now: the whole blocks
        :func:`hit_blocks` gives, within the source's history in the manager (what it can share)."""
        run = self._run(source)
        shareable = fdiv(self.manager.record_of(source).history, self.t)
        return min(self._hit_blocks(run.named, run.written), shareable) * self.t

    def named(self, request_id: str) -> int:
        """The whole blocks of the request's content named now (a closed request's too)."""
        return fdiv(self.runs[request_id].named, self.t)

    def written(self, request_id: str) -> int:
        """The tokens of the request whose KV is written (executed steps and the hit it was created on)."""
        return self.runs[request_id].written

    def in_flight(self, request_id: str | None = None) -> list[Step]:
        return [s for s in self.queue if request_id is None or s.request == request_id]

    # ------------------------------------------------------------------ events
    def create(self, request_id: str, share_with: str | None = None) -> int:
        """Create a request, on ``share_with``'s content when given: its hit (:meth:`lookup`) is its
        reused history. Returns the hit in tokens."""
        if share_with is not None and (share_with not in self.runs
                                       or self.manager.state_of(share_with) is RequestState.CLOSED):
            raise RequestError(request_id, "share_with", share_with, "must name an open request of the execution layer")
        hit = self.lookup(share_with) if share_with is not None else 0
        if hit:
            self.manager.create(request_id, reused_history=hit, share_with=share_with)
        else:
            self.manager.create(request_id)
        self.runs[request_id] = _Run(scheduled=hit, named=hit, written=hit, source=share_with if hit else None, hit=hit)
        return hit

    def resume(self, request_id: str) -> Outcome:
        return self.manager.resume(request_id)

    def schedule(self, request_id: str, tokens: int, drafts: int = 0) -> Step | Outcome:
        """Schedule the request's next ``tokens`` tokens (and ``drafts`` draft tokens): the manager
        allocates (capacity :meth:`capacity_of`, or more where a step of the request still in flight
        asked for more; history the step's first token) and the blocks within
        the step's end are named. A failed allocation is returned as its outcome (nothing scheduled)."""
        run = self._run(request_id)
        if type(tokens) is not int or tokens < 1:
            raise RequestError(request_id, "tokens", tokens, "must be an int >= 1")
        if type(drafts) is not int or drafts < 0:
            raise RequestError(request_id, "drafts", drafts, "must be an int >= 0")
        start = run.scheduled
        if start - run.written > self.k:
            raise RequestError(request_id, "tokens", tokens,
                               f"would leave {start - run.written} tokens in flight, above in_flight_tokens {self.k}")
        end = start + tokens
        # never below what a step of the request still in flight writes (its draft slots)
        capacity = max([self.capacity_of(end, drafts)] + [s.capacity for s in self.queue if s.request == request_id])
        outcome = self.manager.resize(request_id, capacity, start)
        if not outcome:
            return outcome
        step = Step(self.steps, request_id, start, end, drafts, capacity)
        self.steps += 1
        run.scheduled = end
        run.named = max(run.named, end)
        self.queue.append(step)
        return step

    def execute(self, worker: Callable[[Step], None] | None = None) -> Step | None:
        """Execute the oldest step in flight: ``worker(step)`` (a worker's kernel: it writes the step's KV
        and reads its windows, the manager's blocks as the step was scheduled), then the step counts as
        written and, when nothing later of its request is in flight, committed. None when nothing is
        in flight."""
        if not self.queue:
            return None
        step = self.queue.pop(0)
        if worker is not None:
            worker(step)
        self._run(step.request).written = step.end
        record = self.manager.record_of(step.request)
        if record.history < step.end:  # nothing later in flight: the manager's history is what executed
            self.manager.commit(step.request, step.end - record.history)
        return step

    def drop(self, request_id: str, how: str = "preempt") -> list[Step]:
        """Drop the request's steps in flight (they never execute) and revoke the names
        :func:`names_after_drop` no longer keeps; then ``preempt`` suspends it (the manager's suspend),
        ``abort`` closes it. Returns the dropped steps."""
        if how not in ("preempt", "abort"):
            raise RequestError(request_id, "how", how, "must be 'preempt' or 'abort'")
        if how == "preempt" and self.manager.semantics.suspend is not SuspendMode.RECOMPUTE:
            raise RequestError(request_id, "how", how, "needs semantics.suspend 'recompute' (the dropped tokens "
                               "are computed again; a suspend that keeps lengths would count them computed)")
        run = self._run(request_id)
        if how == "preempt" and self.manager.state_of(request_id) is not RequestState.ACTIVE:
            raise RequestError(request_id, "request_id", request_id, "is not active: only an active request is preempted")
        dropped = [s for s in self.queue if s.request == request_id]
        self.queue = [s for s in self.queue if s.request != request_id]
        run.named = min(run.named, self._names_after_drop(run.named, run.written) * self.t)
        run.scheduled = run.written
        if how == "abort":
            self.manager.close(request_id)
        else:
            self.manager.suspend(request_id)  # recompute: every slot and the lengths go (its content stays its own)
            run.scheduled = run.written = run.named = 0
        return dropped

    def close(self, request_id: str) -> list[Step]:
        """Close a request (an abort when steps are in flight)."""
        return self.drop(request_id, "abort")

    def owner(self, request_id: str, position: int) -> str:
        """The request whose content the token at ``position`` of ``request_id`` is (a hit's tokens are
        its source's)."""
        run = self.runs[request_id]
        while run.source is not None and position < run.hit:
            request_id = run.source
            run = self.runs[request_id]
        return request_id

    def _run(self, request_id: str) -> _Run:
        run = self.runs.get(request_id)
        if run is None or self.manager.record_of(request_id).state is RequestState.CLOSED:
            raise RequestError(request_id, "request_id", request_id, "is no open request of the execution layer")
        return run
