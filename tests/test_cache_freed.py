"""The freed-block cache (issue 19, ``Semantics.cache_freed``): a freed block whose tokens were all
committed stays cached in its free slot, a later first resume on the same content takes it back, and
a slot taken from the pool evicts the least recently freed one (a freed request's tail first). The
reference and the independent oracle are checked on the same hand-made runs."""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends.oracle import OracleManager
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, RequestError, Semantics

CACHE = Semantics(prefix_sharing=True, cache_freed=True)


def config(t, window=None, slots=8, semantics=CACHE):
    return Config(tokens_per_block=t, layers=[AttentionLayer(window=window)], slots=[slots], semantics=semantics)


def both(cfg):
    return Manager(cfg), OracleManager(cfg)


def decode(m, rid, history):
    assert m.resume(rid)
    while m.history_of(rid) < history if isinstance(m, Manager) else m.requests[rid].history < history:
        h = m.history_of(rid) if isinstance(m, Manager) else m.requests[rid].history
        assert m.resize(rid, h + 1, h)
        m.commit(rid, 1)


def test_cache_freed_needs_prefix_sharing():
    with pytest.raises(ConfigError) as err:
        Semantics(cache_freed=True)
    assert err.value.field == "semantics.cache_freed"
    assert Semantics.from_dict(CACHE.to_dict()) == CACHE
    assert "cache_freed" not in Semantics(prefix_sharing=True).to_dict()


def test_a_closed_request_s_blocks_are_hits_from_the_cache():
    for m in both(config(2)):
        m.create("a")
        decode(m, "a", 6)  # blocks 0..2 committed; the last step asked for capacity 6
        m.close("a")
        snap = m.snapshot()
        assert snap.pools[0].free == 8  # the cache takes no slot
        assert snap.cached == ((0, 0, "a"), (0, 1, "a"), (0, 2, "a"))
        m.create("b", reused_history=6, share_with="a")  # closed, yet its content is cached
        assert m.resume("b")
        assert m.hit_blocks("b") == 3
        assert m.snapshot().cached == ()
    ref = Manager(config(2))
    ref.create("a")
    decode(ref, "a", 6)
    before = dict(ref.slots().held["a"][0])
    ref.close("a")
    ref.create("b", reused_history=6, share_with="a")
    ref.resume("b")
    assert dict(ref.slots().held["b"][0]) == before  # the very slots a freed
    ref.check()


def test_without_the_cache_a_closed_source_is_refused_and_nothing_is_kept():
    m = Manager(config(2, semantics=Semantics(prefix_sharing=True)))
    m.create("a")
    decode(m, "a", 4)
    m.close("a")
    assert m.snapshot().cached == ()
    with pytest.raises(RequestError):
        m.create("b", reused_history=4, share_with="a")


def test_eviction_takes_never_used_slots_first_then_the_least_recently_freed_tail_first():
    for m in both(config(1, slots=6)):
        m.create("a")
        decode(m, "a", 3)  # holds blocks 0..2 (capacity 3)
        m.close("a")  # freed 2, 1, 0: the tail first
        assert m.snapshot().cached == ((0, 0, "a"), (0, 1, "a"), (0, 2, "a"))
        m.create("c")
        assert m.resume("c") and m.resize("c", 4, 0)  # 3 never-used slots, then one freed: a's block 2
        assert m.snapshot().cached == ((0, 0, "a"), (0, 1, "a"))
        assert m.resize("c", 5, 0)  # then a's block 1
        assert m.snapshot().cached == ((0, 0, "a"),)
        m.close("c")  # nothing of c is committed: freed, nothing cached
        assert m.snapshot().cached == ((0, 0, "a"),)
        m.create("b", reused_history=3, share_with="a")
        assert m.resume("b")
        assert m.hit_blocks("b") == 1  # block 0 only: the rest was evicted and is computed again


def test_an_uncommitted_block_is_freed_but_not_cached():
    for m in both(config(4)):
        m.create("a")
        assert m.resume("a") and m.resize("a", 8, 0)
        m.commit("a", 6)  # block 1 half committed
        m.close("a")
        assert m.snapshot().cached == ((0, 0, "a"),)


def test_a_window_hit_holds_only_live_blocks_and_leaves_null_entries():
    t, w = 2, 3
    for m in both(config(t, window=w, slots=12)):
        m.create("a")
        assert m.resume("a") and m.resize("a", 10, 0)
        m.commit("a", 10)  # stale at 10: blocks [0, (10 + 1 - 3) // 2) = [0, 4): freed and cached
        assert m.snapshot().cached == ((0, 0, "a"), (0, 1, "a"), (0, 2, "a"), (0, 3, "a"))
        m.close("a")
        m.create("b", reused_history=10, share_with="a")
        assert m.resume("b")
        table = m.snapshot().requests[-1].tables[0]
        assert table.dense() == (None, None, None, None, 4)  # only the live block held; the rest null
        assert m.hit_blocks("b") == 1
        # the null entries' content stays cached, not held
        assert m.snapshot().cached == ((0, 0, "a"), (0, 1, "a"), (0, 2, "a"), (0, 3, "a"))


def test_a_live_holder_s_committed_block_is_a_hit_sharing_its_slot():
    for m in both(config(2)):
        m.create("a")
        decode(m, "a", 4)
        m.create("b", reused_history=4, share_with="a")
        assert m.resume("b")
        assert m.hit_blocks("b") == 2
        assert m.snapshot().pools[0].free == 8 - 2  # a holds blocks 0, 1 (capacity 4); b shares both
        assert m.snapshot().cached == ()


def _cached_then_uncached_freed(m) -> None:
    """r0 commits block 0 and closes (slot 0 cached); r1 takes the never-used slot 1 and closes with
    nothing committed (freed keeping nothing); r2 is admitted, no slot taken yet."""
    m.create("r0")
    decode(m, "r0", 1)
    m.close("r0")
    m.create("r1")
    assert m.resume("r1") and m.resize("r1", 1, 0)
    m.close("r1")
    m.create("r2")
    assert m.resume("r2")


@pytest.mark.parametrize("to_tail", [False, True])
def test_uncached_to_tail_hands_out_a_cached_slot_freed_before_an_uncached_one(to_tail):
    """``uncached_to_tail`` (vLLM before 0.23.0): a slot freed keeping nothing joins the free queue's end,
    after a cached slot freed before it, so the next slot taken evicts that cached block; by default it
    goes to the front and the cached block stays. Two slots: r0 commits block 0 and closes (slot 0 cached);
    r1 takes slot 1 and closes with nothing committed; r2 takes one slot."""
    cfg = config(1, slots=2, semantics=Semantics(**{**CACHE.to_dict(), "uncached_to_tail": to_tail}))
    for m in both(cfg):
        _cached_then_uncached_freed(m)
        assert m.resize("r2", 1, 0)
        cached = m.snapshot().cached
        assert len(cached) == (0 if to_tail else 1), (type(m).__name__, cached)
    assert Semantics(**{**CACHE.to_dict(), "uncached_to_tail": True}).to_dict()["uncached_to_tail"] is True
    with pytest.raises(ConfigError, match="needs semantics.cache_freed"):
        Semantics(prefix_sharing=True, uncached_to_tail=True)


@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("on", [False, True])
def test_release_uncached_to_tail_only_for_a_windowless_life_cycle_s_release(on, window):
    """``release_uncached_to_tail`` (vLLM 0.23.0): a slot a request's release frees keeping nothing in a
    life cycle without a window joins the free queue's end, after the cached slot freed before it, so the
    next slot taken evicts that cached block; a sliding window's release keeps the pool's order (to the
    front), as the option off does. The run of the test above, one life cycle of t = 1."""
    cfg = config(1, window=window, slots=2, semantics=Semantics(**{**CACHE.to_dict(), "release_uncached_to_tail": on}))
    for m in both(cfg):
        _cached_then_uncached_freed(m)
        assert m.resize("r2", 1, 0)
        assert m.snapshot().pools[0].free == 1  # the free count is the same in either order
        cached = m.snapshot().cached
        assert len(cached) == (0 if on and window is None else 1), (type(m).__name__, cached)
    assert Semantics(**{**CACHE.to_dict(), "release_uncached_to_tail": True}).to_dict()["release_uncached_to_tail"] is True
    with pytest.raises(ConfigError, match="needs semantics.cache_freed"):
        Semantics(prefix_sharing=True, release_uncached_to_tail=True)


def test_a_window_s_release_to_the_tail_is_caught_at_the_step_that_evicts():
    """The seeded bug release-tail-for-windows (the hook ``release_to_tail`` true for a sliding window
    too): the run above with a window of 2 diverges from the oracle at r2's resize, the step whose slot
    evicts r0's cached block (the spec keeps it: the window's release put r1's slot at the front)."""
    from swafloor.fuzz.backends.reference_mutants import REFERENCE_MUTANTS

    cfg = config(1, window=2, slots=2, semantics=Semantics(**{**CACHE.to_dict(), "release_uncached_to_tail": True}))
    mutant, oracle = REFERENCE_MUTANTS["release-tail-for-windows"].make(cfg), OracleManager(cfg)
    for m in (mutant, oracle):
        _cached_then_uncached_freed(m)
    assert mutant.snapshot() == oracle.snapshot()  # the same up to the step that takes a slot
    for m in (mutant, oracle):
        assert m.resize("r2", 1, 0)
    assert (len(mutant.snapshot().cached), len(oracle.snapshot().cached)) == (0, 1)
