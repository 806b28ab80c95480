"""Configuration: layers, tokens per block, pool groups and slots, validated, and the derived layout.

Layers with equal ``(window, sink blocks)`` share a life cycle; all SSM layers share one. Life cycles
are numbered in order of first appearance among the layers. Each life cycle maps to a pool group
(by default one pool group per life cycle); a pool group's minimum is the sum of its life cycles'
minimum slots under the chosen floor rule. Slots below that minimum either raise or are bumped to it.
"""

from __future__ import annotations

import enum
from typing import Any, Union

import attrs

from .errors import ConfigError
from .floors import FloorRule, life_cycle_min_slots
from .lifecycle import LifeCycle, LifeCycleKind, sink_blocks_for
from .semantics import FreeStale, HitRule, ReleaseOrder, Semantics, SuspendMode
from .validation import MAX_COUNT, enum_value, printable_key, require_int

__all__ = [
    "MAX_COUNT",
    "FreeStale",
    "SuspendMode",
    "ReleaseOrder",
    "HitRule",
    "Semantics",
    "AttentionLayer",
    "SsmLayer",
    "Layer",
    "BelowMinimum",
    "Config",
    "Layout",
    "build_layout",
]


_key = printable_key
_require_int = require_int


@attrs.frozen
class AttentionLayer:
    """An attention layer: full attention when ``window`` is None, else SWA over ``window`` tokens
    (sink tokens excluded) with ``sink_tokens`` sink tokens that are never released.
    ``tokens_per_block``: this layer's own block size (None: the config's ``tokens_per_block``); see
    :class:`Config` for what a block size per life cycle means."""

    window: int | None = None
    sink_tokens: int = 0
    tokens_per_block: int | None = None


@attrs.frozen
class SsmLayer:
    """A state-space layer: one state page per request."""


Layer = Union[AttentionLayer, SsmLayer]


class BelowMinimum(str, enum.Enum):
    """What to do with slots below a pool group's minimum."""

    RAISE = "raise"
    BUMP = "bump"  # as upstream does, silently, at construction


def _tuple_of(field: str):
    def convert(value: Any) -> tuple:
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise ConfigError(field, value, "must be a sequence")
        return tuple(value)

    return convert


def _enum_of(field: str, enum_type: type[enum.Enum]):
    def convert(value: Any) -> Any:
        return enum_value(field, enum_type, value)

    return convert


def _validate_layer(index: int, layer: Any) -> None:
    if isinstance(layer, SsmLayer):
        return
    if not isinstance(layer, AttentionLayer):
        raise ConfigError(f"layers[{index}]", layer, "must be an AttentionLayer or an SsmLayer")
    if layer.window is not None:
        _require_int(f"layers[{index}].window", layer.window, 1)
    _require_int(f"layers[{index}].sink_tokens", layer.sink_tokens, 0)
    if layer.tokens_per_block is not None:
        _require_int(f"layers[{index}].tokens_per_block", layer.tokens_per_block, 1)
    if layer.sink_tokens and layer.window is None:
        raise ConfigError(f"layers[{index}].sink_tokens", layer.sink_tokens, "sink tokens need a window")


def _semantics(value: Any) -> Semantics:
    if not isinstance(value, Semantics):
        raise ConfigError("semantics", value, "must be a Semantics")
    return value


@attrs.frozen
class Config:
    """Everything a manager is built from. Invalid values raise :class:`ConfigError` here.

    Block sizes: ``tokens_per_block`` is every life cycle's, except an attention layer's own
    ``AttentionLayer.tokens_per_block`` (vLLM's hybrid models may give full attention a larger block
    than the SWA layers). Layers with equal window, sinks and block size share a life cycle; each
    life cycle counts its blocks, stale and live ranges, floor and sink blocks in its own ``t``. A
    pool group may serve life cycles of different block sizes: a slot is one page, holding one block
    of whichever life cycle takes it (as vLLM serves every KV-cache group, whatever its block size,
    from one block pool of equal-byte pages), and its minimum is the sum of its life cycles' shares,
    each in its own ``t``. Full attention's share with sizes that differ is the blocks of its own
    ``t`` spanned when each SWA life cycle first holds its floor
    (:func:`~.floors.full_share_in_blocks`; with one size, the largest SWA floor as before). A
    cache hit (``HitRule.COMMON_PREFIX``) is cut to a multiple of the least common multiple of the
    attention life cycles' block sizes (:func:`~.cache_hit.alignment`). SSM layers have no block
    size of their own (one state page)."""

    tokens_per_block: int
    layers: tuple[Layer, ...] = attrs.field(converter=_tuple_of("layers"))
    pool_groups: tuple[int, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_tuple_of("pool_groups"))
    )
    slots: tuple[int, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_tuple_of("slots"))
    )
    floor_rule: FloorRule = attrs.field(default=FloorRule.FIXED, converter=_enum_of("floor_rule", FloorRule))
    below_minimum: BelowMinimum = attrs.field(
        default=BelowMinimum.RAISE, converter=_enum_of("below_minimum", BelowMinimum)
    )
    semantics: Semantics = attrs.field(factory=Semantics, validator=lambda _i, _a, v: _semantics(v))

    def __attrs_post_init__(self) -> None:
        _require_int("tokens_per_block", self.tokens_per_block, 1)
        if not self.layers:
            raise ConfigError("layers", self.layers, "needs at least one layer")
        for i, layer in enumerate(self.layers):
            _validate_layer(i, layer)
            if self.semantics.eagle and getattr(layer, "sink_tokens", 0):
                raise ConfigError(f"layers[{i}].sink_tokens", layer.sink_tokens,
                                  "sink tokens with semantics.eagle (the EAGLE hit rule has no sinks)")
            if self.semantics.window_ring and getattr(layer, "sink_tokens", 0):
                raise ConfigError(f"layers[{i}].sink_tokens", layer.sink_tokens,
                                  "sink tokens with semantics.window_ring (a ring keeps no sinks)")
        build_layout(self)  # validates pool groups and slots

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "tokens_per_block": self.tokens_per_block,
            "layers": [
                {"kind": "ssm"}
                if isinstance(layer, SsmLayer)
                else {"kind": "attention", "window": layer.window, "sink_tokens": layer.sink_tokens,
                      # written only when set: traces of one block size stay as they were
                      **({} if layer.tokens_per_block is None else {"tokens_per_block": layer.tokens_per_block})}
                for layer in self.layers
            ],
            "pool_groups": None if self.pool_groups is None else list(self.pool_groups),
            "slots": None if self.slots is None else list(self.slots),
            "floor_rule": self.floor_rule.value,
            "below_minimum": self.below_minimum.value,
            "semantics": self.semantics.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> "Config":
        """Build from :meth:`to_dict`'s form; malformed data raises :class:`ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError("config", data, "must be an object")
        known = {"tokens_per_block", "layers", "pool_groups", "slots", "floor_rule", "below_minimum", "semantics"}
        for key in data:
            if key not in known:
                raise ConfigError(f"config.{_key(key)}", data[key], "unknown field")
        if "tokens_per_block" not in data:
            raise ConfigError("config.tokens_per_block", None, "missing")
        raw_layers = data.get("layers")
        if not isinstance(raw_layers, list):
            raise ConfigError("config.layers", raw_layers, "must be a list")
        layers: list[Layer] = []
        for i, raw in enumerate(raw_layers):
            if not isinstance(raw, dict) or raw.get("kind") not in ("attention", "ssm"):
                raise ConfigError(f"config.layers[{i}]", raw, "must be an object with kind 'attention' or 'ssm'")
            extra = set(raw) - ({"kind"} if raw["kind"] == "ssm" else {"kind", "window", "sink_tokens", "tokens_per_block"})
            if extra:
                raise ConfigError(f"config.layers[{i}]", raw, f"unknown fields {sorted(map(_key, extra))[:5]}")
            if raw["kind"] == "ssm":
                layers.append(SsmLayer())
            else:
                layers.append(AttentionLayer(window=raw.get("window"), sink_tokens=raw.get("sink_tokens", 0),
                                             tokens_per_block=raw.get("tokens_per_block")))
        for key in ("pool_groups", "slots"):
            if data.get(key) is not None and not isinstance(data[key], list):
                raise ConfigError(f"config.{key}", data[key], "must be a list or null")
        for key in ("floor_rule", "below_minimum"):
            choices = [m.value for m in (FloorRule if key == "floor_rule" else BelowMinimum)]
            if key in data and data[key] not in choices:
                raise ConfigError(f"config.{key}", data[key], f"must be one of {choices}")
        return cls(
            tokens_per_block=data["tokens_per_block"],
            layers=layers,
            pool_groups=data.get("pool_groups"),
            slots=data.get("slots"),
            floor_rule=data.get("floor_rule", FloorRule.FIXED.value),
            below_minimum=data.get("below_minimum", BelowMinimum.RAISE.value),
            semantics=Semantics.from_dict(data["semantics"]) if "semantics" in data else Semantics(),
        )


@attrs.frozen
class Layout:
    """What a config resolves to: life cycles, their pool groups, minimum and actual slots."""

    tokens_per_block: int
    life_cycles: tuple[LifeCycle, ...]
    layer_life_cycle: tuple[int, ...]  # life cycle of each layer
    pool_group_of: tuple[int, ...]  # pool group of each life cycle
    min_slots: tuple[int, ...]  # per pool group, under the config's floor rule
    slots: tuple[int, ...]  # per pool group, after any bump
    bumped: tuple[int, ...]  # pool groups whose slots were raised to the minimum

    @property
    def num_pool_groups(self) -> int:
        return len(self.min_slots)

    @property
    def block_sizes(self) -> tuple[int, ...]:
        """Each life cycle's tokens per block (its own, else the config's)."""
        return tuple(lc.block_size(self.tokens_per_block) for lc in self.life_cycles)

    @property
    def mixed_block_sizes(self) -> bool:
        """Whether some life cycle has a block size of its own."""
        return any(lc.tokens_per_block is not None for lc in self.life_cycles)

    def life_cycles_of(self, pool_group: int) -> tuple[int, ...]:
        return tuple(i for i, g in enumerate(self.pool_group_of) if g == pool_group)


def _life_cycle_of(layer: Layer, t: int) -> LifeCycle:
    if isinstance(layer, SsmLayer):
        return LifeCycle(LifeCycleKind.SSM)
    own = None if layer.tokens_per_block in (None, t) else layer.tokens_per_block  # canonical: None is t
    if layer.window is None:
        return LifeCycle(LifeCycleKind.FULL, tokens_per_block=own)
    return LifeCycle(LifeCycleKind.SWA, layer.window, sink_blocks_for(layer.sink_tokens, own or t), own)


def build_layout(config: Config) -> Layout:
    """Resolve a config: life cycles, pool groups, minimum slots (per the floor rule), slots."""
    t = config.tokens_per_block
    index_of: dict[LifeCycle, int] = {}  # insertion-ordered: life cycles in order of first appearance
    layer_life_cycle: list[int] = []
    for layer in config.layers:
        layer_life_cycle.append(index_of.setdefault(_life_cycle_of(layer, t), len(index_of)))
    life_cycles = list(index_of)

    if config.pool_groups is None:
        pool_group_of = tuple(range(len(life_cycles)))
    else:
        pool_group_of = config.pool_groups
        if len(pool_group_of) != len(life_cycles):
            raise ConfigError(
                "pool_groups", pool_group_of, f"needs one pool group per life cycle ({len(life_cycles)})"
            )
        for i, g in enumerate(pool_group_of):
            _require_int(f"pool_groups[{i}]", g, 0)
        if sorted(set(pool_group_of)) != list(range(len(set(pool_group_of)))):
            raise ConfigError("pool_groups", pool_group_of, "pool groups must be numbered 0..G-1, each used")
    num_groups = max(pool_group_of) + 1

    min_slots = [0] * num_groups
    in_flight, lookahead = config.semantics.in_flight_tokens, config.semantics.lookahead_tokens
    interval = {"eviction_interval": config.semantics.eviction_interval}
    full_share: dict[int | None, int] = {}  # the same for every full-attention life cycle of one t: computed once
    for lc, g in zip(life_cycles, pool_group_of):
        if lc.kind is LifeCycleKind.FULL:
            if lc.tokens_per_block not in full_share:
                full_share[lc.tokens_per_block] = life_cycle_min_slots(
                    lc, t, config.floor_rule, life_cycles, in_flight, lookahead, **interval
                )
            min_slots[g] += full_share[lc.tokens_per_block]
        else:
            min_slots[g] += life_cycle_min_slots(lc, t, config.floor_rule, life_cycles, in_flight, lookahead, **interval,
                                                 prompt_lock=config.semantics.prompt_lock)

    if config.slots is None:
        slots, bumped = list(min_slots), []
    else:
        if len(config.slots) != num_groups:
            raise ConfigError("slots", config.slots, f"needs one slot count per pool group ({num_groups})")
        slots, bumped = [], []
        for g, (given, minimum) in enumerate(zip(config.slots, min_slots)):
            _require_int(f"slots[{g}]", given, 0)
            if given < minimum:
                if config.below_minimum is BelowMinimum.RAISE:
                    raise ConfigError(f"slots[{g}]", given, f"below the pool group's minimum of {minimum}")
                bumped.append(g)
                given = minimum
            slots.append(given)
    return Layout(
        tokens_per_block=t,
        life_cycles=tuple(life_cycles),
        layer_life_cycle=tuple(layer_life_cycle),
        pool_group_of=tuple(pool_group_of),
        min_slots=tuple(min_slots),
        slots=tuple(slots),
        bumped=tuple(bumped),
    )
