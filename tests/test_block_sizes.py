"""A block size per life cycle (issue 23): ``AttentionLayer.tokens_per_block``, floors per life cycle in
its own ``t``, pool groups that mix block sizes, tables and hits in each life cycle's blocks, the hit
aligned to the lcm of the block sizes; the ``oracle-mixed`` campaign that checks it all at token level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swafloor.fuzz import strategies
from swafloor.fuzz.backends import resolve
from swafloor.fuzz.backends.oracle import OracleManager
from swafloor.fuzz.protocol import ALL_SEMANTICS, ALL_SEMANTICS_MIXED
from swafloor.fuzz.runner import PROFILES, run_campaign
from swafloor.reference import (
    AttentionLayer,
    Config,
    ConfigError,
    LifeCycleKind,
    HitRule,
    Manager,
    Semantics,
    SsmLayer,
    build_layout,
)
from swafloor.reference import cache_hit, floors

ROOT = Path(__file__).resolve().parent.parent
CACHING = Semantics(prefix_sharing=True, cache_freed=True, hit_rule="common-prefix")


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "4", 10**18 + 1])
def test_a_layers_block_size_is_validated_by_name(bad):
    with pytest.raises(ConfigError, match=r"layers\[1\]\.tokens_per_block"):
        Config(tokens_per_block=2, layers=[AttentionLayer(window=4), AttentionLayer(tokens_per_block=bad)])


def test_a_layers_block_size_round_trips_and_is_absent_when_unset():
    mixed = Config(tokens_per_block=2, layers=[AttentionLayer(window=5, sink_tokens=3), AttentionLayer(tokens_per_block=8)])
    data = mixed.to_dict()
    assert data["layers"][1]["tokens_per_block"] == 8 and "tokens_per_block" not in data["layers"][0]
    assert Config.from_dict(json.loads(json.dumps(data))) == mixed
    with pytest.raises(ConfigError, match=r"layers\[1\]\.tokens_per_block"):
        Config.from_dict({**data, "layers": [data["layers"][0], {**data["layers"][1], "tokens_per_block": 0}]})
    with pytest.raises(ConfigError, match=r"config\.layers\[0\]"):  # SSM layers have no block size
        Config.from_dict({**data, "layers": [{"kind": "ssm", "tokens_per_block": 4}]})


def test_every_saved_trace_reads_back_with_one_block_size():
    """Traces written before block sizes per life cycle carry none: every life cycle at the config's t."""
    paths = sorted((ROOT / "tests" / "regressions").rglob("*.json"))
    read = 0
    for path in paths:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
            continue
        config = Config.from_dict(data["config"])
        layout = build_layout(config)
        if not any("tokens_per_block" in layer for layer in data["config"]["layers"]):
            assert not layout.mixed_block_sizes and set(layout.block_sizes) == {config.tokens_per_block}, path
            read += 1
    assert read >= 20


def test_layers_of_one_geometry_and_different_block_sizes_are_distinct_life_cycles():
    config = Config(tokens_per_block=2, layers=[
        AttentionLayer(window=5), AttentionLayer(window=5, tokens_per_block=2), AttentionLayer(window=5, tokens_per_block=4),
        AttentionLayer(window=None, sink_tokens=0, tokens_per_block=8), SsmLayer(),
    ])
    layout = build_layout(config)
    assert layout.layer_life_cycle == (0, 0, 1, 2, 3)  # an explicit t equal to the config's is the config's
    assert layout.block_sizes == (2, 4, 8, 2)
    assert layout.life_cycles[0].tokens_per_block is None and layout.mixed_block_sizes
    assert "t=4" in layout.life_cycles[1].describe() and "t=8" in layout.life_cycles[2].describe()


def test_sink_blocks_are_counted_in_the_layers_own_block_size():
    layout = build_layout(Config(tokens_per_block=2, layers=[AttentionLayer(window=4, sink_tokens=5, tokens_per_block=4)]))
    assert layout.life_cycles[0].sink_blocks == 2  # ceil(5 / 4), not ceil(5 / 2)


# ----------------------------------------------------------------------------- floors
def _decode_need(config: Config, horizon: int) -> list[int]:
    """Per pool group, the most slots a lone request decoding from history 0 holds (brute force on the
    token-level oracle, which shares no formula with the reference)."""
    oracle = OracleManager(Config(**{**{a: getattr(config, a) for a in ("tokens_per_block", "layers", "pool_groups")},
                                     "slots": [10**6] * len(build_layout(config).slots)}))
    oracle.create("r")
    oracle.resume("r")
    need = [0] * len(oracle.totals)
    for h in range(horizon):
        assert oracle.resize("r", h + 1, h).ok
        need = [max(n, used) for n, used in zip(need, oracle.used)]
    return need


@pytest.mark.parametrize("t_swa,t_full", [(2, 4), (2, 8), (4, 2), (3, 2), (1, 16), (3, 3)])
@pytest.mark.parametrize("window,sinks", [(2, 0), (5, 0), (8, 3), (13, 0)])
def test_the_layout_minimum_is_the_decode_need_up_to_the_first_floor(t_swa, t_full, window, sinks):
    """Each life cycle's share in its own t (SWA: its floor; full attention: what it holds when the SWA
    life cycle first holds its floor), and the same as floors.mixed_min_slots, whatever the grouping."""
    layers = [AttentionLayer(window=window, sink_tokens=sinks), AttentionLayer(tokens_per_block=t_full), SsmLayer()]
    for groups in (None, (0, 0, 0), (0, 1, 0)):
        config = Config(tokens_per_block=t_swa, layers=layers, pool_groups=groups)
        layout = build_layout(config)
        horizon = floors.first_floor_history(t_swa, window, layout.life_cycles[0].sink_blocks) + 1
        assert list(layout.min_slots) == _decode_need(config, horizon), groups
        assert layout.min_slots == floors.mixed_min_slots(layout.life_cycles, layout.block_sizes, layout.pool_group_of)


def test_full_share_in_blocks_is_the_swa_floor_with_one_block_size():
    for t in range(1, 9):
        for F in range(1, 12):
            assert floors.full_share_in_blocks(F, t, t) == F
    assert floors.full_share_in_blocks(3, 2, 8) == 1  # capacity 5 in blocks of 8
    assert floors.full_share_in_blocks(3, 8, 2) == 9  # capacity 17 in blocks of 2


# ----------------------------------------------------------------------------- the manager
def test_each_life_cycle_counts_its_own_blocks():
    config = Config(tokens_per_block=2, layers=[AttentionLayer(window=3), AttentionLayer(tokens_per_block=8)],
                    pool_groups=(0, 0), slots=(20,))
    m = Manager(config)
    m.create("r")
    m.resume("r")
    assert m.resize("r", 11, 0).ok
    m.commit("r", 11)
    m.check()
    swa, full = m.snapshot().requests[0].tables
    assert swa.length == 6 and full.length == 2  # ceil(11 / 2), ceil(11 / 8)
    assert swa.held == ((4, 6),)  # the window [9, 10] (and token 11 in flight): blocks 4, 5
    assert m.snapshot().pools[0].free == 20 - 2 - 2
    assert "block sizes=[2, 8]" in repr(m)


def _prefix_then_reuse(config: Config, committed: int, reused: int) -> Manager:
    m = Manager(config)
    m.create("a")
    m.resume("a")
    assert m.resize("a", committed, 0).ok
    m.commit("a", committed)
    m.close("a")
    m.create("b", reused_history=reused, share_with="a")
    assert m.resume("b").ok
    m.check()
    return m


def test_a_common_prefix_hit_is_a_multiple_of_the_lcm():
    """Full attention at t=2, a one-token window at t=3: lcm 6. Of 9 reused tokens, 8 would fit every
    life cycle's whole blocks found (the window's block 2 holds tokens 6..8, all reused) but is no
    multiple of 3; the hit is 6 tokens: full attention's blocks 0..2, as cache_hit.longest_hit says."""
    config = Config(tokens_per_block=2, layers=[AttentionLayer(), AttentionLayer(window=1, tokens_per_block=3)],
                    slots=(20, 20), semantics=CACHING)
    m = _prefix_then_reuse(config, committed=10, reused=9)
    assert m.hit_blocks("b") == 3
    cached = [[True] * 5, [True] * 3]  # what "a" committed: blocks 0..4 of t=2, 0..2 of t=3
    assert cache_hit.longest_hit(cached, [2, 3], [None, 1], False, 9) == 6


def test_one_block_size_hits_are_as_before():
    config = Config(tokens_per_block=2, layers=[AttentionLayer(), AttentionLayer(window=1)], slots=(20, 20), semantics=CACHING)
    assert _prefix_then_reuse(config, committed=10, reused=9).hit_blocks("b") == 4  # 8 tokens: blocks 0..3


# ----------------------------------------------------------------------------- the campaign
@settings(max_examples=200, database=None)
@given(st.data())
def test_block_sizes_are_drawn_only_for_a_backend_that_declares_them(data):
    plain = data.draw(strategies.configs(ALL_SEMANTICS))
    assert all(getattr(layer, "tokens_per_block", None) is None for layer in plain.layers)
    mixed = data.draw(strategies.configs(ALL_SEMANTICS_MIXED))
    assert mixed.tokens_per_block in strategies.MIXED_TOKENS_PER_BLOCK


def test_the_mixed_campaign_draws_different_block_sizes():
    from hypothesis import find

    found = find(strategies.configs(ALL_SEMANTICS_MIXED), lambda c: len(set(build_layout(c).block_sizes)) > 1
                 and any(lc.kind is LifeCycleKind.FULL for lc in build_layout(c).life_cycles))
    assert build_layout(found).mixed_block_sizes
    assert resolve("oracle-mixed").capabilities.mixed_block_sizes
    assert not resolve("oracle").capabilities.mixed_block_sizes


def test_the_oracle_mixed_campaign_passes_on_the_ci_profile():
    result = run_campaign("oracle-mixed", examples=600, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None
    assert result.served >= 570


# ----------------------------------------------------------------------------- the cache keeps what an aligned hit takes
def test_cache_aligned_needs_cache_freed_and_round_trips():
    with pytest.raises(ConfigError, match="semantics.cache_aligned"):
        Semantics(cache_aligned=True)
    aligned = Semantics(prefix_sharing=True, cache_freed=True, cache_aligned=True)
    assert Semantics.from_dict(aligned.to_dict()) == aligned
    assert "cache_aligned" not in CACHING.to_dict()


def _cached_after(semantics: Semantics, committed: int) -> tuple:
    config = Config(tokens_per_block=1, layers=[AttentionLayer(window=2), AttentionLayer(tokens_per_block=4)],
                    pool_groups=(0, 0), slots=(30,), semantics=semantics)
    m = Manager(config)
    m.create("a")
    m.resume("a")
    assert m.resize("a", committed, 0).ok
    m.commit("a", committed)
    m.close("a")
    m.check()
    return m.snapshot().cached


def test_cache_aligned_keeps_only_what_an_aligned_hit_takes():
    """SWA at t = 1 (W = 2) beside full attention at t = 4: of 6 committed tokens an aligned hit takes at
    most 4 (the lcm), reading SWA block 3 (its window's block before token 4) and full block 0; without
    the option every whole block is cached."""
    plain = _cached_after(CACHING, 6)
    aligned = _cached_after(attrs_evolve(CACHING, cache_aligned=True), 6)
    assert {(lc, b) for lc, b, _ in plain} == {(0, b) for b in range(6)} | {(1, 0)}
    assert {(lc, b) for lc, b, _ in aligned} == {(0, 3), (1, 0)}


def attrs_evolve(instance, **changes):
    import attrs

    return attrs.evolve(instance, **changes)


def test_longest_common_hit_jumps_to_what_trying_every_length_finds():
    """The common-prefix search skips every length that needs a block it found missing: on random
    patterns of findable blocks it returns what trying each aligned length from the top returns."""
    import random

    rng = random.Random(3)
    layouts = [
        [AttentionLayer(window=None), AttentionLayer(window=3)],
        [AttentionLayer(window=5, tokens_per_block=1), AttentionLayer(window=None, tokens_per_block=4)],
        [AttentionLayer(window=2), AttentionLayer(window=7, sink_tokens=2), SsmLayer()],
        [AttentionLayer(window=9, tokens_per_block=3), AttentionLayer(window=4, tokens_per_block=2)],
    ]
    checked = 0
    for layers in layouts:
        sem = Semantics(prefix_sharing=True, cache_freed=True, hit_rule=HitRule.COMMON_PREFIX,
                        in_flight_tokens=rng.choice([0, 1]))
        manager = Manager(Config(2, layers, semantics=sem))
        a = manager.hit_alignment()
        for _ in range(300):
            limit = rng.randint(0, 60)
            present = {(i, b): rng.random() < 0.8 for i in range(len(layers)) for b in range(61)}

            def found(i, b):
                return 1 if present.get((i, b)) else None

            brute = next(L for L in range(limit - limit % a, -1, -a) if manager.hit_length_fits(L, found))
            assert manager.longest_common_hit(limit, found) == brute, (layers, limit)
            checked += brute > 0
    assert checked > 100
