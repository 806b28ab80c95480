"""``Semantics.load_holds_prefix`` (issue 33): vLLM before 0.14.1 loaded a reused prefix as new tokens of
a request with nothing computed, so a first resume holds a block for every loaded token, out-of-window
ones too, until the next release frees what is stale.

- A hand-made run on the reference and the oracle (expected tables worked out by hand: window 1, one
  token a block, a reused history of 2 tokens).
- At the floor such a load runs out of slots where the default resume fits (theorem
  ``load-holds-prefix-floor``: a load of ``c`` tokens fits the floor exactly when ``c <= floor * t``).
- With prefix sharing on, the load starts past the first resume's common-prefix hit: a hand-made run
  (worked out by hand, replayed alike on vLLM 0.11.2) where the hit is shorter than the reused history.
- The ``oracle-load`` campaign (the option drawn two times in three) against the reference, bounded.
"""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends.oracle import OracleManager
from swafloor.fuzz.runner import PROFILES, run_campaign
from swafloor.reference import AttentionLayer, Config, Manager, Semantics

VLLM = dict(free_stale="at-allocate", suspend="recompute", first_resume_copy=False)


def _held(m) -> list[list[int]]:
    """Per life cycle of request r0, the block indices it holds."""
    (req,) = m.snapshot().requests
    return [[b for lo, hi in table.held for b in range(lo, hi)] for table in req.tables]


@pytest.mark.parametrize("make", [Manager, OracleManager], ids=["reference", "oracle"])
@pytest.mark.parametrize("free_stale", ["at-allocate", "at-commit"])
def test_a_load_holds_every_loaded_block_until_the_next_release(make, free_stale):
    load = Semantics(**{**VLLM, "free_stale": free_stale}, load_holds_prefix=True)
    m = make(Config(1, [AttentionLayer(1)], slots=[3], semantics=load))
    m.create("r0", reused_history=2)
    assert m.resume("r0").ok
    assert _held(m) == [[0, 1]]  # tokens 0 and 1 loaded as new ones: a block each, though out of the window
    assert m.snapshot().pools[0].free == 1
    assert m.resize("r0", 3, 2).ok
    assert _held(m) == [[2]]  # the next step frees both and holds the block of token 2 alone
    plain = make(Config(1, [AttentionLayer(1)], slots=[3], semantics=Semantics(**VLLM)))
    plain.create("r0", reused_history=2)
    assert plain.resume("r0").ok and _held(plain) == [[]]  # the default: nothing live at capacity 2, history 2


@pytest.mark.parametrize("make", [Manager, OracleManager], ids=["reference", "oracle"])
def test_at_the_floor_a_load_longer_than_floor_times_t_runs_out(make):
    # W = 4, t = 2: floor 3 (S + ceil(3/2) + 1); a load of 6 tokens is 3 blocks, of 7 tokens 4
    for reused, fits in ((6, True), (7, False)):
        m = make(Config(2, [AttentionLayer(4)], semantics=Semantics(**VLLM, load_holds_prefix=True)))
        m.create("r0", reused_history=reused)
        assert m.resume("r0").ok is fits, reused
        plain = make(Config(2, [AttentionLayer(4)], semantics=Semantics(**VLLM)))
        plain.create("r0", reused_history=reused)
        assert plain.resume("r0").ok, reused


PREFIX = dict(VLLM, prefix_sharing=True, cache_freed=True, hit_rule="common-prefix", cache_scheduled=True)


def _held_by(m, request_id) -> list[int]:
    (req,) = [r for r in m.snapshot().requests if r.request_id == request_id]
    (table,) = req.tables
    return [b for lo, hi in table.held for b in range(lo, hi)]


@pytest.mark.parametrize("make", [Manager, OracleManager], ids=["reference", "oracle"])
@pytest.mark.parametrize("load", [True, False], ids=["load", "pinned"])
def test_with_prefix_sharing_the_load_starts_past_the_hit(make, load):
    # W = 4, t = 2, 8 slots (vLLM 0.11.2 replays this run alike, issue 33). r0 loads 12 tokens: under the load
    # blocks 0-5 (all six), freed on close tail first, so block 5's cached content is the first a new request
    # evicts: r2 (6 tokens, its own content) takes the two never-used slots and block 5's. r1 on r0's 12
    # tokens: the longest common-prefix hit is 10 tokens (blocks 3 and 4 cached, the window of token 10);
    # the load holds those two and a new block for tokens 10-11 (block 5), nothing freed yet; the
    # pinned resume holds the blocks live at 12 alone (4 and 5, block 4 a hit).
    m = make(Config(2, [AttentionLayer(4)], slots=[8], semantics=Semantics(**PREFIX, load_holds_prefix=load)))
    m.create("r0", reused_history=12)
    assert m.resume("r0").ok
    assert _held_by(m, "r0") == ([0, 1, 2, 3, 4, 5] if load else [4, 5])
    m.close("r0")
    m.create("r2", reused_history=6)
    assert m.resume("r2").ok
    m.create("r1", reused_history=12, share_with="r0")
    assert m.resume("r1").ok
    if load:
        assert _held_by(m, "r1") == [3, 4, 5] and m.snapshot().pools[0].free == 2
    else:  # r0 held blocks 4-5 alone, still cached (r2 holds its blocks 1-2 in never-used slots): a hit of
        # all 12 tokens, both cached slots taken back: 8 - 2 - 2 free
        assert _held_by(m, "r1") == [4, 5] and m.snapshot().pools[0].free == 4
    assert m.hit_blocks("r1") == 2  # blocks 3-4 under the load, 4-5 pinned
    assert m.resize("r1", 13, 12).ok
    assert _held_by(m, "r1") == [4, 5, 6]  # the next step frees block 3, stale at history 12


def test_the_option_is_defined_with_prefix_sharing_on_and_off():
    for sharing in ({}, PREFIX):
        assert Semantics(**sharing, load_holds_prefix=True).to_dict()["load_holds_prefix"] is True
    assert "load_holds_prefix" not in Semantics().to_dict()  # written only when set: older traces unchanged


def test_the_oracle_load_campaign_passes_on_the_ci_profile():
    result = run_campaign("oracle-load", examples=300, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None, result.divergence
    assert result.examples == 300
