"""Driving two backends in lockstep: run each step on both, then compare results and observations.

The state machine and replay both use :class:`Lockstep`, so a saved trace replays exactly as it was
found. Besides comparing, it checks the liveness the upstream fix promises: with every pool group at
or above its (fixed-rule) minimum, a lone request (the only one holding slots: a request suspended
under ``suspend=keep`` still holds them) never runs out of slots on a decode step, i.e. a resize to
``capacity = history + 1`` (full attention: while that capacity fits the full attention share of the
minimum). The check applies to both sides; the reference failing it would be a bug in the spec itself.

Which minimum is read depends on the semantics, always through the reference's own floor functions
(:func:`~swafloor.reference.life_cycle_min_slots` via :func:`~swafloor.reference.build_layout`), never
restated here. With ``k`` tokens in flight it is ``in_flight_floor(k)`` (theorem
``in-flight-sufficient``). In the ``hold-until-return`` order a step that keeps its history is
covered by that same minimum (it makes no block stale), and a step that advances history by one,
holding what it makes stale, peaks at most at the 2-token step floor, which equals
``in_flight_floor(1)`` (theorem ``same-call-release-transient-exact`` and the lemmas of
``sync-floor-short-in-flight-exact``): with no tokens in flight
it is checked against the minimum of the same config with one token in flight; with tokens in flight
no theorem covers such a step, and it is not checked.

Request states and lengths are read from the reference side's observation after every step (they
follow its semantics: a recompute suspend resets history and capacity to 0); a side compared against
that shows no lengths has them tracked from the steps instead. The time each side spends (building,
operations, observations) is summed in ``backend_seconds`` and ``reference_seconds``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

import attrs

from swafloor.reference import (
    Config,
    SlotMap,
    Snapshot,
    SwafloorError,
    FloorRule,
    LifeCycleKind,
    ReleaseOrder,
    SuspendMode,
    build_layout,
    full_attention_max_capacity,
    life_cycle_min_slots,
)

from .backends import UnknownBackend
from .compare import (
    COMMIT, CREATE, RESIZE, RESUME, SUSPEND, Divergence, Result, compare_parts, compare_results, lengths_of, parts_of,
    run_step,
)
from .hits import LostHit, LostHitPolicy, TakingHit
from .identity import IdentityTracker, integrity, slots_of
from .protocol import Backend, Capabilities, Part, Unsupported
from .trace import Step

__all__ = ["Lockstep", "BuildFailed", "Liveness"]


def _cached(view: SlotMap) -> list:
    """The content a slot map's cached free slots keep, sorted (slot ids dropped: a pool's own names)."""
    return sorted(key for per_group in view.cached for key in per_group.values())


#: swafloor's own code (the adapters among it): an exception raised in a frame of these files is ours.
_OURS = tuple(str(p) for p in (Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent / "reference",
                               Path(__file__).resolve().parent.parent / "swafloor"))


def raised_in_ours(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in swafloor's own code (an adapter): its innermost traceback frame."""
    tb = exc.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(_OURS)


def _in_an_import(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a module was being imported (a package failing to initialize)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        tb = tb.tb_next
    return isinstance(exc, ImportError)


def engine_exception(exc: Unsupported) -> BaseException | None:
    """The engine's own exception an adapter turned into ``exc`` (an :class:`Unsupported` raised while
    handling it), or None. An exception raised inside the engine's code (a frame outside swafloor's) is a
    failure of the engine on that input, never a missing piece; an import that fails (ImportError) or a
    lookup the adapter itself makes (its own frame: a signature, an attribute) stays Unsupported (as does
    any exception raised while a module imports: a package that cannot initialize here)."""
    inner = exc.__cause__ or exc.__context__
    while inner is not None:
        if isinstance(inner, Unsupported):
            return engine_exception(inner)
        if not _in_an_import(inner) and not raised_in_ours(inner):
            return inner
        inner = inner.__cause__ or inner.__context__
    return None


class BuildFailed(SwafloorError):
    """The reference side could not be built from the config (a harness or spec problem)."""


@attrs.frozen
class Liveness:
    """When a decode step of a lone request must succeed, for one config: a step that keeps its
    history (``applies``, ``max_capacity``) and one that advances it by one token (``advancing``,
    ``advancing_max_capacity``); see the module docstring for the floors read."""

    applies: bool  # every pool group has at least its fixed-rule minimum
    max_capacity: int | None  # the largest capacity covered (full attention share); None: any
    advancing: bool = False
    advancing_max_capacity: int | None = None
    any_advance: bool = False  # release-first: a step advancing history by any amount is covered

    @classmethod
    def of(cls, config: Config) -> "Liveness":
        layout = build_layout(config)
        applies, max_capacity = cls._floor(config, layout, config.semantics.in_flight_tokens)
        if config.semantics.release_order is not ReleaseOrder.HOLD_UNTIL_RETURN:
            return cls(applies, max_capacity, applies, max_capacity, any_advance=True)
        if config.semantics.in_flight_tokens == 0:
            advancing, advancing_max = cls._floor(config, layout, 1)
            return cls(applies, max_capacity, advancing, advancing_max)
        return cls(applies, max_capacity)

    @staticmethod
    def _floor(config: Config, layout, in_flight: int) -> tuple[bool, int | None]:
        """Whether the slots reach the fixed-rule minimum computed with ``in_flight`` tokens in
        flight, and the largest capacity a full attention share of it serves (None: any)."""
        semantics = attrs.evolve(config.semantics, in_flight_tokens=in_flight)
        fixed = build_layout(attrs.evolve(config, floor_rule=FloorRule.FIXED, slots=None, semantics=semantics))
        applies = all(s >= m for s, m in zip(layout.slots, fixed.min_slots))
        t = layout.tokens_per_block
        max_capacity = None
        for lc in fixed.life_cycles:
            if lc.kind is LifeCycleKind.FULL:  # each in its own block size; the smallest reach counts
                share = life_cycle_min_slots(lc, t, FloorRule.FIXED, fixed.life_cycles, in_flight)
                reach = full_attention_max_capacity(lc.block_size(t), share)
                max_capacity = reach if max_capacity is None else min(max_capacity, reach)
        return applies, max_capacity

    def covers(self, capacity: int, advance: int = 0) -> bool:
        """Whether a decode step to ``capacity`` that advances history by ``advance`` must succeed."""
        if advance == 0 or (advance > 0 and self.any_advance):
            return self.applies and (self.max_capacity is None or capacity <= self.max_capacity)
        if advance == 1:
            return self.advancing and (self.advancing_max_capacity is None or capacity <= self.advancing_max_capacity)
        return False


class Lockstep:
    """Two backends built from one config, stepped together. ``steps`` records what was applied."""

    def __init__(
        self,
        config: Config,
        backend_factory: Callable[[Config], Backend],
        reference_factory: Callable[[Config], Backend],
        caps: Capabilities,
    ):
        self.config = config
        self.caps = caps
        self.steps: list[Step] = []
        self.states: dict[str, str] = {}  # request id -> state, tracked from the reference's results
        self.lengths: dict[str, tuple[int, int]] = {}  # request id -> (capacity, history), likewise
        self.retired: set[str] = set()  # closed on both sides after an accepted outcome slack
        self.holding: set[str] = set()  # requests that hold slots on the reference side: active, or kept
        self.keeps = config.semantics.suspend is SuspendMode.KEEP
        self.liveness = Liveness.of(config)
        self.slack_events = 0
        # A first resume's hit compared one-sided (Capabilities.lost_hit_rules; None: compared exactly)
        # and the lost hits found, in tokens.
        self.lost_hit_policy = LostHitPolicy.of(caps)
        self.lost_hits: list[LostHit] = []
        self.backend_seconds = 0.0
        self.reference_seconds = 0.0
        layout = build_layout(config)
        self.identity = IdentityTracker(tuple(layout.pool_group_of)) if caps.mode(Part.SLOTS) is not None else None
        self.identity_totals = tuple(layout.slots)
        started = time.perf_counter()
        try:
            self.reference = reference_factory(config)
        except UnknownBackend:  # a spec naming no backend factory: a clean error, not a build failure
            raise
        except Exception as exc:  # noqa: BLE001
            raise BuildFailed(f"the reference side failed to build: {type(exc).__name__}: {exc}") from exc
        self.reference_seconds += time.perf_counter() - started
        self.build_divergence: Divergence | None = None
        started = time.perf_counter()
        try:
            self.backend = backend_factory(config)
        except Exception as exc:  # noqa: BLE001 - Unsupported is re-raised for callers that filter
            self.backend_seconds += time.perf_counter() - started
            if isinstance(exc, UnknownBackend) or (isinstance(exc, Unsupported) and engine_exception(exc) is None):
                raise
            inner = engine_exception(exc) if isinstance(exc, Unsupported) else None
            if inner is not None:  # the adapter called the engine's own exception Unsupported: it is not
                exc = inner
            self.backend = None  # type: ignore[assignment]
            self.build_divergence = Divergence(
                -1, None, "build", "built", f"{type(exc).__name__}: {exc}", "exact", "the backend failed to build"
            )
            return
        self.backend_seconds += time.perf_counter() - started
        self.build_divergence = self._compare_observations(-1, None)

    def dispose(self) -> str | None:
        """Let the backend release what it holds when the run ends (its optional ``dispose()``: an
        engine that must close its requests before it is shut down, e.g. TensorRT-LLM's manager,
        whose destructor otherwise ends the process). Returns what ``dispose()`` raised, as
        ``"Type: message"``, else None: after a divergence the engine's state may be broken, and a
        failure to shut it down must not hide the divergence already found; the caller decides.
        Safe to call twice."""
        backend = getattr(self, "backend", None)
        dispose = getattr(backend, "dispose", None)
        if not callable(dispose):
            return None
        try:
            dispose()
        except Exception as exc:  # noqa: BLE001 - returned to the caller, which reports it
            return f"{type(exc).__name__}: {exc}"
        return None

    def _resume_taking_the_backends_hit(self, index: int, step: Step) -> tuple[Divergence | None, Result, Result]:
        """A resume under the lost-hit policy (:mod:`swafloor.fuzz.hits`): the backend first; where it
        was a first resume that looked the cache up, the hit it took (``hit_tokens``) is judged against
        the reference's (:meth:`~swafloor.fuzz.hits.LostHitPolicy.judge`): a divergence, a lost hit
        (recorded; the reference then takes that same hit), or the longest (the reference resumes as
        it would). Returns (divergence or None, the reference's result, the backend's)."""
        rid = step.request
        started = time.perf_counter()
        expected = self.lost_hit_policy.expect(self.reference, rid)
        middle = time.perf_counter()
        got_result = run_step(self.backend, step)
        taken = None
        if expected is not None and got_result.kind in ("ok", "out-of-slots"):
            try:
                taken = self.backend.hit_tokens(rid)
            except Exception as exc:  # noqa: BLE001 - reading the backend is observing it
                got_result = Result("crash", message=f"hit_tokens: {type(exc).__name__}: {exc}")
        after = time.perf_counter()
        self.backend_seconds += after - middle
        found = lost = None
        if taken is not None:
            found, lost = self.lost_hit_policy.judge(index, step, self.reference, expected, taken)
        if lost is not None:
            self.lost_hits.append(lost)
        ref_result = run_step(TakingHit(self.reference, taken) if lost is not None else self.reference, step)
        self.reference_seconds += (middle - started) + (time.perf_counter() - after)
        return found, ref_result, got_result

    def _compare_observations(self, index: int, step: Step | None) -> Divergence | None:
        started = time.perf_counter()
        try:
            got = self.backend.observe()
        except Exception as exc:  # noqa: BLE001
            return Divergence(index, step, "observe", "a snapshot", f"{type(exc).__name__}: {exc}", "exact",
                              "observe() raised")
        finally:
            middle = time.perf_counter()
            self.backend_seconds += middle - started
        try:
            ref = self.reference.observe()
        except Exception as exc:  # noqa: BLE001 - a side compared against (a seeded bug of the spec) may break too
            return Divergence(index, step, "observe", f"{type(exc).__name__}: {exc}", "a snapshot", "exact",
                              "observe() of the side compared against raised")
        finally:
            self.reference_seconds += time.perf_counter() - middle
        self._read_lengths(lengths_of(ref))
        if self.retired or not isinstance(got, Snapshot) or got != ref:  # equal snapshots satisfy every mode
            found = compare_parts(index, step, parts_of(ref), parts_of(got), self.caps, frozenset(self.retired))
            if found is not None:
                return found
        if self.config.semantics.cache_freed and isinstance(ref, Snapshot) and isinstance(got, Snapshot):
            if ref.cached != got.cached:  # which content the freed blocks keep: the eviction order
                return Divergence(index, step, "cached", list(ref.cached), list(got.cached), "exact",
                                  "the cached free blocks differ (what was evicted, or what a free kept)")
        if self.identity is not None:
            return self._compare_identity(index, step, ref, got)
        return None

    def _compare_identity(self, index: int, step: Step | None, ref: object, got: object) -> Divergence | None:
        """Physical identity (the ``slots`` part): integrity on each side's own structures, then the two
        slot maps up to a renaming of slot ids."""
        started = time.perf_counter()
        try:
            got_slots = slots_of(self.backend, got)
        except Exception as exc:  # noqa: BLE001 - reading the backend's structures is part of observing it
            return Divergence(index, step, Part.SLOTS.value, "a slot map", f"{type(exc).__name__}: {exc}", "exact",
                              "reading the backend's slot map raised")
        finally:
            middle = time.perf_counter()
            self.backend_seconds += middle - started
        ref_slots = slots_of(self.reference, ref)
        self.reference_seconds += time.perf_counter() - middle
        if got_slots is None:
            return Divergence(index, step, Part.SLOTS.value, "a slot map", None, "exact", "declared but not shown")
        totals, group_of = self.identity_totals, self.identity.group_of
        for side, view, shown in (("reference", ref_slots, ref), ("backend", got_slots, got)):
            if view is None:
                continue
            # Integrity is each side's own consistency: its held and free slots against the pool totals
            # it shows (else the layout's). The two sides' totals are compared as pool_totals, where
            # declared, never here: a pool of another size is not a slot lost.
            own = parts_of(shown).get(Part.POOL_TOTALS) if isinstance(shown, (Snapshot, Mapping)) else None
            found = integrity(view, tuple(own) if own is not None else totals, group_of, side,
                              self.config.semantics.prefix_sharing)
            if found is not None:
                field, expected, seen, reason = found
                return Divergence(index, step, field, expected, seen, "invariant", reason)
        if ref_slots is None:  # the side compared against shows no slot ids: integrity alone
            return None
        if self.config.semantics.cache_freed and ref_slots.cached is not None and got_slots.cached is not None:
            ref_cached, got_cached = _cached(ref_slots), _cached(got_slots)
            if ref_cached != got_cached:  # which content the freed blocks keep: the eviction order
                return Divergence(index, step, "slots.cached", ref_cached, got_cached, "exact",
                                  "the cached free blocks differ (what was evicted, or what a free kept)")
        found = self.identity.compare(ref_slots, got_slots, frozenset(self.retired))
        if found is not None:
            field, expected, seen, reason = found
            return Divergence(index, step, field, expected, seen, "exact", reason)
        return None

    def _read_lengths(self, lengths: dict | None) -> None:
        """States and lengths as the reference side shows them (closed requests are not shown)."""
        if lengths is None:
            return
        for rid in self.states:
            if rid not in lengths:
                self.states[rid] = "closed"
        for rid, (state, capacity, history) in lengths.items():
            self.states[rid] = state
            self.lengths[rid] = (capacity, history)

    def _lone(self, request: str) -> bool:
        """Whether ``request`` is active and no other request holds slots."""
        return self.states.get(request) == "active" and all(
            state != "active" and (rid not in self.holding or state == "closed")
            for rid, state in self.states.items()
            if rid != request
        )

    def _track(self, step: Step, result: Result) -> None:
        if result.kind == "error":
            return
        op, rid = step.op, step.request
        if op is RESIZE:
            if result.ok:
                self.lengths[rid] = (step.capacity, step.history)
        elif op is COMMIT:
            capacity, history = self.lengths[rid]
            self.lengths[rid] = (capacity, history + step.tokens)
        elif op is CREATE:
            self.states[rid] = "suspended"
            self.lengths[rid] = (step.reused_history, step.reused_history)
        elif op is RESUME:
            if result.ok:
                self.states[rid] = "active"
                self.holding.add(rid)
        elif op is SUSPEND:
            self.states[rid] = "suspended"
            if not self.keeps:
                self.holding.discard(rid)
        else:
            self.states[rid] = "closed"
            self.holding.discard(rid)

    def apply(self, step: Step) -> tuple[Divergence | None, Result]:
        """Run ``step`` on both sides; returns the first divergence (or None) and the reference's result."""
        if self.build_divergence is not None:
            return self.build_divergence, Result("crash", message="not built")
        index = len(self.steps)
        self.steps.append(step)
        decode = (
            step.op is RESIZE
            and step.capacity == step.history + 1
            and self._lone(step.request)
            and self.liveness.covers(step.capacity, step.history - self.lengths[step.request][1])
        )
        if step.op is RESUME and self.lost_hit_policy is not None:
            found, ref_result, got_result = self._resume_taking_the_backends_hit(index, step)
            if found is not None:
                return found, ref_result
        else:
            started = time.perf_counter()
            ref_result = run_step(self.reference, step)
            middle = time.perf_counter()
            got_result = run_step(self.backend, step)
            self.reference_seconds += middle - started
            self.backend_seconds += time.perf_counter() - middle
        divergence, slack = compare_results(index, step, ref_result, got_result, self.caps)
        if divergence is not None:
            return divergence, ref_result
        if decode:
            for side, result in (("reference", ref_result), ("backend", got_result)):
                if result.kind == "out-of-slots":
                    return Divergence(
                        index, step, "liveness", ref_result, got_result, "invariant",
                        f"the {side} failed a decode step of a lone request although every pool group has "
                        "at least its minimum slots",
                    ), ref_result
        self._track(step, ref_result)
        if slack:
            self.slack_events += 1
            self.retired.add(step.request)
            closed = [run_step(side, Step.close(step.request)) for side in (self.reference, self.backend)]
            self.states[step.request] = "closed"
            if any(c.kind in ("check", "crash") for c in closed):  # the retiring close is an operation too
                found, _ = compare_results(index, step, closed[0], closed[1], self.caps)
                if found is not None:
                    return attrs.evolve(found, reason=f"closing the retired request: {found.reason}"), ref_result
        return self._compare_observations(index, step), ref_result
