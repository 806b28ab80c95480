"""The free-order layer: where a request's release puts the freed blocks that keep nothing.

- ``release_uncached_to_tail`` (vLLM 0.23.0): the blocks a request's release (suspend, close) frees
  in a life cycle without a window (full attention, SSM) join the end of the free queue whether or
  not they keep content, in the order the release frees them (last block first); a sliding window's
  frees, at a release or as blocks leave its window, keep the pool's order (:class:`~.pool.Pool`:
  the ones that keep nothing to its front). Where a block goes in the free queue never moves it
  between held and free: the free count, and so every outcome, is the same in either order; only
  which cached slots a later allocation evicts first differs (:func:`evicted_cached`, theorem
  ``free-order-keeps-free-count``).

:func:`evicted_cached` counts what a free queue evicts: one formula, read by the proof catalogue and
by the layer's tests.
"""

from __future__ import annotations

from typing import Any

from . import arith
from .core import CoreManager, RequestRecord

__all__ = ["FreeOrder", "evicted_cached"]


def evicted_cached(m: Any, fresh: Any, q: Any, x: Any, k: Any, tail: Any) -> Any:
    """The cached slots ``m`` takes evict after a release freed ``x`` blocks that keep nothing and
    then ``k`` that keep content (a windowless life cycle freed last block first: its partial last
    block, which keeps nothing, before its whole ones), from a free queue holding ``fresh`` never-used
    slots and ``q`` cached ones, with no freed slot that keeps nothing before the release. The pool's
    order (``tail`` false) hands out the ``x`` first, then the never-used, then the cached oldest
    first; ``tail`` (``release_uncached_to_tail``) the never-used, the ``q`` older cached, the ``x``,
    then the ``k``. ``m`` at most ``fresh + q + x + k`` (what is free)."""
    front = arith.imax(0, m - x - fresh)
    past_old = arith.imax(0, m - fresh)  # under tail: what reaches the cached queue
    behind = arith.imin(past_old, q) + arith.imax(0, past_old - q - x)
    return arith.ite(tail, behind, front)


class FreeOrder(CoreManager):
    """The core with the semantics' free order (the option off: the core's behaviour)."""

    def __init__(self, config, release_order=None):
        super().__init__(config, release_order)
        self._releasing = False

    def new_pool(self, total: int):
        pool = super().new_pool(total)
        pool.release_tail = self.semantics.release_uncached_to_tail
        return pool

    def release_to_tail(self, life_cycle: int) -> bool:
        """Hook: whether a request's release puts the blocks of ``life_cycle`` that keep nothing at the
        free queue's end (``release_uncached_to_tail``: a life cycle without a window)."""
        return self.semantics.release_uncached_to_tail and self.layout.life_cycles[life_cycle].window is None

    def release_all(self, record: RequestRecord) -> None:
        self._releasing = True
        try:
            super().release_all(record)
        finally:
            self._releasing = False

    def free_blocks(self, record: RequestRecord, life_cycle: int, ranges) -> None:
        if not (self._releasing and self.release_to_tail(life_cycle)):
            super().free_blocks(record, life_cycle, ranges)
            return
        pool = self.pool_of(life_cycle)
        pool.tail_now = True
        try:
            super().free_blocks(record, life_cycle, ranges)
        finally:
            pool.tail_now = False
