"""``Semantics.window_ring`` (transformers' continuous batching, issue 33): a sliding window kept as a
fixed ring of the blocks of its first ``min(c, W)`` tokens, nothing freed as it slides. The layer
(reference/ring.py) against hand-counted blocks, the option's checks, the ``oracle-ring`` campaign (the
independent oracle under the same semantics) against the reference, and its seeded bug caught."""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.runner import PROFILES, run_campaign
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics

RING = Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, window_ring=True)


def _decode(semantics: Semantics, steps: int) -> tuple[Manager, list[tuple]]:
    """W = 5, t = 2, one request decoding one token a step: its table after each step."""
    m = Manager(Config(tokens_per_block=2, layers=[AttentionLayer(window=5)], slots=[8], semantics=semantics))
    m.create("r")
    assert m.resume("r")
    tables = []
    for h in range(steps):
        if not m.resize("r", h + 1, h):
            break
        m.commit("r", 1)
        m.check()
        tables.append(m.snapshot().requests[0].tables[0].dense())
    return m, tables


def test_a_ring_holds_the_blocks_of_its_first_w_tokens_and_frees_none():
    _, tables = _decode(RING, 12)
    # capacity 1..12: ceil(min(c, 5) / 2) blocks, always the first ones, whatever the history
    assert [len([b for b in t if b is not None]) for t in tables] == [1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3]
    assert all(t[:3] == tuple(range(min(3, len(t)))) for t in tables)
    assert tables[-1] == (0, 1, 2, None, None, None)  # the spec's table spans 6 blocks; the ring keeps 3


def test_the_spec_frees_the_blocks_that_left_the_window():
    _, tables = _decode(Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False), 12)
    # at-allocate: the 12th step (history 11) frees, before it allocates, what is stale at 11: blocks 0..2
    assert tables[-1] == (None, None, None, 3, 4, 5)


def test_a_ring_needs_one_block_less_than_the_floor_unless_t_divides_w_minus_1():
    for window, free in ((5, 0), (4, 1)):  # t = 2: the floor is 3 for both; the ring 3 (5 - 1 = 4 even), 2
        m = Manager(Config(tokens_per_block=2, layers=[AttentionLayer(window=window)], semantics=RING))
        assert m.snapshot().pools[0].total == 3
        m.create("r")
        assert m.resume("r")
        for h in range(20):
            assert m.resize("r", h + 1, h), h
            m.commit("r", 1)
            m.check()
        assert m.snapshot().pools[0].free == free, window


def test_the_option_refuses_sink_tokens_and_is_written_only_when_set():
    with pytest.raises(ConfigError, match=r"layers\[0\]\.sink_tokens.*window_ring"):
        Config(tokens_per_block=2, layers=[AttentionLayer(window=4, sink_tokens=1)], semantics=RING)
    assert RING.to_dict()["window_ring"] is True and "window_ring" not in Semantics().to_dict()
    assert Semantics.from_dict(RING.to_dict()) == RING


def test_the_oracle_ring_campaign_passes_on_the_ci_profile():
    assert resolve("oracle-ring").capabilities.semantics.window_ring
    assert not resolve("oracle").capabilities.semantics.window_ring
    result = run_campaign("oracle-ring", examples=60, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None, result.divergence
    assert result.served >= 55
