"""``Semantics.drafts_returned_at_commit`` (SGLang's EAGLE worker v1, issue 33): a commit gives back the
slots past the committed tokens. The layer (reference/draft_return.py) against hand-counted tables, the
option's declaration, and its seeded bug (``drafts-kept-at-commit``) caught at the first commit that
rejects drafts."""

from __future__ import annotations

import pytest

from swafloor.proofs import mutations
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics

#: SGLang's: stale blocks freed before each allocation, a retraction recomputes; 3 draft slots a step.
V1 = Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, lookahead_tokens=3,
               drafts_returned_at_commit=True)
KEPT = Semantics(free_stale="at-allocate", suspend="recompute", first_resume_copy=False, lookahead_tokens=3)


def _speculate(semantics: Semantics, accepted: list[int]) -> list[tuple[tuple, tuple]]:
    """W = 5, t = 2: a prefill of 6 tokens, then decode steps of capacity h + 4 committing ``accepted``
    tokens each: (the table at the step, the table after its commit)."""
    m = Manager(Config(tokens_per_block=2, layers=[AttentionLayer(window=5)], semantics=semantics))
    m.create("r")
    assert m.resume("r")
    assert m.resize("r", 6, 0)
    m.commit("r", 6)
    h, out = 6, []
    for d in accepted:
        assert m.resize("r", h + 4, h)
        m.check()
        at_step = m.snapshot().requests[0].tables[0].dense()
        m.commit("r", d)
        m.check()
        out.append((at_step, m.snapshot().requests[0].tables[0].dense()))
        h += d
    return out


def test_a_commit_gives_back_the_blocks_past_the_committed_tokens():
    steps = _speculate(V1, [1, 2, 4])
    # h = 6, capacity 10: blocks 0..4, stale at 6 (window [2, 6]): block 0; commit 1 -> h = 7, capacity 7:
    # blocks 0..3, block 0 already freed, nothing stale freed at the commit (at-allocate)
    assert steps[0] == ((None, 1, 2, 3, 4), (None, 1, 2, 3))
    # h = 7, capacity 11: blocks 0..5, stale at 7 (window [3, 7]): block 0 (block 1 holds token 3 still);
    # commit 2 -> capacity 9: blocks 0..4
    assert [b is not None for b in steps[1][1]] == [False, True, True, True, True]
    # h = 9, capacity 13, commit 4 (every draft accepted): capacity 13 kept, nothing given back
    assert steps[2][1] == steps[2][0]


def test_with_the_drafts_kept_the_step_capacity_stays_held():
    steps = _speculate(KEPT, [1, 2, 4])
    assert [len([b for b in after if b is not None]) for _, after in steps] == [4, 5, 5]
    assert [len([b for b in after if b is not None]) for _, after in _speculate(V1, [1, 2, 4])] == [3, 4, 5]


def test_the_option_is_a_flag_written_only_when_set():
    assert "drafts_returned_at_commit" not in KEPT.to_dict()
    assert V1.to_dict()["drafts_returned_at_commit"] is True
    assert Semantics.from_dict(V1.to_dict()) == V1
    with pytest.raises(ConfigError, match="semantics.drafts_returned_at_commit"):
        Semantics(drafts_returned_at_commit=1)


def test_the_seeded_bug_is_caught_at_the_first_commit_that_rejects_drafts():
    right = _speculate(V1, [1, 2, 4])
    with mutations.applied(next(m for m in mutations.MUTATIONS if m.name == "drafts-kept-at-commit")):
        wrong = _speculate(V1, [1, 2, 4])
    assert wrong[0][0] == right[0][0]  # the step itself is the same
    assert wrong[0][1] != right[0][1] and wrong[0][1] == wrong[0][0]  # its commit gives nothing back
