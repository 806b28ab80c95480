"""The divergence classes of SGLang's releases that have a verdict: what an SGLang matrix cell's class is
named (:mod:`swafloor.fuzz.known`). Each entry's traces are in ``tests/regressions/``, replayed on
their release (a divergence) and on the pinned one (a match) by ``tests/test_sglang_releases.py``.
"""

from __future__ import annotations

from ...known import Known, names

__all__ = ["KNOWN", "classify"]

KNOWN: tuple[Known, ...] = (
    Known("chunk-evict-page-margin",
          {"tables@resize": "sglang-0.5.13.post1-chunk-evict-page-margin.json",
           "outcome@resize": "sglang-0.5.13.post1-chunk-evict-page-margin-refused.json",
           "outcome@schedule@resize": "sglang-0.5.13.post1-dataplane-page-margin-refused.json"},
          ("sglang", "sglang-lazy", "sglang-eagle", "dataplane:sglang", "dataplane:sglang-lazy"), first="0.5.13.post1",
          since="0.5.14",
          fix="0.5.14's free_swa_out_of_window_slots (drop_page_margin for the chunk cache): 0.5.12-0.5.13's "
              "ScheduleBatch._evict_swa kept the radix tree's extra page (sgl-project/sglang PR #22470) behind "
              "every request's window, the chunk cache's too; read in 0.5.12.post1 and 0.5.13.post1"),
    Known("partial-page-mapping",
          {"mapping@close": "sglang-0.5.13.post1-radix-partial-page-mapping.json",
           "mapping@suspend": "sglang-0.5.13.post1-eagle-partial-page-mapping-at-suspend.json"},
          ("sglang-radix", "sglang-eagle"), first="0.5.13.post1", since="0.5.14",
          fix="sgl-project/sglang#27779 (free_swa expands a partial-page free to whole pages; the leak it caused "
              "reported as sgl-project/sglang#27789)"),
    Known("forward-clock-starvation", {"liveness@resize": "sglang-0.5.14-forward-clock-liveness.json"},
          ("sglang-lazy", "dataplane:sglang-lazy"), first="0.5.14", since="0.5.18", kind="candidate bug",
          fix="sgl-project/sglang#33404 (the per-request token gate replaced the batch-wide forward counter of "
              "ScheduleBatch.maybe_evict_swa, for other stated reasons; the starvation itself, a decode batch reading "
              "its own last forward's number while prefills advance the counter, is docs/findings.md 13)"),
    Known("radix-no-window-free", {"liveness@resize": "sglang-0.5.7-radix-no-window-free.json"},
          ("sglang-radix",), first="0.5.7", since="0.5.8",
          fix="sgl-project/sglang#17220 (a running request's out-of-window SWA KV freed during decoding: 0.5.7's "
              "radix path frees no sliding window, so a lone decoding request holds its whole history)"),
    Known("tombstone-revive-frees-locked-full",
          {"tables@resume": "sglang-0.5.14-radix-tombstone-revive-frees-locked-full.json"},
          ("sglang-radix",), first="0.5.7", since="0.5.15.post1",
          fix="sgl-project/sglang#29352 (SWARadixCache._insert_helper reviving a tombstoned node freed its full KV "
              "checking only the SWA lock, while a running request still read it)"),
    Known("radix-cut-page-margin", {"liveness@resize": "sglang-0.5.14-radix-cut-page-margin.json"},
          ("sglang-radix",), first="0.5.14", since="0.5.16",
          fix="sgl-project/sglang#29860 (the radix path's sliding-window cut at max(window, page) instead of "
              "window + page: 'the extra page margin is unnecessary')"),
)


def classify(release: str, backend: str, class_key: str) -> list[str]:
    """The names of the known behaviours of ``release`` on ``backend`` that show as ``class_key``; empty
    where none does (a candidate, unnamed)."""
    return names(KNOWN, release, backend, class_key)
