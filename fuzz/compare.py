"""Comparing a backend with the reference: step results and observed parts, per declared mode.

:func:`run_step` turns whatever an operation did (returned an outcome, raised a
:class:`~swafloor.reference.RequestError`, crashed) into a :class:`Result`. :func:`compare_results`
and :func:`compare_parts` return a :class:`Divergence` (the step, the field, both values) or None.
"""

from __future__ import annotations

import re

from typing import Any, Mapping

import attrs

from swafloor.reference import BlockTable, Outcome, RequestError, Snapshot, ranges_minus

# BackendCheckFailed and parts_of are the protocol's (a backend's adapter uses them); named here too.
from .protocol import (
    Backend, BackendCheckFailed, Capabilities, Comparison, Operation, Part, as_table, held_blocks, parts_of, state_value,
)
from .trace import Step

__all__ = [
    "BackendCheckFailed",
    "Result",
    "Divergence",
    "run_step",
    "parts_of",
    "lengths_of",
    "as_table",
    "held_blocks",
    "compare_results",
    "compare_parts",
    "jsonable",
]


@attrs.frozen
class Result:
    """What one operation did: ``ok``; ``out-of-slots`` with shortfalls ``(pool group, needed,
    available)``; ``error`` (a RequestError naming ``field``); ``crash`` (any other exception)."""

    kind: str
    shortfalls: tuple[tuple[int, int, int], ...] = ()
    field: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def describe(self) -> str:
        if self.kind == "out-of-slots":
            return "out of slots " + ", ".join(
                f"[pool group {g}: needed {n}, {a} free]" for g, n, a in self.shortfalls
            )
        if self.kind == "error":
            return f"RequestError on field {self.field!r} ({self.message})"
        if self.kind == "check":
            return f"its own check failed: {self.message}"
        if self.kind == "crash":
            return f"crashed: {self.message}"
        return "ok"


OK = Result("ok")


# The operations as module constants: on Python 3.11 reading an enum member off its class costs a
# descriptor call, and a campaign runs two steps per decode step on each side.
CREATE, RESUME, RESIZE, COMMIT, SUSPEND = (
    Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.COMMIT, Operation.SUSPEND
)


def run_step(backend: Backend, step: Step) -> Result:
    """Run one step on a backend and classify what happened."""
    op = step.op
    try:
        if op is RESIZE:
            value: Any = backend.resize(step.request, step.capacity, step.history)
        elif op is COMMIT:
            value = backend.commit(step.request, step.tokens)
        elif op is CREATE:
            if step.share_with is None:
                value = backend.create(step.request, step.reused_history)
            else:
                value = backend.create(step.request, step.reused_history, share_with=step.share_with)
        elif op is RESUME:
            value = backend.resume(step.request)
        elif op is SUSPEND:
            value = backend.suspend(step.request)
        else:
            value = backend.close(step.request)
    except RequestError as exc:
        return Result("error", field=exc.field, message=str(exc))
    except BackendCheckFailed as exc:
        return Result("check", field=exc.field, message=exc.message)
    except Exception as exc:  # noqa: BLE001 - any other exception is a finding
        return Result("crash", message=f"{type(exc).__name__}: {exc}")
    if op is RESIZE or op is RESUME:
        if not isinstance(value, Outcome):
            return Result("crash", message=f"{step.op.value} returned {value!r}, not an Outcome")
        if value.ok:
            return OK
        return Result(
            "out-of-slots", shortfalls=tuple((s.pool_group, s.needed, s.available) for s in value.shortfalls)
        )
    return OK


def lengths_of(observation: Snapshot | Mapping[Part, Any]) -> dict[str, Any] | None:
    """The ``LENGTHS`` part of an observation as :func:`parts_of` gives it (None: not shown), without
    normalizing the other parts (read after every step; the tables are long)."""
    if isinstance(observation, Snapshot):
        return {r.request_id: (state_value(r.state), r.capacity, r.history) for r in observation.requests}
    return parts_of(observation).get(Part.LENGTHS)


_DENSE_SHOWN = 4096  # the longest table a saved divergence shows entry by entry


def jsonable(value: Any) -> Any:
    """A JSON-ready copy (tuples become lists, enums their values, keys strings)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, BlockTable):  # its dense form when short (as traces always showed it), else ranges
        if value.length <= _DENSE_SHOWN:
            return list(value.dense())
        return {"length": value.length, "held": [list(r) for r in value.held]}
    if isinstance(value, Result):
        return {k: jsonable(v) for k, v in attrs.asdict(value, recurse=False).items() if v not in (None, ())}
    if hasattr(value, "value") and not isinstance(value, (int, str)):
        return value.value
    return value


@attrs.frozen
class Divergence:
    """Where a backend and the reference disagree.

    ``step_index`` is the 0-based index of the step after which it was seen (-1: right after building,
    before any step); ``field`` names what differs (e.g. ``outcome``, ``tables[r0][1][4]``,
    ``pool_totals[0]``, ``liveness``); ``reference`` and ``backend`` hold both sides' values.
    """

    step_index: int
    step: Step | None
    field: str
    reference: Any
    backend: Any
    mode: str
    reason: str

    def describe(self) -> str:
        where = "after building" if self.step is None else f"at step {self.step_index}: {self.step.describe()}"
        return (
            f"divergence {where}\n  field: {self.field} ({self.mode})\n"
            f"  reference: {_show(self.reference)}\n  backend:   {_show(self.backend)}\n  why: {self.reason}"
        )

    @property
    def class_key(self) -> str:
        """Its class: the part that differs and the operation it differed at (``tables@resize``,
        ``outcome@resume``; ``@build`` before any step). A campaign that reports every class it meets
        (:mod:`swafloor.fuzz.classes`) goes on past the examples of a class it already has."""
        part = re.split(r"[\[.]", self.field, maxsplit=1)[0]
        return f"{part}@{'build' if self.step is None else self.step.op.value}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_index": self.step_index,
            "step": None if self.step is None else self.step.to_dict(),
            "field": self.field,
            "reference": jsonable(self.reference),
            "backend": jsonable(self.backend),
            "mode": self.mode,
            "reason": self.reason,
        }


def _show(value: Any) -> str:
    return value.describe() if isinstance(value, Result) else repr(value)


def compare_results(
    index: int, step: Step, reference: Result, backend: Result, caps: Capabilities
) -> tuple[Divergence | None, bool]:
    """Compare what one step did on both sides. Returns ``(divergence, slack)``: ``slack`` is True when
    an ``AT_LEAST`` outcome let the backend succeed where the reference ran out of slots, or a
    ``RETIRES`` outcome differed from the reference's either way."""
    if reference is OK and backend is OK:  # the common case: both succeeded, nothing else to compare
        return None, False

    def diverge(field: str, mode: Comparison | str, reason: str) -> tuple[Divergence, bool]:
        mode_value = mode.value if isinstance(mode, Comparison) else mode
        return Divergence(index, step, field, reference, backend, mode_value, reason), False

    if reference.kind == "crash":
        return diverge("outcome", "exact", "the reference itself crashed")
    if backend.kind == "check":
        return diverge(backend.field, "invariant", "the backend's own check failed after the operation")
    if backend.kind == "crash":
        return diverge("outcome", "exact", "the backend raised an unexpected exception")
    if reference.kind == "error" or backend.kind == "error":
        if reference.kind != backend.kind:
            return diverge("errors", "exact", "one side rejected the operation as misuse, the other did not")
        if caps.mode(Part.ERRORS) is not None and reference.field != backend.field:
            return diverge("errors", "exact", "both rejected the operation but named different fields")
        return None, False
    outcome_mode = caps.mode(Part.OUTCOME) or Comparison.EXACT
    if reference.ok != backend.ok:
        if (outcome_mode is Comparison.AT_LEAST and backend.ok) or outcome_mode is Comparison.RETIRES:
            return None, True
        return diverge("outcome", outcome_mode, "ok on one side, out of slots on the other")
    if caps.mode(Part.SHORTFALLS) is not None and reference.shortfalls != backend.shortfalls:
        return diverge("shortfalls", "exact", "both ran out of slots but report different shortfalls")
    return None, False


def _first_difference(ref: Any, got: Any, path: str, at_least: bool) -> tuple[str, Any, Any, str] | None:
    """The first place where ``got`` differs from ``ref`` (or falls below it when ``at_least``)."""
    if ref == got:  # the common case, decided without walking the structure
        return None
    if isinstance(ref, dict) and isinstance(got, dict):
        for key in ref:
            if key not in got:
                return f"{path}[{key}]", ref[key], None, "the backend does not show this request"
        for key in got:
            if key not in ref:
                return f"{path}[{key}]", None, got[key], "the backend shows a request the reference lacks"
        for key in ref:
            found = _first_difference(ref[key], got[key], f"{path}[{key}]", at_least)
            if found:
                return found
        return None
    if path.count("[") == 2 and path.startswith(Part.TABLES.value):  # one life cycle's table
        ref_table, got_table = as_table(ref), as_table(got)
        if ref_table is not None and got_table is not None:
            return _table_difference(ref_table, got_table, path, at_least)
        ref = ref.dense() if isinstance(ref, BlockTable) else ref  # a table not of the dense form: entry by entry
        got = got.dense() if isinstance(got, BlockTable) else got
    if isinstance(ref, tuple) and isinstance(got, tuple):
        if at_least and path.startswith(Part.TABLES.value) and len(got) > len(ref) and path.count("[") == 2:
            # A block table longer than the reference's (an engine that never shrinks one): the
            # common part is compared; blocks past the reference's capacity are accepted slack.
            got = got[: len(ref)]
        if len(ref) != len(got):
            return path, ref, got, f"lengths differ ({len(ref)} vs {len(got)})"
        for i, (r, g) in enumerate(zip(ref, got)):
            found = _first_difference(r, g, f"{path}[{i}]", at_least)
            if found:
                return found
        return None
    if ref == got:
        return None
    if at_least:
        if isinstance(ref, int) and isinstance(got, int) and got >= ref:
            return None
        if ref is None and got is not None:  # a table entry: the backend holds a block the reference does not
            return None
        return path, ref, got, "the backend falls below the reference"
    return path, ref, got, "values differ"


def _table_difference(ref: BlockTable, got: BlockTable, path: str, at_least: bool) -> tuple[str, Any, Any, str] | None:
    """Two tables compared by the blocks they hold, in O(held ranges): the first block held on one side
    only (at least: held by the reference and not by the backend; blocks the backend holds besides,
    such as the tail of a table it never shrinks, are accepted slack). How far a table runs past its
    last held block is not compared (``lengths`` shows the capacity)."""
    if ref.held == got.held:
        return None
    # The first block held on one side only (at least: held by the reference, not by the backend).
    wanted = ranges_minus(ref.held, got.held)
    first = wanted[0][0] if wanted else None
    if not at_least:
        extra = ranges_minus(got.held, ref.held)
        if extra and (first is None or extra[0][0] < first):
            first = extra[0][0]
    if first is None:
        return None
    ref_value = first if ref.holds(first) else None
    got_value = first if got.holds(first) else None
    reason = "the backend falls below the reference" if at_least else "values differ"
    return f"{path}[{first}]", ref_value, got_value, reason


def compare_parts(
    index: int,
    step: Step | None,
    reference: Mapping[Part, Any],
    backend: Mapping[Part, Any],
    caps: Capabilities,
    skip_requests: frozenset = frozenset(),
) -> Divergence | None:
    """Compare each part the backend declares, in its mode. ``skip_requests`` are left out (requests
    retired after an accepted outcome slack)."""
    for part in (Part.POOL_TOTALS, Part.LENGTHS, Part.TABLES, Part.POOL_USED):
        mode = caps.mode(part)
        if mode is None:
            continue
        if part not in reference:  # the side compared against does not show it either
            continue
        if part not in backend:
            return Divergence(index, step, part.value, reference.get(part), None, mode.value, "declared but not shown")
        ref, got = reference[part], backend[part]
        if skip_requests and isinstance(ref, dict):
            ref = {k: v for k, v in ref.items() if k not in skip_requests}
            got = {k: v for k, v in got.items() if k not in skip_requests}
        found = _first_difference(ref, got, part.value, mode is Comparison.AT_LEAST)
        if found:
            field, ref_value, got_value, reason = found
            return Divergence(index, step, field, ref_value, got_value, mode.value, reason)
    return None
