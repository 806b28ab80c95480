"""The speculative-decoding layer: draft slots (``lookahead_tokens``, vLLM's ``num_lookahead_tokens``).

Every decode step asks capacity ``h + 1 + k``; the pools' minimum is :func:`~.floors.lookahead_floor`
(sized in :mod:`.config`) and the manager serves whatever capacity a step asks. Of a step of
``n = c - h > 0`` new tokens the last ``min(k, n - 1)`` are draft slots: held, but holding no token of
the request yet, so under ``cache_scheduled`` a step names (makes findable) only the blocks within
``c - min(k, n - 1)``, and a step with no new token names nothing (vLLM caches up to the request's
known tokens).
"""

from __future__ import annotations

from .prefix_cache import PrefixCache

__all__ = ["Lookahead"]


class Lookahead(PrefixCache):
    """The prefix-cache layer with draft slots left out of what a step counts as computed."""

    def scheduled_end(self, history: int, capacity: int, resuming: bool = False) -> int | None:
        k = self.semantics.lookahead_tokens
        if not k:
            return super().scheduled_end(history, capacity, resuming)
        if capacity == history:
            return history if resuming else None
        return capacity - min(k, capacity - history - 1)
