"""The divergence classes of vLLM's releases that have a verdict: what a matrix cell's class is named.

A matrix cell reports each divergence class it met (``part@operation``, :mod:`swafloor.fuzz.classes`).
:func:`classify` names a class met on a release and backend by the known behaviours whose range holds
that release: a vLLM bug (:data:`BUGS`: fixed upstream, never a profile entry, so its cells stay red
with its name), an engine limitation (:data:`LIMITATIONS`: vLLM refuses a config inside its own code,
an exception, until an upstream change lifts it; a divergence at the build, never counted as a refusal)
or a release change the reference cannot express yet (:func:`~.profiles.unmodelled`). A class key match names a candidate, not a proof: each entry's trace
(``tests/regressions/``) is what shows it, and a class no entry names is a candidate bug, unnamed.
"""

from __future__ import annotations

from ...known import Known, names as known_names
from .profiles import unmodelled

__all__ = ["Bug", "BUGS", "Limitation", "LIMITATIONS", "classify"]


def Bug(name: str, traces: dict[str, str], backends: tuple[str, ...], *, first: str, since: str, fix: str) -> Known:
    """A vLLM bug on releases ``[first, since)``, fixed upstream by ``fix``, seen on ``backends`` as each
    class of ``traces`` (class -> ``tests/regressions/`` trace)."""
    return Known(name, traces, backends, first=first, since=since, fix=fix)


BUGS: tuple[Known, ...] = (
    Bug("async-frees-in-flight-read", {"tables@resize": "vllm-0.11.2-async-frees-in-flight-window.json",
                                       "outcome@resize": "vllm-0.21.0-async-frees-in-flight-outcome.json"},
        ("vllm-async",), first="0.10.2", since="0.26.0",
        fix="vllm-project/vllm#47728 (asynchronous scheduling freed a block the in-flight step still reads)"),
    Bug("eagle-spiral-drop", {"pool_used@resume": "vllm-0.19.1-prefix-eagle-spiral-drop.json",
                              "outcome@resume": "vllm-0.19.1-prefix-eagle-spiral-drop-out-of-slots.json",
                              "slots@resume": "vllm-0.19.1-prefix-eagle-spiral-drop-cached.json",
                              "hit@resume": "vllm-0.19.1-prefix-eagle-mixed-spiral-drop-lost-hit.json",
                              # 0.9.2-0.13.0: the connector load past the shorter hit holds other blocks
                              "tables@resume": "vllm-0.11.2-prefix-eagle-spiral-drop-load.json"},
        # dataplane:vllm-prefix-eagle: the wrapped vllm-prefix-eagle's own classes, before the data plane checks
        # anything (its 0.9.2-0.19.1 cells' traces have the same config, steps and field as vllm-prefix-eagle's)
        ("vllm-prefix-eagle", "vllm-prefix-eagle-mixed", "dataplane:vllm-prefix-eagle"), first="0.9.2", since="0.20.2",
        fix="vllm-project/vllm#32802 (EAGLE's last-block drop applied once per attention group)"),
    Bug("parent-hash-from-null-entry", {"outcome@resize": "vllm-0.9.2-prefix-parent-hash-null-crash.json"},
        ("vllm-prefix", "vllm-prefix-eagle", "dataplane:vllm-prefix", "dataplane:vllm-prefix-eagle"),
        first="0.8.3", since="0.10.2",
        fix="vllm-project/vllm#19728 (block hashes kept in Request.block_hashes: 0.8.3-0.9.2's cache_full_blocks chained a "
            "full block's hash from the previous table entry, the null block once a window no longer than a block "
            "left it; an AssertionError inside vLLM; checked on 0.8.3, 0.8.5.post1 and 0.9.2, fixed by 0.10.2)"),
    Bug("eagle-pop-onto-null-entry", {"outcome@resume": "vllm-0.8.5.post1-prefix-eagle-parent-hash-at-resume.json",
                                      # the hit's first computed token reads a null entry (stored under the profile)
                                      "tables@resume": "vllm-0.8.5.post1-prefix-eagle-pop-leaves-window-block.json"},
        ("vllm-prefix-eagle", "dataplane:vllm-prefix-eagle"), first="0.8.5.post1", since="0.9.2",
        fix="vllm-project/vllm#17398 ('Make sliding window compatible with eagle prefix caching', first in 0.9.0: "
            "0.8.5's EAGLE pop dropped the last block of the sliding-window hit after the search, so the hit's first "
            "computed token can read a null entry (tables@resume), and a hit ending on a null entry has the next full "
            "block's hash chained from it, cache_full_blocks asserting (outcome@resume, parent-hash-from-null-entry at "
            "a first resume); bisected: diverge on 0.8.5.post1, match on 0.9.2 under its profile)"),
    Bug("null-hit-counted-evictable", {"outcome@resume": "vllm-0.8.5.post1-prefix-null-hit-counted-evictable.json"},
        ("vllm-prefix", "vllm-prefix-eagle", "dataplane:vllm-prefix"), first="0.8.3", since="0.9.2",
        fix="vllm-project/vllm#19031 ('[Bugfix] get_num_blocks_to_allocate with null_block', first in 0.9.1: 0.8.x's "
            "allocate_slots counted a sliding-window hit's null entries as evictable hit blocks and refused a step "
            "whose new blocks fit; checked on 0.8.3 and 0.8.5.post1, fixed in 0.9.2)"),
    Bug("eagle-mixed-aligned-assert", {"outcome@resume": "vllm-0.18.1-prefix-eagle-mixed-swa-eagle-assert.json"},
        ("vllm-prefix-eagle-mixed",), first="0.14.1", since="0.19.1",
        fix="vllm-project/vllm#39450 (EAGLE with mixed block sizes: SlidingWindowManager asserted "
            "'aligned_length is not compatible with eagle now', a crash inside vLLM; reported as #39528)"),
    Bug("eagle-aligned-only", {"slots@close": "vllm-0.22.1-prefix-eagle-mixed-aligned-only.json",
                               "slots@resize": "vllm-0.22.1-prefix-eagle-mixed-aligned-only-at-resize.json",
                               # the 0.22.1 cell's fifth class (issue 33, class limit 10): the lost hit itself
                               "hit@resume": "vllm-0.22.1-prefix-eagle-mixed-aligned-only-lost-hit.json"},
        ("vllm-prefix-eagle-mixed",), first="0.22.1", since="0.23.0",
        fix="vllm-project/vllm#44082 (EAGLE groups cached only up to the aligned boundary)"),
    Bug("stale-full-attention-hit", {"pool_used@resume": "vllm-0.22.1-prefix-eagle-mixed-stale-full-hit.json",
                                     "slots@resume": "vllm-0.22.1-prefix-eagle-mixed-stale-full-hit-cached.json"},
        ("vllm-prefix-eagle-mixed",), first="0.18.1", since="0.29.0",
        fix="vllm-project/vllm#52828 (only the first full-attention group truncated to the shared hit; "
            "bisected: diverges up to 0.28.0, matches from 0.29.0)"),
)


_CACHING = ("vllm-prefix", "vllm-prefix-eagle", "vllm-prefix-mixed", "vllm-prefix-eagle-mixed", "dataplane:vllm-prefix",
            "dataplane:vllm-prefix-eagle")


def Limitation(name: str, traces: dict[str, str], backends: tuple[str, ...], *, first: str, since: str,
               lifted_by: str) -> Known:
    """A config vLLM's own code refuses on releases ``[first, since)`` (an assertion inside vLLM), seen on
    ``backends`` as each class of ``traces``; ``since`` is the release where ``lifted_by`` is first."""
    return Known(name, traces, backends, first=first, since=since, fix=lifted_by, kind="engine limitation")


LIMITATIONS: tuple[Known, ...] = (
    Limitation("one-kv-cache-group", {"build@build": "vllm-0.8.3-one-kv-cache-group.json"},
               ("vllm", "vllm-no-reuse", *_CACHING), first="0.8.3", since="0.9.2",
               lifted_by="vllm-project/vllm#17996 (the hybrid memory allocator: 0.8.x's KVCacheManager asserts it "
                         "serves one KV-cache group, so any config of two life cycles fails to build, prefix "
                         "caching on or off)"),
    Limitation("hybrid-two-windows-no-caching", {"build@build": "vllm-0.9.2-hybrid-two-windows.json"},
               ("vllm", "vllm-no-reuse"), first="0.9.2", since="0.10.2",
               lifted_by="vllm-project/vllm#20661 (hybrid allocator without prefix caching: 0.9.2's "
                         "HybridKVCacheCoordinator, which serves prefix caching off too, asserts one full-attention "
                         "type and one other; from 0.10.2 KVCacheCoordinatorNoPrefixCache serves caching off)"),
    Limitation("hybrid-two-windows", {"build@build": "vllm-0.11.2-prefix-hybrid-two-windows.json"},
               _CACHING, first="0.9.2", since="0.14.1",
               lifted_by="vllm-project/vllm#31707 (multiple KV-cache groups in the hybrid coordinator: up to 0.13.0 "
                         "its constructor asserts 'assumes exactly one other type of groups now' with prefix caching "
                         "on and two sliding windows of different sizes; 0.14.1's coordinator has no such assertion)"),
)


def classify(release: str, backend: str, class_key: str) -> list[str]:
    """The names of the known behaviours of ``release`` on ``backend`` that show as ``class_key``:
    each ``NAME (bug, FIX)``, ``NAME (engine limitation, lifted by FIX)`` or ``NAME (unmodelled)``; empty
    where none does."""
    names = known_names((*BUGS, *LIMITATIONS), release, backend, class_key)
    names += [f"{c.name} (unmodelled)" for c in unmodelled(release, backend) if class_key in c.class_keys]
    return names
