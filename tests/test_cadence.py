"""The eviction clocks (Semantics.eviction_clock, reference/cadence.py): decode runs worked out by hand
under each clock, the forward clock's dependence on other requests' forwards, the window's interval,
bad input, and the seeded bug of the decode clock caught at its step."""

from __future__ import annotations

import pytest

from swafloor.proofs import mutations
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics


def _manager(clock: str, e: int, window: int = 2, t: int = 1, **more) -> Manager:
    return Manager(Config(t, [AttentionLayer(window=window)], slots=[40],
                          semantics=Semantics(free_stale="at-allocate", eviction_clock=clock, eviction_interval=e,
                                              **more)))


def _held(m: Manager, rid: str) -> int:
    return next(r for r in m.snapshot().requests if r.request_id == rid).tables[0].held_count


def _decodes(m: Manager, rid: str, prompt: int, steps: int, between=None) -> list[int]:
    """A request's extend of ``prompt`` tokens from history 0, then ``steps`` decodes (capacity h + 1 at
    history h); ``between()`` runs before each decode. The blocks it holds after each decode."""
    m.create(rid)
    assert m.resume(rid).ok
    assert m.resize(rid, prompt, 0).ok
    m.commit(rid, prompt)
    held = []
    for d in range(steps):
        if between is not None:
            between()
        h = prompt + d
        assert m.resize(rid, h + 1, h).ok, (rid, d)
        held.append(_held(m, rid))
        m.check()
        m.commit(rid, 1)
    return held


# t = 1, W = 2: at history h the live window is tokens h - 1 .. h, so block b is stale when b <= h - 2.
# A prompt of 3 tokens (history 3 after it), decodes at h = 3, 4, 5, ...


def test_the_decode_clock_frees_on_decodes_one_e_plus_one_and_so_on():
    # e = 3: decode 0 (h = 3) keeps what the extend freed at 0: blocks 0..3 = 4; decode 1 (h = 4) frees
    # (1 % 3 == 1): blocks 3, 4; decodes 2, 3 keep that point: 3 and 4 blocks; decode 4 (h = 7) frees: 6, 7.
    assert _decodes(_manager("decodes", 3), "a", 3, 7) == [4, 2, 3, 4, 2, 3, 4]
    # The token gate at e = 3 frees when h + 1 - 2 >= cursor + 3 (the same counts here by coincidence of
    # t = 1 and a decode per token, but decided by tokens): h = 4 (cursor 0), h = 7 (cursor 3).
    assert _decodes(_manager("tokens", 3), "a", 3, 7) == [4, 2, 3, 4, 2, 3, 4]


def _alternating(a_last: bool) -> list[int]:
    """Requests "a" and "b", e = 2, each an extend of 3 tokens ("a" first), then rounds of one decode each,
    "a" first in a round or last: the blocks "a" holds after each of its decodes."""
    m = _manager("forwards", 2)
    for rid in ("a", "b"):
        m.create(rid)
        assert m.resume(rid).ok
        assert m.resize(rid, 3, 0).ok
        m.commit(rid, 3)
    held = []
    for h in range(3, 8):
        for rid in (("b", "a") if a_last else ("a", "b")):
            assert m.resize(rid, h + 1, h).ok
            if rid == "a":
                held.append(_held(m, "a"))
            m.commit(rid, 1)
    m.check()
    return held


def test_the_forward_clock_counts_every_requests_forwards():
    # Alone, e = 3: the extend is forward 1; decode d sees its previous step's number, 1 + d: due at d = 2
    # (sees 3) and d = 5 (sees 6), never at d = 0.
    assert _decodes(_manager("forwards", 3), "a", 3, 7) == [4, 5, 2, 3, 4, 2, 3]
    # The same two requests and tokens, only the order within a round differs. "a" first: its steps are
    # forwards 1 (extend), 3, 5, ...; each decode sees an odd number: never due, one block more a token.
    assert _alternating(a_last=False) == [4, 5, 6, 7, 8]
    # "a" last: forwards 1, 4, 6, 8, ...: from decode 1 on it sees an even number, due every decode.
    assert _alternating(a_last=True) == [4, 2, 2, 2, 2]


def test_the_window_interval_and_its_degenerate_one():
    # window_interval: t * max(1, floor((W - 1) / t)); t = 2, W = 7: 6; t = 1, W = 2: 1, never due.
    assert _decodes(_manager("decodes", 1, window_interval=True), "a", 3, 6) == [4, 5, 6, 7, 8, 9]
    m = _manager("decodes", 1, window=7, t=2, window_interval=True)  # e = 6: decodes 1, 7 free
    # t = 2, W = 7: block b is stale at h when 2b + 1 < h - 6. Prompt 8: decode 0 at h = 8 keeps the
    # extend's point (0): blocks 0..4 = 5; decode 1 at h = 9 frees block 0: 1..4 = 4; decodes 2-6 keep it
    # (capacity 11..15: blocks 1..5, 1..5, 1..6, 1..6, 1..7); decode 7 at h = 15 frees 0..3: 4..7 = 4.
    assert _decodes(m, "a", 8, 8) == [5, 4, 5, 5, 6, 6, 7, 4]


def test_a_refused_decode_is_not_counted_and_a_suspension_restarts_the_count():
    m = Manager(Config(1, [AttentionLayer(window=2)], slots=[5],
                       semantics=Semantics(free_stale="at-allocate", suspend="recompute", eviction_clock="decodes",
                                           eviction_interval=3)))
    for rid, prompt in (("x", 1), ("a", 4)):
        m.create(rid)
        assert m.resume(rid).ok
        assert m.resize(rid, prompt, 0).ok
        m.commit(rid, prompt)
    assert not m.resize("a", 5, 4).ok  # decode 0 keeps 0..4: 5 blocks, 1 + 5 > 5 slots: refused
    m.close("x")
    assert m.resize("a", 5, 4).ok and _held(m, "a") == 5  # still decode 0 (counted, it would free: 2)
    m.commit("a", 1)
    assert m.resize("a", 6, 5).ok and _held(m, "a") == 2  # decode 1 frees: blocks 4, 5
    m.suspend("a")
    assert m.resume("a").ok
    assert m.resize("a", 2, 0).ok
    m.commit("a", 2)
    assert m.resize("a", 3, 2).ok and _held(m, "a") == 3  # decode 0 again: keeps 0..2
    m.commit("a", 1)
    assert m.resize("a", 4, 3).ok and _held(m, "a") == 2  # decode 1: frees 0, 1
    m.check()


def test_bad_clock_input_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError) as info:
        Semantics(eviction_clock="hourly")
    assert info.value.field == "semantics.eviction_clock"
    with pytest.raises(ConfigError) as info:
        Semantics(eviction_clock="decodes")  # needs free_stale at-allocate
    assert info.value.field == "semantics.eviction_clock"
    with pytest.raises(ConfigError) as info:
        Semantics(free_stale="at-allocate", window_interval=True)  # needs the decode clock
    assert info.value.field == "semantics.window_interval"
    assert "eviction_clock" not in Semantics().to_dict()
    s = Semantics(free_stale="at-allocate", eviction_clock="forwards")
    assert Semantics.from_dict(s.to_dict()) == s and s.to_dict()["eviction_clock"] == "forwards"


def test_the_decode_clock_from_zero_seeded_bug_is_caught_at_its_step():
    """The hand-worked run above, with the decode clock's formula mutated: decode 0 frees (its first
    step to differ), holding 2 blocks where the spec holds 4."""
    mutation = next(m for m in mutations.MUTATIONS if m.name == "decode-clock-from-zero")
    with mutations.applied(mutation):
        mutated = _decodes(_manager("decodes", 3), "a", 3, 2)
    assert mutated[0] == 2 != 4  # decode 0, the first decode, is where the spec (4) and the bug part
    assert _decodes(_manager("decodes", 3), "a", 3, 2)[0] == 4  # undone after


def test_an_extend_after_a_decode_that_was_not_due_frees_and_that_stands_when_refused():
    """Found by sglang-lazy on SGLang 0.5.14 (the forward clock): t = 1, W = 1, one slot. Decode 0 at
    history 1 is not due and is refused (it keeps block 0 and needs block 1); the next step at the same
    history asks two tokens: an extend, which frees block 0 (stale at 1) before its allocation, and that
    free stands though the allocation (blocks 1, 2: two slots of one) is refused."""
    m = Manager(Config(1, [AttentionLayer(window=1)], slots=[1], floor_rule="legacy",
                       semantics=Semantics(free_stale="at-allocate", eviction_clock="forwards", eviction_interval=128)))
    m.create("r")
    assert m.resume("r").ok
    assert m.resize("r", 1, 0).ok
    m.commit("r", 1)
    assert not m.resize("r", 2, 1).ok and _held(m, "r") == 1  # not due: block 0 kept, block 1 refused
    assert not m.resize("r", 3, 1).ok and _held(m, "r") == 0  # an extend: block 0 freed, the rest refused
    m.check()


def test_a_resize_asking_nothing_new_is_no_forward():
    """Under the forward clock (e = 2) a repeated resize to the capacity already held runs no batch: it
    frees nothing and takes no number, so the next decode reads its previous forward's (2: due)."""
    m = _manager("forwards", 2)
    m.create("a")
    assert m.resume("a").ok
    assert m.resize("a", 3, 0).ok  # forward 1
    m.commit("a", 3)
    assert m.resize("a", 4, 3).ok and _held(m, "a") == 4  # decode 0, forward 2
    assert m.resize("a", 4, 3).ok and _held(m, "a") == 4 and m.forwards == 2  # nothing new: no forward
    m.commit("a", 1)
    assert m.resize("a", 5, 4).ok and _held(m, "a") == 2  # decode 1 reads 2: due, blocks 3, 4
    m.check()
