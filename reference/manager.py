"""The reference manager: requests holding per-life-cycle block slots from per-pool-group pools.

A request is created suspended, activated by ``resume``, stepped by ``resize(capacity, history)``,
has history finalized by ``commit``, and is ``suspend``-ed or ``close``-d. After every call an active
request holds a slot for exactly its live blocks (:meth:`Manager.required_ranges`, the ranges of
:func:`~.lifecycle.live_block_indices`) and nothing else, and a closed one holds none.

Running out of slots is an :class:`Outcome`, not an exception: it names each pool group that lacked
slots, and the manager's state is exactly as before the call. Misuse (a request id that is not a
non-empty string, history going backwards, capacity below history, an operation on a closed request)
raises :class:`RequestError` and changes nothing either.

Two release orders exist. ``RELEASE_FIRST`` (the spec) frees blocks a resize no longer needs before
allocating. ``HOLD_UNTIL_RETURN`` (as TensorRT-LLM does) keeps blocks made stale by the same call held
until it returns; blocks cut off by a smaller capacity are freed first in both orders. The manager
records each pool group's peak use so transient peaks can be observed.

A request created with ``reused_history=k`` starts from ``k`` reused committed tokens. When the block
of token ``k`` is partially filled (``k % t != 0``) its first resume copies that block into a private
slot while the source page is still held: one extra slot per attention life cycle for the duration
of the call (SSM: one extra when ``k > 0``, the state snapshot).

What engines do differently is the config's :class:`~.config.Semantics`: tokens in flight (blocks
released on ``h - k``), freeing stale blocks lazily at the next resize (that release stands even when
the allocation then fails), suspension that drops the computed tokens or frees nothing, and no
first-resume copy.

Costs: a pool is a counter and a heap of returned slot ids (memory O(slots in use)); a step is planned
from the endpoints of block ranges (O(blocks that change), independent of ``W / t``), and a step that
changes no block is recognised from a per-request cache without planning. ``check()`` recomputes
everything from the formulas.
"""

from __future__ import annotations

import enum
import heapq
from typing import Any, Hashable, Mapping

import attrs

from . import cache_hit, floors, lifecycle
from .config import Config, FreeStale, HitRule, Layout, ReleaseOrder, SuspendMode, build_layout
from .errors import ConfigError, RequestError
from .lifecycle import LifeCycleKind
from .show import bounded

__all__ = [
    "ReleaseOrder",
    "RequestState",
    "Shortfall",
    "Outcome",
    "PoolSnapshot",
    "BlockTable",
    "RequestSnapshot",
    "Snapshot",
    "SlotMap",
    "Manager",
    "ranges_of",
    "ranges_minus",
]




class RequestState(str, enum.Enum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


@attrs.frozen
class Shortfall:
    """A pool group that lacked slots: the call needed ``needed`` and ``available`` were free."""

    pool_group: int
    needed: int
    available: int

    @property
    def lacking(self) -> int:
        return self.needed - self.available


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
        return BlockTable(length, _ranges(*((lo, min(hi, length)) for lo, hi in self.held if lo < length)))


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
_SSM_PAGE: Ranges = ((0, 1),)


def _ranges(*pairs: tuple[int, int]) -> Ranges:
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


def _size(ranges: Ranges) -> int:
    return sum(hi - lo for lo, hi in ranges)


def _blocks(ranges: Ranges):
    for lo, hi in ranges:
        yield from range(lo, hi)


def ranges_of(blocks: tuple[int, ...]) -> Ranges:
    """The ranges of a sorted tuple of distinct block indices."""
    return _ranges(*((b, b + 1) for b in blocks))


@attrs.define
class _Request:
    request_id: str
    state: RequestState
    capacity: int
    history: int
    released_to: int  # stale blocks are freed up to this history (below ``history`` only when freeing lazily)
    pending_copy: bool
    ranges: list[Ranges]  # per life cycle: the blocks it holds
    held: list[dict[int, int]]  # per life cycle: block index -> slot id
    resumed: bool = False  # was it ever active (a suspension that keeps slots keeps what it held)
    share_with: str | None = None  # the request whose committed prefix it was created on
    prefix_blocks: int = 0  # the whole blocks (of the config's t) of that prefix: cache hits at the first resume
    prefix_tokens: int = 0  # that prefix in tokens (each life cycle's whole blocks of it are looked up)
    prompt_tokens: int = 1  # its prompt: the reused history and the first token it computes itself
    hit_blocks: int = 0  # the blocks its first resume took as hits
    named: list = attrs.Factory(list)  # caching: per life cycle, the blocks whose content was named so far
    # Where each token's content was first computed: ``(end token, request id)`` segments, the last
    # open-ended (``None``): token p's is that of the first segment whose end is above p, and a block's
    # content is its last token's (see _root).
    roots: tuple = ()
    snapshot: Any = None  # the last RequestSnapshot, valid while ``snapshot_key`` is current
    snapshot_key: Any = None
    # A cache that lets a step that changes no block skip planning (see Manager._refresh): the blocks
    # every life cycle requires are the same for all capacities in ``[capacity_from, capacity_below)``
    # and histories in ``[history_from, history_below)``.
    capacity_from: int = 0
    capacity_below: int = 0
    history_from: int = 0
    history_below: int | float = 0
    # Per life cycle, the history its stale blocks were last freed on (its eviction cursor's history):
    # read only under an eviction interval above 1 (see Semantics.eviction_interval).
    evicted_on: list[int] = attrs.Factory(list)


@attrs.define
class _Pool:
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
    # loses its content when it is taken again (evicted).
    cache: bool = False
    front: list[int] = attrs.Factory(list)
    queue: dict[int, None] = attrs.Factory(dict)
    content: dict[int, tuple] = attrs.Factory(dict)
    index: dict[tuple, dict[int, None]] = attrs.Factory(dict)

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
        return {s: self.content[s] for s in self.queue}

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
        order."""
        kept_nothing = []
        for slot in batch:
            if not self.give(slot):
                continue
            if slot in self.content:
                self.queue[slot] = None
            else:
                kept_nothing.append(slot)
        self.front.extend(reversed(kept_nothing))


def _require_count(request_id: Any, field: str, value: Any) -> None:
    if type(value) is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RequestError(request_id, field, value, "must be an integer")
    if value < 0:
        raise RequestError(request_id, field, value, "must be >= 0")


_NEVER = float("inf")  # "no stale range ever moves": a request without windows

# A plan: per life cycle, None (nothing changes) or (blocks to allocate, blocks to release, new ranges).
_Plan = list


class Manager:
    """The executable spec of a paged KV-cache manager with sliding-window attention."""

    def __init__(self, config: Config, release_order: ReleaseOrder | str | None = None):
        if not isinstance(config, Config):
            raise ConfigError("config", config, "must be a Config")
        # The config's semantics name the order; an explicit argument overrides it.
        chosen = config.semantics.release_order if release_order is None else release_order
        try:
            order = ReleaseOrder(chosen)
        except ValueError:
            choices = ", ".join(repr(o.value) for o in ReleaseOrder)
            raise ConfigError("release_order", release_order, f"must be one of {choices}") from None
        self.config = config
        self.layout: Layout = build_layout(config)
        self.release_order = order
        self.semantics = config.semantics
        self._in_flight = config.semantics.in_flight_tokens
        self._cache = config.semantics.cache_freed
        self._pools = [_Pool(n, cache=self._cache) for n in self.layout.slots]
        self._group_of = self.layout.pool_group_of
        self._t = self.layout.block_sizes  # per life cycle, its tokens per block
        attention_t = [t for t, lc in zip(self._t, self.layout.life_cycles) if lc.kind is not LifeCycleKind.SSM]
        # a common-prefix hit ends on a whole block of every attention life cycle
        self._alignment = cache_hit.alignment(attention_t)
        self._least_t = min(self._t)
        self._sizes = tuple(sorted(set(self._t)))  # the distinct block sizes
        self._requests: dict[str, _Request] = {}
        # Steps that change no block are recognised from the cache in _Request, unless a subclass
        # (a seeded bug) redefines which blocks are required.
        self._fast = type(self).required_ranges is Manager.required_ranges
        self._windows = [i for i, lc in enumerate(self.layout.life_cycles) if lc.window is not None]
        # An eviction interval above 1 makes what is freed depend on each window's cursor, not on the
        # history alone: the no-change cache (which assumes the latter) is then off.
        self._interval = config.semantics.eviction_interval
        self._points: list[int] = []  # the release points of the last plan (see _release_points)
        self._taking: int | None = None  # a resume's given hit (tokens), while it runs (see resume)
        if self._interval > 1:
            self._fast = False
        self._planning: _Request | None = None  # the request whose plan _feasible is judging

    # ----------------------------------------------------------------- observation
    @property
    def tokens_per_block(self) -> int:
        """The config's tokens per block (a life cycle with a block size of its own uses that)."""
        return self.layout.tokens_per_block

    def block_size(self, life_cycle: int) -> int:
        """Tokens per block of life cycle ``life_cycle``."""
        return self._t[life_cycle]

    def required_ranges(self, life_cycle: int, history: int, capacity: int) -> Ranges:
        """The blocks a life cycle must hold at ``(history, capacity)``, as ranges: every allocated
        block ``[0, ceil(c / t))`` but the stale ones at ``max(0, history - k)`` (k tokens in flight)."""
        lc = self.layout.life_cycles[life_cycle]
        if lc.kind is LifeCycleKind.SSM:
            return _SSM_PAGE
        allocated = lifecycle.allocated_blocks(capacity, self._t[life_cycle])
        if lc.window is None:
            return ((0, allocated),) if allocated > 0 else ()
        start, end = self._stale(lc, history)
        return _ranges((0, min(start, allocated)), (end, allocated))

    def _stale(self, lc: Any, history: int) -> tuple[int, int]:
        """The stale range of an SWA life cycle at ``history``: released on ``max(0, history - k)``."""
        released_on = lifecycle.released_history(history, self._in_flight)
        return lifecycle.stale_range(released_on, lc.block_size(self.tokens_per_block), lc.window, lc.sink_blocks)

    def required_blocks(self, life_cycle: int, history: int, capacity: int) -> tuple[int, ...]:
        """The blocks a life cycle must hold at ``(history, capacity)``, one by one (O(blocks))."""
        return tuple(_blocks(self.required_ranges(life_cycle, history, capacity)))

    def request_ids(self) -> tuple[str, ...]:
        return tuple(self._requests)

    def state_of(self, request_id: str) -> RequestState:
        return self._get(request_id, allow_closed=True).state

    def history_of(self, request_id: str) -> int:
        return self._get(request_id, allow_closed=True).history

    def capacity_of(self, request_id: str) -> int:
        return self._get(request_id, allow_closed=True).capacity

    def peak_used(self, pool_group: int) -> int:
        """The most slots of ``pool_group`` in use at any moment since the last :meth:`reset_peaks`."""
        return self._pools[pool_group].peak_used

    def reset_peaks(self) -> None:
        for pool in self._pools:
            pool.peak_used = pool.used

    def snapshot(self) -> Snapshot:
        requests = tuple(
            self._request_snapshot(req) for req in self._requests.values() if req.state is not RequestState.CLOSED
        )  # a closed request is gone, as in any backend; its id stays taken
        pools = tuple(PoolSnapshot(p.total, p.free) for p in self._pools)
        cached = tuple(sorted((key[0], key[2], key[1]) for p in self._pools for key in p.cached_content().values()))
        return Snapshot(pools, requests, self._sharing() if any(p.sharers for p in self._pools) else (), cached)

    def _sharing(self) -> tuple[tuple[int, int, tuple[str, ...]], ...]:
        """Each shared slot as (life cycle, block, holders in creation order): O(held blocks)."""
        holders: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
        for req in self._requests.values():
            for lc_index, held in enumerate(req.held):
                g = self._group_of[lc_index]
                sharers = self._pools[g].sharers
                for b, slot in held.items():
                    if slot in sharers:
                        holders.setdefault((g, slot), []).append((lc_index, b, req.request_id))
        return tuple(sorted((who[0][0], who[0][1], tuple(r for _, _, r in who)) for who in holders.values()))

    def slots(self) -> SlotMap:
        """Which slot each held block is in and which slots are free: O(held blocks + freed slots)."""
        held = {
            req.request_id: tuple(dict(h) for h in req.held)
            for req in self._requests.values()
            if req.state is not RequestState.CLOSED
        }
        fresh = [((p.fresh, p.total),) if p.fresh < p.total else () for p in self._pools]
        if not self._cache:
            freed = [tuple((s, s + 1) for s in p.freed()) for p in self._pools]
            return SlotMap(held, tuple(f + n for f, n in zip(freed, fresh)))
        free = tuple(
            tuple((s, s + 1) for s in reversed(p.front)) + n + tuple((s, s + 1) for s in p.queue)
            for p, n in zip(self._pools, fresh)
        )  # the queue's order: what keeps nothing, the never-used ids, then the cached slots
        cached = tuple({s: (key[0], key[2], key[1]) for s, key in p.cached_content().items()} for p in self._pools)
        return SlotMap(held, free, cached=cached)

    def _request_snapshot(self, req: _Request) -> RequestSnapshot:
        """A request's snapshot, rebuilt only when its state, lengths or blocks changed (a harness
        snapshots after every step; most steps change one request). O(held ranges)."""
        key = (req.state, req.capacity, req.history, tuple(req.ranges))
        if req.snapshot_key != key:
            tables = self._tables(req, req.capacity)
            req.snapshot = RequestSnapshot(req.request_id, req.state, req.capacity, req.history, tables)
            req.snapshot_key = key
        return req.snapshot

    def _tables(self, req: _Request, capacity: int) -> tuple[BlockTable, ...]:
        """Per life cycle, the ranges of the blocks held among the blocks ``capacity`` spans in its
        own block size (SSM: its one page)."""
        return tuple(
            BlockTable(1 if lc.kind is LifeCycleKind.SSM else lifecycle.allocated_blocks(capacity, t), ranges)
            for lc, t, ranges in zip(self.layout.life_cycles, self._t, req.ranges)
        )

    def _holds_blocks(self, req: _Request) -> bool:
        return req.state is RequestState.ACTIVE or (
            req.state is RequestState.SUSPENDED and req.resumed and self.semantics.suspend is SuspendMode.KEEP
        )

    def check(self) -> None:
        """Assert the invariants (O(everything)); raises AssertionError naming the first one broken."""
        owners: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
        for req in self._requests.values():
            for lc_index, held in enumerate(req.held):
                g = self._group_of[lc_index]
                on = req.released_to if self._interval == 1 else req.evicted_on[lc_index]
                expected = self.required_blocks(lc_index, on, req.capacity) if self._holds_blocks(req) else ()
                assert tuple(sorted(held)) == expected, (
                    f"request {req.request_id!r} life cycle {lc_index} holds blocks {sorted(held)}, "
                    f"must hold exactly {list(expected)} ({req.state.value}, h={req.history}, c={req.capacity})"
                )
                assert tuple(_blocks(req.ranges[lc_index])) == expected, (
                    f"request {req.request_id!r} life cycle {lc_index}: recorded ranges {req.ranges[lc_index]} "
                    f"disagree with the blocks it must hold exactly, {list(expected)}"
                )
                for b, slot in held.items():
                    owners.setdefault((g, slot), []).append((lc_index, b, req.request_id))
        for (g, slot), who in owners.items():
            sharers = self._pools[g].sharers.get(slot, 0)
            if len(who) > 1:
                assert self.semantics.prefix_sharing, f"slot {slot} of pool group {g} owned twice: {who}"
                assert len({(lc, b) for lc, b, _ in who}) == 1 and len({r for _, _, r in who}) == len(who), (
                    f"slot {slot} of pool group {g} shared by other than one block of distinct requests: {who}"
                )
            assert sharers == len(who) - 1, (
                f"pool group {g} counts {sharers + 1} holders of slot {slot}, held by {len(who)}: {who}"
            )
        for g, pool in enumerate(self._pools):
            listed = pool.freed()
            returned = set(listed)
            assert len(returned) == len(listed), f"pool group {g} lists a free slot twice"
            assert set(pool.queue) <= set(pool.content) and not set(pool.front) & set(pool.content), f"pool group {g}: cached slots {sorted(set(pool.content) - returned)} not free"
            assert {(key, s) for key, slots in pool.index.items() for s in slots} == {
                (key, s) for s, key in pool.content.items()} and all(pool.index.values()), f"pool group {g}: cache index disagrees"
            used = {slot for (group, slot) in owners if group == g}
            assert not returned & used, f"pool group {g}: slots {sorted(returned & used)} both free and owned"
            assert all(0 <= s < pool.fresh for s in returned | used), f"pool group {g}: slot id out of range"
            free = len(returned) + pool.total - pool.fresh
            assert free + len(used) == pool.total, (
                f"pool group {g}: free {free} + used {len(used)} != total {pool.total}"
            )
            assert pool.used == len(used), f"pool group {g}: counts {pool.used} in use, {len(used)} owned"
            assert set(pool.sharers) <= used, f"pool group {g}: shared slots {sorted(set(pool.sharers) - used)} not owned"

    def __repr__(self) -> str:
        sizes = "" if not self.layout.mixed_block_sizes else f", block sizes={list(self._t)}"
        lines = [f"Manager(t={self.tokens_per_block}{sizes}, release_order={self.release_order.value})"]
        for g, pool in enumerate(self._pools):
            lcs = ", ".join(self.layout.life_cycles[i].describe() for i in self.layout.life_cycles_of(g))
            lines.append(f"  pool group {g} [{lcs}]: {pool.free}/{pool.total} free")
        for req in self._requests.values():
            lines.append(
                f"  request {req.request_id!r}: {req.state.value}, capacity={req.capacity}, history={req.history}"
            )
            for lc_index, held in enumerate(req.held):
                blocks = " ".join(f"{b}:{s}" for b, s in sorted(held.items())) or "-"
                lines.append(f"    life cycle {lc_index} (block:slot) {blocks}")
        return "\n".join(lines)

    # ----------------------------------------------------------------- operations
    def create(self, request_id: str, *, reused_history: int = 0, share_with: str | None = None) -> None:
        """Add a suspended request whose first ``reused_history`` tokens are reused, committed ones.

        ``share_with``: those tokens are a prefix of that (not closed) request's committed history
        (``reused_history`` at most its history). With ``semantics.prefix_sharing`` the whole blocks of
        the prefix (``reused_history // t``) that request still holds at this one's first resume are
        cache hits: held in the same slot, once (only the blocks live for the new request; the others
        are null entries); without it the argument shares nothing."""
        _require_id(request_id)
        if request_id in self._requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        _require_count(request_id, "reused_history", reused_history)
        if share_with is not None:
            if type(share_with) is not str or share_with not in self._requests:
                raise RequestError(request_id, "share_with", share_with, "must name an existing request")
            source = self._requests[share_with]
            if source.state is RequestState.CLOSED and not self._cache:  # cached: its blocks may outlive it
                raise RequestError(request_id, "share_with", share_with, "request is closed")
            if reused_history > source.history:
                raise RequestError(
                    request_id, "reused_history", reused_history,
                    f"exceeds the committed history {source.history} of share_with {share_with!r}",
                )
        n = len(self.layout.life_cycles)
        # (with freed blocks cached, any reused prefix is looked up: its content may have been computed
        # by a request created on this one's prefix)
        prefix = reused_history if share_with is not None or self._cache else 0  # tokens
        roots: tuple = ((None, request_id),)
        if share_with is not None and prefix > 0:
            inherited = []
            for end, root in self._requests[share_with].roots:
                inherited.append((prefix if end is None else min(end, prefix), root))
                if end is None or end >= prefix:
                    break
            roots = (*inherited, *roots)
        self._requests[request_id] = _Request(
            request_id,
            RequestState.SUSPENDED,
            capacity=reused_history,
            history=reused_history,
            released_to=reused_history,
            pending_copy=reused_history > 0,
            ranges=[()] * n,
            held=[{} for _ in range(n)],
            evicted_on=[reused_history] * n,
            share_with=share_with if self.semantics.prefix_sharing else None,
            prefix_blocks=prefix // self.tokens_per_block,
            prefix_tokens=prefix,
            prompt_tokens=reused_history + 1,
            roots=roots,
        )

    def resume(self, request_id: str, *, hit_tokens: int | None = None) -> Outcome:
        """Activate a suspended request: allocate its live blocks (plus any first-resume copy).

        ``hit_tokens``: the first resume takes a hit of that many tokens instead of the longest valid
        one (:meth:`longest_hit`): what an engine that lost a hit took, so both can go on alike. It
        must be a valid hit (:meth:`hit_is_valid`) no longer than the longest, under the
        ``common-prefix`` rule of a caching manager; else :class:`RequestError` names it, nothing
        changed."""
        req = self._get(request_id, RequestState.SUSPENDED)
        if hit_tokens is not None:
            longest = self.longest_hit(request_id)
            if longest is None or type(hit_tokens) is not int or not 0 <= hit_tokens <= longest \
                    or not self.hit_is_valid(request_id, hit_tokens):
                why = ("applies only to a first resume that looks up the cache under the common-prefix rule"
                       if longest is None else f"must be a valid hit of at most the longest, {longest} tokens")
                raise RequestError(request_id, "hit_tokens", hit_tokens, why)
        extra = self._copy_needs(req)
        plan = self._plan(req, req.history, req.capacity)
        points = self._points
        self._taking = hit_tokens
        try:
            hits = self._hits(req, plan) if self._looks_up(req) else None
        finally:
            self._taking = None
        copies = list(extra)
        if hits is not None:
            for lc_index, found in enumerate(hits):
                pool = self._pools[self._group_of[lc_index]]
                # a hit on a held slot takes no slot; one on a cached free slot takes that slot
                extra[self._group_of[lc_index]] -= sum(1 for slot in found.values() if slot not in pool.queue)
        self._planning = req
        outcome = self._feasible(plan, held_back=None, extra=extra)
        if not outcome:
            return outcome
        # The copy's slot is taken before the blocks (a caching pool: after them, so it evicts no hit).
        transient = [] if self._cache else [[self._pools[g].take() for _ in range(n)] for g, n in enumerate(copies)]
        if hits is None:
            self._apply(req, plan)
        else:
            self._apply(req, plan, hits=hits)
            req.hit_blocks = sum(len(found) for found in hits)
        if self._cache:
            transient = [[self._pools[g].take() for _ in range(n)] for g, n in enumerate(copies)]
        for g, slots in enumerate(transient):
            if self._cache:
                self._pools[g].give_batch(slots)
                continue
            for slot in slots:
                self._pools[g].give(slot)
        req.evicted_on = points
        req.released_to = req.history
        req.state = RequestState.ACTIVE
        req.resumed = True
        req.pending_copy = False
        if self._cache:
            self._name_step(req, req.history, req.capacity, resuming=True)
        self._refresh(req)
        return OK

    def _looks_up(self, req: _Request) -> bool:
        """Whether the next resume of ``req`` looks its prefix up (its first, on a shared prefix or a
        reused history under ``cache_freed``)."""
        return not req.resumed and (
            req.share_with is not None or (self._cache and req.prefix_tokens >= self._least_t)
        )

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
        the longest hit (the rules change only the EAGLE pop). None where :meth:`longest_hit` is None;
        :class:`RequestError` for a name that is no rule. Changes nothing."""
        if rule not in cache_hit.LOST_HIT_RULES:
            raise RequestError(request_id, "rule", rule, f"is not a lost-hit rule {sorted(cache_hit.LOST_HIT_RULES)}")
        longest = self.longest_hit(request_id)
        if longest is None or not self.semantics.eagle:
            return longest
        req = self._get(request_id, RequestState.SUSPENDED)
        patterns, sizes, windows = self._eagle_patterns(req, self._finder(req))
        return cache_hit.rule_hit(rule, patterns, sizes, windows, True, req.history) if patterns else 0

    def hit_is_valid(self, request_id: str, tokens: int) -> bool:
        """Whether a first resume of the suspended ``request_id`` could take a hit of ``tokens`` now:
        0, or a multiple of the alignment within the reused history whose every needed block is cached
        in every attention life cycle (with ``eagle``, :func:`~.cache_hit.hit_valid`, the block given
        back included; else :meth:`_hit_length_fits`). Changes nothing."""
        req = self._get(request_id, RequestState.SUSPENDED)
        if type(tokens) is not int or tokens < 0:
            return False
        if tokens == 0:
            return True
        found = self._finder(req)
        if self.semantics.eagle:
            patterns, sizes, windows = self._eagle_patterns(req, found)
            return cache_hit.hit_valid(tokens, patterns, sizes, windows, True, req.history)
        return tokens <= req.prefix_tokens and tokens % self._hit_alignment() == 0 and self._hit_length_fits(tokens, found)

    def _copy_needs(self, req: _Request) -> list[int]:
        """The first-resume copy slots per pool group of ``req``: :meth:`first_resume_copies` of its
        reused history while its first resume is pending, else none."""
        if not req.pending_copy:
            return [0] * self.layout.num_pool_groups
        return list(self.first_resume_copies(req.history))

    def first_resume_copies(self, reused_history: int) -> list[int]:
        """Extension point (a named hook): the slots per pool group that the first resume of a request
        created over ``reused_history`` tokens (> 0) takes, for the call only, to copy what it reuses
        into private pages. :meth:`resume` charges them with the request's blocks and gives them back
        before it returns; a hook that returns other counts changes nothing else (seeded bugs of the
        reference override it, never :meth:`resume`).

        The spec (``first_resume_copy``): one per attention life cycle whose reused history ends
        mid-block (the partial block is copied), one per SSM life cycle (its state snapshot); none
        with the option off."""
        extra = [0] * self.layout.num_pool_groups
        if self.semantics.first_resume_copy:
            for lc_index, lc in enumerate(self.layout.life_cycles):
                needs_copy = reused_history > 0 if lc.kind is LifeCycleKind.SSM else lifecycle.partial_block(
                    reused_history, self._t[lc_index]
                )
                extra[self._group_of[lc_index]] += int(needs_copy)
        return extra

    def _hits(self, req: _Request, plan: _Plan) -> list[dict[int, int]]:
        """Per life cycle, the blocks a first resume takes as cache hits: the prefix's whole blocks it
        must hold that its ``share_with`` request still holds (attention life cycles only)."""
        source = self._requests.get(req.share_with)
        hits: list[dict[int, int]] = [{} for _ in plan]
        if self._cache:
            return self._cache_hits(req, plan)
        if source is None or source.state is RequestState.CLOSED:
            return hits
        for lc_index, step in enumerate(plan):
            if step is None or self.layout.life_cycles[lc_index].kind is LifeCycleKind.SSM:
                continue
            theirs = source.held[lc_index]
            for lo, hi in step[0]:
                for b in range(lo, min(hi, req.prefix_tokens // self._t[lc_index])):
                    if b in theirs:
                        hits[lc_index][b] = theirs[b]
        return hits

    def _cache_hits(self, req: _Request, plan: _Plan) -> list[dict[int, int]]:
        """Under ``cache_freed``: per life cycle, the prefix's whole blocks the first resume must hold
        whose content some slot has (held, or cached free): the slot first named with it."""
        hits: list[dict[int, int]] = [{} for _ in plan]
        found = self._finder(req)
        limit = self._hit_limit(req, found) if self._taking is None else self._taking
        for lc_index, step in enumerate(plan):
            if step is None or self.layout.life_cycles[lc_index].kind is LifeCycleKind.SSM:
                continue
            for lo, hi in step[0]:
                for b in range(lo, min(hi, limit // self._t[lc_index])):
                    slot = found(lc_index, b)
                    if slot is not None:
                        hits[lc_index][b] = slot
        return hits

    def _finder(self, req: _Request) -> Any:
        """``found(life cycle, block)``: the slot first named with the content of ``req``'s block, else None."""

        def found(lc_index: int, b: int) -> int | None:
            return self._pools[self._group_of[lc_index]].first((lc_index, _root(req, b, self._t[lc_index]), b))

        return found

    def _hit_limit(self, req: _Request, found: Any) -> int:
        """The tokens below which a first resume takes what it finds: the reused prefix (``per-block``),
        else the one hit length for all life cycles, a multiple of the alignment (the lcm of the block
        sizes): :meth:`_eagle_hit` or :meth:`_longest_common_hit`."""
        if self.semantics.eagle:
            return self._eagle_hit(req, found)
        if self.semantics.hit_rule is HitRule.COMMON_PREFIX:
            return self._longest_common_hit(req.prefix_tokens, found)
        return req.prefix_tokens

    def _eagle_patterns(self, req: _Request, found: Any) -> tuple[list, list, list]:
        """Per attention life cycle: which blocks of the reused prefix it finds (in its own block
        size), its block size and its window (None: full attention)."""
        patterns, sizes, windows = [], [], []
        for lc_index, lc in enumerate(self.layout.life_cycles):
            if lc.kind is LifeCycleKind.SSM:
                continue
            t = self._t[lc_index]
            patterns.append([found(lc_index, b) is not None for b in range(req.prefix_tokens // t)])
            sizes.append(t)
            windows.append(lc.window if lc.kind is LifeCycleKind.SWA else None)
        return patterns, sizes, windows

    def _eagle_hit(self, req: _Request, found: Any) -> int:
        """The hit (tokens) of a first resume under ``Semantics.eagle``: :func:`.cache_hit.longest_hit`
        over which prefix blocks each attention life cycle finds (in its own block size), its reusable
        length the reused history."""
        patterns, sizes, windows = self._eagle_patterns(req, found)
        return cache_hit.longest_hit(patterns, sizes, windows, True, req.history) if patterns else 0

    def _scheduled_end(self, history: int, capacity: int, resuming: bool = False) -> int | None:
        """Under ``cache_scheduled``: the tokens a step to ``capacity`` counts as computed, its draft
        slots (``lookahead_tokens``: the last ``min(k, n - 1)`` of ``n = capacity - history`` new
        tokens) left out; None: a resize with no new token names nothing (only with draft slots)."""
        k = self.semantics.lookahead_tokens
        if not k:
            return capacity
        if capacity == history:
            return history if resuming else None
        return capacity - min(k, capacity - history - 1)

    def _name_step(self, req: _Request, history: int, capacity: int, resuming: bool = False) -> None:
        """Name what a step to ``(history, capacity)`` made computed (see :meth:`_name`)."""
        if not self.semantics.cache_scheduled:
            self._name(req, history)
            return
        end = self._scheduled_end(history, capacity, resuming)
        if end is not None:
            self._name(req, end)

    def _hit_alignment(self) -> int:
        """The tokens a common-prefix hit is a multiple of: the least common multiple of the attention
        life cycles' block sizes (:func:`~.cache_hit.alignment`; with one block size, ``t``)."""
        return self._alignment

    def _longest_common_hit(self, limit: int, found: Any) -> int:
        """The longest hit of at most ``limit`` tokens, a multiple of the alignment, that fits every
        attention life cycle (:meth:`_hit_length_fits`). A length that does not fit names a block it
        needs and cannot find; every longer length down to that block's start needs it too, so the
        search goes on from there: O(blocks looked up), where trying each length was quadratic."""
        a = self._hit_alignment()
        L = limit - limit % a
        while L > 0:
            missing = self._hit_missing(L, found)
            if missing is None:
                return L
            t, b = missing
            L = min(L - a, b * t - (b * t) % a)
        return 0

    def _hit_length_fits(self, L: int, found: Any) -> bool:
        """Whether a hit of ``L`` tokens (a multiple of every attention life cycle's block size) fits
        every attention life cycle (``HitRule.COMMON_PREFIX``): each finds every block it holds at
        history and capacity ``L`` (its live blocks there), or, holding none there, its block before
        ``L``."""
        return L == 0 or self._hit_missing(L, found) is None

    def _hit_missing(self, L: int, found: Any) -> tuple[int, int] | None:
        """For a hit of ``L > 0`` tokens (see :meth:`_hit_length_fits`): ``(t, b)``, the highest block
        ``b`` (of ``t`` tokens) some attention life cycle needs and cannot find, or None when it fits."""
        for lc_index, lc in enumerate(self.layout.life_cycles):
            if lc.kind is LifeCycleKind.SSM:
                continue
            t = self._t[lc_index]
            ranges = self.required_ranges(lc_index, L, L) or ((L // t - 1, L // t),)
            for lo, hi in reversed(ranges):
                for b in range(hi - 1, lo - 1, -1):
                    if found(lc_index, b) is None:
                        return t, b
        return None

    def hit_blocks(self, request_id: str) -> int:
        """The blocks the request's first resume took as cache hits (0 before it or without any)."""
        return self._get(request_id, allow_closed=True).hit_blocks

    def resize(self, request_id: str, capacity: int, history: int | None = None) -> Outcome:
        """Step an active request to ``capacity`` tokens with ``history`` of them computed
        (history unchanged when None). Out of slots leaves everything as it was, except that a lazily
        freeing manager (``free_stale = at-allocate``) first frees what is stale at the current
        history, and that stands."""
        req = self._active(request_id)
        history = req.history if history is None else history
        if type(capacity) is not int or type(history) is not int or capacity < 0 or history < 0:
            _require_count(request_id, "capacity", capacity)
            _require_count(request_id, "history", history)
        if history < req.history:
            raise RequestError(request_id, "history", history, f"goes backwards from {bounded(req.history)}")
        if capacity < history:
            raise RequestError(request_id, "capacity", capacity, f"is below history {bounded(history)}")
        if self._unchanged(req, history, capacity):  # no block changes: nothing to plan
            req.capacity, req.history, req.released_to = capacity, history, history
            if self._cache:
                self._name_step(req, history, capacity)
            return OK
        if req.released_to < req.history:  # lazy freeing: catch up before allocating
            self._apply(req, self._plan(req, req.history, req.capacity))
            req.evicted_on = self._points
            req.released_to = req.history
            self._refresh(req)
        plan = self._plan(req, history, capacity)
        points = self._points
        hold = self.release_order is ReleaseOrder.HOLD_UNTIL_RETURN
        held_back = self._stale_released(plan, history) if hold else None
        self._planning = req
        outcome = self._feasible(plan, held_back=held_back, extra=None)
        if not outcome:
            return outcome
        if self._cache and not self.semantics.cache_scheduled:
            self._name(req, history, advance=False)  # the history it ends on is computed: named before this call frees
        self._apply(req, plan, held_back)
        req.evicted_on = points
        req.capacity, req.history, req.released_to = capacity, history, history
        if self._cache:  # the blocks this call reserved (or allocated below the history it ends on)
            if req.named:  # blocks a smaller capacity cut off are named again when held again
                req.named = [min(n, lifecycle.allocated_blocks(capacity, t)) for n, t in zip(req.named, self._t)]
            self._name_step(req, history, capacity)
        self._refresh(req)
        return OK

    def commit(self, request_id: str, tokens: int) -> None:
        """Finalize ``tokens`` more tokens: history advances (within capacity); stale blocks are freed
        now, or at the next resize when freeing lazily."""
        req = self._active(request_id)
        if type(tokens) is not int or tokens < 0:
            _require_count(request_id, "tokens", tokens)
        if req.history + tokens > req.capacity:
            raise RequestError(
                request_id, "tokens", tokens, f"history {bounded(req.history)} + tokens exceeds capacity {bounded(req.capacity)}"
            )
        req.history += tokens
        if self._cache and not self.semantics.cache_scheduled:
            self._name(req, req.history)
        if self.semantics.free_stale is FreeStale.AT_COMMIT:
            changed = not self._unchanged(req, req.history, req.capacity)
            if changed:
                self._apply(req, self._plan(req, req.history, req.capacity))  # only releases
                req.evicted_on = self._points
            req.released_to = req.history
            if changed:
                self._refresh(req)

    def suspend(self, request_id: str) -> None:
        """Deactivate a request: free every slot and keep its lengths (``release``), free every slot
        and drop its computed tokens (``recompute``), or free nothing (``keep``)."""
        req = self._get(request_id, RequestState.ACTIVE)
        mode = self.semantics.suspend
        if mode is not SuspendMode.KEEP:
            self._release_all(req)
        if mode is SuspendMode.RECOMPUTE:
            req.capacity = req.history = req.released_to = 0
            req.evicted_on = [0] * len(req.evicted_on)
            req.pending_copy = False
        req.state = RequestState.SUSPENDED
        self._refresh(req)

    def close(self, request_id: str) -> None:
        """Release every slot; any later operation on the request raises :class:`RequestError`."""
        req = self._get(request_id)
        self._release_all(req)
        req.state = RequestState.CLOSED

    # ----------------------------------------------------------------- internals
    def _get(
        self, request_id: str, state: RequestState | None = None, allow_closed: bool = False
    ) -> _Request:
        _require_id(request_id)
        req = self._requests.get(request_id)
        if req is None:
            raise RequestError(request_id, "request_id", request_id, "unknown request")
        if req.state is RequestState.CLOSED and not allow_closed:
            raise RequestError(request_id, "state", req.state.value, "request is closed")
        if state is not None and req.state is not state:
            raise RequestError(request_id, "state", req.state.value, f"must be {state.value}")
        return req

    def _active(self, request_id: str) -> _Request:
        """The active request ``request_id`` (the common case first), else :meth:`_get`'s error."""
        req = self._requests.get(request_id) if type(request_id) is str else None
        if req is None or req.state is not RequestState.ACTIVE:
            req = self._get(request_id, RequestState.ACTIVE)
        return req

    def _unchanged(self, req: _Request, history: int, capacity: int) -> bool:
        """Whether moving an active ``req`` to ``(history, capacity)`` changes none of its blocks, judged
        from the cache alone (False when unsure: the caller then plans)."""
        return (
            self._fast
            and req.history_from <= history < req.history_below
            and req.capacity_from <= capacity < req.capacity_below
        )

    def _refresh(self, req: _Request) -> None:
        """Renew the cache after the request's blocks changed. :meth:`required_ranges` depends on the
        capacity only through the allocated count and on the history only through the windows' stale
        ranges, and both are monotone: so the required blocks stay the same from the current capacity
        up to the first capacity that allocates one more block, and from the current history up to the
        first history at which some window's stale range moves on. Each bound is found by searching the
        reference's own functions (no formula restated), in O(log distance) evaluations, and only when
        the request has left the box the cache describes."""
        sizes = self._sizes
        c = req.capacity
        if not req.capacity_from <= c < req.capacity_below:
            guess = req.capacity_below - req.capacity_from

            def spans(x: int) -> tuple[int, ...]:  # the blocks capacity x spans, in each block size
                return tuple(lifecycle.allocated_blocks(x, t) for t in sizes)

            req.capacity_from = c
            req.capacity_below = _first_change(spans, c, spans(c), guess=guess)
        h = req.released_to
        if not req.history_from <= h < req.history_below:
            guess = req.history_below - req.history_from if req.history_below != _NEVER else 0
            nearest: int | float = _NEVER
            for lc_index in self._windows:
                lc = self.layout.life_cycles[lc_index]
                nearest = _first_change(lambda x: self._stale(lc, x), h, self._stale(lc, h), nearest, guess)
            req.history_from, req.history_below = h, nearest

    def _plan(self, req: _Request, history: int, capacity: int) -> _Plan:
        """Per life cycle: None when its blocks do not change, else (to allocate, to release, new ranges)."""
        plan: _Plan = []
        points = self._points = self._release_points(req, history)
        for lc_index, old in enumerate(req.ranges):
            new = self.required_ranges(lc_index, points[lc_index], capacity)
            plan.append(None if new == old else (ranges_minus(new, old), ranges_minus(old, new), new))
        return plan

    def _release_points(self, req: _Request, history: int) -> list[int]:
        """Per life cycle, the history a step to ``history`` frees stale blocks on: ``history`` itself,
        except under an eviction interval above 1, where a window whose eviction is not due
        (:func:`~.floors.eviction_due`) keeps the history it last freed on."""
        if self._interval == 1:
            return [history] * len(req.ranges)
        k, e = self._in_flight, self._interval
        points = []
        for lc_index, lc in enumerate(self.layout.life_cycles):
            r, t = req.evicted_on[lc_index], self._t[lc_index]
            if lc.window is None or r >= history or floors.eviction_due(history, r, t, lc.window, lc.sink_blocks, k, e):
                points.append(history)
            else:
                points.append(r)
        return points

    def _stale_released(self, plan: _Plan, history: int) -> list[Ranges | None]:
        """Per life cycle, the released blocks that are stale at ``history`` (rather than cut off by a
        smaller capacity): what the hold-until-return order keeps held while allocating."""
        kept: list[Ranges | None] = []
        released_on = lifecycle.released_history(history, self._in_flight)
        for lc_index, step in enumerate(plan):
            lc = self.layout.life_cycles[lc_index]
            if step is None or lc.kind is LifeCycleKind.SSM or lc.window is None:
                kept.append(None)
                continue
            start, end = lifecycle.stale_range(released_on, self._t[lc_index], lc.window, lc.sink_blocks)
            kept.append(ranges_minus(step[1], ranges_minus(step[1], _ranges((start, end)))))
        return kept

    def _feasible(self, plan: _Plan, held_back: list[Ranges | None] | None, extra: list[int] | None) -> Outcome:
        """Whether every pool group has the slots the plan needs, given blocks ``held_back`` (released
        only after allocating) and ``extra`` transient slots."""
        needed = list(extra) if extra is not None else [0] * len(self._pools)
        available = [p.free for p in self._pools]
        for lc_index, step in enumerate(plan):
            if step is None:
                continue
            g = self._group_of[lc_index]
            needed[g] += _size(step[0])
            available[g] += self._freed_by(lc_index, step[1])
            if held_back is not None and held_back[lc_index]:
                available[g] -= self._freed_by(lc_index, held_back[lc_index])
        if all(n <= a for n, a in zip(needed, available)):
            return OK
        return Outcome(False, tuple(Shortfall(g, n, a) for g, (n, a) in enumerate(zip(needed, available)) if n > a))

    def _freed_by(self, lc_index: int, ranges: Ranges) -> int:
        """Slots freed when the planning request releases ``ranges`` of a life cycle: every block, unless
        its pool has shared slots, when only blocks whose slot has no other holder count."""
        pool = self._pools[self._group_of[lc_index]]
        if not pool.sharers or self._planning is None:
            return _size(ranges)
        held = self._planning.held[lc_index]
        return sum(1 for b in _blocks(ranges) if pool.frees(held[b]))

    def _apply(
        self, req: _Request, plan: _Plan, held_back: list[Ranges | None] | None = None,
        hits: list[dict[int, int]] | None = None,
    ) -> None:
        """Carry out a feasible plan: free, allocate (cache hits share their slot), then free what was
        held back until now."""
        for lc_index, step in enumerate(plan):
            if step is None:
                continue
            release = step[1]
            if held_back is not None and held_back[lc_index]:
                release = ranges_minus(release, held_back[lc_index])
            self._free(req, lc_index, release)
        if hits is not None and self._cache:  # every hit first: a slot taken next must not evict one
            for lc_index, found in enumerate(hits):
                pool, held = self._pools[self._group_of[lc_index]], req.held[lc_index]
                for b, slot in found.items():
                    held[b] = slot
                    if slot in pool.queue:
                        pool.touch(slot)
                    else:
                        pool.share(slot)
        for lc_index, step in enumerate(plan):
            if step is None:
                continue
            pool, held = self._pools[self._group_of[lc_index]], req.held[lc_index]
            found = hits[lc_index] if hits is not None else None
            for b in _blocks(step[0]):
                if found and b in found:
                    if not self._cache:
                        held[b] = found[b]
                        pool.share(found[b])
                else:
                    held[b] = pool.take()
            req.ranges[lc_index] = step[2]
        if held_back is not None:
            for lc_index, kept in enumerate(held_back):
                if kept:
                    self._free(req, lc_index, kept)

    def _free(self, req: _Request, lc_index: int, ranges: Ranges) -> None:
        pool, held = self._pools[self._group_of[lc_index]], req.held[lc_index]
        if not self._cache:
            for b in _blocks(ranges):
                pool.give(held.pop(b))
            return
        blocks = sorted(_blocks(ranges), reverse=True)  # last block first
        pool.give_batch([held.pop(b) for b in blocks])

    def _name(self, req: _Request, computed: int, advance: bool = True) -> None:
        """Under ``cache_freed``: the content of every block ``req`` holds whose tokens all lie below
        ``computed`` (committed, or under ``cache_scheduled`` reserved) is named, once per block index
        (a block not held when it became computed, out of the window, is never named). ``advance``
        False: blocks not held now may still be named by a later call. ``cache_aligned``: a life cycle
        names only its first :func:`~.cache_hit.cacheable_tokens` tokens' blocks, and only those an
        aligned hit reads (:meth:`_reachable`). ``cache_prompt_tail``: see :meth:`_name_prompt_tail`.
        O(blocks named)."""
        if not req.named:
            req.named = [0] * len(req.held)
        aligned_only = self.semantics.cache_aligned
        eagle, a = int(self.semantics.eagle), self._hit_alignment()
        for lc_index, held in enumerate(req.held):
            t = self._t[lc_index]
            if self.layout.life_cycles[lc_index].kind is LifeCycleKind.SSM:
                continue
            upto = cache_hit.cacheable_tokens(computed, t, a, eagle) if aligned_only else computed
            if self.semantics.cache_prompt_tail:
                self._name_prompt_tail(req, lc_index, upto)
            full = upto // t
            if req.named[lc_index] >= full:
                continue
            pool = self._pools[self._group_of[lc_index]]
            for b in range(req.named[lc_index], full):
                if b in held and (not aligned_only or self._reachable(lc_index, b)):
                    pool.name(held[b], (lc_index, _root(req, b, t), b))
            if advance:
                req.named[lc_index] = full

    def _name_prompt_tail(self, req: _Request, lc_index: int, upto: int) -> None:
        """``cache_prompt_tail``: a full-attention life cycle whose block size differs from the config's
        ``t`` (vLLM's hash block size) names the block its request's prompt ends inside by the prompt's
        whole hash blocks (:func:`~.cache_hit.prompt_tail_tokens`, ``n`` tokens, a partial prefix entry)
        once its first ``upto`` cacheable tokens reach them, while that block is not whole: a content
        no hit reads (hits look whole blocks up), which the block keeps if freed before it fills and
        which its whole content replaces when it does."""
        lc, t = self.layout.life_cycles[lc_index], self._t[lc_index]
        if lc.kind is not LifeCycleKind.FULL or t == self.tokens_per_block:
            return
        n = cache_hit.prompt_tail_tokens(req.prompt_tokens, self.tokens_per_block, int(self.semantics.eagle))
        b = n // t
        if 0 < n <= upto and n % t and b in req.held[lc_index]:
            self._pools[self._group_of[lc_index]].name(req.held[lc_index][b], (lc_index, _root_of(req, n - 1), b, n))

    def _reachable(self, lc_index: int, b: int) -> bool:
        """Whether some hit whose length is a multiple of the alignment reads block ``b`` of the life
        cycle (``cache_aligned``), by the hit rule in force. Under ``eagle`` (:func:`~.cache_hit.longest_hit`'s
        rule): :func:`~.cache_hit.retained_block`, the block a hit gives back counted as read. Else
        the smallest such length ending past the block, ``L``, looks it up (:meth:`_hit_length_fits`:
        its blocks at ``(L, L)``, else its block before ``L``); longer ones start their windows no
        earlier."""
        lc = self.layout.life_cycles[lc_index]
        if lc.window is None:
            return True
        t, a = self._t[lc_index], self._hit_alignment()
        if self.semantics.eagle:
            return cache_hit.retained_block(b, t, lc.window, a, 1)
        L = -(-(b + 1) * t // a) * a
        ranges = self.required_ranges(lc_index, L, L)
        return any(lo <= b < hi for lo, hi in ranges) if ranges else b == L // t - 1

    def _release_all(self, req: _Request) -> None:
        for lc_index, held in enumerate(req.held):
            pool = self._pools[self._group_of[lc_index]]
            if self._cache:  # last block first, as one free
                pool.give_batch([held.pop(b) for b in sorted(held, reverse=True)])
            for b in sorted(held):
                pool.give(held.pop(b))
            req.ranges[lc_index] = ()
        req.named = []  # blocks it holds again are named again


def _root(req: _Request, b: int, t: int) -> str:
    """The request that first computed the content of ``req``'s block ``b`` of ``t`` tokens: the one
    that computed its last token (a token's content is that of every token before it too)."""
    return _root_of(req, (b + 1) * t - 1)


def _root_of(req: _Request, token: int) -> str:
    """The request that first computed ``req``'s token at position ``token``."""
    for end, root in req.roots:
        if end is None or token < end:
            return root
    return req.request_id


def _first_change(f: Any, x: int, now: Any, limit: int | float = _NEVER, guess: int = 0) -> int | float:
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


def _require_id(request_id: Any) -> None:
    """Request ids are non-empty strings (the protocol's and the traces' form)."""
    if type(request_id) is not str or not request_id:
        raise RequestError(request_id, "request_id", request_id, "must be a non-empty string")
