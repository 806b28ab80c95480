"""Reducing a failing trace further after Hypothesis has shrunk it.

Hypothesis shrinks the choices that generated a run; a rule it cannot delete (for instance because
the choice of enabled rules was drawn inside it) can leave steps that play no part. This pass works
on the trace itself: it drops one step at a time while a replay still diverges on the same part, then
renames requests to ``r0, r1, ...`` in order of appearance. Every candidate is replayed, so the result
diverges for certain; it is never longer than the input.
"""

from __future__ import annotations

import attrs

from .backends import ResolvedBackend
from .compare import Divergence
from .replay import replay
from .trace import Step, Trace

__all__ = ["reduce_trace"]


def _kind(divergence: Divergence) -> str:
    return divergence.field.split("[", 1)[0]


def _diverges(trace: Trace, backend: ResolvedBackend, against: ResolvedBackend, kind: str) -> Divergence | None:
    found = replay(trace, backend, against).divergence
    return found if found is not None and _kind(found) == kind else None


def _renamed(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    names: dict[str, str] = {}
    for step in steps:
        names.setdefault(step.request, f"r{len(names)}")
    return tuple(attrs.evolve(step, request=names[step.request]) for step in steps)


def reduce_trace(
    trace: Trace, backend: ResolvedBackend, against: ResolvedBackend, divergence: Divergence
) -> tuple[Trace, Divergence]:
    """A trace no longer than ``trace`` that still diverges on the same part, and its divergence."""
    kind = _kind(divergence)
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
