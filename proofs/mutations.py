"""Seeded bugs in the reference formulas, applied as temporary patches of reference functions.

The catalogue's goals look reference functions up through their modules at call time, so inside
:func:`applied` every goal is built from the mutated formula. A mutation the catalogue cannot tell
from the real formula would show that the theorems miss that bug; :func:`flips` reports which
theorems change outcome.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

import attrs

from swafloor.reference import arith, floors, lifecycle, peers

from .discharge import UNKNOWN, discharge
from .theorem import Theorem

__all__ = ["Mutation", "MUTATIONS", "applied", "flips"]

Patch = tuple[Any, str, Callable[..., Any]]


@attrs.frozen
class Mutation:
    name: str
    description: str
    patches: Callable[[], list[Patch]] = attrs.field(eq=False)  # (module, attribute, replacement)


def _drop_in_flight() -> list[Patch]:
    real = lifecycle.stale_range

    def stale_range(h, t, window, sink_blocks):  # the window ends at h - 1: [h - W, h - 1]
        return real(h, t, None if window is None else window + 1, sink_blocks)

    return [(lifecycle, "stale_range", stale_range)]


def _floor_not_ceiling() -> list[Patch]:
    def window_span_blocks(length, t):
        return arith.fdiv(length - 1, t) + 1

    return [(floors, "window_span_blocks", window_span_blocks)]


def _sinks_ignored() -> list[Patch]:
    real = floors.step_floor

    def step_floor(t, window, sink_blocks, n):
        return real(t, window, 0, n)

    return [(floors, "step_floor", step_floor)]


def _pre_fix() -> list[Patch]:
    def swa_floor(t, window, sink_blocks):
        return floors.legacy_floor()

    return [(floors, "swa_floor", swa_floor)]


def _cpp_floor() -> list[Patch]:
    def swa_floor(t, window, sink_blocks):
        return sink_blocks + peers.trtllm_cpp_blocks(t, window)

    return [(floors, "swa_floor", swa_floor)]


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("drop-in-flight-plus-one", "stale range ends at (h - W) // t: the in-flight token's +1 dropped",
             _drop_in_flight),
    Mutation("floor-not-ceiling", "the floor's window term is floor((W-1)/t) + 1 instead of the ceiling",
             _floor_not_ceiling),
    Mutation("sinks-ignored", "the floor (and the n-token worst case) leave out the sink blocks", _sinks_ignored),
    Mutation("pre-fix-floor", "the SWA floor is the pre-fix 1 slot", _pre_fix),
    Mutation("cpp-floor", "the SWA floor is the looser S + ceil(W/t) + 1", _cpp_floor),
)


@contextlib.contextmanager
def applied(mutation: Mutation) -> Iterator[None]:
    """Patch the reference with ``mutation`` for the duration of the block."""
    originals = []
    try:
        for module, attribute, replacement in mutation.patches():
            originals.append((module, attribute, getattr(module, attribute)))
            setattr(module, attribute, replacement)
        yield
    finally:
        for module, attribute, original in reversed(originals):
            setattr(module, attribute, original)


def flips(
    mutation: Mutation,
    theorems: Sequence[Theorem],
    *,
    timeout_s: float = 10.0,
    seed: int = 0,
    first_only: bool = False,
) -> dict[str, tuple[str, str, dict[str, int] | None]]:
    """Theorems whose Z3 outcome under ``mutation`` is the opposite of their expected one:
    ``{name: (expected, mutated result, counterexample)}``; unknown answers are not flips. With
    ``first_only`` it stops at the first flip."""
    changed = {}
    with applied(mutation):
        for theorem in theorems:
            d = discharge(theorem, timeout_s=timeout_s, seed=seed, minimise=False, attempts=False)
            if d.result != UNKNOWN and d.result != theorem.expected.value:
                changed[theorem.name] = (theorem.expected.value, d.result, d.counterexample)
                if first_only:
                    break
    return changed
