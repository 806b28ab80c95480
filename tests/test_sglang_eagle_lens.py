"""Issue 33, without SGLang (this environment): how ``sglang-eagle`` finds the decode allocation lengths of a
release that computes them inline, before SGLang's ``page_aligned_decode_alloc_lens`` (0.5.19), read from the
release's spec v2 decode preparation (``fuzz/engines/sglang/eagle.py``: ``_page_aligned``, ``_InlineLens``).

The functions given to ``_page_aligned`` are paraphrases of the computations read in the releases (0.5.16's
page-aligned ``nxt``, 0.5.13.post1-0.5.15's token-granular ``nxt``, 0.5.7's increment ``x``), not SGLang's
code. The real releases run in tests/test_sglang_releases.py (0.5.14, in the SGLang venv) and in
``swafloor matrix sglang --backends sglang-eagle``.
"""

from __future__ import annotations

import ast

import pytest

from swafloor.fuzz.engines.sglang import eagle
from swafloor.fuzz.protocol import Unsupported

ALIGNED = """
def prepare(batch):
    for i, r in enumerate(batch.reqs):
        cur = r.kv.kv_allocated_len
        nxt = max(cur, (r.kv_committed_len + reserve + page_size - 1) // page_size * page_size)
"""
GRANULAR = """
def prepare(batch):
    for i, r in enumerate(batch.reqs):
        cur = r.kv_allocated_len
        nxt = max(cur, r.kv_committed_len + reserve)
"""
INCREMENT = """
def prepare(self, batch):
    for r in batch.reqs:
        x = r.kv_committed_len + 2 * self.ALLOC_LEN_PER_DECODE - r.kv_allocated_len
        r.kv_allocated_len += x
"""
NONE = """
def prepare(batch):
    nxt = batch.seq_lens + 1
"""


@pytest.mark.parametrize("source, aligned", [(ALIGNED, True), (GRANULAR, False), (INCREMENT, False), (NONE, None)],
                         ids=["aligned", "granular", "increment", "none"])
def test_sglang_eagle_reads_whether_a_release_page_aligns_its_decode_allocation(source, aligned):
    assert eagle._page_aligned(ast.parse(source).body[0]) is aligned


class _Kv:
    def __init__(self, allocated: int, committed: int):
        self.kv = self
        self.kv_allocated_len, self.kv_committed_len = allocated, committed


@pytest.mark.parametrize("aligned, one, two, clamped", [
    # (allocated 6, committed 5, reserve 8, pages of 4): up to ceil_4(13) = 16, or 13 token-granular
    (True, ([6], [16], 10), ([6, 21], [8, 24], 5), ([24], [24], 0)),
    # (6, 5) and (21, 20) with reserve 2: 7 -> 8 and 22 -> 24 aligned; 7 and 22 granular
    (False, ([6], [13], 7), ([6, 21], [7, 22], 2), ([24], [24], 0)),
], ids=["aligned", "granular"])
def test_sglang_eagle_inline_lengths_are_the_releases_next_allocated_length(aligned, one, two, clamped):
    lens = eagle._InlineLens(aligned, "a paraphrase")
    assert lens([_Kv(6, 5)], reserve=8, page_size=4) == one
    assert lens([_Kv(6, 5), _Kv(21, 20)], reserve=2, page_size=4) == two
    # committed 20 + reserve 3 = 23 (24 aligned) never takes the allocated length 24 back
    assert lens([_Kv(24, 20)], reserve=3, page_size=4) == clamped


def test_sglang_eagle_is_unsupported_naming_a_preparation_it_does_not_recognise(monkeypatch):
    monkeypatch.setattr(eagle, "_find", lambda name, modules, required=True: None)
    monkeypatch.setattr(eagle, "_preparation_source", lambda: ("speculative/x.py:prepare", ast.parse(NONE).body[0]))
    with pytest.raises(Unsupported, match="speculative/x.py:prepare computes no next allocated length"):
        eagle._decode_lens()
