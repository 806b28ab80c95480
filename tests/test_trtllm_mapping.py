"""The mapping from a swafloor config to TensorRT-LLM's description (no upstream code involved)."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from swafloor.fuzz.engines.trtllm.mapping import GPU_GRANULARITY, layer_configs, round_up, to_trtllm
from swafloor.reference import AttentionLayer, Config, ConfigError, SsmLayer


def _config(**kw):
    return Config(**{"tokens_per_block": 32, **kw})


def _slot_size_list(tl, lc):
    """Per life cycle, what upstream groups pool groups by: the sizes of its coalesced buffers
    (all of a size, summed over the life cycle's layers)."""
    sizes: dict[int, int] = {}
    for spec, owner in zip(tl.layers, tl.life_cycle_of_layer):
        if owner == lc:
            for b in spec.buffers:
                sizes[b.size] = sizes.get(b.size, 0) + b.size
    return tuple(sorted(sizes.values(), reverse=True))


def test_life_cycles_follow_first_appearance_and_share_equal_geometry():
    config = _config(layers=[AttentionLayer(window=128, sink_tokens=1), AttentionLayer(), SsmLayer(),
                             AttentionLayer(window=128, sink_tokens=32), AttentionLayer(window=64), SsmLayer()])
    tl = to_trtllm(config)
    # sink tokens 1 and 32 are both one sink block at t = 32: one life cycle
    assert tl.life_cycles == (("swa", 128, 1), ("full", None, 0), ("ssm", None, 0), ("swa", 64, 0))
    assert tl.life_cycle_of_layer == (0, 1, 2, 0, 3, 2)
    assert tl.has_ssm


def test_each_pool_group_has_one_slot_size_shared_by_its_life_cycles_and_no_other():
    layers = [AttentionLayer(window=8)] * 3 + [AttentionLayer()] * 2 + [SsmLayer()] + [AttentionLayer(window=64)]
    for groups in [(0, 0, 0, 0), (0, 1, 2, 3), (0, 1, 0, 1), (0, 0, 1, 1), (1, 0, 0, 1)]:
        tl = to_trtllm(_config(layers=layers, pool_groups=groups))
        lists = [_slot_size_list(tl, lc) for lc in range(len(tl.life_cycles))]
        for a in range(len(lists)):
            for b in range(len(lists)):
                assert (lists[a] == lists[b]) == (groups[a] == groups[b]), (groups, lists)
        for lc, g in enumerate(groups):
            assert lists[lc] == (tl.slot_sizes[g],)
        assert tl.pool_partition() == frozenset(
            frozenset(i for i, x in enumerate(groups) if x == g) for g in set(groups))


def test_scratch_fraction_is_one_over_layers_and_buffers_are_whole_halves():
    tl = to_trtllm(_config(layers=[AttentionLayer(window=8)] * 3 + [AttentionLayer()] * 2, pool_groups=(0, 0)))
    assert tl.scratch_fraction == (Fraction(1, 3), Fraction(1, 2))
    for spec in tl.layers:
        assert [b.role for b in spec.buffers] == ["key", "value"]
        assert spec.buffers[0].size == spec.buffers[1].size > 0


def test_full_attention_carries_no_sinks_and_ssm_has_one_state_buffer():
    tl = to_trtllm(_config(layers=[AttentionLayer(), SsmLayer(), AttentionLayer(window=5, sink_tokens=0)]))
    assert tl.layers[0].window is None and tl.layers[0].sink_tokens is None
    assert [b.role for b in tl.layers[1].buffers] == ["state"]
    assert tl.layers[2].sink_tokens == 0


def test_quota_rounds_each_pool_up_to_2_mib_and_covers_the_slots():
    tl = to_trtllm(_config(layers=[AttentionLayer(window=8), AttentionLayer()]))
    slots = (3, 7)
    quota = tl.quota_bytes(slots)
    assert quota == sum(round_up(n * s, GPU_GRANULARITY) for n, s in zip(slots, tl.slot_sizes))
    assert quota % GPU_GRANULARITY == 0
    for n, s in zip(slots, tl.slot_sizes):
        assert round_up(n * s, GPU_GRANULARITY) // s >= n
    assert sum(tl.byte_ratio(slots)) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="slots"):
        tl.quota_bytes((1,))


def test_bad_unit_is_a_typed_error():
    with pytest.raises(ConfigError, match="unit_bytes"):
        to_trtllm(_config(layers=[AttentionLayer()]), unit_bytes=0)


def test_layer_configs_use_the_module_handed_in():
    made = []

    def record(kind):
        def build(**kw):
            made.append((kind, kw))
            return (kind, kw)
        return build

    module = SimpleNamespace(BufferConfig=record("buf"), AttentionLayerConfig=record("attn"), SsmLayerConfig=record("ssm"))
    tl = to_trtllm(_config(layers=[AttentionLayer(window=16, sink_tokens=4), SsmLayer()]))
    out = layer_configs(tl, module)
    assert [o[0] for o in out] == ["attn", "ssm"]
    assert out[0][1]["sliding_window_size"] == 16 and out[0][1]["num_sink_tokens"] == 4
    assert out[0][1]["layer_id"] == 0 and out[1][1]["layer_id"] == 1
