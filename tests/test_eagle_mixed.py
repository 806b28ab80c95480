"""EAGLE with block sizes that differ (issue 23): what vLLM caches, and hits compared one-sided.

- ``cache_hit.cacheable_tokens`` and ``cache_hit.retained_block`` (``Semantics.cache_aligned`` under
  ``eagle``) against token-level searches over every aligned hit;
- ``Semantics.cache_prompt_tail`` (vLLM's partial prefix entry) and the EAGLE caching rule on the
  reference, against what vLLM 0.33.0 was seen to cache (``tests/regressions/vllm-prefix-eagle-mixed-*``
  replay those on vLLM itself in ``tests/test_vllm_prefix.py``);
- ``Manager.resume(hit_tokens=)``, ``longest_hit`` and ``hit_is_valid``: a lost hit taken on purpose,
  typed errors for a hit no engine may take;
- ``Capabilities.lost_hits`` in the lockstep: a shorter valid hit is a lost hit, reported, and the
  reference takes it; a longer hit, or a shorter invalid one, is a divergence.
"""

from __future__ import annotations

import attrs
import pytest

from swafloor.fuzz.adapter import ManagerBackend
from swafloor.fuzz.lockstep import Lockstep
from swafloor.fuzz.protocol import Capabilities, Operation
from swafloor.fuzz.trace import Step
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, RequestError, Semantics
from swafloor.reference import cache_hit

EAGLE_MIXED = Semantics(
    free_stale="at-allocate", suspend="recompute", first_resume_copy=False, prefix_sharing=True, cache_freed=True,
    hit_rule="common-prefix", cache_scheduled=True, lookahead_tokens=3, eagle=True, cache_aligned=True,
    cache_prompt_tail=True,
)


def _reads(L: int, t: int, window: int | None, eagle: int) -> set[int]:
    """The blocks a hit of ``L`` tokens reads, listed from its positions: those its first uncomputed
    token's window covers before it (at least the one holding token ``L - 1``), and the EAGLE block."""
    first = 0 if window is None else max(0, L + 1 - max(window, 2))
    return {p // t for p in range(first, L)} | ({L // t} if eagle else set())


@pytest.mark.parametrize("eagle", [0, 1])
def test_retained_block_is_a_block_some_aligned_hit_reads(eagle):
    """Block ``b`` is kept iff a hit of ``L > 0`` tokens, ``L`` a multiple of ``A``, reads it (searched
    over every such ``L`` far enough), or one hit far from position 0 reads ``A / t`` blocks or more."""
    for t in (1, 2, 3):
        for a in (1, 2, 3, 4):
            A = a * t
            for window in (None, *range(1, 14)):
                far = A * ((window or 0) // A + 2)
                everything = window is None or len(_reads(far, t, window, eagle)) >= a
                for b in range(0, 3 * a + (window or 0) + 2):
                    read = any(b in _reads(L, t, window, eagle) for L in range(A, (b + 2) * t + A + (window or 0), A))
                    assert cache_hit.retained_block(b, t, window, A, eagle) == (everything or read), (t, A, window, b)


def _cached_reach(computed: int, t: int, A: int, eagle: int) -> int:
    """Token by token: the furthest token (plus one) that any hit of ``L > 0`` tokens, ``L`` a multiple
    of ``A`` and at most ``computed``, reads: its tokens ``0..L-1`` and, with EAGLE, every token of the
    block holding token ``L`` (the block matched and given back), of those the computed ones only."""
    reach = 0
    for L in range(1, computed + 1):
        if L % A:
            continue
        read = set(range(L)) | ({p for p in range(computed) if p // t == L // t} if eagle else set())
        reach = max(reach, 1 + max(p for p in read if p < computed))
    return reach


def test_cacheable_tokens_is_the_furthest_an_aligned_hit_and_its_eagle_block_reach():
    """The tokens a life cycle caches: the furthest any aligned hit reaches, with EAGLE its block
    after the hit too, never past the computed tokens (:func:`_cached_reach`, token by token)."""
    for t in (1, 2, 4):
        for a in (1, 2, 4):
            A = a * t
            for computed in range(0, 5 * A):
                for eagle in (0, 1):
                    assert cache_hit.cacheable_tokens(computed, t, A, eagle) == _cached_reach(computed, t, A, eagle), \
                        (t, A, computed, eagle)
    # By hand: t = 2, A = 4, 9 computed: hits of 4 and 8 tokens; the longest reads tokens 0-7 (8), with
    # EAGLE also block 4 (tokens 8, 9), of which token 8 is computed (9). t = 4, A = 8, 13 computed: the
    # hit of 8 and, with EAGLE, block 2 (tokens 8-11, all computed): 12. 3 computed, A = 4: no hit, 0.
    assert [cache_hit.cacheable_tokens(9, 2, 4, e) for e in (0, 1)] == [8, 9]
    assert [cache_hit.cacheable_tokens(13, 4, 8, e) for e in (0, 1)] == [8, 12]
    assert [cache_hit.cacheable_tokens(3, 1, 4, e) for e in (0, 1)] == [0, 0]


def _whole_blocks_within(tokens: int, hash_t: int) -> int:
    """Token by token: the tokens of the hash blocks every token of which lies within the first ``tokens``."""
    return sum(hash_t for b in range(tokens + 1) if all(p < tokens for p in range(b * hash_t, (b + 1) * hash_t)))


def test_prompt_tail_tokens_is_the_prompts_whole_hash_blocks():
    """The prompt's whole hash blocks within its first ``prompt - 1`` tokens, with EAGLE within all of it."""
    for hash_t in (1, 2, 3):
        for prompt in range(1, 20):
            for eagle in (0, 1):
                assert cache_hit.prompt_tail_tokens(prompt, hash_t, eagle) == \
                    _whole_blocks_within(prompt - 1 + eagle, hash_t), (prompt, hash_t, eagle)
    # By hand, hash blocks of 3: a prompt of 7 tokens: its first 6 hold blocks 0 and 1 whole (6), with
    # EAGLE all 7 hold the same two (6); a prompt of 6: its first 5 hold block 0 (3), all 6 hold two (6).
    # A prompt of 1 token: none without EAGLE; with EAGLE its one token is a whole block of size 1 only.
    assert [cache_hit.prompt_tail_tokens(p, 3, e) for p in (7, 6) for e in (0, 1)] == [6, 6, 3, 6]
    assert [cache_hit.prompt_tail_tokens(1, h, e) for h in (1, 2) for e in (0, 1)] == [0, 1, 0, 0]


def test_cache_prompt_tail_needs_cache_freed_and_round_trips():
    with pytest.raises(ConfigError, match="semantics.cache_prompt_tail"):
        Semantics(cache_prompt_tail=True)
    assert Semantics.from_dict(EAGLE_MIXED.to_dict()) == EAGLE_MIXED
    assert "cache_prompt_tail" not in attrs.evolve(EAGLE_MIXED, cache_prompt_tail=False).to_dict()


def _manager(window: int, full_t: int, t: int = 1, slots=None) -> Manager:
    return Manager(Config(tokens_per_block=t, layers=[AttentionLayer(window=window),
                                                      AttentionLayer(window=None, tokens_per_block=full_t)],
                          pool_groups=[0, 0], slots=slots, semantics=EAGLE_MIXED))


def test_eagle_caches_one_block_past_the_boundary_and_the_prompt_tail_as_vllm_does():
    """SWA at t = 1 (W = 2) beside full attention at t = 2, 2 tokens reused, one more scheduled: vLLM
    0.33.0 cached SWA blocks 1 and 2 and full-attention blocks 0 and 1 (1 a partial entry: the prompt's
    3 tokens) at close (tests/regressions/vllm-prefix-eagle-mixed-cache-past-boundary.json, seen on
    vLLM); without the EAGLE rule and the prompt tail only SWA block 1 and full block 0 are."""
    seen_on_vllm = ((0, 1, "r0"), (0, 2, "r0"), (1, 0, "r0"), (1, 1, "r0"))
    for semantics, expected in ((EAGLE_MIXED, seen_on_vllm),
                                (attrs.evolve(EAGLE_MIXED, eagle=False, cache_prompt_tail=False),
                                 ((0, 1, "r0"), (1, 0, "r0")))):
        m = Manager(Config(tokens_per_block=1, layers=[AttentionLayer(window=2),
                                                       AttentionLayer(window=None, tokens_per_block=2)],
                           pool_groups=[0, 0], semantics=semantics))
        m.create("r0", reused_history=2)
        assert m.resume("r0").ok and m.resize("r0", 3, 2).ok
        m.close("r0")
        assert m.snapshot().cached == expected


def test_a_partial_entry_gives_way_to_the_whole_block():
    """t = 2, full attention at 8, r1 on 14 of r0's tokens: its block 1 is cached as r0's content while
    only the prompt fills it, as r1's once r1 fills it (both seen on vLLM: the two
    vllm-prefix-eagle-mixed-prompt-tail traces)."""
    for fill, last in ((False, "r0"), (True, "r1")):
        m = _manager(window=3, full_t=8, t=2, slots=[12])
        m.create("r0", reused_history=14)
        assert m.resume("r0").ok
        m.close("r0")
        m.create("r1", reused_history=14, share_with="r0")
        assert m.resume("r1").ok and m.hit_blocks("r1") == 0  # EAGLE needs block 1 whole: a partial entry is no hit
        if fill:
            assert m.resize("r1", 20, 14).ok
        m.close("r1")
        assert [key for key in m.snapshot().cached if key[0] == 1] == [(1, 0, "r0"), (1, 0, "r0"), (1, 1, "r0"), (1, 1, last)]


def _lost_hit_manager(full_t: int = 2) -> Manager:
    """t = 1, W = 5, full attention at 2: r0 caches SWA blocks 0-3 and full blocks 0-1, r1 waits on its
    4 tokens; its longest valid EAGLE hit is 2 (window blocks 0-1, block 2 given back; 4 would need
    block 4 within the 4 reused tokens)."""
    m = _manager(window=5, full_t=full_t)
    m.create("r0", reused_history=4)
    assert m.resume("r0").ok
    m.create("r1", reused_history=4, share_with="r0")
    return m


def test_longest_hit_and_hit_is_valid():
    m = _lost_hit_manager()
    assert m.longest_hit("r1") == 2
    assert [L for L in range(6) if m.hit_is_valid("r1", L)] == [0, 2]
    assert m.longest_hit("r1") == 2  # asking changes nothing


def _used(m: Manager) -> int:
    pool = m.snapshot().pools[0]
    return pool.total - pool.free


def test_resume_takes_a_lost_hit_or_names_the_bad_one():
    m = _lost_hit_manager()
    before = repr(m)
    for bad in (4, 1, -1, "2", None.__class__):
        with pytest.raises(RequestError, match="hit_tokens"):
            m.resume("r1", hit_tokens=bad)
        assert repr(m) == before
    assert m.resume("r1", hit_tokens=0).ok and m.hit_blocks("r1") == 0
    assert _used(m) == 12  # 6 blocks each, as vLLM 0.33.0 (its lost hit)
    other = _lost_hit_manager()
    assert other.resume("r1").ok and _used(other) == 9  # the longest: 3 blocks shared
    per_block = Manager(Config(tokens_per_block=1, layers=[AttentionLayer(window=5)],
                               semantics=Semantics(prefix_sharing=True, cache_freed=True)))
    per_block.create("a", reused_history=2)
    assert per_block.longest_hit("a") is None
    with pytest.raises(RequestError, match="hit_tokens"):
        per_block.resume("a", hit_tokens=0)


class _Engine(ManagerBackend):
    """A manager-shaped engine that takes ``hit(longest)`` as a first resume's hit where some hit is
    possible (``longest > 0``), and says so."""

    def __init__(self, config: Config, hit):
        super().__init__(Manager(config))
        self.hit, self.taken = hit, {}

    def resume(self, request_id, **_):
        longest = self.manager.longest_hit(request_id)
        if longest is None:
            return self.manager.resume(request_id)
        self.taken[request_id] = self.hit(longest) if longest > 0 else 0
        if self.manager.hit_is_valid(request_id, self.taken[request_id]) and self.taken[request_id] <= longest:
            return self.manager.resume(request_id, hit_tokens=self.taken[request_id])
        return self.manager.resume(request_id)  # what it claims is not what it does: the harness must object

    def hit_tokens(self, request_id):
        return self.taken.get(request_id)


STEPS = (Step.create("r0", 4), Step.resume("r0"), Step.create("r1", 4, share_with="r0"), Step.resume("r1"))


@pytest.mark.parametrize("hit, expect", [
    (lambda longest: longest, None),  # the longest: nothing lost
    (lambda longest: 0, "lost"),  # vLLM 0.33.0's hit here
    (lambda longest: longest + 2, "hit"),  # longer than any valid hit: a correctness bug
    (lambda longest: 1, "hit"),  # shorter but off the alignment: not valid either
])
def test_lockstep_reports_a_lost_hit_and_objects_to_a_wrong_one(hit, expect):
    config = _manager(window=5, full_t=2).config
    lock = Lockstep(config, lambda c: _Engine(c, hit), lambda c: ManagerBackend(Manager(c)), _rule_caps())
    found = None
    for step in STEPS:
        found, _ = lock.apply(step)
        if found is not None:
            break
    if expect == "hit":
        assert found is not None and found.field == "hit" and found.reference == 2
        return
    assert found is None
    assert lock.lost_hits == ([(3, "r1", 2, 0, "align-before-eagle-pop")] if expect == "lost" else [])


def _rule_caps(rules=("align-before-eagle-pop",)) -> Capabilities:
    return Capabilities(semantics=EAGLE_MIXED, prefix_sharing=True, lost_hit_rules=rules,
                        operations=[Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.CLOSE])


def test_the_named_rule_yields_vllms_hit_and_the_longest_where_it_does_not_apply():
    """``align-before-eagle-pop``: in the lost-hit situation (no run of W cached SWA blocks, alignment 2)
    the rule yields vLLM 0.33.0's 0; with one block size (alignment 1) it yields the longest, 3; within
    one run, a hit whose window lies in the run is left as it is."""
    m = _lost_hit_manager()
    assert (m.longest_hit("r1"), m.rule_hit("r1", "align-before-eagle-pop")) == (2, 0)
    with pytest.raises(RequestError, match="rule"):
        m.rule_hit("r1", "no-such-rule")
    other = _lost_hit_manager(full_t=1)
    assert (other.longest_hit("r1"), other.rule_hit("r1", "align-before-eagle-pop")) == (3, 3)
    # the closed form of one run: W = 5, t = 1, a = 2, run [0, 4), M = 4: run_hit 2, the rule 0
    assert cache_hit.run_hit(0, 4, 1, 5, 2, 1, 4) == 2
    assert cache_hit.run_hit_aligned_before_eagle_pop(0, 4, 1, 5, 2, 1, 4) == 0
    assert cache_hit.run_hit_aligned_before_eagle_pop(1, 8, 1, 5, 2, 1, 8) == cache_hit.run_hit(1, 8, 1, 5, 2, 1, 8)


@pytest.mark.parametrize("rules", [("align-before-eagle-pop",), ()])
def test_a_shorter_valid_hit_no_declared_rule_yields_is_a_hit_divergence_at_its_step(rules):
    """An engine that takes no hit where the longest is 3 and the rule yields 3 too (one block size:
    alignment 1): valid, shorter, but no declared rule explains it: a ``hit`` divergence at that resume.
    With no rule declared the hit is compared exactly (a table or slot difference shows it there)."""
    config = _manager(window=5, full_t=1).config
    lock = Lockstep(config, lambda c: _Engine(c, lambda longest: 0), lambda c: ManagerBackend(Manager(c)),
                    _rule_caps(rules))
    found = None
    for index, step in enumerate(STEPS):
        found, _ = lock.apply(step)
        if found is not None:
            break
    assert found is not None and index == 3 and lock.lost_hits == []
    if rules:
        assert found.field == "hit" and (found.reference, found.backend) == (3, 0)
        assert "no declared lost-hit rule" in found.reason and "align-before-eagle-pop yields 3" in found.reason


def test_lost_hits_need_one_common_prefix_semantics_and_named_rules():
    with pytest.raises(ValueError, match="lost_hit"):
        Capabilities(lost_hit_rules=("align-before-eagle-pop",))
    with pytest.raises(ValueError, match="lost_hit"):
        Capabilities(all_semantics=True, lost_hit_rules=("align-before-eagle-pop",), semantics=EAGLE_MIXED)
    with pytest.raises(ValueError, match="not lost-hit rules"):
        _rule_caps(("shorter-whenever",))
    assert _rule_caps().lost_hits and not _rule_caps(()).lost_hits
