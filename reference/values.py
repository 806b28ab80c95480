"""Values and observations of the reference manager: what a call returns (:class:`Outcome`,
:class:`Shortfall`), what a backend shows (:class:`Snapshot`, :class:`RequestSnapshot`,
:class:`PoolSnapshot`, :class:`BlockTable`, :class:`SlotMap`), and block ranges, the form in which
the manager keeps a set of block indices. Plain values and functions: no state, no engine.
"""

from __future__ import annotations

import enum
from typing import Any, Hashable, Mapping

import attrs

from .show import bounded

__all__ = [
    "NEVER", "OK", "BlockTable", "Outcome", "Plan", "PoolSnapshot", "Ranges", "RequestSnapshot", "RequestState",
    "SSM_PAGE", "Shortfall", "SlotMap", "Snapshot", "first_change", "merged_ranges", "range_blocks", "range_size",
    "ranges_minus", "ranges_of",
]


@attrs.frozen
class Shortfall:
    """A pool group that lacked slots: the call needed ``needed`` and ``available`` were free."""

    pool_group: int
    needed: int
    available: int

    @property
    def lacking(self) -> int:
        return self.needed - self.available


class RequestState(str, enum.Enum):
    """Where a request is in its life: running, suspended (slots kept or freed by the suspend
    semantics) or closed."""

    ACTIVE, SUSPENDED, CLOSED = "active", "suspended", "closed"


@attrs.frozen
class Outcome:
    """The result of a call that allocates: ok, or out of slots in the listed pool groups."""

    ok: bool
    shortfalls: tuple[Shortfall, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def describe(self) -> str:
        if self.ok:
            return "ok"
        return "out of slots: " + ", ".join(
            f"pool group {s.pool_group} lacks {s.lacking} (needed {s.needed}, {s.available} free)"
            for s in self.shortfalls
        )


OK = Outcome(True)


@attrs.frozen
class PoolSnapshot:
    total: int
    free: int


def _check_held(table: "BlockTable", attribute: Any, held: Any) -> None:
    end = 0
    for pair in held:
        lo, hi = pair
        if type(lo) is not int or type(hi) is not int or not end <= lo < hi or (end and lo == end):
            raise ValueError(f"BlockTable.held={bounded(held)}: must be sorted, disjoint, merged (lo, hi) ranges")
        end = hi
    if end > table.length:
        raise ValueError(f"BlockTable.held={bounded(held)}: reaches block {end - 1}, past length {table.length}")


@attrs.frozen
class BlockTable:
    """One life cycle's block table in O(held ranges): ``length`` entries, block ``b`` holding a slot
    exactly when it lies in one of the ``held`` ranges (sorted, disjoint, merged, half-open
    ``(lo, hi)``, within ``[0, length)``). The reference's length is the blocks its capacity spans,
    ``ceil(c / t)`` (SSM: its one page). Its dense form (:meth:`dense`) is the tuple with ``b`` where
    block ``b`` holds a slot and None where not; two tables are equal exactly when their dense forms
    are, whatever the history (a table of 10**12 blocks holding two is two ranges)."""

    length: int = attrs.field(validator=attrs.validators.and_(attrs.validators.instance_of(int),
                                                              attrs.validators.ge(0)))
    held: Ranges = attrs.field(default=(), converter=lambda v: tuple(tuple(p) for p in v), validator=_check_held)

    @classmethod
    def from_blocks(cls, length: int, blocks: Any) -> "BlockTable":
        """The table of ``length`` entries in which exactly ``blocks`` (distinct ints) hold a slot."""
        return cls(length, ranges_of(tuple(sorted(blocks))))

    @classmethod
    def from_dense(cls, entries: Any) -> "BlockTable":
        """The table whose dense form is ``entries``; ValueError unless each entry is None or its index."""
        entries = tuple(entries)
        blocks = []
        for b, entry in enumerate(entries):
            if entry is None:
                continue
            if type(entry) is not int or entry != b:
                raise ValueError(f"entry {b} is {bounded(entry)}: a dense table holds its index or None")
            blocks.append(b)
        return cls(len(entries), ranges_of(tuple(blocks)))

    def holds(self, block: int) -> bool:
        return any(lo <= block < hi for lo, hi in self.held)

    def blocks(self):
        """The blocks that hold a slot, in increasing order."""
        for lo, hi in self.held:
            yield from range(lo, hi)

    @property
    def held_count(self) -> int:
        return sum(hi - lo for lo, hi in self.held)

    def dense(self) -> tuple[int | None, ...]:
        """Entry ``b`` is ``b`` where block ``b`` holds a slot, None where not (O(length))."""
        table: list[int | None] = [None] * self.length
        for lo, hi in self.held:
            table[lo:hi] = range(lo, hi)
        return tuple(table)

    def truncated(self, length: int) -> "BlockTable":
        """The first ``length`` entries (``length <= self.length``)."""
        return BlockTable(length, merged_ranges(*((lo, min(hi, length)) for lo, hi in self.held if lo < length)))


@attrs.frozen
class RequestSnapshot:
    """A request's lengths and, per life cycle, its :class:`BlockTable`: the blocks ``[0, ceil(c / t))``
    its capacity spans (SSM: one) and the ranges of those that hold a slot. O(held ranges), whatever
    the capacity or history."""

    request_id: Hashable
    state: RequestState
    capacity: int
    history: int
    tables: tuple[BlockTable, ...]


@attrs.frozen
class Snapshot:
    """A backend-independent picture of a manager: comparable with ``==`` across backends.
    Requests appear in creation order; closed requests do not appear. ``sharing``: each slot held by
    more than one request, as ``(life cycle, block index, holder ids in creation order)``, sorted
    (empty without prefix sharing). ``cached``: under ``cache_freed``, the content each cached free slot
    keeps, as ``(life cycle, block index, request that first computed it)``, sorted (empty otherwise)."""

    pools: tuple[PoolSnapshot, ...]
    requests: tuple[RequestSnapshot, ...]
    sharing: tuple[tuple[int, int, tuple[Hashable, ...]], ...] = ()
    cached: tuple[tuple[int, int, Hashable], ...] = ()


@attrs.frozen
class SlotMap:
    """Physical identity: which slot each held block is in, and which slots are free.

    ``held``: per request (creation order, closed requests left out), per life cycle, ``{block index:
    slot id}``. ``free``: per pool group, the free slot ids as half-open ranges in the order the pool
    would hand them out; ranges may overlap when a (buggy) pool lists an id twice. ``ref_counts``: per
    pool group ``{slot id: holders}`` where a pool keeps reference counts (None: it keeps none). Slot
    ids are a pool's own names for its slots: two pools are compared up to a renaming of ids.
    ``cached``: per pool group ``{free slot id: (life cycle, block index, request that first computed
    it)}``, the content a cached free slot keeps (None: the pool caches nothing)."""

    held: Mapping[Hashable, tuple[Mapping[int, int], ...]]
    free: tuple[tuple[tuple[int, int], ...], ...]
    ref_counts: tuple[Mapping[int, int], ...] | None = None
    cached: tuple[Mapping[int, tuple[int, int, Hashable]], ...] | None = None


# ----------------------------------------------------------------------------- block ranges
# A set of block indices is kept as its ranges: sorted, disjoint, non-empty, half-open ``(lo, hi)``.
# An SWA life cycle holds at most two (the sink blocks and the window), full attention and SSM one,
# so a step is planned from range endpoints and costs O(blocks that change), whatever W / t is.
Ranges = tuple[tuple[int, int], ...]
SSM_PAGE: Ranges = ((0, 1),)


def merged_ranges(*pairs: tuple[int, int]) -> Ranges:
    """Canonical ranges from sorted, disjoint pairs: empty ones dropped, touching ones merged."""
    out: list[tuple[int, int]] = []
    for lo, hi in pairs:
        if lo >= hi:
            continue
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def ranges_minus(a: Ranges, b: Ranges) -> Ranges:
    """The blocks of ``a`` that are not in ``b`` (both sorted, disjoint ranges), as ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        for cut_lo, cut_hi in b:
            if cut_hi <= lo or cut_lo >= hi:
                continue
            if cut_lo > lo:
                out.append((lo, cut_lo))
            lo = max(lo, cut_hi)
            if lo >= hi:
                break
        if lo < hi:
            out.append((lo, hi))
    return tuple(out)


def range_size(ranges: Ranges) -> int:
    return sum(hi - lo for lo, hi in ranges)


def range_blocks(ranges: Ranges):
    for lo, hi in ranges:
        yield from range(lo, hi)


def ranges_of(blocks: tuple[int, ...]) -> Ranges:
    """The ranges of a sorted tuple of distinct block indices."""
    return merged_ranges(*((b, b + 1) for b in blocks))


#: A plan of one step: per life cycle, None (nothing changes) or (blocks to allocate, blocks to
#: release, new ranges).
Plan = list

NEVER = float("inf")  # "no stale range ever moves": a request without windows


def first_change(f: Any, x: int, now: Any, limit: int | float = NEVER, guess: int = 0) -> int | float:
    """The smallest ``y`` in ``(x, limit)`` with ``f(y) != now``, else ``limit``, for an ``f`` that keeps
    differing from ``now`` once it does (a monotone function): galloping search, then bisection,
    O(log(y - x)) evaluations. ``f(limit)`` is never evaluated. A ``guess`` of the distance (the last
    one found: steps repeat) is confirmed with two evaluations: ``f`` still ``now`` just before it
    and not at it make it the answer, by monotonicity."""
    y = x + guess
    if guess > 0 and y < limit and f(y) != now and (guess == 1 or f(y - 1) == now):
        return y
    step = 1
    while x + step < limit and f(x + step) == now:
        step *= 2
    lo, hi = x + step // 2, min(x + step, limit)  # f(lo) == now (or lo == x); the answer is in (lo, hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if f(mid) == now:
            lo = mid
        else:
            hi = mid
    return hi

