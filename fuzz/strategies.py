"""Hypothesis strategies for configs: mixes of SWA (varied windows and sinks), full attention and SSM
layers, tokens per block in {1, 2, 3, 4, 8, 16, 32, 64, 128}, and tight pools.

Pools are sized at the minimum plus 0, 1 or 2 slots per pool group, in one of three ways so that a
backend with its own (wrong) minimum shows it: slots left to the minimum (``slots=None``), given
explicitly as the reference's minimum plus k, or given below the minimum with ``below_minimum='bump'``.

A backend that serves every semantics (``Capabilities.all_semantics``) gets one drawn per example
(:func:`semantics`: every option drawn, its default first, and the default itself a third of the time;
prefix sharing and eviction intervals above 1 only where ``Capabilities.prefix_sharing`` and
``Capabilities.eviction_interval`` say so); any other backend gets the semantics it claims. A quarter of the configs are built from three or four distinct
life cycles (:func:`distinct_life_cycles`), and shared pool-group maps are drawn unrenumbered, so
non-monotone maps such as ``(1, 0, 1)`` are common.
"""

from __future__ import annotations

import functools

import attrs
from hypothesis import strategies as st

from swafloor.reference import (
    AttentionLayer, Config, FreeStale, HitRule, LifeCycleKind, ReleaseOrder, Semantics, SsmLayer, SuspendMode, build_layout,
)

from .protocol import EXACT_EVERYTHING, Capabilities

__all__ = [
    "TOKENS_PER_BLOCK", "windows", "layers", "semantics", "distinct_life_cycles", "configs", "horizon", "has_swa",
    "default_semantics", "block_sizes", "MIXED_TOKENS_PER_BLOCK",
]

TOKENS_PER_BLOCK = (1, 2, 3, 4, 8, 16, 32, 64, 128)
MAX_LAYERS = 4
#: Block sizes of a campaign with a block size per life cycle (``Capabilities.mixed_block_sizes``):
#: small, so that windows of a few blocks of the largest stay cheap for the oracle, with multiples
#: (vLLM's full attention at 2t or 4t) and coprime pairs (an lcm above both).
MIXED_TOKENS_PER_BLOCK = (1, 2, 3, 4, 8)


@functools.lru_cache(maxsize=None)
def windows(t: int, least: int = 1) -> st.SearchStrategy[int]:
    """Windows around block boundaries (where off-by-one bugs live), small ones, and any up to 4t+4;
    none below ``least`` (a backend's smallest window, ``Capabilities.min_window``)."""
    edges = sorted({w for k in (1, 2, 3) for w in (k * t - 1, k * t, k * t + 1, k * t + 2) if w >= least})
    return st.one_of(st.integers(least, max(least, 6)), st.sampled_from(edges), st.integers(least, 4 * t + 4 + least))


@functools.lru_cache(maxsize=None)
def sink_tokens(t: int) -> st.SearchStrategy[int]:
    return st.one_of(st.just(0), st.just(0), st.integers(1, 2 * t + 1))


@functools.lru_cache(maxsize=None)
def layers(t: int, caps: Capabilities = EXACT_EVERYTHING) -> st.SearchStrategy:
    """One layer the capabilities allow; SWA, the subject, is weighted above the other kinds."""
    options = []
    if LifeCycleKind.SWA in caps.layer_kinds:
        sinks = sink_tokens(t) if caps.sinks else st.just(0)
        swa = st.builds(AttentionLayer, window=windows(t, caps.min_window), sink_tokens=sinks)
        options += [swa, swa, swa]
    if LifeCycleKind.FULL in caps.layer_kinds:
        options.append(st.just(AttentionLayer(window=None)))
    if LifeCycleKind.SSM in caps.layer_kinds:
        options.append(st.just(SsmLayer()))
    return st.one_of(options)


#: Every semantics option, each drawn with its default (the spec's) first, so that an example
#: shrinks towards the default semantics and the default is what the zero of every choice gives.
_OPTIONS = st.builds(
    Semantics,
    in_flight_tokens=st.sampled_from((0, 0, 1, 2, 3)),
    free_stale=st.sampled_from(tuple(FreeStale)),
    suspend=st.sampled_from(tuple(SuspendMode)),
    first_resume_copy=st.sampled_from((True, False)),
    release_order=st.sampled_from(tuple(ReleaseOrder)),
)
#: What a backend serving every semantics gets: drawn options, and the default itself a third of the
#: time besides (about 30% of the configs of a campaign carry the default).
SEMANTICS = st.one_of(_OPTIONS, _OPTIONS, st.just(Semantics()))
#: What a backend that shares prefixes gets: every semantics, with prefix sharing on and, two times
#: in three, freed blocks cached (so a closed request's blocks still give hits), under either hit rule.
_SHARING = st.builds(
    lambda s, cache, rule, scheduled: attrs.evolve(
        s, prefix_sharing=True, cache_freed=cache, hit_rule=rule if cache else HitRule.PER_BLOCK,
        cache_scheduled=cache and scheduled),
    SEMANTICS, st.sampled_from((True, True, False)), st.sampled_from(tuple(HitRule)), st.booleans(),
)
#: ... and vLLM's free queue before 0.23.0 (``uncached_to_tail``) a third of the time where freed blocks
#: are cached, 0.23.0's (``release_uncached_to_tail``) another third: one draw of three values, so the
#: stream keeps the draws it had (the EAGLE draw below keeps the stream it had, which its seeded bugs'
#: relations were measured on).
SEMANTICS_SHARING = st.builds(
    lambda s, order: attrs.evolve(s, uncached_to_tail=s.cache_freed and order == "every free",
                                  release_uncached_to_tail=s.cache_freed and order == "a release"),
    _SHARING, st.sampled_from(("pool", "a release", "every free")))
#: SGLang's eviction interval, for a backend that declares it: every token (the default, first, so an
#: example shrinks towards it), a few tokens, and 9 (past a block of up to 8 tokens).
EVICTION_INTERVALS = st.sampled_from((1, 2, 3, 9))


#: Draft slots of speculative decoding (Semantics.lookahead_tokens), drawn in the same campaign: only
#: the minimum slots change, so it needs no campaign of its own.
LOOKAHEAD_TOKENS = st.sampled_from((0, 0, 1, 3))


def _with_interval(semantics_: st.SearchStrategy[Semantics]) -> st.SearchStrategy[Semantics]:
    return st.builds(lambda s, e, k: attrs.evolve(s, eviction_interval=e, lookahead_tokens=k), semantics_,
                     EVICTION_INTERVALS, LOOKAHEAD_TOKENS)


#: What a backend that declares EAGLE gets: every semantics with prefix sharing, freed blocks cached,
#: one hit length with the EAGLE pop, and draft slots.
SEMANTICS_EAGLE = st.builds(
    lambda s, k: attrs.evolve(s, cache_freed=True, hit_rule=HitRule.COMMON_PREFIX, eagle=True, lookahead_tokens=k),
    _SHARING, LOOKAHEAD_TOKENS,
)


#: What a backend that declares ``load_holds_prefix`` gets (its own campaign, ``oracle-load``): every
#: semantics, and two times in three a first resume's load holding every loaded token (vLLM before 0.14.1);
#: declaring prefix sharing too, half the time with prefix sharing on (the load then starts past a hit).
SEMANTICS_LOAD = st.builds(lambda s, load: attrs.evolve(s, load_holds_prefix=load), SEMANTICS,
                           st.sampled_from((False, True, True)))
SEMANTICS_LOAD_SHARING = st.one_of(
    SEMANTICS_LOAD,
    st.builds(lambda s, load: attrs.evolve(s, load_holds_prefix=load), SEMANTICS_SHARING,
              st.sampled_from((False, True, True))))


def semantics(caps: Capabilities = EXACT_EVERYTHING) -> st.SearchStrategy[Semantics]:
    """The semantics a config for ``caps`` carries: drawn when the backend serves every semantics,
    else the one it claims."""
    if caps.all_semantics and caps.eagle:
        return SEMANTICS_EAGLE
    if caps.all_semantics and getattr(caps, "load_holds_prefix", False):
        return SEMANTICS_LOAD_SHARING if caps.prefix_sharing else SEMANTICS_LOAD
    if caps.all_semantics:
        drawn = SEMANTICS_SHARING if caps.prefix_sharing else SEMANTICS
        return _with_interval(drawn) if caps.eviction_interval else drawn
    return st.just(caps.semantics)


@st.composite
def distinct_life_cycles(draw, t: int, caps: Capabilities = EXACT_EVERYTHING):
    """Three or four layers of distinct life cycles, as the capabilities allow: SWA layers with
    different windows (or sinks), full attention, SSM; in a drawn order."""
    chosen: list = []
    if LifeCycleKind.SWA in caps.layer_kinds:
        for _ in range(draw(st.integers(2, 3))):
            sinks = draw(sink_tokens(t)) if caps.sinks else 0
            chosen.append(AttentionLayer(window=draw(windows(t, caps.min_window)), sink_tokens=sinks))
    if LifeCycleKind.FULL in caps.layer_kinds and draw(st.booleans()):
        chosen.append(AttentionLayer(window=None))
    if LifeCycleKind.SSM in caps.layer_kinds and draw(st.booleans()):
        chosen.append(SsmLayer())
    if not chosen:
        chosen.append(AttentionLayer(window=None))
    return draw(st.permutations(chosen[:MAX_LAYERS]))


@functools.lru_cache(maxsize=None)
def _per_group(low: int, high: int, groups: int) -> st.SearchStrategy:
    return st.lists(st.integers(low, high), min_size=groups, max_size=groups)


@st.composite
def configs(draw, caps: Capabilities = EXACT_EVERYTHING, tokens_per_block=TOKENS_PER_BLOCK):
    """A valid config the capabilities allow, with a tight pool."""
    if caps.mixed_block_sizes:
        tokens_per_block = MIXED_TOKENS_PER_BLOCK
    if caps.tokens_per_block:
        tokens_per_block = caps.tokens_per_block
    t = draw(st.sampled_from(tokens_per_block))
    if draw(st.integers(0, 3)) == 3:  # a quarter: three or four distinct life cycles
        chosen = list(draw(distinct_life_cycles(t, caps)))
    else:
        n = draw(st.integers(1, MAX_LAYERS))
        layer = layers(t, caps)
        chosen = [draw(layer) for _ in range(n)]
    windowed = any(isinstance(x, AttentionLayer) and x.window is not None for x in chosen)
    if caps.mixed_block_sizes and caps.full_attention_block_multiples and windowed:  # full attention at t times a multiple
        multiple = st.sampled_from(caps.full_attention_block_multiples)
        if len(chosen) < MAX_LAYERS and not any(isinstance(x, AttentionLayer) and x.window is None for x in chosen):
            chosen.append(AttentionLayer(window=None))  # the subject: full attention beside the windows
        chosen = [attrs.evolve(layer, tokens_per_block=t * draw(multiple))
                  if isinstance(layer, AttentionLayer) and layer.window is None else layer for layer in chosen]
    elif caps.mixed_block_sizes and not caps.full_attention_block_multiples:  # each attention layer: the config's block size, or one of its own
        own = st.one_of(st.none(), st.sampled_from(MIXED_TOKENS_PER_BLOCK))
        chosen = [attrs.evolve(layer, tokens_per_block=draw(own)) if isinstance(layer, AttentionLayer) else layer
                  for layer in chosen]
    if all(isinstance(layer, SsmLayer) for layer in chosen):
        attention = [k for k in (LifeCycleKind.SWA, LifeCycleKind.FULL) if k in caps.layer_kinds][0]
        chosen[0] = AttentionLayer(window=draw(windows(t, caps.min_window)) if attention is LifeCycleKind.SWA else None)
    if caps.one_window:  # one window per config: every SWA layer takes the first one's (no draw added)
        first = next((x.window for x in chosen if isinstance(x, AttentionLayer) and x.window is not None), None)
        chosen = [attrs.evolve(x, window=first) if isinstance(x, AttentionLayer) and x.window is not None else x
                  for x in chosen]
    semantics_ = draw(semantics(caps))  # the reference side runs the same semantics
    if caps.all_semantics and caps.mixed_block_sizes and semantics_.cache_freed:  # vLLM's retention mask, or not
        semantics_ = attrs.evolve(semantics_, cache_aligned=draw(st.booleans()))
        semantics_ = attrs.evolve(semantics_, cache_prompt_tail=draw(st.booleans()))  # its partial prefix entries
    base = Config(tokens_per_block=t, layers=chosen, semantics=semantics_)
    life_cycles = len(build_layout(base).life_cycles)

    pool_groups = None
    if caps.one_pool_group:
        pool_groups = (0,) * life_cycles if life_cycles > 1 else None
    elif caps.shared_pool_groups and life_cycles > 1 and draw(st.booleans()):
        groups = draw(st.integers(1, life_cycles))
        raw = draw(_per_group(0, groups - 1, life_cycles))
        used = sorted(set(raw))  # numbered 0..G-1, each used; the order of first use is left as drawn
        pool_groups = tuple(used.index(g) for g in raw)
        if draw(st.sampled_from((True, False))):  # numbered backwards: a monotone map becomes non-monotone
            pool_groups = tuple(len(used) - 1 - g for g in pool_groups)
    floor_rule = "fixed"
    if caps.legacy_floor and draw(st.integers(0, 9)) == 9:  # rarely; shrinks towards "fixed"
        floor_rule = "legacy"
    sized = Config(
        tokens_per_block=t, layers=chosen, pool_groups=pool_groups, floor_rule=floor_rule, semantics=semantics_
    )
    minimum = build_layout(sized).min_slots

    if caps.prefix_sharing and draw(st.integers(0, 3)) > 0:
        # Room for a second request beside one at its floor: what lets a repeated request be admitted
        # (and hit) while its source still holds the prefix.
        extra = draw(_per_group(0, 2, len(minimum)))
        times = draw(st.sampled_from((2, 3)))  # room for one more request, or two (repeated requests)
        return attrs.evolve(sized, slots=tuple(times * m + k for m, k in zip(minimum, extra)))
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


def default_semantics(config: Config) -> bool:
    """Whether a config carries the default semantics (the spec's)."""
    return config.semantics == Semantics()


def block_sizes(config: Config) -> tuple[int, ...]:
    """The distinct block sizes of a config's attention layers, the config's own included, sorted."""
    own = {layer.tokens_per_block for layer in config.layers
           if isinstance(layer, AttentionLayer) and layer.tokens_per_block is not None}
    return tuple(sorted(own | {config.tokens_per_block}))


def has_swa(config: Config) -> bool:
    """Whether a config has a sliding-window life cycle (the subject of every comparison)."""
    return any(isinstance(layer, AttentionLayer) and layer.window is not None for layer in config.layers)


def horizon(config: Config) -> int:
    """A history past which nothing new happens for any layer: sinks, the largest window (plus the
    tokens in flight) and two blocks (for reused-history draws); blocks of the largest block size."""
    t = max(block_sizes(config))
    reach = 0
    for layer in config.layers:
        if isinstance(layer, AttentionLayer) and layer.window is not None:
            reach = max(reach, layer.sink_tokens + t + layer.window + config.semantics.in_flight_tokens)
    return reach + 2 * t
