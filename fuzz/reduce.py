"""Reducing a failing trace further after Hypothesis has shrunk it.

Hypothesis shrinks the choices that generated a run; a rule it cannot delete (for instance because
the choice of enabled rules was drawn inside it) can leave steps that play no part. This pass works
on the trace itself: it drops one step at a time while a replay still shows the *same* divergence,
then renames requests to ``r0, r1, ...`` in order of appearance. It is never longer than the input.

Two rules keep the result meaningful:

- **Same divergence**: the part that differs (``outcome``, ``tables``, ``liveness`` ...), how (the
  reason and mode) and what each side did (:func:`signature`: a step result's kind, e.g. out of slots
  against ok, or the type of a crash; a value's type), not only the part's name.
- **Inside the generator's domain**: a candidate is checked (:func:`in_domain`) before it is
  replayed: every step must be one the state machine could have generated for this backend at that
  point (a resize never advances history past the capacity held, nor at all for a backend that
  commits before it allocates; no capacity cut for a backend without them; a commit within the
  capacity; misuse only for a backend that declares errors; reused history only where allowed).
  States and lengths come from the reference manager run on the trace's config, as in the machine.
"""

from __future__ import annotations

from typing import Any

import attrs

from swafloor.reference import Manager, RequestError, RequestState

from .compare import Divergence, Result
from .protocol import BackendRecord, Capabilities, Operation, Part
from .replay import replay
from .trace import Step, Trace

__all__ = ["reduce_trace", "signature", "in_domain"]


def _side(value: Any) -> str:
    if isinstance(value, Result):
        if value.kind == "crash" and value.message:
            return f"crash:{value.message.split(':', 1)[0]}"
        return value.kind
    if isinstance(value, dict) and "kind" in value:  # a saved divergence's jsonable Result
        kind = value["kind"]
        if kind == "crash" and value.get("message"):
            return f"crash:{str(value['message']).split(':', 1)[0]}"
        return str(kind)
    return type(value).__name__


def signature(divergence: Divergence) -> tuple[str, str, str, str, str]:
    """What makes two divergences the same: the part, the mode, the reason and each side's kind."""
    part = divergence.field.split("[", 1)[0]
    return (part, divergence.mode, divergence.reason, _side(divergence.reference), _side(divergence.backend))


def in_domain(trace: Trace, caps: Capabilities) -> bool:
    """Whether every step of ``trace`` is one the state machine could generate for ``caps``."""
    manager = Manager(trace.config)
    misuse_allowed = caps.mode(Part.ERRORS) is not None
    known: set[str] = set()
    for step in trace.steps:
        if not caps.supports(step.op):
            return False
        rid = step.request
        if step.op is Operation.CREATE:
            if rid in known:
                if not misuse_allowed:
                    return False
                continue  # the duplicate-id misuse: rejected, changes nothing
            if step.reused_history and not caps.reused_history:
                return False
        elif rid not in known:
            if not misuse_allowed:
                return False
            continue  # the unknown-request misuse
        elif step.op is Operation.RESIZE and manager.state_of(rid) is RequestState.ACTIVE:
            capacity, history = manager.capacity_of(rid), manager.history_of(rid)
            sane = 0 <= step.history <= step.capacity and history <= step.history
            if sane:
                if step.history > max(history, capacity):
                    return False  # history past the capacity held: never generated
                if caps.commit_before_allocate and step.history != history:
                    return False
                if not caps.capacity_cuts and step.capacity < capacity:
                    return False
            elif not misuse_allowed:
                return False
        elif step.op is Operation.COMMIT and manager.state_of(rid) is RequestState.ACTIVE:
            if step.tokens < 0 or manager.history_of(rid) + step.tokens > manager.capacity_of(rid):
                if not misuse_allowed:
                    return False
        try:
            _run(manager, step)
        except RequestError:
            if not misuse_allowed:
                return False
        else:
            known.add(rid)
    return True


def _run(manager: Manager, step: Step) -> None:
    if step.op is Operation.CREATE:
        manager.create(step.request, reused_history=step.reused_history, share_with=step.share_with)
    elif step.op is Operation.RESUME:
        manager.resume(step.request)
    elif step.op is Operation.RESIZE:
        manager.resize(step.request, step.capacity, step.history)
    elif step.op is Operation.COMMIT:
        manager.commit(step.request, step.tokens)
    elif step.op is Operation.SUSPEND:
        manager.suspend(step.request)
    else:
        manager.close(step.request)


def _diverges(
    trace: Trace, backend: BackendRecord, against: BackendRecord, wanted: tuple
) -> Divergence | None:
    if not in_domain(trace, backend.capabilities):
        return None
    found = replay(trace, backend, against).divergence
    return found if found is not None and signature(found) == wanted else None


def _renamed(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    names: dict[str, str] = {}
    for step in steps:
        names.setdefault(step.request, f"r{len(names)}")
    return tuple(attrs.evolve(step, request=names[step.request]) for step in steps)


def reduce_trace(
    trace: Trace, backend: BackendRecord, against: BackendRecord, divergence: Divergence
) -> tuple[Trace, Divergence]:
    """A trace no longer than ``trace`` that still shows the same divergence (:func:`signature`),
    inside the generator's domain, and its divergence."""
    kind = signature(divergence)
    best, best_divergence = trace, divergence
    if not trace.steps:
        return best, best_divergence
    # Nothing after the divergence matters.
    if divergence.step is not None and divergence.step_index + 1 < len(trace.steps):
        cut = attrs.evolve(trace, steps=trace.steps[: divergence.step_index + 1])
        found = _diverges(cut, backend, against, kind)
        if found is not None:
            best, best_divergence = cut, found
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(best.steps))):
            candidate = attrs.evolve(best, steps=best.steps[:i] + best.steps[i + 1:])
            found = _diverges(candidate, backend, against, kind)
            if found is not None:
                best, best_divergence, changed = candidate, found, True
    renamed = attrs.evolve(best, steps=_renamed(best.steps))
    found = _diverges(renamed, backend, against, kind)
    if found is not None:
        best, best_divergence = renamed, found
    return best, best_divergence
