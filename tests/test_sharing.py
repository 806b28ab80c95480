"""Shared prefixes (issue 19): cache hits on another request's committed prefix, one slot for all
holders, freed by the last; the batch-sizing formula of reference/sharing.py against a brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from swafloor.reference import AttentionLayer, Config, Manager, RequestError, Semantics, SsmLayer
from swafloor.reference import lifecycle, sharing

SHARING = Semantics(prefix_sharing=True)


def config(t, window=None, sinks=0, slots=64, semantics=SHARING, layers=None):
    layers = layers or [AttentionLayer(window=window, sink_tokens=sinks)]
    return Config(tokens_per_block=t, layers=layers, slots=[slots], semantics=semantics)


def run_to(m, rid, history):
    """Resume a new request and decode it to ``history`` committed, capacity h + 1."""
    assert m.resume(rid)
    while m.history_of(rid) < history:
        h = m.history_of(rid)
        assert m.resize(rid, h + 1, h)
        m.commit(rid, 1)
    assert m.resize(rid, history + 1, history)
    m.check()


def used(m):
    return m.snapshot().pools[0].total - m.snapshot().pools[0].free


# ------------------------------------------------------------------ the manager
def test_without_prefix_sharing_share_with_shares_nothing():
    m = Manager(config(4, semantics=Semantics()))
    m.create("a")
    run_to(m, "a", 12)
    m.create("b", reused_history=10, share_with="a")
    m.resume("b")
    m.check()
    assert used(m) == 4 + 3  # a: blocks 0-3; b: 0-2 of its own
    assert m.snapshot().sharing == ()


def test_full_attention_hit_shares_whole_prefix_blocks_once():
    m = Manager(config(4))
    m.create("a")
    run_to(m, "a", 12)  # c = 13: blocks 0-3
    m.create("b", reused_history=10, share_with="a")  # prefix: blocks 0, 1 whole; block 2 partial
    assert m.resume("b")
    m.check()
    assert used(m) == 4 + 1  # b takes only its partial block 2
    assert m.snapshot().sharing == ((0, 0, ("a", "b")), (0, 1, ("a", "b")))
    slots = m.slots().held
    assert slots["a"][0][0] == slots["b"][0][0] and slots["a"][0][1] == slots["b"][0][1]
    assert slots["a"][0][2] != slots["b"][0][2]
    m.close("a")  # b still holds the shared blocks
    m.check()
    assert used(m) == 3 and m.snapshot().sharing == ()
    m.close("b")
    m.check()
    assert used(m) == 0


def test_hit_under_a_window_holds_only_live_blocks_and_leaves_null_entries():
    m = Manager(config(4, window=5))
    m.create("a")
    run_to(m, "a", 20)  # live window [16, 20]: blocks 4, 5
    m.create("b", reused_history=20, share_with="a")  # prefix blocks 0-4; b at (20, 20) needs block 4 only
    assert m.resume("b")
    m.check()
    (table,) = m.snapshot().requests[1].tables
    assert table.dense() == (None, None, None, None, 4)  # null entries for the out-of-window positions
    assert used(m) == 2 and m.snapshot().sharing == ((0, 4, ("a", "b")),)


def test_shared_block_stale_for_one_holder_is_not_freed_and_not_counted_free():
    m = Manager(config(4, window=5, slots=3))
    m.create("a")
    run_to(m, "a", 20)  # holds blocks 4, 5
    m.create("b", reused_history=20, share_with="a")
    assert m.resume("b")  # shares block 4
    assert used(m) == 2
    # a's step to (24, 25): block 4 goes stale for a (b still needs it), block 6 is new: 3 slots in use.
    assert m.resize("a", 25, 24)
    m.check()
    assert used(m) == 3
    # a's next step needs block 7 at (28, 29) and releases 5: one freed, one taken.
    assert m.resize("a", 29, 28)
    m.check()
    # Now b's block 4 and a's 6, 7: the pool is full; a step of a that would need block 8 while
    # releasing only block 6 fits, but b's own growth into block 5 must fail: nothing is free.
    before = m.snapshot()
    outcome = m.resize("b", 24, 20)
    assert not outcome and outcome.shortfalls[0].available == 0
    assert m.snapshot() == before


def test_release_of_a_shared_block_frees_no_slot_in_the_feasibility_check():
    """Old accounting counted every released block as freed: a's step would be judged feasible and
    then take a slot that does not exist."""
    m = Manager(config(4, window=5, slots=2))
    m.create("a")
    run_to(m, "a", 20)
    m.create("b", reused_history=20, share_with="a")
    assert m.resume("b")
    before = m.snapshot()
    outcome = m.resize("a", 25, 24)  # releases shared block 4 (b keeps it), needs block 6
    assert not outcome
    assert outcome.shortfalls[0].needed == 1 and outcome.shortfalls[0].available == 0
    assert m.snapshot() == before
    m.check()


def test_hits_only_on_blocks_the_source_still_holds_and_never_on_ssm():
    m = Manager(Config(
        tokens_per_block=4, layers=[AttentionLayer(window=5), AttentionLayer(), SsmLayer()],
        pool_groups=(0, 0, 0), slots=[64], semantics=SHARING,
    ))
    m.create("a")
    run_to(m, "a", 20)
    m.create("b", reused_history=12, share_with="a")  # prefix blocks 0-2
    assert m.resume("b")
    m.check()
    # SWA: b at (12, 12) needs blocks 2 (window [8, 12]); a no longer holds it: private.
    # Full attention: blocks 0-2 all hits. SSM: its own page.
    assert m.snapshot().sharing == ((1, 0, ("a", "b")), (1, 1, ("a", "b")), (1, 2, ("a", "b")))


def test_source_closed_before_the_first_resume_gives_no_hit():
    m = Manager(config(4))
    m.create("a")
    run_to(m, "a", 12)
    m.create("b", reused_history=8, share_with="a")
    m.close("a")
    assert m.resume("b")
    m.check()
    assert used(m) == 2 and m.snapshot().sharing == ()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"reused_history": 4, "share_with": "nobody"}, "share_with"),
        ({"reused_history": 4, "share_with": 7}, "share_with"),
        ({"reused_history": 4, "share_with": "closed"}, "share_with"),
        ({"reused_history": 13, "share_with": "a"}, "reused_history"),
    ],
)
def test_bad_share_with_is_a_typed_error_and_changes_nothing(kwargs, field):
    m = Manager(config(4))
    m.create("a")
    run_to(m, "a", 12)
    m.create("closed")
    m.close("closed")
    before = (m.snapshot(), m.request_ids())
    with pytest.raises(RequestError) as caught:
        m.create("b", **kwargs)
    assert caught.value.field == field and repr(kwargs[field])[:6].strip("'") in str(caught.value)
    assert (m.snapshot(), m.request_ids()) == before


def test_random_sharing_histories_keep_the_invariants():
    """Random creates on prefixes, steps, suspends and closes: check() (each request holds exactly its
    live blocks; a slot is shared only by one block of distinct requests, counted per holder; free and
    held slots add up) after every call."""
    rng = random.Random(19)
    shared_seen = 0
    for trial in range(150):
        t, window = rng.choice([1, 2, 4]), rng.choice([None, 1, 3, 5, 9])
        m = Manager(config(t, window=window, sinks=rng.choice([0, 1]) if window else 0, slots=rng.choice([12, 20, 40])))
        ids: list[str] = []
        for step in range(40):
            live = [r for r in ids if m.state_of(r).value != "closed"]
            op = rng.random()
            if op < 0.3 or not live:
                rid = f"r{len(ids)}"
                src = rng.choice(live) if live and rng.random() < 0.8 else None
                k = rng.randint(0, m.history_of(src)) if src else 0
                m.create(rid, reused_history=k, share_with=src)
                ids.append(rid)
            else:
                rid = rng.choice(live)
                state = m.state_of(rid).value
                if state == "suspended":
                    m.resume(rid)
                elif op < 0.85:
                    h = m.history_of(rid)
                    if m.resize(rid, h + rng.randint(1, 3), h):
                        m.commit(rid, rng.randint(0, 1))
                elif op < 0.92:
                    m.suspend(rid)
                else:
                    m.close(rid)
            m.check()
            shared_seen += bool(m.snapshot().sharing)
    assert shared_seen > 100  # the histories do share

def test_manager_holds_what_the_batch_formula_counts():
    """Requests created on one source's prefix at various histories: the pool's use equals
    sharing.shared_batch_slots over the batch (with the source's own blocks)."""
    for t, window, sinks in [(4, 5, 0), (4, None, 0), (2, 3, 1), (3, 7, 0)]:
        for reuse in range(0, 25):
            m = Manager(config(t, window=window, sinks=sinks, slots=200))
            m.create("a")
            run_to(m, "a", 24)
            p = reuse // t
            m.create("b", reused_history=reuse, share_with="a")
            assert m.resume("b")
            m.check()
            batch = [(24, 25), (reuse, max(reuse, p * t))]
            assert used(m) == sharing.shared_batch_slots(batch, t, window, sinks, p), (t, window, sinks, reuse)


# ------------------------------------------------------------------ the formula against a brute force
def brute_batch(requests, t, window, sinks, p):
    """Set-level count: prefix blocks live for any holder once, plus each request's own live blocks."""
    union: set[int] = set()
    own = 0
    for h, c in requests:
        live = lifecycle.live_block_indices(h, c, t, window, sinks)
        union.update(b for b in live if b < p)
        own += sum(1 for b in live if b >= p)
    return len(union) + own


def test_shared_batch_slots_against_brute_force_for_batches_up_to_three():
    for t, window, sinks, p in itertools.product((1, 2, 3, 4), (None, 1, 2, 4, 7), (0, 1, 2), (0, 1, 3, 5)):
        if window is None and sinks:
            continue
        histories = range(0, 3 * t + (window or 0) + p * t + 3, 2)
        for hs in itertools.combinations_with_replacement(histories, 3):
            for size in (1, 2, 3):
                batch = [(h, max(h + 1 + i, p * t)) for i, h in enumerate(hs[:size])]
                assert sharing.shared_batch_slots(batch, t, window, sinks, p) == brute_batch(batch, t, window, sinks, p)


def test_shared_batch_slots_counts_a_shared_block_once_and_never_more_than_the_sum():
    # t = 4, full attention, prefix of 3 blocks, two requests at c = 13: 4 + 4 blocks, 3 shared.
    assert sharing.shared_batch_slots([(12, 13), (12, 13)], 4, None, 0, 3) == 5
    assert sharing.shared_batch_slots([(12, 13), (12, 13)], 4, None, 0, 0) == 8
    assert sharing.prefix_blocks(11, 4) == 2
