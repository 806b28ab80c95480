"""A swafloor config as TensorRT-LLM KVCacheManagerV2 describes it: pure data, no upstream import.

KVCacheManagerV2 groups layers into life cycles by ``(window, sink blocks, cache domain)`` (every SSM
layer in one), numbered in order of first appearance, as the reference does. It puts life cycles
whose slots have the same list of sizes into one pool group. So the mapping gives every layer of a
life cycle ``n`` layers two buffers (key, value) of ``slot_size / (2 n)`` bytes, and every life cycle
of a swafloor pool group the same slot size, distinct from any other group's: a life cycle's slot is
then one pool of ``slot_size`` bytes, and each layer uses ``1 / n`` of it (its scratch fraction).

:func:`layer_configs` builds upstream's layer objects from a ``_config`` module handed in (real or a
stand-in), so this module never imports TensorRT-LLM itself.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence

import attrs

from swafloor.reference import AttentionLayer, Config, ConfigError, SsmLayer, build_layout
from swafloor.reference.lifecycle import LifeCycleKind

__all__ = [
    "GPU_GRANULARITY",
    "BufferSpec",
    "LayerSpec",
    "TrtllmLayout",
    "to_trtllm",
    "layer_configs",
    "round_up",
]

#: KVCacheManagerV2 rounds every GPU pool up to this many bytes (for quotas below 1 GiB).
GPU_GRANULARITY = 2 << 20


def round_up(value: int, granularity: int) -> int:
    """``value`` rounded up to a multiple of ``granularity`` (> 0)."""
    return -(-value // granularity) * granularity


@attrs.frozen
class BufferSpec:
    """One buffer of a layer: its role (unique in the layer) and its size in bytes per block."""

    role: str
    size: int


@attrs.frozen
class LayerSpec:
    """One upstream layer: attention (``window`` None for full attention) or SSM."""

    layer_id: int
    kind: str  # "attention" or "ssm"
    window: int | None
    sink_tokens: int | None
    buffers: tuple[BufferSpec, ...]


@attrs.frozen
class TrtllmLayout:
    """What upstream should make of a config: life cycles per layer, pool groups, sizes.

    ``life_cycles``: per life cycle, ``("swa", W, S)``, ``("full", None, 0)`` or ``("ssm", None, 0)``
    (``S`` in blocks), in the reference's order (first appearance). ``pool_group_of``: swafloor's pool
    group of each life cycle; upstream numbers its pool groups its own way, so compare partitions
    (:meth:`pool_partition`). ``slot_sizes``: bytes of one slot, per pool group.
    ``scratch_fraction``: per life cycle, the share of a slot one layer uses (``1 / layers``).
    """

    tokens_per_block: int
    layers: tuple[LayerSpec, ...]
    life_cycle_of_layer: tuple[int, ...]
    life_cycles: tuple[tuple[str, int | None, int], ...]
    pool_group_of: tuple[int, ...]
    slot_sizes: tuple[int, ...]
    scratch_fraction: tuple[Fraction, ...]

    @property
    def has_ssm(self) -> bool:
        return any(lc[0] == "ssm" for lc in self.life_cycles)

    @property
    def num_pool_groups(self) -> int:
        return len(self.slot_sizes)

    def pool_partition(self) -> frozenset[frozenset[int]]:
        """The life cycles of each pool group, as a set of sets (independent of numbering)."""
        groups: dict[int, set[int]] = {}
        for lc, g in enumerate(self.pool_group_of):
            groups.setdefault(g, set()).add(lc)
        return frozenset(frozenset(s) for s in groups.values())

    def quota_bytes(self, slots: Sequence[int], granularity: int = GPU_GRANULARITY) -> int:
        """The GPU quota for ``slots`` slots per pool group: each pool rounded up to the granularity,
        so upstream's pools hold at least that many slots."""
        if len(slots) != self.num_pool_groups:
            raise ConfigError("slots", tuple(slots), f"needs one count per pool group ({self.num_pool_groups})")
        return sum(round_up(n * size, granularity) for n, size in zip(slots, self.slot_sizes))

    def byte_ratio(self, slots: Sequence[int]) -> tuple[float, ...]:
        """Each pool group's share of :meth:`quota_bytes` (upstream's ``initial_pool_ratio``)."""
        sizes = [round_up(n * size, GPU_GRANULARITY) for n, size in zip(slots, self.slot_sizes)]
        total = sum(sizes)
        return tuple(s / total for s in sizes)


def _key(kind: LifeCycleKind, window: int | None, sink_blocks: int) -> tuple[str, int | None, int]:
    return (kind.value, window, sink_blocks)


def to_trtllm(config: Config, unit_bytes: int = 1024) -> TrtllmLayout:
    """Map ``config`` (validated already) to TensorRT-LLM's description; ``unit_bytes`` scales sizes."""
    if not isinstance(unit_bytes, int) or isinstance(unit_bytes, bool) or unit_bytes < 1:
        raise ConfigError("unit_bytes", unit_bytes, "must be an integer >= 1")
    layout = build_layout(config)
    counts = [0] * len(layout.life_cycles)
    for lc in layout.layer_life_cycle:
        counts[lc] += 1
    # One slot size per pool group: a multiple of 2 * lcm(layer counts) so every layer's buffers are
    # whole bytes, strictly increasing so that no two groups share a slot size.
    slot_sizes: list[int] = []
    for g in range(layout.num_pool_groups):
        members = [counts[lc] for lc in layout.life_cycles_of(g)]
        step = 2 * math.lcm(*members) * unit_bytes
        previous = slot_sizes[-1] if slot_sizes else 0
        slot_sizes.append((previous // step + 1) * step)
    layers = []
    for layer_id, (layer, lc) in enumerate(zip(config.layers, layout.layer_life_cycle)):
        per_layer = slot_sizes[layout.pool_group_of[lc]] // counts[lc]
        if isinstance(layer, SsmLayer):
            layers.append(LayerSpec(layer_id, "ssm", None, None, (BufferSpec("state", per_layer),)))
        else:
            assert isinstance(layer, AttentionLayer)
            half = per_layer // 2
            layers.append(
                LayerSpec(
                    layer_id,
                    "attention",
                    layer.window,
                    layer.sink_tokens if layer.window is not None else None,
                    (BufferSpec("key", half), BufferSpec("value", half)),
                )
            )
    return TrtllmLayout(
        tokens_per_block=config.tokens_per_block,
        layers=tuple(layers),
        life_cycle_of_layer=layout.layer_life_cycle,
        life_cycles=tuple(_key(lc.kind, lc.window, lc.sink_blocks) for lc in layout.life_cycles),
        pool_group_of=layout.pool_group_of,
        slot_sizes=tuple(slot_sizes),
        scratch_fraction=tuple(Fraction(1, n) for n in counts),
    )


def layer_configs(layout: TrtllmLayout, config_module: Any) -> list[Any]:
    """Upstream's layer objects for ``layout``, built from ``config_module`` (its ``_config``):
    ``AttentionLayerConfig(layer_id, buffers, sliding_window_size, num_sink_tokens)``,
    ``SsmLayerConfig(layer_id, buffers)``, ``BufferConfig(role, size)``."""
    out = []
    for spec in layout.layers:
        buffers = [config_module.BufferConfig(role=b.role, size=b.size) for b in spec.buffers]
        if spec.kind == "ssm":
            out.append(config_module.SsmLayerConfig(layer_id=spec.layer_id, buffers=buffers))
        else:
            out.append(
                config_module.AttentionLayerConfig(
                    layer_id=spec.layer_id,
                    buffers=buffers,
                    sliding_window_size=spec.window,
                    num_sink_tokens=spec.sink_tokens,
                )
            )
    return out
