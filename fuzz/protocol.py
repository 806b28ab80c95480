"""The backend protocol: what any KV-cache manager implements, in an adapter, to be fuzzed against
the reference.

A backend is built from a :class:`~swafloor.reference.Config` by a *factory* and driven through six
operations that mirror the reference manager's (:class:`Operation`): ``create``, ``resume``,
``resize`` (capacity and history, ``ok`` or out of slots), ``commit`` (advance history), ``suspend``
and ``close``. After every operation the harness calls ``observe()`` and compares the *parts* the
backend declares (:class:`Part`) with the reference's, each in its declared :class:`Comparison`
mode: ``EXACT``, or ``AT_LEAST`` (the backend's value may exceed the reference's, for accepted slack
such as slot counts rounded up to a granularity or a peer's looser sizing).

A factory carries :class:`Capabilities` so the harness knows, *before* building anything, which
operations, observations and configs to generate. A backend that needs a GPU or is slow to import
keeps its heavy imports inside the factory call; the registry (:mod:`swafloor.fuzz.backends`)
imports a backend's module only when it is named.

This module is light: it imports attrs and the reference's value types only.
"""

from __future__ import annotations

import enum
import types
from typing import Any, Callable, Hashable, Mapping, Protocol, runtime_checkable

import attrs

from swafloor.reference import Config, Outcome, Semantics, Snapshot, SwafloorError

__all__ = [
    "Operation",
    "Part",
    "Comparison",
    "LayerKind",
    "Capabilities",
    "Backend",
    "BackendFactory",
    "Unsupported",
    "factory",
    "capabilities_of",
    "name_of",
    "prepare",
    "ALL_OPERATIONS",
    "ALL_PARTS",
    "EXACT_EVERYTHING",
]


class Operation(str, enum.Enum):
    """The operations of the protocol (one method each on :class:`Backend`)."""

    CREATE = "create"  # create(request_id, reused_history) -> None; the request starts suspended
    RESUME = "resume"  # resume(request_id) -> Outcome
    RESIZE = "resize"  # resize(request_id, capacity, history) -> Outcome
    COMMIT = "commit"  # commit(request_id, tokens) -> None; advances history
    SUSPEND = "suspend"  # suspend(request_id) -> None; frees every slot
    CLOSE = "close"  # close(request_id) -> None; frees every slot, later operations raise


class Part(str, enum.Enum):
    """The observable parts of a backend's state and results.

    ``OUTCOME`` and ``SHORTFALLS`` are read from what ``resume``/``resize`` return; ``ERRORS`` from the
    :class:`~swafloor.reference.RequestError` a misused operation raises; the rest from ``observe()``.
    """

    OUTCOME = "outcome"  # ok or out of slots
    SHORTFALLS = "shortfalls"  # (pool group, needed, available) of each pool group that lacked slots
    ERRORS = "errors"  # misuse raises RequestError naming the same field; state left intact
    POOL_TOTALS = "pool_totals"  # slots per pool group
    POOL_USED = "pool_used"  # slots in use per pool group (total - free)
    LENGTHS = "lengths"  # per request: state, capacity, history
    TABLES = "tables"  # per request and life cycle: which blocks hold a slot (a BlockTable, or its dense form)


class Comparison(str, enum.Enum):
    """How a part of the backend is compared with the reference's.

    ``EXACT``: equal. ``AT_LEAST``: one-sided, the backend may exceed the reference: counts are ``>=``
    element-wise, a table holds at least the reference's blocks (and may be longer: an engine that
    never shrinks a table keeps its tail), and an outcome may be ok where the
    reference ran out of slots (never the other way round; the harness then closes that request on
    both sides so the two stay comparable). ``LENGTHS``, ``ERRORS`` and ``SHORTFALLS`` are EXACT only.
    """

    EXACT = "exact"
    AT_LEAST = "at-least"


class LayerKind(str, enum.Enum):
    SWA = "swa"
    FULL = "full"
    SSM = "ssm"


ALL_OPERATIONS = frozenset(Operation)
ALL_PARTS = frozenset(Part)
_EXACT_ONLY = frozenset({Part.LENGTHS, Part.ERRORS, Part.SHORTFALLS})


def _operations(value: Any) -> frozenset[Operation]:
    return frozenset(Operation(v) for v in value)


def _observations(value: Any) -> Mapping[Part, Comparison]:
    items = value.items() if isinstance(value, Mapping) else value
    return types.MappingProxyType({Part(k): Comparison(v) for k, v in items})


@attrs.frozen
class Capabilities:
    """What a backend supports; the harness generates nothing else.

    ``operations``: the operations it implements (``CREATE``, ``RESUME`` and ``RESIZE`` are required).
    ``observations``: each part it can show and how it is compared (``OUTCOME`` is required).
    ``layer_kinds``: the layer kinds its configs may contain. ``sinks``: whether SWA layers may have
    sink tokens. ``shared_pool_groups``: whether life cycles may share a pool group.
    ``one_pool_group``: every life cycle shares one pool group (as vLLM serves every KV-cache group
    from one block pool); the generator then makes only such configs. ``reused_history``: whether
    ``create`` accepts reused history. ``legacy_floor``: whether it accepts the pre-fix floor rule.

    How a step is driven: ``commit_before_allocate``: the engine advances history (the tokens just
    computed) before it asks for the next step's slots, and that commit stands when the allocation
    fails; the harness then never advances history inside ``resize``: a step is ``commit`` then
    ``resize(capacity, current history)``, on both sides. ``capacity_cuts``: whether capacity may be
    lowered (False: the engine never shrinks a block table, so the generator never lowers capacity).
    ``semantics``: the reference :class:`~swafloor.reference.Semantics` the backend claims (tokens in
    flight, when stale blocks are freed, what suspend does, the first resume's copy slot); every
    generated config carries it, so the reference side is built with the same semantics.
    ``needs_gpu``: informational; the factory itself raises if the GPU is missing.
    """

    operations: frozenset[Operation] = attrs.field(default=ALL_OPERATIONS, converter=_operations)
    observations: Mapping[Part, Comparison] = attrs.field(
        factory=lambda: {p: Comparison.EXACT for p in Part}, converter=_observations, hash=False
    )
    layer_kinds: frozenset[LayerKind] = attrs.field(
        default=frozenset(LayerKind), converter=lambda v: frozenset(LayerKind(x) for x in v)
    )
    sinks: bool = True
    shared_pool_groups: bool = True
    reused_history: bool = True
    legacy_floor: bool = True
    one_pool_group: bool = False
    commit_before_allocate: bool = False
    capacity_cuts: bool = True
    semantics: Semantics = attrs.field(factory=Semantics)
    needs_gpu: bool = False

    def __attrs_post_init__(self) -> None:
        required = {Operation.CREATE, Operation.RESUME, Operation.RESIZE}
        if not required <= self.operations:
            missing = sorted(o.value for o in required - self.operations)
            raise ValueError(f"Capabilities.operations: missing required operations {missing}")
        if Part.OUTCOME not in self.observations:
            raise ValueError("Capabilities.observations: 'outcome' is required (resume and resize return one)")
        for part, mode in self.observations.items():
            if part in _EXACT_ONLY and mode is not Comparison.EXACT:
                raise ValueError(f"Capabilities.observations[{part.value}]: only 'exact' is allowed, got {mode.value!r}")
        if self.observations[Part.OUTCOME] is Comparison.AT_LEAST and Operation.CLOSE not in self.operations:
            raise ValueError("Capabilities.observations[outcome]: 'at-least' needs 'close' (slack retires requests)")
        if Part.SHORTFALLS in self.observations and self.observations.get(Part.OUTCOME) is not Comparison.EXACT:
            raise ValueError("Capabilities.observations[shortfalls]: needs outcome compared exactly")
        if not self.layer_kinds - {LayerKind.SSM}:
            raise ValueError("Capabilities.layer_kinds: needs an attention kind ('swa' or 'full')")
        if not isinstance(self.semantics, Semantics):
            raise ValueError(f"Capabilities.semantics: must be a Semantics, got {type(self.semantics).__name__}")
        if self.commit_before_allocate and Operation.COMMIT not in self.operations:
            raise ValueError("Capabilities.commit_before_allocate: needs the 'commit' operation")

    def supports(self, operation: Operation) -> bool:
        return operation in self.operations

    def mode(self, part: Part) -> Comparison | None:
        """How ``part`` is compared, or None when the backend does not show it."""
        return self.observations.get(part)

    def describe(self) -> str:
        ops = ",".join(o.value for o in Operation if o in self.operations)
        parts = ",".join(f"{p.value}={m.value}" for p, m in self.observations.items())
        kinds = ",".join(k.value for k in LayerKind if k in self.layer_kinds)
        sem = self.semantics
        flags = [
            name
            for name, on in (
                ("one pool group", self.one_pool_group),
                ("commit before allocate", self.commit_before_allocate),
                ("no capacity cuts", not self.capacity_cuts),
                ("no sinks", not self.sinks),
                ("no reused history", not self.reused_history),
            )
            if on
        ]
        semantics = (
            f"semantics [in-flight {sem.in_flight_tokens}, free {sem.free_stale.value}, suspend {sem.suspend.value}, "
            f"first-resume copy {'yes' if sem.first_resume_copy else 'no'}]"
        )
        return f"operations [{ops}]; observations [{parts}]; layers [{kinds}]; {semantics}" + (
            f"; {', '.join(flags)}" if flags else ""
        ) + ("; needs a GPU" if self.needs_gpu else "")


EXACT_EVERYTHING = Capabilities()


class Unsupported(SwafloorError):
    """Raised by a factory for a config it cannot serve; the harness then discards that example."""


@runtime_checkable
class Backend(Protocol):
    """A KV-cache manager driven by the harness. Request ids are strings.

    Operations that allocate return a :class:`~swafloor.reference.Outcome`: ok, or out of slots with a
    :class:`~swafloor.reference.Shortfall` per pool group that lacked slots (leaving the state as it
    was). Misuse raises :class:`~swafloor.reference.RequestError` naming the offending field. Any
    other exception is a divergence.
    """

    def create(self, request_id: Hashable, reused_history: int = 0) -> None: ...

    def resume(self, request_id: Hashable) -> Outcome: ...

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome: ...

    def commit(self, request_id: Hashable, tokens: int) -> None: ...

    def suspend(self, request_id: Hashable) -> None: ...

    def close(self, request_id: Hashable) -> None: ...

    def observe(self) -> Snapshot | Mapping[Part, Any]:
        """The reference's :class:`~swafloor.reference.Snapshot`, or a mapping holding only the
        declared parts, each in the form :func:`swafloor.fuzz.compare.parts_of` gives."""
        ...


#: A factory builds a backend from a config. It carries ``capabilities`` (see :func:`factory`); a
#: plain callable without them is taken to support everything, compared exactly.
BackendFactory = Callable[[Config], Backend]


def factory(
    capabilities: Capabilities = EXACT_EVERYTHING,
    *,
    name: str | None = None,
    prepare: Callable[[], Any] | None = None,
):
    """Decorate a ``config -> Backend`` function with its capabilities, an optional display name
    (reports show it instead of the spec string) and an optional ``prepare()`` that does the slow
    imports once, before a campaign, so their time is reported apart from the campaign's::

        @factory(Capabilities(observations={"outcome": "exact", "pool_totals": "at-least"}))
        def make(config): return MyAdapter(config)
    """

    def decorate(fn: Callable[[Config], Any]) -> Callable[[Config], Any]:
        fn.capabilities = capabilities  # type: ignore[attr-defined]
        if name is not None:
            fn.backend_name = name  # type: ignore[attr-defined]
        if prepare is not None:
            fn.prepare = prepare  # type: ignore[attr-defined]
        return fn

    return decorate


def name_of(backend_factory: Any, default: str) -> str:
    """The name a factory declared with :func:`factory` (``default``, the spec, when none)."""
    name = getattr(backend_factory, "backend_name", None)
    return name if isinstance(name, str) and name else default


def prepare(backend_factory: Any) -> None:
    """Run a factory's declared ``prepare()`` (its slow imports), if it has one."""
    hook = getattr(backend_factory, "prepare", None)
    if callable(hook):
        hook()


def capabilities_of(backend_factory: Any) -> Capabilities:
    """A factory's declared capabilities (everything, exactly, when it declares none)."""
    caps = getattr(backend_factory, "capabilities", EXACT_EVERYTHING)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"{backend_factory!r}.capabilities must be a Capabilities, got {type(caps).__name__}")
    return caps
