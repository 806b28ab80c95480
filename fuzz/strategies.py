"""Hypothesis strategies for configs: mixes of SWA (varied windows and sinks), full attention and SSM
layers, tokens per block in {1, 2, 3, 4, 8, 16, 32, 64, 128}, and tight pools.

Pools are sized at the minimum plus 0, 1 or 2 slots per pool group, in one of three ways so that a
backend with its own (wrong) minimum shows it: slots left to the minimum (``slots=None``), given
explicitly as the reference's minimum plus k, or given below the minimum with ``below_minimum='bump'``.
"""

from __future__ import annotations

import functools

import attrs
from hypothesis import strategies as st

from swafloor.reference import AttentionLayer, Config, LifeCycleKind, SsmLayer, build_layout

from .protocol import EXACT_EVERYTHING, Capabilities

__all__ = ["TOKENS_PER_BLOCK", "windows", "layers", "configs", "horizon", "has_swa"]

TOKENS_PER_BLOCK = (1, 2, 3, 4, 8, 16, 32, 64, 128)
MAX_LAYERS = 4


@functools.lru_cache(maxsize=None)
def windows(t: int) -> st.SearchStrategy[int]:
    """Windows around block boundaries (where off-by-one bugs live), small ones, and any up to 4t+4."""
    edges = sorted({w for k in (1, 2, 3) for w in (k * t - 1, k * t, k * t + 1, k * t + 2) if w >= 1})
    return st.one_of(st.integers(1, 6), st.sampled_from(edges), st.integers(1, 4 * t + 4))


@functools.lru_cache(maxsize=None)
def sink_tokens(t: int) -> st.SearchStrategy[int]:
    return st.one_of(st.just(0), st.just(0), st.integers(1, 2 * t + 1))


@functools.lru_cache(maxsize=None)
def layers(t: int, caps: Capabilities = EXACT_EVERYTHING) -> st.SearchStrategy:
    """One layer the capabilities allow; SWA, the subject, is weighted above the other kinds."""
    options = []
    if LifeCycleKind.SWA in caps.layer_kinds:
        sinks = sink_tokens(t) if caps.sinks else st.just(0)
        swa = st.builds(AttentionLayer, window=windows(t), sink_tokens=sinks)
        options += [swa, swa, swa]
    if LifeCycleKind.FULL in caps.layer_kinds:
        options.append(st.just(AttentionLayer(window=None)))
    if LifeCycleKind.SSM in caps.layer_kinds:
        options.append(st.just(SsmLayer()))
    return st.one_of(options)


@functools.lru_cache(maxsize=None)
def _per_group(low: int, high: int, groups: int) -> st.SearchStrategy:
    return st.lists(st.integers(low, high), min_size=groups, max_size=groups)


@st.composite
def configs(draw, caps: Capabilities = EXACT_EVERYTHING, tokens_per_block=TOKENS_PER_BLOCK):
    """A valid config the capabilities allow, with a tight pool."""
    t = draw(st.sampled_from(tokens_per_block))
    n = draw(st.integers(1, MAX_LAYERS))
    layer = layers(t, caps)
    chosen = [draw(layer) for _ in range(n)]
    if all(isinstance(layer, SsmLayer) for layer in chosen):
        attention = [k for k in (LifeCycleKind.SWA, LifeCycleKind.FULL) if k in caps.layer_kinds][0]
        chosen[0] = AttentionLayer(window=draw(windows(t)) if attention is LifeCycleKind.SWA else None)
    semantics = caps.semantics  # the reference side runs the semantics the backend claims
    base = Config(tokens_per_block=t, layers=chosen, semantics=semantics)
    life_cycles = len(build_layout(base).life_cycles)

    pool_groups = None
    if caps.one_pool_group:
        pool_groups = (0,) * life_cycles if life_cycles > 1 else None
    elif caps.shared_pool_groups and life_cycles > 1 and draw(st.booleans()):
        raw = draw(_per_group(0, life_cycles - 1, life_cycles))
        renumber: dict[int, int] = {}
        pool_groups = tuple(renumber.setdefault(g, len(renumber)) for g in raw)
    floor_rule = "fixed"
    if caps.legacy_floor and draw(st.integers(0, 9)) == 9:  # rarely; shrinks towards "fixed"
        floor_rule = "legacy"
    sized = Config(
        tokens_per_block=t, layers=chosen, pool_groups=pool_groups, floor_rule=floor_rule, semantics=semantics
    )
    minimum = build_layout(sized).min_slots

    how = draw(st.sampled_from(("minimum", "explicit", "bump")))
    if how == "minimum":
        return sized
    if how == "explicit":
        extra = draw(_per_group(0, 2, len(minimum)))
        slots = tuple(m + k for m, k in zip(minimum, extra))
        return attrs.evolve(sized, slots=slots)
    below = draw(_per_group(0, 3, len(minimum)))
    slots = tuple(max(0, m - 1 - k) for m, k in zip(minimum, below))
    return attrs.evolve(sized, slots=slots, below_minimum="bump")


def has_swa(config: Config) -> bool:
    """Whether a config has a sliding-window life cycle (the subject of every comparison)."""
    return any(isinstance(layer, AttentionLayer) and layer.window is not None for layer in config.layers)


def horizon(config: Config) -> int:
    """A history past which nothing new happens for any layer: sinks, the largest window (plus the
    tokens in flight) and two blocks (for reused-history draws)."""
    t = config.tokens_per_block
    reach = 0
    for layer in config.layers:
        if isinstance(layer, AttentionLayer) and layer.window is not None:
            reach = max(reach, layer.sink_tokens + t + layer.window + config.semantics.in_flight_tokens)
    return reach + 2 * t
