"""The radix-tree layer (reference/radix.py): SGLang's tree lock (``prompt_lock``) and publication
(``publish_on_release``) as options of the reference. Expected values are worked out by hand below
(block ``b`` of ``t`` tokens holds tokens ``b*t .. b*t + t - 1``), not read from the code under test."""

from __future__ import annotations

import attrs
import pytest

from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics
from swafloor.reference.config import build_layout

SGLANG = Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, prefix_sharing=True,
                   cache_freed=True)


def _held(m: Manager, rid: str) -> list[list[int]]:
    return [sorted(table) for table in m.slots().held[rid]]


def _decode(m: Manager, rid: str, upto: int) -> None:
    h = m.history_of(rid)
    while h < upto:
        assert m.resize(rid, h + 1, h).ok
        m.commit(rid, 1)
        h += 1
    m.check()


@pytest.mark.parametrize("lock", [False, True])
def test_prompt_lock_keeps_the_prompts_last_window_until_released(lock):
    # t = 1, W = 2: the window is [h - 1, h]; a prompt of 2 tokens locks its last W - 1 = 1 token: block 1.
    semantics = attrs.evolve(SGLANG, prompt_lock=lock)
    config = Config(tokens_per_block=1, layers=[AttentionLayer(window=2)], semantics=semantics)
    assert build_layout(config).slots == ((3,) if lock else (2,))  # S + 2*ceil(1/1) + 1 = 3; the floor 2
    m = Manager(config)
    m.create("r0", reused_history=2)
    assert m.resume("r0").ok
    _decode(m, "r0", 7)  # lazily freed: released on h = 6, the window [5, 6]
    assert _held(m, "r0") == [[1, 5, 6] if lock else [5, 6]]
    m.suspend("r0")  # a retraction lets go of the lock; it recomputes from token 0 with none
    assert m.resume("r0").ok
    _decode(m, "r0", 5)
    assert _held(m, "r0") == [[3, 4]]


def test_prompt_lock_needs_prefix_sharing():
    with pytest.raises(ConfigError, match="semantics.prompt_lock=True: needs semantics.prefix_sharing"):
        Semantics(prompt_lock=True)


def _full_only(semantics: Semantics, slots: int = 8) -> Manager:
    return Manager(Config(tokens_per_block=2, layers=[AttentionLayer()], slots=[slots], semantics=semantics))


@pytest.mark.parametrize("publish, hits_while_live", [(False, 4), (True, 2)])
def test_publish_on_release_hits_only_a_prompt_or_a_finished_request(publish, hits_while_live):
    # r0: a prompt of 4 tokens (blocks 0, 1), then 4 tokens decoded (blocks 2, 3), committed, unpublished.
    m = _full_only(attrs.evolve(SGLANG, publish_on_release=publish))
    m.create("r0", reused_history=4)
    assert m.resume("r0").ok
    _decode(m, "r0", 8)
    m.create("r1", reused_history=8, share_with="r0")
    assert m.resume("r1").ok and m.hit_blocks("r1") == hits_while_live
    m.close("r0")  # finished: its committed tokens are published
    m.create("r2", reused_history=8, share_with="r0")
    assert m.resume("r2").ok and m.hit_blocks("r2") == 4
    m.check()


@pytest.mark.parametrize("publish", [False, True])
def test_a_prompt_ending_on_a_block_boundary_recomputes_its_last_block(publish):
    # Two slots, both held by r0's prompt (4 tokens, blocks 0 and 1). r1 on the same 4 tokens hits both;
    # under publish_on_release it first computes block 1 again in a slot of its own (one token is always
    # computed) before taking r0's: there is no third slot, so it runs out; without, it takes both as hits.
    m = _full_only(attrs.evolve(SGLANG, publish_on_release=publish), slots=2)
    m.create("r0", reused_history=4)
    assert m.resume("r0").ok
    m.create("r1", reused_history=4, share_with="r0")
    assert bool(m.resume("r1")) is not publish
    m.create("r2", reused_history=3, share_with="r0")  # ends mid-block: its block 1 is its own, no recompute
    assert not m.resume("r2")  # its partial block 1 needs a slot of its own either way
    m.check()


# --------------------------------------------------------------------------- the oracle (issue 28 §1)
# fuzz/backends/oracle.py implements both options on its own, token by token; the same hand-worked cases
# hold for it, and the oracle-radix campaign holds it to the reference.
def _oracle(config: Config):
    from swafloor.fuzz.backends.oracle import OracleManager

    return OracleManager(config)


def _oracle_held(m, rid: str) -> list[list[int]]:
    request = next(r for r in m.snapshot().requests if r.request_id == rid)
    return [[b for b, slot in enumerate(table.dense()) if slot is not None] for table in request.tables]


def _oracle_decode(m, rid: str, upto: int) -> None:
    while m.requests[rid].history < upto:
        h = m.requests[rid].history
        assert m.resize(rid, h + 1, h).ok
        m.commit(rid, 1)


@pytest.mark.parametrize("lock", [False, True])
def test_the_oracle_keeps_the_prompts_last_window_until_released(lock):
    # as test_prompt_lock_keeps_the_prompts_last_window_until_released: t = 1, W = 2, a prompt of 2 tokens
    config = Config(tokens_per_block=1, layers=[AttentionLayer(window=2)], semantics=attrs.evolve(SGLANG, prompt_lock=lock))
    m = _oracle(config)
    assert m.totals == ([3] if lock else [2])
    m.create("r0", reused_history=2)
    assert m.resume("r0").ok
    _oracle_decode(m, "r0", 7)
    assert _oracle_held(m, "r0") == [[1, 5, 6] if lock else [5, 6]]
    m.suspend("r0")
    assert m.resume("r0").ok
    _oracle_decode(m, "r0", 5)
    assert _oracle_held(m, "r0") == [[3, 4]]


def test_the_oracles_locked_minimum_is_the_prompt_lock_floor():
    # the oracle walks prompts and histories; the reference's formula S + 2*ceil((W-1)/t) + 1, by hand at
    # t = 4, W = 5, one sink block: 1 + 2*1 + 1 = 4; and the formula over a grid against the walk
    from swafloor.fuzz.backends.oracle import decode_peak_locked
    from swafloor.reference import floors

    assert decode_peak_locked(4, 5, frozenset({0})) == 4
    for t in (1, 2, 3, 4):
        for window in range(1, 11):
            for sinks in (0, 1, 2):
                assert decode_peak_locked(t, window, frozenset(range(sinks))) == floors.prompt_lock_floor(t, window, sinks)


@pytest.mark.parametrize("publish, hits_while_live", [(False, 4), (True, 2)])
def test_the_oracle_hits_only_a_prompt_or_a_finished_request(publish, hits_while_live):
    m = _oracle(Config(tokens_per_block=2, layers=[AttentionLayer()], slots=[8],
                       semantics=attrs.evolve(SGLANG, publish_on_release=publish)))
    m.create("r0", reused_history=4)
    assert m.resume("r0").ok
    _oracle_decode(m, "r0", 8)
    m.create("r1", reused_history=8, share_with="r0")
    assert m.resume("r1").ok and m.hit_blocks("r1") == hits_while_live
    m.close("r0")
    m.create("r2", reused_history=8, share_with="r0")
    assert m.resume("r2").ok and m.hit_blocks("r2") == 4


@pytest.mark.parametrize("publish", [False, True])
def test_the_oracle_recomputes_a_prompts_last_block(publish):
    m = _oracle(Config(tokens_per_block=2, layers=[AttentionLayer()], slots=[2],
                       semantics=attrs.evolve(SGLANG, publish_on_release=publish)))
    m.create("r0", reused_history=4)
    assert m.resume("r0").ok
    m.create("r1", reused_history=4, share_with="r0")
    assert bool(m.resume("r1").ok) is not publish
    m.create("r2", reused_history=3, share_with="r0")
    assert not m.resume("r2").ok


def test_the_oracle_radix_campaign_passes_on_the_ci_profile():
    from swafloor.fuzz.backends import resolve
    from swafloor.fuzz.runner import PROFILES, run_campaign

    semantics = resolve("oracle-radix").capabilities.semantics
    assert semantics.prompt_lock and semantics.publish_on_release
    result = run_campaign("oracle-radix", examples=150, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None, result.divergence.describe()
    assert result.served >= 140
