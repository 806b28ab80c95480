"""vLLM's release profiles: the ``Semantics`` each release has, as data, where it differs from the
pinned release's (``swafloor matrix vllm`` compares a release with its own profile).

A backend claims the pinned release's semantics (:mod:`.backend`, :mod:`.prefix`). Each
:class:`Change` names one behaviour a run of older releases had instead: the option and the value
those releases have, the release range (``first`` up to, not including, ``since``), the trace that
shows it (``tests/regressions/``: it diverges under the pinned semantics on ``evidence_release``) and
the upstream change that made the pinned behaviour. Ranges are bisected with those traces (each
trace's ``found.verdict`` says how).

- A change the reference expresses (``option`` names a :class:`~swafloor.reference.Semantics` option):
  :func:`profile_semantics` sets it, for the backends whose claimed semantics has the option at
  another value, so the cell's campaign compares like with like and goes on past it.
- A change the reference cannot express yet (``option`` empty, ``modelled`` False): nothing is set;
  the cell stays red where its campaign meets it, and :func:`unmodelled` names it with the divergence
  class (``part@operation``) its trace shows, so a red cell's class is read against it (a class key
  match names a candidate, not a proof: the class's own trace is what shows it).

Bugs (named in a cell by :func:`.verdicts.classify`; behaviour an upstream fix calls wrong: the asynchronous scheduler freeing a block the step in
flight reads, 0.10.2-0.25.1, vLLM PR #47728; EAGLE groups caching only up to the aligned boundary on
0.22.1, vLLM #44082) are not profile entries: a profile never absorbs a bug, and those cells stay red.
"""

from __future__ import annotations

from typing import Any

import attrs

from swafloor.reference import Semantics
from swafloor.reference.semantics import options

from ...matrix import release_key

__all__ = ["Change", "CHANGES", "applies", "profile_semantics", "profile_capabilities", "profile_of", "unmodelled"]


@attrs.frozen
class Change:
    """One behaviour releases ``[first, since)`` have instead of the pinned release's."""

    name: str  # short, for reports
    since: str  # the first release with the pinned behaviour
    evidence: str  # tests/regressions/ trace that diverges under the pinned semantics on evidence_release
    evidence_release: str
    upstream: str  # the upstream change that made the pinned behaviour
    what: str
    option: str = ""  # the Semantics option (empty: not expressible by the reference yet)
    value: Any = None  # the option's value on those releases
    first: str = "0.8.3"  # the first release it applies to
    backends: tuple[str, ...] = ()  # unmodelled: the backends it shows on (modelled: those claiming the option)
    class_key: str = ""  # unmodelled: the divergence class its trace shows (part@operation)
    #: the other classes it shows, each with its own tests/regressions/ trace (on evidence_release)
    also: dict[str, str] = attrs.field(factory=dict)

    @property
    def modelled(self) -> bool:
        return bool(self.option)

    @property
    def class_keys(self) -> tuple[str, ...]:
        """Every divergence class it shows: ``class_key`` (its evidence trace's), then ``also``'s."""
        return (self.class_key, *self.also) if self.class_key else ()


CHANGES: tuple[Change, ...] = (
    Change(
        "no-partial-prompt-tail", since="0.26.0", first="0.12.0",
        evidence="vllm-0.24.0-prefix-eagle-mixed-no-prompt-tail.json", evidence_release="0.24.0",
        upstream="vllm-project/vllm#45939 and #46384 (FullAttentionManager._cache_partial_tail_block, in 0.26.0); "
                 "0.12.0-0.13.0 too since issue 33 (the mixed cells' slots@close traces of 0.12.0 and 0.13.0, met "
                 "past the connector load, match under it)",
        what="no partial prefix entry for the block a prompt ends inside", option="cache_prompt_tail", value=False),
    Change(
        "every-full-swa-block-cached", since="0.22.1", first="0.12.0",
        evidence="vllm-0.21.0-prefix-mixed-caches-unaligned.json", evidence_release="0.21.0",
        upstream="vLLM 0.22.1's hybrid coordinator (bisected with the evidence trace: diverges up to 0.21.0, "
                 "matches from 0.22.1; computed tokens rounded down to the scheduler block size, a retention mask; "
                 "0.12.0-0.13.0, the first releases serving mixed block sizes, since issue 33's connector load "
                 "past a hit: the mixed cells' slots@close and slots@resize traces of 0.13.0 match under it)",
        what="with block sizes that differ, every full SWA block is cached once computed, aligned or not",
        option="cache_aligned", value=False),
    Change(
        "unhashed-freed-to-tail", since="0.23.0", first="0.8.3",
        evidence="vllm-0.21.0-prefix-eagle-unhashed-freed-to-tail.json", evidence_release="0.21.0",
        upstream="vllm-project/vllm#42656 ('Apply LRU policy only to proper cache entries', first in 0.23.0); "
                 "0.9.2-0.10.2 too since issue 33 (their free_blocks append every freed block; the vllm-prefix "
                 "cells of 0.10.2 met its slots@resume and slots@resize classes past the connector load, and "
                 "both traces match under it); 0.8.3-0.8.5.post1 too since 0.8.x's prefix backends were driven (the "
                 "same free_blocks; vllm-0.8.5.post1-prefix-eagle-unhashed-freed-to-tail.json matches under it)",
        what="BlockPool.free_blocks appends every freed block to the free queue's tail, hashed or not "
             "(from 0.23.0 the ones without a hash go to its head)",
        option="uncached_to_tail", value=True),
    Change(
        "free-path-before-0.24", since="0.24.0", first="0.23.0",
        evidence="vllm-0.23.0-prefix-release-uncached-to-tail.json", evidence_release="0.23.0",
        upstream="0.24.0's BlockPool.free_blocks prepends the freed blocks without a hash on every free (with the "
                 "deferred free path of vllm-project/vllm#45357, which frees whole requests through it); 0.23.0 "
                 "had vllm-project/vllm#42656's split only in SlidingWindowManager.free and remove_skipped_blocks. "
                 "Isolated with the evidence traces: 0.23.0 with FullAttentionManager's free split as "
                 "SlidingWindowManager's matches, 0.23.0 with 0.24.0's two-phase hit touch (#44409) does not; "
                 "bisected: diverge on 0.23.0, match on 0.22.1 (unhashed-freed-to-tail) and from 0.24.0",
        what="a request's release appends a full-attention group's freed blocks to the free queue's end, "
             "hashed or not (the base SingleTypeKVCacheManager.free); a sliding window's frees prepend the "
             "ones without a hash",
        option="release_uncached_to_tail", value=True,
        backends=("vllm-prefix", "vllm-prefix-eagle", "vllm-prefix-mixed", "vllm-prefix-eagle-mixed"),
        also={"slots@resize": "vllm-0.23.0-prefix-eagle-release-uncached-to-tail.json"}),
    Change(
        "connector-load-holds-prefix", since="0.14.1",
        evidence="vllm-0.11.2-connector-load-holds-prefix.json", evidence_release="0.11.2",
        upstream="vllm-project/vllm#30166 ('Support hybrid allocator + kv cache connector': "
                 "allocate_slots' num_external_computed_tokens; bisected with the evidence traces and the matrix's "
                 "outcome@resume trace of 0.8.5.post1-0.13.0: diverge up to 0.13.0, match from 0.14.1)",
        what="a reused prefix is loaded as new tokens of a request with nothing computed: the first step holds a "
             "block for every loaded token, out-of-window ones too (also out of slots at the floor: "
             "vllm-0.11.2-connector-load-out-of-slots.json)",
        option="load_holds_prefix", value=True, also={"outcome@resume": "vllm-0.11.2-connector-load-out-of-slots.json"}),
    Change(
        "connector-load-past-a-hit", since="0.14.1", first="0.9.2",
        evidence="vllm-0.11.2-prefix-connector-load-holds-prefix.json", evidence_release="0.11.2",
        upstream="vllm-project/vllm#30166 (as connector-load-holds-prefix; bisected with both traces: diverge up to "
                 "0.13.0, match from 0.14.1)",
        what="connector-load-holds-prefix with prefix caching on: the step that adopts a hit (allocate_slots with "
             "the hit's blocks, nothing computed yet, so nothing freed) holds the hit's blocks live at the hit and "
             "a new block for every loaded token past it, out-of-window ones too (also out of slots at the floor: "
             "vllm-0.11.2-prefix-connector-load-out-of-slots.json)",
        option="load_holds_prefix", value=True,
        also={"outcome@resume": "vllm-0.11.2-prefix-connector-load-out-of-slots.json"}),
    Change(
        "preallocation", since="0.8.5", first="0.8.3",
        evidence="vllm-0.8.3-preallocation.json", evidence_release="0.8.3",
        upstream="vllm-project/vllm#16941 ('[V1] Remove pre-allocation for KV cache', in 0.8.5: memory a request "
                 "holds for nothing; modelled since issue 33, Semantics.preallocate_tokens, its cost theorems "
                 "preallocation-within-free and preallocation-keeps-waiting)",
        what="a step that needs a block takes num_preallocate_tokens (64) more tokens' worth past it, as many "
             "blocks as the pool has free (also at a first resume: vllm-0.8.3-preallocation-at-resume.json)",
        option="preallocate_tokens", value=64, also={"tables@resume": "vllm-0.8.3-preallocation-at-resume.json"}),
)


def applies(change: Change, release: str) -> bool:
    """Whether ``release`` is in the change's range ``[first, since)``."""
    return release_key(change.first) <= release_key(release) < release_key(change.since)


def profile_of(release: str, claimed: Semantics) -> dict[str, Any]:
    """The options ``release`` has otherwise than ``claimed`` (a backend's pinned-release semantics),
    option -> (value, the change's name): only options the claimed semantics has at another value."""
    found: dict[str, Any] = {}
    for change in CHANGES:
        if change.modelled and applies(change, release) and _expressible(claimed, change.option):
            current = getattr(claimed, change.option)
            if current != change.value:
                found[change.option] = (change.value, change.name)
    return found


def _expressible(claimed: Semantics, option: str) -> bool:
    """Whether ``claimed`` may take ``option`` off its default: the option it needs (``needs``) has the
    value it needs there (``uncached_to_tail`` only where freed blocks are cached)."""
    declared = {o.name: o for o in options(type(claimed))}[option]
    if declared.needs is None:
        return True
    other, wanted = declared.needs
    needed = {o.name: o for o in options(type(claimed))}[other]
    return needed.serialised(getattr(claimed, other)) == wanted


def profile_semantics(release: str, claimed: Semantics) -> Semantics:
    """``claimed`` (the pinned release's semantics a backend claims) as ``release`` has it."""
    changes = profile_of(release, claimed)
    return attrs.evolve(claimed, **{option: value for option, (value, _) in changes.items()}) if changes else claimed


def profile_capabilities(release: str, capabilities: Any) -> Any:
    """A backend's capabilities with its claimed semantics replaced by ``release``'s profile (a backend
    serving every semantics is left as it is)."""
    if getattr(capabilities, "all_semantics", False) or capabilities.semantics is None:
        return capabilities
    return attrs.evolve(capabilities, semantics=profile_semantics(release, capabilities.semantics))


def unmodelled(release: str, backend: str) -> tuple[Change, ...]:
    """The changes ``release`` has that the reference cannot express, shown on ``backend``."""
    return tuple(c for c in CHANGES if not c.modelled and applies(c, release) and backend in c.backends)
