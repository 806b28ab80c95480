"""A pool group's slots: a counter and a heap of returned ids, reference counts for shared slots, and,
under ``cache_freed`` (vLLM's prefix cache), the content each slot keeps and one free queue.
"""

from __future__ import annotations

import heapq

import attrs

from . import cache_hit

__all__ = ["Pool"]


@attrs.define
class Pool:
    """Slot ids ``0 .. total - 1``; the lowest free id is taken first. Memory is O(slots in use):
    ids at or above ``fresh`` have never been taken, ids below it that are free sit in ``returned``."""

    total: int
    fresh: int = 0
    returned: list[int] = attrs.Factory(list)  # a heap
    used: int = 0
    peak_used: int = 0
    sharers: dict[int, int] = attrs.Factory(dict)  # slot id -> holders beyond the first (shared slots only)
    # A caching pool (``cache_freed``) names the content of every slot whose block counts as computed
    # (``content``: slot -> key; ``index``: key -> its slots, first named first), held or free, and
    # hands slots out in the order of one free queue: the freed slots without content (``front``, a
    # stack: the last freed batch first, each batch in its own order), then the never-used ids, then
    # the freed slots with content (``queue``: least recently freed first), the cached ones. A slot
    # loses its content when it is taken again (evicted). ``tail`` (``uncached_to_tail``): a freed slot
    # without content joins the queue's end too (``front`` stays empty). ``release_tail``
    # (``release_uncached_to_tail``, :mod:`.free_order`): the frees that set ``tail_now`` while they run
    # put such a slot at the queue's end.
    cache: bool = False
    tail: bool = False
    release_tail: bool = False
    tail_now: bool = False
    front: list[int] = attrs.Factory(list)
    queue: dict[int, None] = attrs.Factory(dict)
    content: dict[int, tuple] = attrs.Factory(dict)
    index: dict[tuple, dict[int, None]] = attrs.Factory(dict)

    def check(self, g: int, used: set[int]) -> None:
        """Assert the pool's invariants, ``used`` the slots some request holds (``g``: its pool group)."""
        listed = self.freed()
        returned = set(listed)
        assert len(returned) == len(listed), f"pool group {g} lists a free slot twice"
        assert (self.tail or self.release_tail or set(self.queue) <= set(self.content)) and not set(self.front) & set(self.content), (
            f"pool group {g}: cached slots {sorted(set(self.content) - returned)} not free")
        assert {(key, s) for key, slots in self.index.items() for s in slots} == {
            (key, s) for s, key in self.content.items()} and all(self.index.values()), f"pool group {g}: cache index disagrees"
        assert not returned & used, f"pool group {g}: slots {sorted(returned & used)} both free and owned"
        assert all(0 <= s < self.fresh for s in returned | used), f"pool group {g}: slot id out of range"
        free = len(returned) + self.total - self.fresh
        assert free + len(used) == self.total, f"pool group {g}: free {free} + used {len(used)} != total {self.total}"
        assert self.used == len(used), f"pool group {g}: counts {self.used} in use, {len(used)} owned"
        assert set(self.sharers) <= used, f"pool group {g}: shared slots {sorted(set(self.sharers) - used)} not owned"

    @property
    def free(self) -> int:
        # The pool's blocks are its slots and the shared null block (the entry of every table position
        # outside a window: never free, never evictable, never handed out).
        return cache_hit.pool_free_blocks(self.total + 1, self.used)

    def freed(self) -> list[int]:
        """The freed slot ids (not the never-used ones), in the order the pool hands them out."""
        return [*reversed(self.front), *self.queue] if self.cache else sorted(self.returned)

    def take(self) -> int:
        if self.cache:
            if self.front:  # a freed slot that keeps nothing
                slot = self.front.pop()
            elif self.fresh < self.total:
                slot, self.fresh = self.fresh, self.fresh + 1
            else:  # the least recently freed cached slot; what it cached is evicted
                slot = next(iter(self.queue))
                del self.queue[slot]
                key = self.content.pop(slot, None)
                if key is not None:
                    self._uncache(key, slot)
        elif self.returned:
            slot = heapq.heappop(self.returned)
        else:
            slot, self.fresh = self.fresh, self.fresh + 1
        self.used += 1
        if self.used > self.peak_used:
            self.peak_used = self.used
        return slot

    def hit_takes(self, slot: int) -> bool:
        """Whether a hit on ``slot`` takes it from the free slots (a cached free slot) rather than
        sharing it with its holders."""
        return slot in self.queue

    def hold(self, slot: int) -> None:
        """A hit holds ``slot``: a cached free one leaves the free queue, a held one gains a holder."""
        if slot in self.queue:
            self.touch(slot)
        else:
            self.share(slot)

    def give_back(self, slots: list[int]) -> None:
        """Holders let go of ``slots`` (a caching pool: in this order, as one free)."""
        if self.cache:
            self.give_batch(slots)
        else:
            for slot in slots:
                self.give(slot)

    def share(self, slot: int) -> None:
        """One more holder of a slot in use (a cache hit): no slot is taken."""
        self.sharers[slot] = self.sharers.get(slot, 0) + 1

    def touch(self, slot: int) -> None:
        """A cache hit on a cached free slot: it leaves the free queue, held again (its content kept)."""
        del self.queue[slot]
        self.used += 1
        if self.used > self.peak_used:
            self.peak_used = self.used

    def frees(self, slot: int) -> bool:
        """Whether giving ``slot`` back frees it (its last holder)."""
        return slot not in self.sharers

    def _uncache(self, key: tuple, slot: int) -> None:
        slots = self.index[key]
        del slots[slot]
        if not slots:
            del self.index[key]

    def first(self, key: tuple) -> int | None:
        """The slot first named with content ``key``, held or cached (None: none)."""
        slots = self.index.get(key)
        return next(iter(slots)) if slots else None

    def name(self, slot: int, key: tuple) -> None:
        """A held slot's block now counts as computed: its content is ``key`` (kept until evicted). A
        whole block's key, ``(life cycle, root, block)``, replaces the key of a prefix of it (a
        ``cache_prompt_tail`` key, which carries its length in tokens as a fourth part)."""
        old = self.content.get(slot)
        if old is not None and (len(old) == 3 or len(key) == 4):
            return
        if old is not None:
            self._uncache(old, slot)
        self.content[slot] = key
        self.index.setdefault(key, {})[slot] = None

    def cached_content(self) -> dict[int, tuple]:
        """The cached free slots and their content."""
        return {s: self.content[s] for s in self.queue if s in self.content}

    def give(self, slot: int) -> bool:
        """A holder lets go of ``slot``: it is freed when that was its last holder (returns whether)."""
        others = self.sharers.get(slot)
        if others is not None:
            if others == 1:
                del self.sharers[slot]
            else:
                self.sharers[slot] = others - 1
            return False
        if not self.cache:
            heapq.heappush(self.returned, slot)
        self.used -= 1
        return True

    def give_batch(self, batch: list[int]) -> None:
        """A caching pool: holders let go of ``batch`` in this order, as one free. A freed slot with
        content keeps it (even where another slot has the same: vLLM keeps every block of a hash) and
        joins the end of the queue; the freed slots without content go to its front, together, in this
        order (``tail``, or ``tail_now`` for this free: to its end, each where the batch has it)."""
        kept_nothing = []
        to_tail = self.tail or self.tail_now
        for slot in batch:
            if not self.give(slot):
                continue
            if to_tail or slot in self.content:
                self.queue[slot] = None
            else:
                kept_nothing.append(slot)
        self.front.extend(reversed(kept_nothing))

