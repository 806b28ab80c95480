"""Physical identity: which slot each held block is in, checked on the backend's own structures.

Counts drift late; identity fails at the step of the bug. A backend that shows the ``slots`` part (a
:class:`~swafloor.reference.SlotMap` read from its own objects: block ids, the free structure,
reference counts) is checked after every step in two ways:

- :func:`integrity`, on the backend alone, per pool group: no slot held by two blocks, except,
  under prefix sharing, one block index of one life cycle held by several requests (the sharing the
  model allows; which blocks are shared is compared with the reference's by the tracker); no id listed twice in the free structure (a double free); no held slot in the
  free structure; distinct held slots plus free slots equal the pool's total (a slot lost, a leak, or
  one made up); where the backend keeps reference counts, each held slot's count equals its holders
  and no free slot has one.
- :class:`IdentityTracker`, against the reference's own slot map, up to a renaming of slot ids: the
  blocks both sides hold are grouped into slots the same way (the same sharing), and a block held on
  both sides across steps keeps its slot on one side exactly when it keeps it on the other (a slot
  keeps its identity until freed). Which free slot a pool hands out next is its own policy: a
  renaming, never compared.

Both return ``(field, reference value, backend value, reason)`` or None, the form
:func:`~swafloor.fuzz.compare.compare_parts` turns into a divergence.
"""

from __future__ import annotations

import bisect
from typing import Any, Hashable

from swafloor.reference import SlotMap

from .protocol import slots_of

__all__ = ["IdentityTracker", "integrity", "slots_of", "Finding"]

Finding = tuple[str, Any, Any, str]
Block = tuple[Hashable, int, int]  # (request id, life cycle, block index)


def _holders(view: SlotMap, group_of: tuple[int, ...]) -> list[dict[int, list[Block]]]:
    groups: list[dict[int, list[Block]]] = [{} for _ in range(max(group_of, default=-1) + 1)]
    for rid, per_lc in view.held.items():
        for lc, table in enumerate(per_lc):
            slots = groups[group_of[lc]]
            for b, s in table.items():
                slots.setdefault(s, []).append((rid, lc, b))
    return groups


def _name(block: Block) -> str:
    rid, lc, b = block
    return f"{rid}/lc{lc}/block{b}"


def integrity(
    view: SlotMap, totals: tuple[int, ...], group_of: tuple[int, ...], side: str = "backend", sharing: bool = False
) -> Finding | None:
    """The first broken integrity rule of ``view`` (None: all hold). ``totals``: slots per pool group.
    ``sharing``: prefix sharing is modelled, so a slot may be held by one block of several requests."""
    if len(view.free) != len(totals):
        return "slots.free", len(totals), len(view.free), f"the {side} shows free slots of {len(view.free)} pool groups, not {len(totals)}"
    for g, (slots, total) in enumerate(zip(_holders(view, group_of), totals)):
        field = f"slots.pool[{g}]"
        for s, who in slots.items():
            if len(who) > 1 and not (
                sharing and len({(lc, b) for _, lc, b in who}) == 1 and len({rid for rid, _, _ in who}) == len(who)
            ):
                names = ", ".join(_name(b) for b in who)
                return f"{field}.slot[{s}]", 1, len(who), (
                    f"the {side} holds slot {s} for {len(who)} blocks ({names}); the model shares no block"
                )
        free = sorted((lo, hi) for lo, hi in view.free[g] if hi > lo)
        count, reach = 0, None
        for lo, hi in free:
            if reach is not None and lo < reach:
                return f"{field}.free", "each free slot once", f"slot {lo} listed twice", (
                    f"the {side}'s free structure lists slot {lo} twice (a double free)"
                )
            reach = hi
            count += hi - lo
        starts = [lo for lo, _ in free]
        for s, who in slots.items():
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0 and free[i][0] <= s < free[i][1]:
                return f"{field}.slot[{s}]", "held", "held and free", (
                    f"the {side} holds slot {s} for {_name(who[0])} and also lists it as free"
                )
        if len(slots) + count != total:
            return f"{field}.total", total, len(slots) + count, (
                f"the {side} holds {len(slots)} slots and lists {count} free: {len(slots) + count}, not the pool's "
                f"{total} ({'a slot lost: a leak, or a free structure that lost track' if len(slots) + count < total else 'slots made up'})"
            )
        if view.ref_counts is not None:
            counts = view.ref_counts[g]
            for s, who in slots.items():
                if counts.get(s, 0) != len(who):
                    return f"{field}.ref_count[{s}]", len(who), counts.get(s, 0), (
                        f"the {side} counts {counts.get(s, 0)} references to slot {s}, held by {len(who)} block(s)"
                    )
            for s, n in counts.items():
                if n and s not in slots:
                    return f"{field}.ref_count[{s}]", 0, n, f"the {side} counts {n} references to slot {s}, which no block holds"
    return None


class IdentityTracker:
    """Compares two slot maps step after step, up to a renaming of slot ids (module docstring)."""

    def __init__(self, group_of: tuple[int, ...]):
        self.group_of = group_of
        self._last: dict[Block, tuple[int, int]] = {}  # block held on both sides -> (reference slot, backend slot)

    def compare(self, reference: SlotMap, backend: SlotMap, skip: frozenset = frozenset()) -> Finding | None:
        group_of = self.group_of
        ref_blocks = {
            (rid, lc, b): s
            for rid, per_lc in reference.held.items() if rid not in skip
            for lc, table in enumerate(per_lc) for b, s in table.items()
        }
        now: dict[Block, tuple[int, int]] = {}
        forward: dict[tuple[int, int], tuple[int, Block]] = {}  # (group, backend slot) -> (reference slot, first block)
        backward: dict[tuple[int, int], tuple[int, Block]] = {}
        for rid, per_lc in backend.held.items():
            if rid in skip:
                continue
            for lc, table in enumerate(per_lc):
                g = group_of[lc]
                for b, s in table.items():
                    key = (rid, lc, b)
                    r = ref_blocks.get(key)
                    if r is None:
                        continue  # held on one side only: the tables part says whether that is allowed
                    field = f"slots[{rid}][{lc}][{b}]"
                    seen = forward.setdefault((g, s), (r, key))
                    if seen[0] != r:
                        return field, f"a slot apart from {_name(seen[1])}", f"slot {s}, as {_name(seen[1])}", (
                            f"the backend keeps {_name(key)} and {_name(seen[1])} in one slot ({s}); "
                            "the reference keeps them apart"
                        )
                    seen = backward.setdefault((g, r), (s, key))
                    if seen[0] != s:
                        return field, f"one slot with {_name(seen[1])}", f"slot {s}, apart from {_name(seen[1])}", (
                            f"the reference keeps {_name(key)} and {_name(seen[1])} in one slot; the backend in two"
                        )
                    before = self._last.get(key)
                    if before is not None and (before[0] == r) != (before[1] == s):
                        moved, kept = ("backend", "reference") if before[0] == r else ("reference", "backend")
                        return field, f"slot {before[0]} -> {r}", f"slot {before[1]} -> {s}", (
                            f"the {moved} moved {_name(key)} to another slot while it stayed held; the {kept} kept "
                            "its slot (a slot keeps its identity until freed)"
                        )
                    now[key] = (r, s)
        self._last = now
        return None
