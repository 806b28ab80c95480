"""SGLang's eviction interval (Semantics.eviction_interval) in the reference and in the fuzz harness:
a decode run's held blocks worked out by hand; the pool it needs is floors.eviction_floor; intervals
are drawn only for a backend that declares them (its own campaign, ``oracle-eviction``, so the plain
oracle campaign's draws are unchanged), and that campaign passes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swafloor.fuzz import strategies
from swafloor.fuzz.backends import resolve
from swafloor.fuzz.protocol import ALL_SEMANTICS, ALL_SEMANTICS_EVICTION, ALL_SEMANTICS_SHARING
from swafloor.fuzz.runner import PROFILES, run_campaign
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics, build_layout


def _decode_run(e: int, slots: int | None = None, steps: int = 11) -> list[int]:
    """Blocks held after each decode step (capacity h + 1, history h) of one request, t = 2, W = 3."""
    config = Config(2, [AttentionLayer(window=3)], slots=None if slots is None else [slots],
                    semantics=Semantics(eviction_interval=e))
    m = Manager(config)
    m.create("r")
    assert m.resume("r").ok
    held = []
    for h in range(steps):
        assert m.resize("r", h + 1, h).ok, h
        (request,) = m.snapshot().requests
        held.append(request.tables[0].held_count)
        m.check()
    return held


def test_a_decode_run_under_an_interval_of_four_holds_what_is_worked_out_by_hand():
    # t=2, W=3: block b is stale at h when (b+1)*2 <= h+1-3. Interval 4: the cursor starts at token 0,
    # eviction is due when h+1-3 >= cursor+4 (h=6, then cursor 4, due again at h=10); in between the
    # blocks stale at the last eviction point stay the only ones freed.
    assert _decode_run(4) == [1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 2]
    # Interval 1 frees whatever is stale at each step: at most 2 blocks.
    assert _decode_run(1) == [1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2]


def test_the_pool_minimum_is_the_eviction_floor_and_serves_the_run():
    # eviction_floor = S + ceil((W - 1 + k + max(e, t)) / t) = ceil((2 + 4) / 2) = 3; at e = 1 the floor is 2.
    assert build_layout(Config(2, [AttentionLayer(window=3)], semantics=Semantics(eviction_interval=4))).min_slots == (3,)
    assert build_layout(Config(2, [AttentionLayer(window=3)])).min_slots == (2,)
    assert max(_decode_run(4, slots=3, steps=40)) == 3


def test_a_bad_interval_is_a_config_error_naming_the_field():
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ConfigError) as info:
            Semantics(eviction_interval=bad)
        assert info.value.field == "semantics.eviction_interval"
    assert Semantics.from_dict({"eviction_interval": 3}).eviction_interval == 3
    assert "eviction_interval" not in Semantics().to_dict()  # traces of every other semantics unchanged
    assert Semantics(eviction_interval=3).to_dict()["eviction_interval"] == 3


@settings(max_examples=300, database=None)
@given(st.data())
def test_intervals_are_drawn_only_for_a_backend_that_declares_them(data):
    assert data.draw(strategies.semantics(ALL_SEMANTICS)).eviction_interval == 1
    assert data.draw(strategies.semantics(ALL_SEMANTICS_SHARING)).eviction_interval == 1
    assert data.draw(strategies.semantics(ALL_SEMANTICS_EVICTION)).eviction_interval in (1, 2, 3, 9)


def test_the_eviction_campaign_draws_intervals():
    from hypothesis import find

    assert find(strategies.semantics(ALL_SEMANTICS_EVICTION), lambda s: s.eviction_interval == 9).eviction_interval == 9
    assert resolve("oracle-eviction").capabilities.eviction_interval
    assert not resolve("oracle").capabilities.eviction_interval


def test_the_oracle_eviction_campaign_passes_on_the_ci_profile():
    result = run_campaign("oracle-eviction", examples=1000, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None
    assert result.served >= 950
