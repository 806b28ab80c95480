"""The eviction-clock layer: WHEN an SWA life cycle's eviction runs (``eviction_clock``, ``window_interval``).

Under the default clock (``tokens``) the release policy's token gate decides (:func:`~.floors.eviction_due`:
``e`` tokens left the window since the cursor). The other clocks count steps, not tokens; a step of
the protocol is read as one forward of a batch of one request:

- a *forward* is a resize that succeeds and raises the request's capacity (it schedules new tokens); a
  resize that asks nothing new is no forward: it frees nothing and counts nothing (the engine runs no
  batch for it).
- a *decode* is a forward asking one token past a computed history (capacity ``h + 1``, ``h >= 1``);
  every other step is an *extend* (a prefill chunk). An extend frees everything stale at its history,
  as every step of a life cycle without a window does; a decode frees it only when its clock is due,
  else it keeps the point it last freed on (its ``evicted_on``).
- ``decodes``: the clock is the request's decode counter ``d``, the decodes it ran since it was last
  resumed (refused ones, and resizes asking nothing new, do not count); due when ``d % e == 1`` (:func:`decode_clock_due`): its
  decodes 1, e + 1, 2e + 1, ... (the first, ``d = 0``, never).
- ``forwards``: the manager counts the forwards of every request; a
  decode's clock is the number its request's previous step got (the forward a batch last ran, which
  the batch's next step reads before it runs again); due when that number is a multiple of ``e`` and
  the request has decoded before (:func:`forward_clock_due`). Other requests' forwards between two
  of its steps advance the number, so a multiple of ``e`` can be skipped any number of times.
- ``window_interval`` (with ``decodes``): ``e`` is made from the life cycle's window,
  :func:`window_interval`, not ``eviction_interval``.

What it costs, against the spec's window (a decode holds :func:`~.floors.in_flight_floor`): under
``decodes`` at ``e >= 2`` a decode past the first holds at most :func:`decode_clock_floor`, the
in-flight floor ``e - 1`` tokens further back (the first decode after an extend of ``n`` tokens at
most the in-flight floor ``n`` tokens back), tight (theorems ``decode-clock-floor-sufficient``,
``decode-clock-floor-tight``); at ``e = 1`` no decode is ever due (``d % 1 == 1`` never holds) and a
decoding request's window grows a block every ``t`` tokens (``decode-clock-interval-one``). Under
``forwards`` no per-request floor exists: a request whose steps have ``e - 1`` other forwards between
them never reaches a multiple of ``e`` once it missed one (``forward-clock-no-floor``).
"""

from __future__ import annotations

from typing import Any

import attrs

from .arith import fdiv, fmod, imax, ite
from .core import RequestRecord
from .floors import in_flight_floor
from .release import ReleasePolicy
from .semantics import EvictionClock

__all__ = ["EvictionClock", "ClockPolicy", "decode_clock_due", "forward_clock_due", "decode_clock_floor",
           "window_interval", "is_decode"]


def is_decode(capacity: Any, history: Any) -> bool:
    """Whether a step to ``capacity`` at ``history`` is a decode: one token past a computed history."""
    return capacity == history + 1 and history >= 1


def decode_clock_due(decodes: Any, interval: Any) -> Any:
    """Whether a decode whose request ran ``decodes`` decodes before it frees under ``decodes``: ``d % e == 1``."""
    return fmod(decodes, interval) == 1


def forward_clock_due(seen: Any, decodes: Any, interval: Any) -> Any:
    """Whether a decode frees under ``forwards``: the number of its request's previous forward, ``seen``,
    is a multiple of ``e`` and the request ran a decode before (``decodes >= 1``)."""
    return ite(decodes >= 1, fmod(seen, interval) == 0, False)


def decode_clock_floor(t: Any, window: Any, sink_blocks: Any, in_flight: Any, interval: Any) -> Any:
    """The most blocks an SWA life cycle holds at a decode past its request's first under the ``decodes``
    clock at ``e >= 2``: it last freed at most ``e - 1`` decodes before, so it keeps ``e - 1`` tokens more
    than the in-flight window: :func:`~.floors.in_flight_floor` at ``k + e - 1``."""
    return in_flight_floor(t, window, sink_blocks, in_flight + interval - 1)


def window_interval(t: Any, window: Any) -> Any:
    """The interval made from a window (``window_interval``): ``t * max(1, floor((W - 1) / t))``."""
    return t * imax(1, fdiv(window - 1, t))


@attrs.define
class _Clock:
    decodes: int = 0  # decodes since the request was last resumed
    seen: int = 0  # the manager's forward number of its last step


class ClockPolicy(ReleasePolicy):
    """The release policy with an eviction clock (``tokens``, the default: the policy's behaviour)."""

    def __init__(self, config, release_order=None):
        super().__init__(config, release_order)
        self.forwards = 0  # resizes that succeeded, all requests
        self._clocks: dict[str, _Clock] = {}
        self._step: tuple[str, bool, bool] | None = None  # (request, a decode, a forward) of the resize being made

    def _clocked(self) -> bool:
        return self.semantics.eviction_clock is not EvictionClock.TOKENS

    def interval_of(self, life_cycle: int) -> int:
        """The eviction interval of a windowed life cycle: ``eviction_interval`` or its window's."""
        if self.semantics.window_interval:
            return window_interval(self.block_sizes[life_cycle], self.layout.life_cycles[life_cycle].window)
        return self.eviction_interval

    def clock_due(self, decode: bool, clock: Any, interval: int) -> bool:
        """Hook: whether a step slides its windows (an extend always; a decode when its clock is due)."""
        if not decode:
            return True
        if self.semantics.eviction_clock is EvictionClock.DECODES:
            return bool(decode_clock_due(clock.decodes, interval))
        return bool(forward_clock_due(clock.seen, clock.decodes, interval))

    def resize(self, request_id, capacity, history=None):
        if not self._clocked():
            return super().resize(request_id, capacity, history)
        record = self._requests.get(request_id) if type(request_id) is str else None
        step_history = history if history is not None or record is None else record.history
        forward = record is not None and type(capacity) is int and capacity > record.capacity
        self._step = (request_id, is_decode(capacity, step_history), forward)
        try:
            outcome = super().resize(request_id, capacity, history)
        finally:
            step, self._step = self._step, None
        if outcome and forward:
            clock = self._clocks.setdefault(request_id, _Clock())
            self.forwards += 1
            clock.seen = self.forwards
            clock.decodes += step[1]
        return outcome

    def suspend(self, request_id):
        super().suspend(request_id)
        self._clocks.pop(request_id, None)  # a resumed request counts its decodes from 0

    def close(self, request_id):
        super().close(request_id)
        self._clocks.pop(request_id, None)

    def catch_up(self, record: RequestRecord) -> None:
        """A step that is due frees what is stale at the current history first (and that stands when its
        allocation is refused), even where an earlier step at that history, not due, freed nothing."""
        if self._clocked() and record.released_to >= record.history:
            kept = [on for on, lc in zip(record.evicted_on, self.layout.life_cycles) if lc.window is not None]
            if kept and min(kept) < record.history:
                record.released_to = min(kept)  # what its windows freed on, below the history
        super().catch_up(record)

    def skips_unchanged_steps(self) -> bool:
        # what a step frees depends on its clock, not on the history alone: plan every step
        return not self._clocked() and super().skips_unchanged_steps()

    def release_points(self, record: RequestRecord, history: int) -> list[int]:
        """Under a clock a windowed life cycle whose decode is not due keeps the point it last freed on."""
        if not self._clocked():
            return super().release_points(record, history)
        step = self._step
        mine = step is not None and step[0] == record.request_id
        decode, forward = mine and step[1], not mine or step[2]
        clock = self._clocks.get(record.request_id, _Clock())
        points = []
        for lc_index, lc in enumerate(self.layout.life_cycles):
            kept = record.evicted_on[lc_index]
            if lc.window is None or kept >= history or (
                    forward and self.clock_due(decode, clock, self.interval_of(lc_index))):
                points.append(history)
            else:
                points.append(kept)
        return points

    def released_on(self, record: RequestRecord, life_cycle: int) -> int:
        return record.evicted_on[life_cycle] if self._clocked() else super().released_on(record, life_cycle)
