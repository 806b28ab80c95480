"""Hit rules of the prefix-cache layer (a mixin of :class:`~.prefix_cache.PrefixCache`): which
cached blocks a first resume takes, by the rule in force.

- ``per-block`` (the spec): every block it must hold whose content some slot keeps.
- ``common-prefix`` (vLLM's hybrid allocator): one hit length for every life cycle, a multiple of the
  alignment (the lcm of the attention life cycles' block sizes, :func:`~.cache_hit.alignment`).
- ``eagle`` (vLLM with an EAGLE drafter): :func:`~.cache_hit.longest_hit`, the block after the hit
  found too and given back to the drafter (the pop).
"""

from __future__ import annotations

from typing import Any

from . import cache_hit
from .config import HitRule
from .errors import RequestError
from .lifecycle import LifeCycleKind
from .values import RequestState

__all__ = ["HitRules", "block_root", "token_root"]


def block_root(prefix: Any, b: int, t: int) -> str:
    """The request that first computed the content of block ``b`` (of ``t`` tokens) of the request
    whose prefix record is ``prefix``: the one that computed its last token."""
    return token_root(prefix, (b + 1) * t - 1)


def token_root(prefix: Any, token: int) -> str:
    """The request that first computed the token at position ``token`` (see ``PrefixRecord.roots``)."""
    for end, root in prefix.roots:
        if end is None or token < end:
            return root
    return prefix.request_id


class HitRules:
    """Hit lookups: :meth:`longest_hit`, :meth:`rule_hit`, :meth:`hit_is_valid` and the hooks
    :meth:`cache_hits`, :meth:`eagle_hit`, :meth:`hit_alignment`."""

    def longest_hit(self, request_id: str) -> int | None:
        """The hit (tokens) the first resume of the suspended ``request_id`` would take now: the longest
        valid one under the ``common-prefix`` rule of a caching manager (``cache_freed``); None where
        no such lookup happens (another rule, no cache, not a first resume). Changes nothing."""
        req = self._get(request_id, RequestState.SUSPENDED)
        if not self._cache or self.semantics.hit_rule is not HitRule.COMMON_PREFIX or not self._looks_up(req):
            return None
        return self._hit_limit(req, self._finder(req))

    def rule_hit(self, request_id: str, rule: str) -> int | None:
        """The hit the first resume of the suspended ``request_id`` would take now under the lost-hit
        rule ``rule`` (a name in :data:`~.cache_hit.LOST_HIT_RULES`): under ``eagle``
        :func:`~.cache_hit.rule_hit` over the same patterns as :meth:`longest_hit`; without ``eagle``
        the longest hit up to the rule's lookup limit (:data:`~.cache_hit.LOOKUP_LIMITS`; the other
        rules change only the EAGLE pop). None where :meth:`longest_hit` is None; :class:`RequestError`
        for a name that is no rule. Changes nothing."""
        if rule not in cache_hit.LOST_HIT_RULES:
            raise RequestError(request_id, "rule", rule, f"is not a lost-hit rule {sorted(cache_hit.LOST_HIT_RULES)}")
        longest = self.longest_hit(request_id)
        if longest is None:
            return longest
        if not self.semantics.eagle:
            if rule not in cache_hit.LOOKUP_LIMITS:
                return longest
            req = self._get(request_id, RequestState.SUSPENDED)
            limit = cache_hit.LOOKUP_LIMITS[rule](self.prefix_of(req).prefix_tokens)
            return self.longest_common_hit(limit, self._finder(req))
        req = self._get(request_id, RequestState.SUSPENDED)
        patterns, sizes, windows = self._eagle_patterns(req, self._finder(req))
        return cache_hit.rule_hit(rule, patterns, sizes, windows, True, req.history) if patterns else 0

    def hit_is_valid(self, request_id: str, tokens: int) -> bool:
        """Whether a first resume of the suspended ``request_id`` could take a hit of ``tokens`` now:
        0, or a multiple of the alignment within the reused history whose every needed block is cached
        in every attention life cycle (with ``eagle``, :func:`~.cache_hit.hit_valid`, the block given
        back included; else :meth:`hit_length_fits`). Changes nothing."""
        req = self._get(request_id, RequestState.SUSPENDED)
        if type(tokens) is not int or tokens < 0:
            return False
        if tokens == 0:
            return True
        found = self._finder(req)
        if self.semantics.eagle:
            patterns, sizes, windows = self._eagle_patterns(req, found)
            return cache_hit.hit_valid(tokens, patterns, sizes, windows, True, req.history)
        prefix = self.prefix_of(req)
        return tokens <= prefix.prefix_tokens and tokens % self.hit_alignment() == 0 and self.hit_length_fits(tokens, found)

    def cache_hits(self, record: Any, plan: Any) -> list[dict[int, int]]:
        """Hook, under ``cache_freed``: per life cycle, the prefix's whole blocks the first resume must
        hold whose content some slot has (held, or cached free): the slot first named with it."""
        hits: list[dict[int, int]] = [{} for _ in plan]
        found = self._finder(record)
        limit = self._hit_limit(record, found) if self._taking is None else self._taking
        for lc_index, step in enumerate(plan):
            if step is None or self.layout.life_cycles[lc_index].kind is LifeCycleKind.SSM:
                continue
            for lo, hi in step[0]:
                for b in range(lo, min(hi, limit // self.block_sizes[lc_index])):
                    slot = found(lc_index, b)
                    if slot is not None:
                        hits[lc_index][b] = slot
        return hits

    def _finder(self, req: Any) -> Any:
        """``found(life cycle, block)``: the slot first named with the content of ``req``'s block, else None."""
        prefix = self.prefix_of(req)

        def found(lc_index: int, b: int) -> int | None:
            return self.pool_of(lc_index).first((lc_index, block_root(prefix, b, self.block_sizes[lc_index]), b))

        return found

    def _hit_limit(self, req: Any, found: Any) -> int:
        """The tokens below which a first resume takes what it finds: the reused prefix (``per-block``),
        else the one hit length for all life cycles: :meth:`eagle_hit` or :meth:`longest_common_hit`."""
        if self.semantics.eagle:
            return self.eagle_hit(req, found)
        if self.semantics.hit_rule is HitRule.COMMON_PREFIX:
            return self.longest_common_hit(self.prefix_of(req).prefix_tokens, found)
        return self.prefix_of(req).prefix_tokens

    def _eagle_patterns(self, req: Any, found: Any) -> tuple[list, list, list]:
        """Per attention life cycle: which blocks of the reused prefix it finds (in its own block
        size), its block size and its window (None: full attention)."""
        patterns, sizes, windows = [], [], []
        prefix_tokens = self.prefix_of(req).prefix_tokens
        for lc_index, lc in enumerate(self.layout.life_cycles):
            if lc.kind is LifeCycleKind.SSM:
                continue
            t = self.block_sizes[lc_index]
            patterns.append([found(lc_index, b) is not None for b in range(prefix_tokens // t)])
            sizes.append(t)
            windows.append(lc.window if lc.kind is LifeCycleKind.SWA else None)
        return patterns, sizes, windows

    def eagle_hit(self, record: Any, found: Any) -> int:
        """Hook: the hit (tokens) of a first resume under ``eagle``: :func:`.cache_hit.longest_hit` over
        which prefix blocks each attention life cycle finds, its reusable length the reused history."""
        patterns, sizes, windows = self._eagle_patterns(record, found)
        return cache_hit.longest_hit(patterns, sizes, windows, True, record.history) if patterns else 0

    def hit_alignment(self) -> int:
        """Hook: the tokens a common-prefix hit is a multiple of: the least common multiple of the
        attention life cycles' block sizes (:func:`~.cache_hit.alignment`; with one block size, ``t``)."""
        return self._alignment

    def longest_common_hit(self, limit: int, found: Any) -> int:
        """The longest hit of at most ``limit`` tokens, a multiple of the alignment, that fits every
        attention life cycle (:meth:`hit_length_fits`). A length that does not fit names a block it
        needs and cannot find; every longer length down to that block's start needs it too, so the
        search goes on from there: O(blocks looked up), where trying each length was quadratic."""
        a = self.hit_alignment()
        L = limit - limit % a
        while L > 0:
            missing = self._hit_missing(L, found)
            if missing is None:
                return L
            t, b = missing
            L = min(L - a, b * t - (b * t) % a)
        return 0

    def hit_length_fits(self, L: int, found: Any) -> bool:
        """Whether a hit of ``L`` tokens (a multiple of every attention life cycle's block size) fits
        every attention life cycle (``HitRule.COMMON_PREFIX``): each finds every block it holds at
        history and capacity ``L`` (its live blocks there), or, holding none there, its block before ``L``."""
        return L == 0 or self._hit_missing(L, found) is None

    def _hit_missing(self, L: int, found: Any) -> tuple[int, int] | None:
        """For a hit of ``L > 0`` tokens: ``(t, b)``, the highest block ``b`` (of ``t`` tokens) some
        attention life cycle needs and cannot find, or None when it fits."""
        for lc_index, lc in enumerate(self.layout.life_cycles):
            if lc.kind is LifeCycleKind.SSM:
                continue
            t = self.block_sizes[lc_index]
            ranges = self.required_ranges(lc_index, L, L) or ((L // t - 1, L // t),)
            for lo, hi in reversed(ranges):
                for b in range(hi - 1, lo - 1, -1):
                    if found(lc_index, b) is None:
                        return t, b
        return None

    def _reachable(self, lc_index: int, b: int) -> bool:
        """Whether some hit whose length is a multiple of the alignment reads block ``b`` of the life
        cycle (``cache_aligned``), by the hit rule in force. Under ``eagle``:
        :func:`~.cache_hit.retained_block`. Else the smallest such length ending past the block, ``L``,
        looks it up (its blocks at ``(L, L)``, else its block before ``L``); longer ones start their
        windows no earlier."""
        lc = self.layout.life_cycles[lc_index]
        if lc.window is None:
            return True
        t, a = self.block_sizes[lc_index], self.hit_alignment()
        if self.semantics.eagle:
            return cache_hit.retained_block(b, t, lc.window, a, 1)
        L = -(-(b + 1) * t // a) * a
        ranges = self.required_ranges(lc_index, L, L)
        return any(lo <= b < hi for lo, hi in ranges) if ranges else b == L // t - 1
