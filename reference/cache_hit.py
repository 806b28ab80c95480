"""Prefix-cache hits: which cached prefix a new request may reuse, with speculative (EAGLE) drafting
and a different block size per life cycle.

A request whose first ``L`` prompt tokens are reused starts at history ``h = L``: its first
uncomputed token sits at position ``L`` and attends to the tokens ``[L + 1 - W, L - 1]`` before it
(the live window of :mod:`.lifecycle`; full attention: ``[0, L - 1]``). A hit of ``L`` tokens is
*valid* for a life cycle with ``t`` tokens per block when

- ``L`` is a multiple of the alignment ``A`` (the least common multiple of every life cycle's block
  size, :func:`alignment`), so that every life cycle's table ends on a whole block;
- every block that window touches is cached, blocks ``[first, L / t)`` with
  ``first = max(0, (L + 1 - max(W, 2)) // t)`` (:func:`hit_first_needed`; full attention:
  ``first = 0``). ``max(W, 2)``: a hit always ends on a cached block, the one holding token ``L - 1``,
  whose chained hash vouches for the prefix, even where a window of one token reads nothing before
  its own position;
- with EAGLE (``eagle = 1``) the block after the hit, ``L / t``, is cached too and within the
  request's longest reusable length ``M`` (``L + t <= M``): the engine matched it and gave it back
  so the drafter recomputes it (the *pop*: the hit ends one block before the matched prefix);
- ``L = 0`` is always valid (nothing reused).

Blocks ``[0, first)`` of a valid hit are null entries of the table (positions outside the window,
never read); the table holds real blocks only from ``first`` on. A hit valid for every life cycle is
valid; the model's hit is the longest valid one (:func:`longest_hit`). Within one cached run of
blocks ``[r0, r1)`` of one life cycle the longest valid hit has the closed form :func:`run_hit`
(the catalogue proves it valid and longest): the pop first (the hit ends one block before the run,
``(r1 - eagle) * t``, or before ``M``), then the alignment (round that down to a multiple of ``A``), and only then the
window check against the run's start; rounding down moves the window's start back, so checking the
window before rounding reads before the run.

Written on the arithmetic kernel (ints, Z3 and cvc5 terms, numpy arrays) except :func:`alignment`
and :func:`longest_hit`, which take concrete patterns. ``window=None`` is full attention.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .arith import fdiv, fmod, imax, imin, ite
from .lifecycle import stale_count

__all__ = [
    "alignment",
    "hit_first_needed",
    "hit_entries",
    "hit_null_entries",
    "hit_real_blocks",
    "valid_in_run",
    "run_hit",
    "hit_valid",
    "cached_runs",
    "longest_hit",
    "run_hit_aligned_before_eagle_pop",
    "LOST_HIT_RULES",
    "prompt_end_limit",
    "LOOKUP_LIMITS",
    "rule_hit",
    "pool_free_blocks",
    "cacheable_tokens",
    "hit_read_blocks",
    "retained_block",
    "prompt_tail_tokens",
]


def alignment(block_sizes: Sequence[int]) -> int:
    """The alignment of a hit, in tokens: the least common multiple of the life cycles' block sizes
    (concrete sizes, each >= 1)."""
    return math.lcm(*block_sizes) if block_sizes else 1


def hit_first_needed(L: Any, t: Any, window: Any) -> Any:
    """The first block a hit of ``L > 0`` tokens needs cached: the block of the window's first token,
    ``max(0, (L + 1 - max(W, 2)) // t)``; full attention (``window is None``): 0."""
    if window is None:
        return 0
    return imax(0, fdiv(L + 1 - imax(window, 2), t))


def hit_entries(L: Any, t: Any) -> Any:
    """Table entries of a hit of ``L`` tokens (a multiple of ``t``): ``L / t`` blocks."""
    return fdiv(L, t)


def hit_null_entries(L: Any, t: Any, window: Any) -> Any:
    """Entries of a hit's table that are null (before the window's first block): ``first`` for
    ``L > 0``, none for ``L = 0``."""
    return ite(L > 0, hit_first_needed(L, t, window), 0)


def hit_real_blocks(L: Any, t: Any, window: Any) -> Any:
    """Real (non-null) blocks a hit of ``L`` tokens holds: its entries less its null entries."""
    return hit_entries(L, t) - hit_null_entries(L, t, window)


def pool_free_blocks(pool_blocks: Any, used: Any) -> Any:
    """Free blocks of a pool of ``pool_blocks`` blocks, one of them the shared null block (never free,
    never evictable, never handed out), when ``used`` real blocks are held: ``pool_blocks - 1 - used``."""
    return pool_blocks - 1 - used


def valid_in_run(L: Any, r0: Any, r1: Any, t: Any, window: Any, a: Any, eagle: Any, M: Any) -> Any:
    """Whether ``L`` is a valid hit for one life cycle whose needed blocks lie in its cached run
    ``[r0, r1)`` (see the module doc): alignment ``A = a * t`` (``a`` blocks), ``eagle`` 0 or 1."""
    backed = _and(hit_first_needed(L, t, window) >= r0, fdiv(L, t) + eagle <= r1)
    aligned = _and(fmod(L, t) == 0, fmod(fdiv(L, t), a) == 0)
    return _or(L == 0, _and(L > 0, _and(aligned, _and(L + eagle * t <= M, backed))))


def run_hit(r0: Any, r1: Any, t: Any, window: Any, a: Any, eagle: Any, M: Any) -> Any:
    """The longest valid hit (tokens) within the cached run ``[r0, r1)`` of one life cycle
    (``0 <= r0 <= r1`` blocks, alignment ``A = a * t`` with ``a >= 1`` blocks of this life cycle,
    ``eagle`` 0 or 1, ``M >= 0`` tokens): the pop, then the alignment, then the window check. In
    blocks: the matched prefix ends at ``min(r1, M // t)``, the pop leaves ``e = min(r1, M // t) -
    eagle``, the alignment ``a * (e // a)``; the hit is that many blocks when positive and its window
    starts within the run, else 0."""
    popped = imax(imin(r1, fdiv(M, t)) - eagle, 0)
    L = t * (a * fdiv(popped, a))
    return ite(_and(L > 0, hit_first_needed(L, t, window) >= r0), L, 0)


def hit_valid(L: int, cached: Sequence[Sequence[bool]], block_sizes: Sequence[int],
              windows: Sequence[int | None], eagle: Sequence[bool] | bool, M: int) -> bool:
    """Whether ``L`` is a valid hit for every life cycle (concrete): ``cached[i][b]`` says whether
    block ``b`` of life cycle ``i`` is cached (missing entries: not cached); ``eagle`` per life cycle
    (or one for all)."""
    if L == 0:
        return True
    A = alignment(block_sizes)
    if L < 0 or L % A or L > M:
        return False
    flags = [eagle] * len(block_sizes) if isinstance(eagle, bool) else list(eagle)
    for blocks, t, window, e in zip(cached, block_sizes, windows, flags):
        e = int(bool(e))
        if L + e * t > M:
            return False
        first, end = hit_first_needed(L, t, window), L // t + e
        if end > len(blocks) or not all(blocks[first:end]):
            return False
    return True


def cached_runs(blocks: Sequence[bool]) -> list[tuple[int, int]]:
    """The maximal runs ``[r0, r1)`` of cached blocks in a pattern (concrete)."""
    runs, start = [], None
    for b, present in enumerate(list(blocks) + [False]):
        if present and start is None:
            start = b
        elif not present and start is not None:
            runs.append((start, b))
            start = None
    return runs


def longest_hit(cached: Sequence[Sequence[bool]], block_sizes: Sequence[int],
                windows: Sequence[int | None], eagle: Sequence[bool] | bool, M: int,
                eagle_reach: int | None = None) -> int:
    """The model's hit (concrete): the longest hit valid for every life cycle. A hit's needed blocks
    are contiguous, so for one life cycle the longest valid hit up to ``L`` is the best of its maximal
    cached runs' :func:`run_hit` with the reusable length capped at ``L`` (plus the EAGLE block);
    starting from ``L = M`` and taking the smallest over the life cycles until nothing changes gives
    the longest hit valid for all (every jointly valid hit stays below each step). ``eagle_reach``
    (default ``M``): how far the drafter's block may reach, ``L + t <= eagle_reach``; an engine may let
    it reach the prompt's last whole block (``eagle_reach >= M``), one past the last reusable token."""
    A = alignment(block_sizes)
    flags = [eagle] * len(block_sizes) if isinstance(eagle, bool) else list(eagle)
    runs = [cached_runs(blocks) for blocks in cached]
    reach = M if eagle_reach is None else eagle_reach
    L = M
    while True:
        new = L
        for blocks_runs, t, window, e in zip(runs, block_sizes, windows, flags):
            e = int(bool(e))
            cap = min(reach, L + e * t)
            new = min(new, max([run_hit(r0, r1, t, window, A // t, e, cap) for r0, r1 in blocks_runs], default=0))
        if new == L:
            return L
        L = new


def run_hit_aligned_before_eagle_pop(r0: Any, r1: Any, t: Any, window: Any, a: Any, eagle: Any, M: Any) -> Any:
    """The lost-hit rule ``align-before-eagle-pop`` (vLLM 0.33.0's sliding-window finder): the hit of one
    cached run is :func:`run_hit`'s, except where the engine finds no run as long as the window: a run
    from block 0 (``r0 = 0``) of a sliding-window life cycle whose hit ``L`` has a window reaching before
    position 0 (``L + 1 < W``), with EAGLE and an alignment of two blocks or more (``a >= 2``). There the
    cached prefix is aligned first, the EAGLE block popped, and the rest aligned again, one alignment
    step short: ``max(L - a * t, 0)``, still a valid hit (shorter, within the same run). Full attention,
    one block of alignment, no EAGLE, or a window the hit fills: :func:`run_hit` unchanged."""
    L = run_hit(r0, r1, t, window, a, eagle, M)
    if window is None:
        return L
    short = _and(r0 == 0, _and(eagle == 1, _and(a >= 2, L + 1 < window)))
    return ite(short, imax(L - a * t, 0), L)


def prompt_end_limit(M: Any) -> Any:
    """The lost-hit rule ``prompt-end-recomputed``: the reusable length a lookup may reach when the
    request's prompt ends at its reused history ``M``, one token short of it, ``max(M - 1, 0)``: the
    scheduler stops a hit before the prompt's last token so that its first step computes at least that
    token (vLLM's ``max_cache_hit_length = num_tokens - 1``). The rule's hit is the longest valid hit up
    to that length; it loses a block exactly where the longest hit covers the whole reused history."""
    return imax(M - 1, 0)


#: The lost-hit rules: each a named way an engine takes a valid hit shorter than the longest, as the
#: hit of one cached run on the engine's first lookup pass (:func:`rule_hit`). A backend declares the
#: ones its engine follows (``Capabilities.lost_hit_rules``); a shorter hit no declared rule yields is
#: a divergence.
LOST_HIT_RULES: dict[str, Any] = {
    "align-before-eagle-pop": run_hit_aligned_before_eagle_pop,
    "prompt-end-recomputed": run_hit,  # the run's hit unchanged, the reusable length shortened (LOOKUP_LIMITS)
}

#: The rules of :data:`LOST_HIT_RULES` that shorten the reusable length a lookup may reach (the
#: reused history ``M`` -> the length the lookup stops at); the others look up to ``M``.
LOOKUP_LIMITS: dict[str, Any] = {
    "prompt-end-recomputed": prompt_end_limit,
}


def rule_hit(rule: str, cached: Sequence[Sequence[bool]], block_sizes: Sequence[int],
             windows: Sequence[int | None], eagle: Sequence[bool] | bool, M: int,
             eagle_reach: int | None = None) -> int:
    """The hit (concrete) the lost-hit rule ``rule`` (a name in :data:`LOST_HIT_RULES`) yields: one
    lookup pass over the life cycles, full attention first (as vLLM orders its groups), each taking
    the best of its cached runs under the rule's hit of a run (:data:`LOST_HIT_RULES`) at the candidate
    so far (plus its EAGLE block); a hit the pass shortened counts as looked up, so from there on it is
    the :func:`longest_hit` fixed point, which keeps a valid candidate and shortens only one that is
    not valid. A rule of :data:`LOOKUP_LIMITS` looks up to its shortened length. KeyError for a name
    that is no rule."""
    run = LOST_HIT_RULES[rule]
    A = alignment(block_sizes)
    flags = [eagle] * len(block_sizes) if isinstance(eagle, bool) else list(eagle)
    reach = M if eagle_reach is None else eagle_reach
    if rule in LOOKUP_LIMITS:  # the lookup stops short of the reused history, the drafter's reach with it
        M = LOOKUP_LIMITS[rule](M)
        reach = min(reach, M)
    L = M
    for i in sorted(range(len(block_sizes)), key=lambda i: windows[i] is not None):
        t, e = block_sizes[i], int(bool(flags[i]))
        cap = min(reach, L + e * t)
        L = min(L, max([run(r0, r1, t, windows[i], A // t, e, cap) for r0, r1 in cached_runs(cached[i])], default=0))
    return longest_hit(cached, block_sizes, windows, eagle, L, reach)


def cacheable_tokens(computed: Any, t: Any, A: Any, eagle: Any) -> Any:
    """Under ``cache_aligned``: how many of a request's ``computed`` tokens a life cycle of ``t`` tokens
    per block caches. A hit is a multiple of the alignment ``A``, so the computed tokens rounded down
    to it, ``aligned``; with EAGLE (``eagle = 1``) one block of the life cycle's own past that too
    (the block a later hit matches and gives back to the drafter), never past ``computed``; and
    nothing while ``aligned`` is 0 (no hit, so no block to give back either)."""
    aligned = A * fdiv(computed, A)
    return ite(aligned > 0, imin(computed, aligned + eagle * t), 0)


def hit_read_blocks(t: Any, window: Any, A: Any, eagle: Any) -> Any:
    """The blocks one hit of ``A`` tokens reads in a life cycle of ``t`` tokens per block (a multiple
    of ``t`` divides ``A``): its needed blocks ``[hit_first_needed(A), A / t)`` and, with EAGLE, the
    block the engine matched and gave back. Every longer aligned hit reads as many or more (its window
    is not cut by position 0)."""
    return fdiv(A, t) + eagle - hit_first_needed(A, t, window)


def retained_block(b: Any, t: Any, window: Any, A: Any, eagle: Any) -> Any:
    """Under ``cache_aligned``: whether block ``b`` of a life cycle of ``t`` tokens per block is kept
    in the cache, i.e. whether some hit of ``L > 0`` tokens, a multiple of ``A``, reads it: blocks
    ``[hit_first_needed(L), L / t + eagle)``. The shortest such ``L`` reaching the block,
    ``L = A * max(1, ceil((b + 1 - eagle) * t / A))``, starts its window no later than any longer one,
    so it decides. Full attention (``window`` None) keeps every block, and so does a life cycle where
    one hit reads a whole alignment's worth of blocks or more (:func:`hit_read_blocks` at least
    ``A / t``): vLLM's retention mask then keeps all, block 0 included even where, with EAGLE, no hit
    reads it."""
    if window is None:
        return True
    L = A * imax(1, fdiv((b + 1 - eagle) * t + A - 1, A))
    reads = _and(hit_first_needed(L, t, window) <= b, b < fdiv(L, t) + eagle)
    return _or(hit_read_blocks(t, window, A, eagle) >= fdiv(A, t), reads)


def prompt_tail_tokens(prompt: Any, hash_t: Any, eagle: Any) -> Any:
    """Under ``cache_prompt_tail``: the prefix, in tokens, that names the block a request's prompt
    ends inside: the prompt's whole blocks of the hash size ``hash_t`` (the config's ``t``) within its
    first ``prompt - 1`` tokens (what a resend of the prompt can reuse: its last token is computed
    again), or within the whole prompt with EAGLE (the lookup reads one block further, then gives it
    back)."""
    return hash_t * fdiv(prompt - 1 + eagle, hash_t)


def _and(a: Any, b: Any) -> Any:
    """Conjunction on the kernel's ``ite`` (bools, numpy arrays, solver terms alike)."""
    return ite(a, b, False)


def _or(a: Any, b: Any) -> Any:
    return ite(a, True, b)
