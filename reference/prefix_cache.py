"""The prefix-cache layer: blocks of a reused prefix taken as hits, and freed blocks kept as cache.

- ``prefix_sharing`` (vLLM's and SGLang's prefix caches, TensorRT-LLM's block reuse): a request
  created on another's committed prefix (``create(..., share_with=...)``) takes the whole prefix
  blocks that request still holds at its first resume as hits: one slot for all holders.
- ``cache_freed`` (vLLM's prefix cache): a freed block whose tokens were all computed keeps its
  content in its free slot (one free queue, :class:`~.pool.Pool`); a later first resume on the same
  content takes it back. ``hit_rule``, ``eagle`` and the alignment: :mod:`.hits`.
- ``cache_scheduled`` (vLLM hashes a block when the step that fills it is scheduled): a block counts
  as computed once its tokens lie within the reserved capacity (draft slots left out, :mod:`.lookahead`).
- ``cache_aligned`` (vLLM's hybrid coordinator): only what an aligned hit can read is cached.
- ``cache_prompt_tail`` (vLLM's partial prefix entry): the block a prompt ends inside is named by
  the prompt's whole hash blocks while it fills.
"""

from __future__ import annotations

from typing import Any

import attrs

from . import cache_hit, lifecycle
from .core import CoreManager, RequestRecord
from .errors import RequestError, require_count, require_id
from .hits import HitRules, block_root, token_root
from .lifecycle import LifeCycleKind
from .config import HitRule
from .pool import Pool
from .values import Outcome, Plan, RequestState

__all__ = ["PrefixCache", "PrefixRecord"]


@attrs.define
class PrefixRecord:
    """What the layer keeps of a request."""

    request_id: str
    share_with: str | None = None  # the request whose committed prefix it was created on (prefix_sharing)
    prefix_blocks: int = 0  # the whole blocks (of the config's t) of that prefix
    prefix_tokens: int = 0  # that prefix in tokens (each life cycle's whole blocks of it are looked up)
    prompt_tokens: int = 1  # its prompt: the reused history and the first token it computes itself
    hit_blocks: int = 0  # the blocks its first resume took as hits
    named: list = attrs.Factory(list)  # caching: per life cycle, the blocks whose content was named so far
    # Where each token's content was first computed: ``(end token, request id)`` segments, the last
    # open-ended (``None``): token p's is that of the first segment whose end is above p.
    roots: tuple = ()


class PrefixCache(HitRules, CoreManager):
    """The core with the semantics' prefix sharing and cache (each option off: the core's behaviour)."""

    def __init__(self, config, release_order=None):
        super().__init__(config, release_order)
        self._cache = config.semantics.cache_freed
        self._prefixes: dict[str, PrefixRecord] = {}
        self._taking: int | None = None  # a resume's given hit (tokens), while it runs
        self._resume_hits: list | None = None  # what the running resume takes as hits

    def prefix_of(self, record: RequestRecord) -> PrefixRecord:
        return self._prefixes[record.request_id]

    def new_pool(self, total: int) -> Pool:
        return Pool(total, cache=self.semantics.cache_freed, tail=self.semantics.uncached_to_tail)

    def use_block_sizes(self, sizes: tuple[int, ...]) -> None:
        super().use_block_sizes(sizes)
        attention_t = [t for t, lc in zip(sizes, self.layout.life_cycles) if lc.kind is not LifeCycleKind.SSM]
        self._alignment = cache_hit.alignment(attention_t)  # a common-prefix hit ends on a whole block of each
        self._least_t = min(sizes)

    def copies_after_blocks(self) -> bool:
        return self._cache

    def hit_blocks(self, request_id: str) -> int:
        """The blocks the request's first resume took as cache hits (0 before it or without any)."""
        return self.prefix_of(self._get(request_id, allow_closed=True)).hit_blocks

    # ----------------------------------------------------------------- operations
    def create(self, request_id: str, *, reused_history: int = 0, share_with: str | None = None) -> None:
        """As the core's; ``share_with``: with ``prefix_sharing`` the whole blocks of the prefix that
        request still holds at this one's first resume are hits (with freed blocks cached, any
        reused prefix is looked up). ``share_with`` names a request that is not closed (cached: it may
        be, its blocks may outlive it), ``reused_history`` at most its history."""
        if share_with is not None:
            require_id(request_id)  # the core's checks first, in its order
            if request_id in self._requests:
                raise RequestError(request_id, "request_id", request_id, "already exists")
            require_count(request_id, "reused_history", reused_history)
            if type(share_with) is not str or share_with not in self._requests:
                raise RequestError(request_id, "share_with", share_with, "must name an existing request")
            source = self._requests[share_with]
            if source.state is RequestState.CLOSED and not self._cache:
                raise RequestError(request_id, "share_with", share_with, "request is closed")
            if reused_history > source.history:
                raise RequestError(request_id, "reused_history", reused_history,
                                   f"exceeds the committed history {source.history} of share_with {share_with!r}")
        super().create(request_id, reused_history=reused_history)
        prefix = reused_history if share_with is not None or self._cache else 0  # tokens
        roots: tuple = ((None, request_id),)
        if share_with is not None and prefix > 0:
            inherited = []
            for end, root in self._prefixes[share_with].roots:
                inherited.append((prefix if end is None else min(end, prefix), root))
                if end is None or end >= prefix:
                    break
            roots = (*inherited, *roots)
        self._prefixes[request_id] = PrefixRecord(
            request_id, share_with=share_with if self.semantics.prefix_sharing else None,
            prefix_blocks=prefix // self.tokens_per_block, prefix_tokens=prefix,
            prompt_tokens=reused_history + 1, roots=roots)

    def resume(self, request_id: str, *, hit_tokens: int | None = None) -> Outcome:
        """As the core's. ``hit_tokens``: the first resume takes a hit of that many tokens instead of
        the longest valid one (:meth:`longest_hit`): what an engine that lost a hit took. It must be a
        valid hit (:meth:`hit_is_valid`) no longer than the longest, under the ``common-prefix`` rule
        of a caching manager; else :class:`RequestError` names it, nothing changed."""
        self._get(request_id, RequestState.SUSPENDED)
        if hit_tokens is not None:
            longest = self.longest_hit(request_id)
            if longest is None or type(hit_tokens) is not int or not 0 <= hit_tokens <= longest \
                    or not self.hit_is_valid(request_id, hit_tokens):
                why = ("applies only to a first resume that looks up the cache under the common-prefix rule"
                       if longest is None else f"must be a valid hit of at most the longest, {longest} tokens")
                raise RequestError(request_id, "hit_tokens", hit_tokens, why)
        self._taking = hit_tokens
        try:
            return super().resume(request_id)
        finally:
            self._taking = None

    def _looks_up(self, req: RequestRecord) -> bool:
        """Whether the next resume of ``req`` looks its prefix up (its first, on a shared prefix or a
        reused history under ``cache_freed``)."""
        prefix = self.prefix_of(req)
        return not req.resumed and (
            prefix.share_with is not None or (self._cache and prefix.prefix_tokens >= self._least_t))

    def resume_hit_tokens(self, record: RequestRecord) -> int:
        """Under ``cache_freed`` and the ``common-prefix`` rule the hit a first resume that looks up takes
        (the given ``hit_tokens``, else :meth:`_hit_limit`); else none (no hit ends a loaded prefix)."""
        if not (self._cache and self._looks_up(record)) or self.semantics.hit_rule is not HitRule.COMMON_PREFIX:
            return super().resume_hit_tokens(record)
        return self._hit_limit(record, self._finder(record)) if self._taking is None else self._taking

    def resume_hits(self, record: RequestRecord, plan: Plan) -> list[dict[int, int]] | None:
        """Per life cycle, the blocks a first resume takes as hits: under ``cache_freed``
        :meth:`cache_hits`; else the prefix's whole blocks it must hold that its ``share_with``
        request still holds (attention life cycles only)."""
        hits = self._resume_hits = None if not self._looks_up(record) else (
            self.cache_hits(record, plan) if self._cache else self._shared_hits(record, plan))
        return hits

    def _shared_hits(self, record: RequestRecord, plan: Plan) -> list[dict[int, int]]:
        prefix = self.prefix_of(record)
        source = self._requests.get(prefix.share_with)
        hits: list[dict[int, int]] = [{} for _ in plan]
        if source is None or source.state is RequestState.CLOSED:
            return hits
        for lc_index, step in enumerate(plan):
            if step is None or self.layout.life_cycles[lc_index].kind is LifeCycleKind.SSM:
                continue
            theirs = source.held[lc_index]
            for lo, hi in step[0]:
                for b in range(lo, min(hi, prefix.prefix_tokens // self.block_sizes[lc_index])):
                    if b in theirs:
                        hits[lc_index][b] = theirs[b]
        return hits

    def stepped(self, record: RequestRecord, history: int, capacity: int, how: str) -> None:
        super().stepped(record, history, capacity, how)
        if how == "resumed" and self._resume_hits is not None:
            self.prefix_of(record).hit_blocks = sum(len(found) for found in self._resume_hits)
        if not self._cache:
            return
        if how == "planned":
            if not self.semantics.cache_scheduled:  # the history it ends on is computed: named before the call frees
                self._name(record, history, advance=False)
            return
        if how == "resized":  # blocks a smaller capacity cut off are named again when held again
            prefix = self.prefix_of(record)
            if prefix.named:
                prefix.named = [min(n, lifecycle.allocated_blocks(capacity, t)) for n, t in zip(prefix.named, self.block_sizes)]
        self._name_step(record, history, capacity, resuming=how == "resumed")

    def committed(self, record: RequestRecord) -> None:
        if self._cache and not self.semantics.cache_scheduled:
            self._name(record, record.history)
        super().committed(record)

    def release_all(self, record: RequestRecord) -> None:
        super().release_all(record)
        self.prefix_of(record).named = []  # blocks it holds again are named again

    # ----------------------------------------------------------------- naming content
    def names_now(self, record: RequestRecord) -> bool:
        """Hook: whether content ``record`` computed is named (findable) now; :mod:`.radix` names only
        what is published."""
        return True

    def scheduled_end(self, history: int, capacity: int, resuming: bool = False) -> int | None:
        """Hook, under ``cache_scheduled``: the tokens a step to ``capacity`` counts as computed (all
        of them; :mod:`.lookahead` leaves draft slots out). None: the step names nothing."""
        return capacity

    def _name_step(self, req: RequestRecord, history: int, capacity: int, resuming: bool = False) -> None:
        """Name what a step to ``(history, capacity)`` made computed (see :meth:`_name`)."""
        if not self.semantics.cache_scheduled:
            self._name(req, history)
            return
        end = self.scheduled_end(history, capacity, resuming)
        if end is not None:
            self._name(req, end)

    def _name(self, req: RequestRecord, computed: int, advance: bool = True) -> None:
        """Under ``cache_freed``: the content of every block ``req`` holds whose tokens all lie below
        ``computed`` is named, once per block index (a block not held when it became computed, out of
        the window, is never named). ``advance`` False: blocks not held now may still be named by a
        later call. ``cache_aligned``: a life cycle names only its first
        :func:`~.cache_hit.cacheable_tokens` tokens' blocks, and only those an aligned hit reads
        (:meth:`_reachable`). ``cache_prompt_tail``: see :meth:`_name_prompt_tail`. O(blocks named)."""
        if not self.names_now(req):
            return
        prefix = self.prefix_of(req)
        if not prefix.named:
            prefix.named = [0] * len(req.held)
        aligned_only = self.semantics.cache_aligned
        eagle, a = int(self.semantics.eagle), self.hit_alignment()
        for lc_index, held in enumerate(req.held):
            t = self.block_sizes[lc_index]
            if self.layout.life_cycles[lc_index].kind is LifeCycleKind.SSM:
                continue
            upto = cache_hit.cacheable_tokens(computed, t, a, eagle) if aligned_only else computed
            if self.semantics.cache_prompt_tail:
                self._name_prompt_tail(req, lc_index, upto)
            full = upto // t
            if prefix.named[lc_index] >= full:
                continue
            pool = self.pool_of(lc_index)
            for b in range(prefix.named[lc_index], full):
                if b in held and (not aligned_only or self._reachable(lc_index, b)):
                    pool.name(held[b], (lc_index, block_root(prefix, b, t), b))
            if advance:
                prefix.named[lc_index] = full

    def _name_prompt_tail(self, req: RequestRecord, lc_index: int, upto: int) -> None:
        """``cache_prompt_tail``: a full-attention life cycle whose block size differs from the config's
        ``t`` names the block its request's prompt ends inside by the prompt's whole hash blocks
        (:func:`~.cache_hit.prompt_tail_tokens`, ``n`` tokens) once its first ``upto`` cacheable tokens
        reach them, while that block is not whole: a content no hit reads, which the block keeps if
        freed before it fills and which its whole content replaces when it does."""
        lc, t = self.layout.life_cycles[lc_index], self.block_sizes[lc_index]
        if lc.kind is not LifeCycleKind.FULL or t == self.tokens_per_block:
            return
        prefix = self.prefix_of(req)
        n = cache_hit.prompt_tail_tokens(prefix.prompt_tokens, self.tokens_per_block, int(self.semantics.eagle))
        b = n // t
        if 0 < n <= upto and n % t and b in req.held[lc_index]:
            self.pool_of(lc_index).name(req.held[lc_index][b], (lc_index, token_root(prefix, n - 1), b, n))


def content_key(manager: Any, record: RequestRecord, life_cycle: int, block: int) -> tuple:
    """The content key of ``record``'s block of a life cycle: ``(life cycle, root, block)``."""
    return (life_cycle, block_root(manager.prefix_of(record), block, manager.block_size(life_cycle)), block)
