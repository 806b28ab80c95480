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
``(r1 - eagle) * t``), then the alignment (round that down to a multiple of ``A``), and only then the
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
    "longest_hit",
    "pool_free_blocks",
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


def valid_in_run(L: Any, r0: Any, r1: Any, t: Any, window: Any, A: Any, eagle: Any, M: Any) -> Any:
    """Whether ``L`` is a valid hit for one life cycle whose needed blocks lie in its cached run
    ``[r0, r1)`` (see the module doc). ``eagle`` is 0 or 1."""
    backed = _and(hit_first_needed(L, t, window) >= r0, fdiv(L, t) + eagle <= r1)
    return _or(L == 0, _and(L > 0, _and(fmod(L, A) == 0, _and(L + eagle * t <= M, backed))))


def run_hit(r0: Any, r1: Any, t: Any, window: Any, A: Any, eagle: Any, M: Any) -> Any:
    """The longest valid hit within the cached run ``[r0, r1)`` of one life cycle (``0 <= r0 <= r1``
    blocks, ``A`` a multiple of ``t``, ``eagle`` 0 or 1, ``M >= 0`` tokens): pop, then align, then
    check the window: ``L = A * ((min(r1 * t, M) - eagle * t) // A)``, kept when positive and its
    window starts within the run, else 0."""
    end = imin(r1 * t, M) - eagle * t
    L = A * fdiv(imax(end, 0), A)
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


def longest_hit(cached: Sequence[Sequence[bool]], block_sizes: Sequence[int],
                windows: Sequence[int | None], eagle: Sequence[bool] | bool, M: int) -> int:
    """The model's hit: the longest valid hit (tokens) over every life cycle, by enumerating the
    aligned lengths up to ``M`` (concrete)."""
    A = alignment(block_sizes)
    for L in range(M - M % A, 0, -A):
        if hit_valid(L, cached, block_sizes, windows, eagle, M):
            return L
    return 0


def _and(a: Any, b: Any) -> Any:
    """Conjunction on the kernel's ``ite`` (bools, numpy arrays, solver terms alike)."""
    return ite(a, b, False)


def _or(a: Any, b: Any) -> Any:
    return ite(a, True, b)
