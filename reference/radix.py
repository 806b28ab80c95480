"""The radix-tree layer: what a prefix cache kept as a radix tree of published prefixes does
differently (SGLang's radix cache), two options of :class:`~.semantics.Semantics`:

- ``prompt_lock``: a request keeps the SWA blocks of its prompt's last window
  (:func:`~.lifecycle.prompt_lock_range`) from its first resume until it is suspended or closed
  (the tree lock on the prefix it matched or published pins that window's SWA KV), whether or not
  its window still reads them. A lone decoding request then holds up to
  :func:`~.floors.prompt_lock_floor` blocks, the minimum the config sizes an SWA pool to.
- ``publish_on_release``: content is findable only once published: a first resume publishes its
  prompt's whole blocks, a close its committed tokens' (a suspension publishes nothing), so what a
  live request commits after its prompt is hit by no other until it closes. A prompt ending on a
  block boundary has its last block computed again (one token is always computed) and then replaced
  by the published block: the call holds transient slots for it and for the block its window reads
  before the locked window (:meth:`RadixTree.first_resume_copies`).

Each option off, the layer changes nothing.
"""

from __future__ import annotations

from . import lifecycle
from .core import RequestRecord
from .lifecycle import LifeCycleKind
from .prefix_cache import PrefixCache
from .values import Outcome, Ranges, RequestState, merged_ranges

__all__ = ["RadixTree"]


def _union(ranges: Ranges, extra: tuple[int, int]) -> Ranges:
    """``ranges`` (sorted, disjoint) with the blocks ``[lo, hi)`` of ``extra`` added."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted((*ranges, extra)):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return merged_ranges(*out)


class RadixTree(PrefixCache):
    """The prefix-cache layer with a radix tree's tree lock and publication (module docstring)."""

    def __init__(self, config, release_order=None):
        super().__init__(config, release_order)
        self._locks: dict[str, int] = {}  # request -> its prompt (tokens), while it holds its tree lock
        self._publishing = False
        self._resuming: RequestRecord | None = None  # the request whose resume runs

    # ----------------------------------------------------------------- prompt_lock
    def lock_prompt(self, record: RequestRecord) -> int | None:
        """Hook: the prompt (tokens) whose last window ``record`` keeps locked, None when it holds no
        lock: from its first resume (which plans with it) until it is released."""
        if not self.semantics.prompt_lock:
            return None
        if record.request_id in self._locks:
            return self._locks[record.request_id]
        if record.state is RequestState.SUSPENDED and not record.resumed and record.history > 0:
            return record.history  # its first resume, being planned
        return None

    def record_ranges(self, record: RequestRecord, life_cycle: int, history: int, capacity: int) -> Ranges:
        ranges = super().record_ranges(record, life_cycle, history, capacity)
        prompt = self.lock_prompt(record)
        lc = self.layout.life_cycles[life_cycle]
        if prompt is None or lc.kind is not LifeCycleKind.SWA:
            return ranges
        t = self.block_sizes[life_cycle]
        lo, hi = lifecycle.prompt_lock_range(prompt, t, lc.window)
        hi = min(hi, lifecycle.allocated_blocks(capacity, t))
        return _union(ranges, (lo, hi)) if lo < hi else ranges

    # ----------------------------------------------------------------- publish_on_release
    def names_now(self, record: RequestRecord) -> bool:
        return (not self.semantics.publish_on_release or self._publishing) and super().names_now(record)

    def first_resume_copies(self, reused_history: int) -> list[int]:
        """Under ``publish_on_release``, a first resume of a prompt that ends on a block boundary computes
        its last block again (one token is always computed) and then takes the published one, holding
        for the call, per attention life cycle: one slot when another request holds that last block (a
        cached free one is taken for it instead), and, of an SWA life cycle, the block its window
        reaches before the prompt's locked last window (stale at the prompt's end) when no other
        request holds it. No first-resume copy otherwise."""
        if not self.semantics.publish_on_release or self._resuming is None:
            return super().first_resume_copies(reused_history)
        extra = [0] * self.layout.num_pool_groups
        found = self._finder(self._resuming)
        for lc_index, lc in enumerate(self.layout.life_cycles):
            t = self.block_sizes[lc_index]
            if lc.kind is LifeCycleKind.SSM or reused_history % t or reused_history < t:
                continue
            pool, last = self.pool_of(lc_index), reused_history // t - 1
            slot = found(lc_index, last)
            if slot is not None and not pool.hit_takes(slot):
                extra[self.pool_group_of[lc_index]] += 1
            if lc.window is not None:  # the last block's window reaches one block before the lock
                before = lifecycle.prompt_lock_range(reused_history, t, lc.window)[0] - 1
                slot = found(lc_index, before) if before >= 0 else None
                if before >= 0 and (slot is None or pool.hit_takes(slot)):
                    extra[self.pool_group_of[lc_index]] += 1
        return extra

    # ----------------------------------------------------------------- operations
    def resume(self, request_id: str, **kwargs) -> Outcome:
        record = self._get(request_id, RequestState.SUSPENDED)
        prompt = self.lock_prompt(record)
        self._publishing = True  # a resume publishes its prompt (named when it is resumed)
        self._resuming = record
        try:
            outcome = super().resume(request_id, **kwargs)
        finally:
            self._publishing = False
            self._resuming = None
        if outcome and prompt is not None:
            self._locks[request_id] = prompt
        return outcome

    def close(self, request_id: str) -> None:
        record = self._get(request_id)
        if self.semantics.publish_on_release and self._cache and record.state is RequestState.ACTIVE:
            self._publishing = True  # a finished request publishes its committed tokens before it lets go
            try:
                self.publish(record)
            finally:
                self._publishing = False
        super().close(request_id)

    def publish(self, record: RequestRecord) -> None:
        """Hook: what a close publishes: the content of every block ``record`` holds whose tokens are all
        committed."""
        self._name(record, record.history)

    def release_all(self, record: RequestRecord) -> None:
        self._locks.pop(record.request_id, None)
        super().release_all(record)
