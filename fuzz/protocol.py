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

from swafloor.reference import (
    BlockTable, Config, LifeCycleKind, Outcome, RequestState, Semantics, SlotMap, Snapshot, SwafloorError,
)
from swafloor.reference.show import bounded
from swafloor.reference.cache_hit import LOST_HIT_RULES
from swafloor.reference.semantics import options as semantics_options

__all__ = [
    "slots_of",
    "EventOrder",
    "as_table",
    "held_blocks",
    "Operation",
    "Part",
    "Comparison",
    "Capabilities",
    "Backend",
    "SharesPrefixes",
    "ShowsSlots",
    "PrefixCacheHits",
    "HitModel",
    "BackendFactory",
    "Unsupported",
    "BackendCheckFailed",
    "UnknownBackend",
    "Limits",
    "NO_LIMITS",
    "Declaration",
    "BackendRecord",
    "factory",
    "declaration_of",
    "capabilities_of",
    "parts_of",
    "state_value",
    "ALL_OPERATIONS",
    "ALL_PARTS",
    "EXACT_EVERYTHING",
    "EXACT_WITH_IDENTITY",
    "DEFAULT_PARTS",
    "ALL_SEMANTICS",
    "ALL_SEMANTICS_EVICTION",
    "ALL_SEMANTICS_LOAD",
    "ALL_SEMANTICS_EAGLE",
    "ALL_SEMANTICS_MIXED",
    "REFUSAL_KEEPS_STALE",
    "STALE_FREED_ON_GROWTH",
    "RADIX_TREE",
    "REFERENCE_CAPABILITIES",
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
    # Physical identity (a SlotMap): which slot each held block is in, the pool's free slots and its
    # reference counts, read from the backend's own structures. Checked for integrity after every step
    # and compared with the reference's up to a renaming of slot ids (see swafloor.fuzz.identity);
    # only EXACT. Shown by ``observe()`` or, for a backend that returns a Snapshot, by ``slots()``.
    SLOTS = "slots"


class Comparison(str, enum.Enum):
    """How a part of the backend is compared with the reference's.

    ``EXACT``: equal. ``AT_LEAST``: one-sided, the backend may exceed the reference: counts are ``>=``
    element-wise, a table holds at least the reference's blocks (and may be longer: an engine that
    never shrinks a table keeps its tail), and an outcome may be ok where the
    reference ran out of slots (never the other way round; the harness then closes that request on
    both sides so the two stay comparable). ``RETIRES`` (outcome only): the backend's outcome is its
    own, on pools of the reference's sizes, and may differ from the reference's either way; each
    difference retires the request as an ``AT_LEAST`` slack does (a hole, counted: above
    :data:`~swafloor.fuzz.retired.MAX_RETIRED_SHARE` the campaign fails), and what makes a refusal
    sound is the adapter's own exact accounting, checked after every operation. ``LENGTHS``,
    ``ERRORS`` and ``SHORTFALLS`` are EXACT only.
    """

    EXACT = "exact"
    AT_LEAST = "at-least"
    RETIRES = "retires"


ALL_OPERATIONS = frozenset(Operation)
ALL_PARTS = frozenset(Part)
_EXACT_ONLY = frozenset({Part.LENGTHS, Part.ERRORS, Part.SHORTFALLS, Part.SLOTS})
#: What a backend that declares nothing shows: every part but physical identity (slot ids), which a
#: backend must offer on purpose.
DEFAULT_PARTS = frozenset(Part) - {Part.SLOTS}


def _operations(value: Any) -> frozenset[Operation]:
    return frozenset(Operation(v) for v in value)


def _observations(value: Any) -> Mapping[Part, Comparison]:
    items = value.items() if isinstance(value, Mapping) else value
    return types.MappingProxyType({Part(k): Comparison(v) for k, v in items})


#: The key, in a mirror field's metadata, of the Semantics option it mirrors.
MIRROR_KEY = "swafloor.capabilities.mirrors"


def with_semantics_mirrors(semantics_class: type | None = None):
    """A class decorator, applied before ``attrs.frozen``: adds a bool field, False by default, for each
    option of ``semantics_class`` (default: the reference's ``Semantics``) declared ``drawn_apart``
    that the class and its bases do not have yet. A subclass of :class:`Capabilities` decorated with a
    class from ``reference.semantics.semantics_with`` gets the mirrors of its new options."""

    def add(cls: type) -> type:
        inherited = {f.name for base in cls.__mro__[1:] if attrs.has(base) for f in attrs.fields(base)}
        own = dict(cls.__dict__.get("__annotations__", {}))
        for o in semantics_options(semantics_class):
            if o.drawn_apart and o.name not in inherited and o.name not in own:
                own[o.name] = "bool"
                setattr(cls, o.name, attrs.field(default=False, metadata={MIRROR_KEY: o}))
        cls.__annotations__ = own
        return cls

    return add


def semantics_mirrors(capabilities_class: type) -> tuple:
    """The Semantics options (``reference.semantics.Option``) a Capabilities class mirrors, in order."""
    return tuple(f.metadata[MIRROR_KEY] for f in attrs.fields(capabilities_class) if MIRROR_KEY in f.metadata)


@attrs.frozen
@with_semantics_mirrors()
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
    flight, when stale blocks are freed, what suspend does, the first resume's copy slot, the release
    order); every generated config carries it, so the reference side is built with the same semantics.
    ``all_semantics``: the backend serves every ``Semantics`` a config names (the reference, the
    oracle); the generator then draws one per example instead of using ``semantics``.
    Mirrors: each ``Semantics`` option declared ``drawn_apart`` (``reference.semantics.option``) gets a
    bool field of its own name here (:func:`with_semantics_mirrors`), False by default: a backend
    serving every semantics has that option drawn only where it declares the mirror, a campaign of its
    own, so the plain oracle campaign's draws stay as they were. Today ``eviction_interval`` (SGLang's
    intervals above 1, and draft slots), ``prefix_sharing`` (requests created on another's committed
    prefix, ``create(..., share_with=...)``; for a backend of one semantics too) and ``eagle`` (with
    ``prefix_sharing``: the EAGLE hit rule and draft slots on every config, freed blocks cached, one hit
    length): :mod:`~.strategies` reads them.
    ``mixed_block_sizes``: attention layers may carry a block size of their own
    (``AttentionLayer.tokens_per_block``), drawn in the ``oracle-mixed`` campaign; with
    ``full_attention_block_multiples`` only full attention layers get one, the config's ``t`` times one
    of those multiples (``vllm-prefix-mixed``).
    ``needs_gpu``: informational; the factory itself raises if the GPU is missing. ``adapter_set``:
    parts whose values the adapter sets itself rather than reads from the backend (e.g. a capacity the
    engine keeps no number for): reports name them, and they are never compared. ``notes``: what else a
    report must say about how the backend is checked (e.g. a data plane running table-only).
    """

    operations: frozenset[Operation] = attrs.field(default=ALL_OPERATIONS, converter=_operations)
    observations: Mapping[Part, Comparison] = attrs.field(
        factory=lambda: {p: Comparison.EXACT for p in Part if p in DEFAULT_PARTS}, converter=_observations, hash=False
    )
    layer_kinds: frozenset[LifeCycleKind] = attrs.field(
        default=frozenset(LifeCycleKind), converter=lambda v: frozenset(LifeCycleKind(x) for x in v)
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
    adapter_set: frozenset[Part] = attrs.field(default=frozenset(), converter=lambda v: frozenset(Part(x) for x in v))
    notes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    all_semantics: bool = False
    min_window: int = 1  # the smallest window its configs may have
    # The block sizes its configs may have (empty: the generator's own list, strategies.TOKENS_PER_BLOCK): an
    # engine release that serves fewer (SGLang 0.5.7's SWA allocator: token slots only, a block of 1).
    tokens_per_block: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    # Every sliding-window layer of a config has one window (an engine that takes one per model, as
    # transformers does): the generator gives each SWA layer the first one's window (no draw added).
    one_window: bool = False
    mixed_block_sizes: bool = False  # attention layers with block sizes of their own (AttentionLayer.tokens_per_block)
    # With mixed_block_sizes: () draws any block size per attention layer; else SWA layers keep the
    # config's t and full attention layers get t times one of these (vLLM: full attention at 2t or 4t).
    full_attention_block_multiples: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    # A first resume's hit compared one-sided: the backend may take a valid hit shorter than the
    # reference's longest (a lost hit: the engine recomputes what it could have reused), read from its
    # ``hit_tokens(request_id)`` after the resume; the reference then takes that same hit
    # (``Manager.resume(..., hit_tokens=)``) and the campaign reports the lost hits apart, counted per
    # rule. Only a hit one of these named rules yields (``reference.cache_hit.LOST_HIT_RULES``, computed
    # by the reference's ``rule_hit``) is a lost hit; a longer hit, a shorter one that is not valid, or
    # a shorter valid one no declared rule yields is a divergence (field ``hit``). Needs the
    # common-prefix rule.
    lost_hit_rules: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def lost_hits(self) -> bool:
        """Whether a first resume's hit is compared one-sided (some lost-hit rule declared)."""
        return bool(self.lost_hit_rules)

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
        for part, mode in self.observations.items():
            if mode is Comparison.RETIRES and part is not Part.OUTCOME:
                raise ValueError(f"Capabilities.observations[{part.value}]: 'retires' is for the outcome only")
        if self.observations[Part.OUTCOME] is not Comparison.EXACT and Operation.CLOSE not in self.operations:
            mode = self.observations[Part.OUTCOME].value
            raise ValueError(f"Capabilities.observations[outcome]: {mode!r} needs 'close' (slack retires requests)")
        if Part.SHORTFALLS in self.observations and self.observations.get(Part.OUTCOME) is not Comparison.EXACT:
            raise ValueError("Capabilities.observations[shortfalls]: needs outcome compared exactly")
        if not self.layer_kinds - {LifeCycleKind.SSM}:
            raise ValueError("Capabilities.layer_kinds: needs an attention kind ('swa' or 'full')")
        if not isinstance(self.semantics, Semantics):
            raise ValueError(f"Capabilities.semantics: must be a Semantics, got {type(self.semantics).__name__}")
        both = self.adapter_set & set(self.observations)
        if both:
            names = sorted(p.value for p in both)
            raise ValueError(f"Capabilities.adapter_set: {names} are set by the adapter, so they cannot be observations")
        if self.commit_before_allocate and Operation.COMMIT not in self.operations:
            raise ValueError("Capabilities.commit_before_allocate: needs the 'commit' operation")
        if self.lost_hits and (self.all_semantics or self.semantics.hit_rule.value != "common-prefix"):
            raise ValueError("Capabilities.lost_hit_rules (lost_hits): needs one semantics with hit_rule common-prefix")
        unknown = [r for r in self.lost_hit_rules if r not in LOST_HIT_RULES]
        if unknown:
            raise ValueError(f"Capabilities.lost_hit_rules: {unknown} are not lost-hit rules {sorted(LOST_HIT_RULES)}")

    def supports(self, operation: Operation) -> bool:
        return operation in self.operations

    def mode(self, part: Part) -> Comparison | None:
        """How ``part`` is compared, or None when the backend does not show it."""
        return self.observations.get(part)

    def describe(self) -> str:
        ops = ",".join(o.value for o in Operation if o in self.operations)
        parts = ",".join(f"{p.value}={m.value}" for p, m in self.observations.items())
        kinds = ",".join(k.value for k in LifeCycleKind if k in self.layer_kinds)
        sem = self.semantics
        flags = [
            name
            for name, on in (
                ("one pool group", self.one_pool_group),
                ("one window", self.one_window),
                ("commit before allocate", self.commit_before_allocate),
                ("no capacity cuts", not self.capacity_cuts),
                ("no sinks", not self.sinks),
                ("no reused history", not self.reused_history),
                (f"lost hits reported apart ({', '.join(self.lost_hit_rules)})", self.lost_hits),
            )
            if on
        ]
        shown = [(o, getattr(sem, o.name)) for o in semantics_options(type(sem))]  # as its to_dict writes them
        semantics = "semantics [" + ", ".join(
            f"{o.name} {str(o.serialised(v)).lower() if o.is_flag else o.serialised(v)}"
            for o, v in shown if o.always_written or v != o.default) + "]"
        if self.all_semantics:
            drawn_too = [o.drawn_apart for o in semantics_mirrors(type(self)) if getattr(self, o.name)]
            drawn_too += ["mixed block sizes"] if self.mixed_block_sizes else []
            semantics = "semantics [any, drawn per example" + "".join(f"; {d}" for d in drawn_too) + "]"
        return f"operations [{ops}]; observations [{parts}]; layers [{kinds}]; {semantics}" + (
            f"; {', '.join(flags)}" if flags else ""
        ) + ("; needs a GPU" if self.needs_gpu else "") + (
            f"; set by the adapter, not compared [{','.join(p.value for p in Part if p in self.adapter_set)}]"
            if self.adapter_set else ""
        ) + "".join(f"; {note}" for note in self.notes)


EXACT_EVERYTHING = Capabilities()
#: Everything, compared exactly, under every semantics (the oracle: it keeps no slot ids).
ALL_SEMANTICS = Capabilities(all_semantics=True)
#: Every semantics and requests created on another's prefix: the oracle.
ALL_SEMANTICS_SHARING = Capabilities(all_semantics=True, prefix_sharing=True)
#: Every semantics, eviction intervals above 1 drawn too: the oracle.
ALL_SEMANTICS_EVICTION = Capabilities(all_semantics=True, eviction_interval=True)
#: Every semantics, with prefix sharing too, a first resume's load holding every loaded token drawn too:
#: the oracle.
ALL_SEMANTICS_LOAD = Capabilities(all_semantics=True, prefix_sharing=True, load_holds_prefix=True)
#: Every semantics with prefix sharing, the EAGLE hit rule and draft slots (no sinks: the EAGLE hit
#: rule has none): the oracle.
ALL_SEMANTICS_EAGLE = Capabilities(all_semantics=True, prefix_sharing=True, eagle=True, sinks=False,
                                   mixed_block_sizes=True)
#: Every semantics (prefix sharing and eviction intervals too) and a block size per life cycle: the oracle.
ALL_SEMANTICS_MIXED = Capabilities(all_semantics=True, prefix_sharing=True, eviction_interval=True,
                                   mixed_block_sizes=True)
#: LMDeploy's semantics (one token in flight, freed lazily, a refused resize keeping the blocks that left
#: the window: ``refused_keeps_stale``), each step committed before it allocates: the oracle.
REFUSAL_KEEPS_STALE = Capabilities(
    semantics=Semantics(in_flight_tokens=1, free_stale="at-allocate", refused_keeps_stale=True),
    commit_before_allocate=True,
)
#: LMDeploy's semantics where its decode schedule calls the block manager only for a sequence that needs a
#: new block (0.2.5 to 0.4.1, 0.12.0 on): ``refused_keeps_stale`` and ``stale_freed_on_growth``: the oracle.
STALE_FREED_ON_GROWTH = Capabilities(
    semantics=Semantics(in_flight_tokens=1, free_stale="at-allocate", refused_keeps_stale=True,
                        stale_freed_on_growth=True),
    commit_before_allocate=True,
)
#: SGLang's radix cache (freed lazily, a retraction recomputes, no first-resume copy, prefix sharing with
#: freed blocks cached) with its radix tree: the tree lock on a prompt's last window (``prompt_lock``) and
#: content findable only once published (``publish_on_release``): the oracle.
RADIX_TREE = Capabilities(
    semantics=Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, prefix_sharing=True,
                        cache_freed=True, prompt_lock=True, publish_on_release=True),
    prefix_sharing=True,
)
#: transformers' semantics (sliding windows kept as rings: ``window_ring``; freed lazily; a suspension
#: recomputing; no first-resume copy), no sinks, each step committed before it allocates: the oracle.
WINDOW_RING = Capabilities(
    semantics=Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, window_ring=True),
    commit_before_allocate=True, sinks=False,
)
#: Everything, exactly, physical identity included: the seeded bugs of the reference.
EXACT_WITH_IDENTITY = Capabilities(observations={p: Comparison.EXACT for p in Part})
#: The reference manager: everything, exactly, physical identity included, under every semantics.
REFERENCE_CAPABILITIES = Capabilities(
    observations={p: Comparison.EXACT for p in Part}, all_semantics=True, prefix_sharing=True, eviction_interval=True,
    mixed_block_sizes=True,
)


class Unsupported(SwafloorError):
    """Raised by a factory for a config it cannot serve; the harness then discards that example."""


class BackendCheckFailed(SwafloorError):
    """Raised by a backend whose own check failed after an operation did its work (the data plane's
    outputs through the block tables): reported as a divergence on ``field``, not as a crash."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@attrs.frozen
class EventOrder:
    """An engine's own order of a step's events, declared by its room for the data plane
    (``dataplane:NAME`` then runs :mod:`swafloor.fuzz.engines.dataplane.ordered`): a ``resize`` that
    allocates is the scheduler's *schedule* (its allocation and any hash registration happen there);
    the step's KV is written when it *executes*, which is when the request's history next advances
    (its output returned), or earlier when more than ``steps_in_flight`` steps are scheduled and not
    executed (the oldest first: steps execute in the order they were scheduled). ``close_drops``:
    whether a close of a request with a step in flight drops the step (it never executes) rather
    than executing it first; ``suspend_drops`` the same for a suspension (a preemption);
    ``first_step_drops``: whether a request's first step since it started (newly scheduled) can be
    dropped so too (else it executes before the close or suspension). ``why``: one
    line from the engine's own sources saying where that order comes from.

    The backend then also offers ``handed_out(request_id)`` (per life cycle, the block ids its
    scheduler handed the worker at the request's last schedule, None for a null entry; None when it
    scheduled nothing) and ``step_drafts(request_id)`` (the lookahead slots of that step)."""

    steps_in_flight: int = 1
    close_drops: bool = False
    suspend_drops: bool = True
    first_step_drops: bool = True
    why: str = ""


class UnknownBackend(SwafloorError, ValueError):
    """A backend name or ``MODULE:FACTORY`` could not be resolved. ``field``/``value`` name it."""

    def __init__(self, field: str, value: Any, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={bounded(value)}: {reason}")


@runtime_checkable
class Backend(Protocol):
    """A KV-cache manager driven by the harness. Request ids are strings.

    Operations that allocate return a :class:`~swafloor.reference.Outcome`: ok, or out of slots with a
    :class:`~swafloor.reference.Shortfall` per pool group that lacked slots (leaving the state as it
    was). Misuse raises :class:`~swafloor.reference.RequestError` naming the offending field. Any
    other exception is a divergence.

    Every method the harness calls on a backend is declared here or in one of the sub-protocols
    below, each called only where the backend's :class:`Capabilities` ask for it:
    :class:`SharesPrefixes` (``prefix_sharing``), :class:`ShowsSlots` (the ``slots`` part),
    :class:`PrefixCacheHits` (``lost_hit_rules``); the side compared against (the reference, the
    oracle) is a :class:`HitModel` too.
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


@runtime_checkable
class SharesPrefixes(Protocol):
    """A backend that creates a request on another's committed prefix (``Capabilities.prefix_sharing``):
    ``create`` takes ``share_with``, the request whose committed prefix the new one starts from. The
    harness passes it only on such a step (:attr:`swafloor.fuzz.trace.Step.share_with`)."""

    def create(self, request_id: Hashable, reused_history: int = 0, *, share_with: Hashable) -> None: ...


@runtime_checkable
class ShowsSlots(Protocol):
    """A backend whose ``observe()`` gives a Snapshot and which shows physical identity (the ``slots``
    part) apart: its slot map, or None when it keeps no slot ids (read by :func:`slots_of`)."""

    def slots(self) -> SlotMap | None: ...


@runtime_checkable
class PrefixCacheHits(Protocol):
    """A backend whose first resume's prefix-cache hit is compared one-sided
    (``Capabilities.lost_hit_rules``; :mod:`swafloor.fuzz.hits` holds the policy): after a first
    resume that looked the cache up, how many tokens it took as a hit."""

    def hit_tokens(self, request_id: Hashable) -> int: ...


@runtime_checkable
class HitModel(Protocol):
    """The side a :class:`PrefixCacheHits` backend is compared against (the reference's adapter): what
    hits a request's next first resume may take, and a resume that takes a given one (the backend's
    lost hit). ``longest_hit`` and ``rule_hit`` are None where the resume looks nothing up."""

    def longest_hit(self, request_id: Hashable) -> int | None: ...

    def hit_is_valid(self, request_id: Hashable, tokens: int) -> bool: ...

    def rule_hit(self, request_id: Hashable, rule: str) -> int | None: ...

    def resume(self, request_id: Hashable, *, hit_tokens: int) -> Outcome: ...


def state_value(value: Any) -> str:
    """A request state as the string a ``LENGTHS`` observation holds."""
    return value._value_ if isinstance(value, RequestState) else str(value)  # _value_: .value, without a descriptor


def as_table(value: Any) -> BlockTable | None:
    """A table as a :class:`~swafloor.reference.BlockTable`: itself, or converted from its dense form;
    None when it is neither (a sequence holding something other than its indices and None)."""
    if isinstance(value, BlockTable):
        return value
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        return None
    try:
        return BlockTable.from_dense(value)
    except (ValueError, TypeError):
        return None


def _normal_table(value: Any) -> Any:
    table = as_table(value)
    return table if table is not None else tuple(value)


def held_blocks(table: Any) -> set[int]:
    """The blocks a table (either form) shows holding a slot."""
    if isinstance(table, BlockTable):
        return set(table.blocks())
    return {b for b in table if b is not None}


def parts_of(observation: Snapshot | Mapping[Part, Any]) -> dict[Part, Any]:
    """Normalize an observation to ``{part: value}``.

    Forms: ``POOL_TOTALS``/``POOL_USED``: a tuple of ints per pool group; ``LENGTHS``: ``{request id:
    (state, capacity, history)}`` with the state's string value; ``TABLES``: ``{request id: tuple of
    per-life-cycle tables}``, each a :class:`~swafloor.reference.BlockTable` (a backend may show one,
    or the dense sequence: block index where held, None where not, converted here; a dense sequence
    that is not of that form is kept as a tuple and compared entry by entry). A table is compared by
    the blocks it holds: how far it runs past its last held block says only how far the capacity
    reaches, which ``lengths`` shows (and an engine's table may end at its last block or run on).
    """
    if isinstance(observation, Snapshot):
        return {
            Part.POOL_TOTALS: tuple(p.total for p in observation.pools),
            Part.POOL_USED: tuple(p.total - p.free for p in observation.pools),
            Part.LENGTHS: {r.request_id: (state_value(r.state), r.capacity, r.history) for r in observation.requests},
            Part.TABLES: {r.request_id: r.tables for r in observation.requests},
        }
    parts: dict[Part, Any] = {}
    for key, value in observation.items():
        part = Part(key)
        if part in (Part.POOL_TOTALS, Part.POOL_USED):
            value = tuple(value)
        elif part is Part.LENGTHS:
            value = {rid: (state_value(v[0]), v[1], v[2]) for rid, v in value.items()}
        elif part is Part.TABLES:
            value = {rid: tuple(_normal_table(t) for t in v) for rid, v in value.items()}
        parts[part] = value
    return parts


#: A factory builds a backend from a config. It carries ``capabilities`` (see :func:`factory`); a
#: plain callable without them is taken to support everything, compared exactly.
BackendFactory = Callable[[Config], Backend]


@attrs.frozen
class Limits:
    """What a backend serves in bounded time and memory; None: no bound of its own. A token-level
    backend (the oracle) walks positions one by one, so a replay refuses traces beyond its limits."""

    max_window_tokens: int | None = None  # a window plus its sinks plus 3 blocks, in tokens
    max_capacity_tokens: int | None = None  # a request's capacity, in tokens


NO_LIMITS = Limits()


@attrs.frozen
class Declaration:
    """What :func:`factory` declares about a ``config -> Backend`` function: its capabilities, the
    name reports show (None: the name it was resolved from), a ``prepare()`` doing its slow imports
    once before a campaign, and its limits."""

    capabilities: Capabilities = EXACT_EVERYTHING
    label: str | None = None
    prepare: Callable[[], Any] | None = attrs.field(default=None, eq=False)
    limits: Limits = NO_LIMITS
    event_order: EventOrder | None = None


def factory(
    capabilities: Capabilities = EXACT_EVERYTHING,
    *,
    name: str | None = None,
    prepare: Callable[[], Any] | None = None,
    limits: Limits = NO_LIMITS,
    event_order: EventOrder | None = None,
):
    """Declare a ``config -> Backend`` function's capabilities, an optional display name (reports
    show it instead of the spec string), an optional ``prepare()`` that does the slow imports once,
    before a campaign, so their time is reported apart from the campaign's, and its :class:`Limits`::

        @factory(Capabilities(observations={"outcome": "exact", "pool_totals": "at-least"}))
        def make(config): return MyAdapter(config)
    """
    declared = Declaration(capabilities, name, prepare, limits, event_order)

    def decorate(fn: Callable[[Config], Any]) -> Callable[[Config], Any]:
        fn.capabilities = capabilities  # type: ignore[attr-defined]
        fn.declaration = declared  # type: ignore[attr-defined]
        return fn

    return decorate


def declaration_of(backend_factory: Any) -> Declaration:
    """What a factory declares: its :func:`factory` declaration; else, for a plain callable, its
    ``capabilities`` attribute (everything, exactly, when it has none)."""
    declared = getattr(backend_factory, "declaration", None)
    if isinstance(declared, Declaration):
        return declared
    caps = getattr(backend_factory, "capabilities", EXACT_EVERYTHING)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"{backend_factory!r}.capabilities must be a Capabilities, got {type(caps).__name__}")
    return Declaration(caps)


def capabilities_of(backend_factory: Any) -> Capabilities:
    """A factory's declared capabilities (everything, exactly, when it declares none)."""
    return declaration_of(backend_factory).capabilities


def _declared(field: str) -> Any:
    return attrs.Factory(lambda self: getattr(declaration_of(self.factory), field), takes_self=True)


@attrs.frozen
class BackendRecord:
    """A backend as the harness uses it, one record whatever it came from (a registered name, a
    ``dataplane:`` wrapper, ``MODULE:FACTORY``): the ``name`` it was resolved from, its ``factory``
    (builds it from a config), ``capabilities``, ``prepare()``, :class:`Limits`, the ``label`` reports
    show, what it ``needs`` installed beyond swafloor's dependencies and its ``status`` (how far it has
    been checked); a data-plane wrapper also names its ``device`` and the record it wraps (``inner``).
    Fields left out are the factory's :class:`Declaration`. The registry
    (:func:`swafloor.fuzz.backends.resolve`) is what makes them from a name."""

    name: str
    factory: Callable[[Config], Any] = attrs.field(eq=False)
    capabilities: Capabilities = attrs.field(default=_declared("capabilities"), eq=False)
    prepare: Callable[[], Any] | None = attrs.field(default=_declared("prepare"), eq=False)
    limits: Limits = _declared("limits")
    label: str | None = _declared("label")
    event_order: EventOrder | None = _declared("event_order")
    needs: str = ""
    status: str = ""
    device: str | None = None
    inner: BackendRecord | None = attrs.field(default=None, eq=False)

    @property
    def display_name(self) -> str:
        """The name reports show: the declared label, else the name it was resolved from."""
        return self.label if isinstance(self.label, str) and self.label else self.name

    def run_prepare(self) -> None:
        """Do the declared slow imports (``prepare()``), if any."""
        if callable(self.prepare):
            self.prepare()


def slots_of(backend: Any, observation: Any) -> SlotMap | None:
    """A backend's slot map (physical identity): the ``slots`` part of its observation, else what its
    ``slots()`` method returns (a backend whose ``observe()`` gives a Snapshot), else None."""
    if isinstance(observation, Mapping) and Part.SLOTS in observation:
        return observation[Part.SLOTS]
    method = getattr(backend, "slots", None)
    return method() if callable(method) else None
