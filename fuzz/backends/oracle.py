"""The ``oracle`` backend: an independent, token-level KV-cache manager.

It is written without the reference's formulas (no stale ranges, live-block counts or floors): it
decides for every token *position* whether attention may still read it, and holds a block exactly
when the block is allocated (some position of it lies below the capacity) and holds such a position.

At history ``h`` the token in flight is at position ``h``; it attends to the ``W`` positions ending
at itself, so a position ``p`` of a windowed layer is still needed when ``p >= h + 1 - W`` (this
includes every position not computed yet) or when ``p`` lies in a sink block (a block holding one
of the first ``sink_tokens`` positions). With ``k`` tokens in flight the engine only knows that
``h - k`` are computed, so the oldest position still read is ``h - k + 1 - W``. Full attention needs
every position; an SSM layer holds one state page. Minimum slots are found by brute force: the most
blocks a decode step (capacity ``h + 1``) holds, over every history up to a few windows past the sinks.

The semantics options are modelled in the same terms, from what each engine does, not from the
reference's code: freeing lazily (``at-allocate``) leaves a commit's out-of-window blocks held and
frees them when the next resize starts (that release stands if the allocation then fails); a
suspension frees every block and keeps the lengths (``release``), frees every block and forgets the
computed tokens (``recompute``), or frees nothing (``keep``); a first resume whose reused history
ends inside a block copies it into one more slot only when ``first_resume_copy`` is on; and a
resize in the ``hold-until-return`` order frees, before it allocates, only blocks that lie past the
new capacity: blocks that left the window in the same call are freed after it. Under an eviction
interval ``e`` above 1 (SGLang's) each windowed geometry of a request keeps a cursor, a position: the
first position of the first block past the sinks that it has not freed (at first the first position
past the sinks). Where stale blocks would be freed at history ``h``, they are freed only when the
oldest position still read, ``h - k + 1 - W``, lies at least ``e`` positions past the cursor; the
cursor then moves to the first position of that oldest position's block (never back into the sinks),
and the geometry holds the blocks with a position from the cursor on (and the sinks).

Shared prefixes (``prefix_sharing``) are modelled by content: a request created on another's first
``k`` committed tokens has the same tokens at positions below ``k``, so at its first resume each
block it must hold whose every position lies below ``k`` and which that request still holds is the
same page. A page is named by where its content was first computed; a pool group's use is the number
of distinct pages its requests hold, and a page is freed when no request holds it any more.

With ``cache_freed`` a page whose last holder lets go stays cached when every position of it was
committed by that holder: its content is the list of where each of its positions' tokens was first
computed, so a later first resume on the same tokens finds it (live pages are looked for first: the
prefix's source, then every other request in creation order). Which cached page is lost when a new
page is needed is decided by the order a pool hands its free slots out: first the freed slots that
keep no page and the never-used ones (taking one of them loses nothing), then the slot whose page was
cached longest ago; a release lets go of a request's blocks from its last one back.

Speculative decoding (``eagle``, ``lookahead_tokens``; the ``oracle-eagle`` campaign): a first resume's
hit length ``L`` is the longest that ends on a whole block of every attention layer and such that, in
every attention layer of ``t`` tokens per block, each block the position ``L`` reads (or, reading none,
the block before it) and block ``L / t`` itself (the block the engine matched and gave back for the
drafter) has a findable page, and that block lies within the reused tokens. Of a step's new positions
all but one may be drafts, at most ``lookahead``: the last ones; with ``cache_scheduled`` only the
positions before the drafts become findable, and a resize with no new position makes nothing findable.

Block sizes: an attention layer may have a block size of its own (``AttentionLayer.tokens_per_block``);
a geometry is then also its block size, and every block of it (allocated, held, sink, copied, cached)
is counted in its own size. Full attention's minimum is the blocks of its size that a decode step's
capacity spans at the first history where a windowed geometry holds its peak (found by walking the
histories). A hit under the common-prefix rule ends on a whole block of every attention geometry
(its length is a multiple of each one's size).

SGLang's radix tree (the ``oracle-radix`` campaign), two options. ``prompt_lock``: the tree lock a request
takes at its first resume on the prompt it matched or published (its reused history, when above 0) pins the
SWA KV a token placed right after the prompt's whole blocks would read besides itself: the positions
``[q + 1 - W, q - 1]``, ``q`` the prompt's length rounded down to a block start (never below position 0), so
each windowed geometry also holds the blocks of those positions, read or not, until the request lets go of
all its blocks (a suspension that frees them, a close). Its minimum is the most blocks a lone request decoding
from any prompt holds (found by walking the prompts, one per block start, and the histories after each); full
attention's stays as without the lock (the lock pins SWA KV only). ``publish_on_release``: content becomes
findable only when published: a resume publishes what it holds below its history, a close (of an active
request) what it holds below its committed history, before it lets go; a commit or a resize publishes
nothing. A first resume of reused history ending on a whole block (at least one) computes that last block
again (one token is always computed) and then takes the published copy: per attention geometry it holds a
slot for the call when the first findable page of that block's content is held by a request, and per
windowed geometry one more for the block just before the locked window (the block its window reaches past
the lock; with a window of one token, the last block itself) unless such a held page has its content.

A load holding every loaded token (``load_holds_prefix``, the ``oracle-load`` campaign): a first resume of
a request created over reused history holds, per geometry, the blocks of every position up to its capacity
(its positions held as at history 0: none has left a window yet); with the freed-page cache and one hit
length (common-prefix or EAGLE) its positions are held as at the hit's length instead (the hit's live
blocks, then every loaded one); the request's next resize, or under ``at-commit`` its next commit, first
lets go of what is stale at its history.

Only the reference's value types are shared (config, snapshot, outcome, errors), so the two can be
compared with ``==``.
"""

from __future__ import annotations

import functools
from typing import Callable, Hashable

import attrs

from swafloor.reference import (
    AttentionLayer,
    BelowMinimum,
    BlockTable,
    Config,
    ConfigError,
    FloorRule,
    FreeStale,
    Outcome,
    PoolSnapshot,
    RequestError,
    RequestSnapshot,
    RequestState,
    Shortfall,
    SuspendMode,
    Snapshot,
    SsmLayer,
)

from ..adapter import ManagerBackend
from ..protocol import (ALL_SEMANTICS, ALL_SEMANTICS_EAGLE, ALL_SEMANTICS_EVICTION, ALL_SEMANTICS_LOAD, ALL_SEMANTICS_MIXED,
                        ALL_SEMANTICS_SHARING, RADIX_TREE, REFUSAL_KEEPS_STALE, STALE_FREED_ON_GROWTH, WINDOW_RING, Capabilities, Limits,
                        factory)

__all__ = ["OracleManager", "oracle", "decode_peak"]

# Request states as module constants (on Python 3.11 reading a member off its enum costs a descriptor call).
ACTIVE, SUSPENDED, CLOSED = RequestState.ACTIVE, RequestState.SUSPENDED, RequestState.CLOSED


@attrs.frozen
class _Geometry:
    """What layers with equal attention geometry share: kind, window, and the set of sink blocks."""

    kind: str  # "swa", "full" or "ssm"
    window: int | None = None
    sink_blocks: frozenset[int] = frozenset()
    t: int = 1  # tokens per block
    ring: bool = False  # a window kept as a ring (window_ring): token p in ring slot p % W


def _sink_blocks(sink_tokens: int, t: int) -> frozenset[int]:
    """The blocks holding the first ``sink_tokens`` positions, found by listing them."""
    return frozenset(p // t for p in range(sink_tokens))


def _allocated(capacity: int, t: int) -> range:
    """The blocks that hold at least one position below ``capacity``: one per block start
    ``0, t, 2t, ...`` below it (the starts are counted, not derived from a formula)."""
    return range(len(range(0, capacity, t)))


def _within(held: frozenset[int], capacity: int, t: int) -> frozenset[int]:
    """The blocks of ``held`` that hold a position below ``capacity`` (``held`` itself when all do)."""
    allocated = _allocated(capacity, t)
    return held if all(b in allocated for b in held) else frozenset(b for b in held if b in allocated)


def _held(
    geometry: _Geometry, history: int, capacity: int, t: int, in_flight: int = 0, cursor: int | None = None
) -> frozenset[int]:
    """The blocks a request holds for one geometry at ``(history, capacity)`` with ``in_flight``
    tokens of that history not known to be computed yet (with an eviction cursor: every position
    from the cursor on is still held)."""
    if geometry.kind == "ssm":
        return frozenset({0})
    allocated = _allocated(capacity, t)
    if geometry.kind == "full":
        return frozenset(allocated)
    if geometry.ring:  # ring slot p % W of every position below the capacity; past W the slots repeat
        return frozenset((p % geometry.window) // t for p in range(min(capacity, geometry.window)))
    # The oldest position the token in flight reads, counted from the tokens known to be computed.
    newest = max(capacity, history + 1)  # positions up to the token in flight and the capacity
    if cursor is None:
        oldest = max(0, history - in_flight + 1 - geometry.window)
    else:  # a cursor past the token in flight (still among the sinks) holds the token in flight
        oldest = min(cursor, newest - 1)
    positions = range(oldest, newest)  # never empty: it holds the token in flight
    # Every t-th of these positions and the last one: no block between them is skipped.
    needed = {p // t for p in positions[::t]} | {positions[-1] // t} | geometry.sink_blocks
    return frozenset(b for b in needed if b in allocated)


def _locked(geometry: _Geometry, prompt: int | None, t: int) -> frozenset[int]:
    """``prompt_lock``: the blocks of a windowed geometry a tree lock on a prompt of ``prompt`` tokens
    pins: those holding a position a token at the prompt's last whole block's end ``q`` reads besides
    itself, ``q + 1 - W .. q - 1`` (none below position 0)."""
    if prompt is None or geometry.kind != "swa":
        return frozenset()
    q = max(range(0, prompt + 1, t))  # the last block start at or below the prompt's end
    return frozenset(p // t for p in range(max(0, q + 1 - geometry.window), q))


@functools.lru_cache(maxsize=4096)
def decode_peak_locked(t: int, window: int, sink_blocks: frozenset[int]) -> int:
    """:func:`decode_peak` of a request holding its prompt's last window locked (``prompt_lock``): the
    most blocks one decode step holds, over every prompt (one per block start: the lock depends on the
    prompt's whole blocks, and the shortest such prompt admits every later history) up to one window and
    two blocks past the sinks, and every history from the prompt up to one window and three blocks past it."""
    geometry = _Geometry("swa", window, sink_blocks, t)
    reach = (max(sink_blocks, default=-1) + 1) * t + window + 2 * t
    peak = 0
    for prompt in range(0, reach + 1, t):
        locked = _locked(geometry, prompt, t)
        for h in range(prompt, prompt + window + 3 * t + 1):
            allocated = _allocated(h + 1, t)
            peak = max(peak, len(_held(geometry, h, h + 1, t) | {b for b in locked if b in allocated}))
    return peak


@functools.lru_cache(maxsize=4096)
def decode_peak(t: int, window: int, sink_blocks: frozenset[int], in_flight: int = 0, lookahead: int = 0) -> int:
    """The most blocks one decode step (capacity ``h + 1``, plus ``lookahead`` draft slots) of a
    windowed geometry holds with ``in_flight`` tokens in flight, over every history ``h`` up to one
    window, the tokens in flight, the drafts and two blocks past the sinks (the pattern repeats with
    period ``t`` once the window has left the sinks)."""
    geometry = _Geometry("swa", window, sink_blocks)
    horizon = (max(sink_blocks, default=-1) + 1) * t + window + in_flight + lookahead + 2 * t
    return max(len(_held(geometry, h, h + 1 + lookahead, t, in_flight)) for h in range(horizon + 1))


def first_peak_capacity(t: int, window: int, sink_blocks: frozenset[int], in_flight: int = 0,
                        lookahead: int = 0, interval: int = 1) -> int:
    """The capacity of the first decode step (from history 0, drafts included) at which a windowed
    geometry holds its peak (:func:`decode_peak` or :func:`decode_peak_interval`), found by walking."""
    geometry = _Geometry("swa", window, sink_blocks, t)
    if interval > 1:
        peak = decode_peak_interval(t, window, sink_blocks, in_flight, interval, lookahead)
        cursor = past_sinks = len(range(0, (max(sink_blocks, default=-1) + 1) * t))
    else:
        peak, cursor = decode_peak(t, window, sink_blocks, in_flight, lookahead), None
    h = 0
    while True:
        if interval > 1:
            oldest = h - in_flight + 1 - window
            if oldest >= cursor + interval:
                cursor = max(past_sinks, max(p for p in range(0, oldest + 1, t)))
        if len(_held(geometry, h, h + 1 + lookahead, t, in_flight, cursor)) == peak:
            return h + 1 + lookahead
        h += 1


@functools.lru_cache(maxsize=4096)
def decode_peak_interval(
    t: int, window: int, sink_blocks: frozenset[int], in_flight: int, interval: int, lookahead: int = 0
) -> int:
    """:func:`decode_peak` under an eviction interval: one request decoding from history 0, its cursor
    moved as the module docstring says before each step, over every history up to the sinks, the
    window, the tokens in flight, two intervals and four blocks (the cursor's pattern then repeats)."""
    geometry = _Geometry("swa", window, sink_blocks)
    cursor = past_sinks = len(range(0, (max(sink_blocks, default=-1) + 1) * t))
    horizon = past_sinks + window + in_flight + lookahead + 2 * interval + 4 * t
    peak = 0
    for h in range(horizon + 1):
        oldest = h - in_flight + 1 - window
        if oldest >= cursor + interval:
            cursor = max(past_sinks, max(p for p in range(0, oldest + 1, t)))
        peak = max(peak, len(_held(geometry, h, h + 1 + lookahead, t, in_flight, cursor)))
    return peak


@attrs.define
class _Request:
    state: RequestState
    capacity: int
    history: int
    pending_copy: bool
    held: list[frozenset[int]]
    # The last snapshot of this request and the state it was taken from (see OracleManager.snapshot).
    shown: tuple | None = None
    # Per geometry, the eviction cursor (a position; see the module docstring), under an interval above 1.
    cursors: list[int] = attrs.Factory(list)
    name: Hashable = None
    source: Hashable = None  # created on this request's committed prefix (prefix sharing only)
    prefix: int = 0  # tokens of that prefix
    resumed: bool = False
    pages: list[dict[int, tuple]] | None = None  # per geometry, held block -> page name (prefix sharing only)
    hit: int = 0  # blocks its first resume found already computed
    lock: int | None = None  # prompt_lock: the prompt (tokens) whose last window it keeps locked
    loaded: bool = False  # load_holds_prefix: it holds every block its first resume loaded, none freed yet


class OracleManager:
    """A manager that tracks live token positions and derives blocks from them."""

    def __init__(self, config: Config):
        self.t = config.tokens_per_block  # the config's; a geometry's own size wins (geometry.t)
        semantics = config.semantics
        self.in_flight = semantics.in_flight_tokens
        self.lazy = semantics.free_stale is FreeStale.AT_ALLOCATE
        self.keeps_stale = semantics.refused_keeps_stale  # nothing freed before the gate: all or nothing
        self.on_growth = semantics.stale_freed_on_growth  # a resize adding no block to a geometry frees none of it
        self.ring = semantics.window_ring  # a window is a ring of its first W positions' blocks
        self.suspend_mode = semantics.suspend
        self.copies = semantics.first_resume_copy
        self.hold = semantics.release_order.value == "hold-until-return"
        self.interval = semantics.eviction_interval
        self.lookahead = semantics.lookahead_tokens  # draft slots: only the minimum grows
        self.sharing = semantics.prefix_sharing
        self.lock = semantics.prompt_lock  # SGLang's tree lock on a prompt's last window
        self.publish = semantics.publish_on_release  # content findable only once published
        self.load_all = semantics.load_holds_prefix  # a first resume holds a block for every token it loads
        self.geometries: list[_Geometry] = []
        for layer in config.layers:
            geometry = self._geometry(layer)
            if geometry not in self.geometries:
                self.geometries.append(geometry)
        self.group_of = (
            list(range(len(self.geometries))) if config.pool_groups is None else list(config.pool_groups)
        )
        groups = max(self.group_of) + 1
        self.minimum = [0] * groups
        for geometry, g in zip(self.geometries, self.group_of):
            self.minimum[g] += self._share(geometry, config.floor_rule)
        if config.slots is None:
            self.totals = list(self.minimum)
        else:
            self.totals = []
            for g, (given, least) in enumerate(zip(config.slots, self.minimum)):
                if given < least:
                    if config.below_minimum is not BelowMinimum.BUMP:
                        raise ConfigError(f"slots[{g}]", given, f"below the pool group's minimum of {least}")
                    given = least
                self.totals.append(given)
        self.used = [0] * groups
        self.requests: dict[Hashable, _Request] = {}
        self.holders: list[dict[tuple, int]] = [{} for _ in range(groups)]  # per group: page -> holders
        self.pages_made = 0
        # The freed-page cache (cache_freed): per group, the free slots that keep no page (never used,
        # or freed keeping nothing), the slots keeping a page in the order they were freed (entry ->
        # page), and content -> entry.
        self.cache = semantics.cache_freed
        self.common_prefix = semantics.hit_rule.value == "common-prefix"
        self.scheduled = semantics.cache_scheduled
        self.eagle = semantics.eagle
        self.aligned_only = semantics.cache_aligned
        self.prompt_tail = semantics.cache_prompt_tail
        # uncached_to_tail: a slot freed keeping nothing joins the freed slots' order as an entry
        # keeping no page (None), after the never-used ones; else it is blank, handed out first.
        self.to_tail = semantics.uncached_to_tail
        # release_uncached_to_tail: so too a slot a request's release frees in a geometry without a window.
        self.release_to_tail = semantics.release_uncached_to_tail
        self.releasing = False
        # Pages named by the prefix of their block that a request's prompt fills (cache_prompt_tail):
        # no hit finds them, but one freed so is cached.
        self.partial: set[tuple] = set()
        self.blank = list(self.totals)
        self.freed_slots: list[dict[int, tuple | None]] = [{} for _ in range(groups)]
        self.kept: list[dict[tuple, list[int]]] = [{} for _ in range(groups)]
        # Pages whose content counts as computed (committed, or reserved with cache_scheduled), and,
        # per group, content -> those pages in the order they became so (held or cached).
        self.known: set[tuple] = set()
        self.findable: list[dict[tuple, list[tuple]]] = [{} for _ in range(groups)]
        self.content: dict[tuple, tuple] = {}  # page -> its content (geometry, origins of its positions)
        self.entries = 0

    # ------------------------------------------------------------------ sizing
    def _geometry(self, layer: AttentionLayer | SsmLayer) -> _Geometry:
        if isinstance(layer, SsmLayer):
            return _Geometry("ssm", t=self.t)
        t = self.t if layer.tokens_per_block is None else layer.tokens_per_block
        if layer.window is None:
            return _Geometry("full", t=t)
        return _Geometry("swa", layer.window, _sink_blocks(layer.sink_tokens, t), t, self.ring)

    def _share(self, geometry: _Geometry, rule: FloorRule) -> int:
        """One geometry's part of its pool group's minimum."""
        if rule is FloorRule.LEGACY or geometry.kind == "ssm":
            return 1
        if geometry.kind == "swa":
            if self.lock:  # the lock pins SWA KV: only the windowed geometries' own share grows
                return decode_peak_locked(geometry.t, geometry.window, geometry.sink_blocks)
            return self._peak(geometry)
        # Full attention sees the same sequence as every windowed layer: at least the largest peak; in
        # blocks of its own size, what it spans where each windowed geometry first holds its peak.
        peaks = [self._peak(g) if g.t == geometry.t else
                 len(_allocated(first_peak_capacity(g.t, g.window, g.sink_blocks, self.in_flight, self.lookahead,
                                                    self.interval), geometry.t))
                 for g in self.geometries if g.kind == "swa"]
        return max([1, *peaks])

    def _peak(self, g: _Geometry) -> int:
        if self.interval > 1:
            return decode_peak_interval(g.t, g.window, g.sink_blocks, self.in_flight, self.interval, self.lookahead)
        return decode_peak(g.t, g.window, g.sink_blocks, self.in_flight, self.lookahead)

    # ------------------------------------------------------------------ helpers
    def _get(self, request_id: Hashable, state: RequestState | None = None) -> _Request:
        req = self.requests.get(request_id)
        if req is None:
            raise RequestError(request_id, "request_id", request_id, "unknown request")
        if req.state is CLOSED:
            raise RequestError(request_id, "state", req.state.value, "request is closed")
        if state is not None and req.state is not state:
            raise RequestError(request_id, "state", req.state.value, f"must be {state.value}")
        return req

    @staticmethod
    def _count(request_id: Hashable, field: str, value: object) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RequestError(request_id, field, value, "must be an integer")
        if value < 0:
            raise RequestError(request_id, field, value, "must be >= 0")

    def _targets(self, history: int, capacity: int, req: _Request | None = None) -> list[frozenset[int]]:
        if self.interval == 1 or req is None:
            targets = [_held(g, history, capacity, g.t, self.in_flight) for g in self.geometries]
        else:
            self._moved = self._cursors(req.cursors, history)
            targets = [_held(g, history, capacity, g.t, self.in_flight, c) for g, c in zip(self.geometries, self._moved)]
        if req is None or req.lock is None:
            return targets
        # prompt_lock: the locked blocks too, those allocated (a set unchanged stays the same object)
        out = []
        for g, held in zip(self.geometries, targets):
            allocated = _allocated(capacity, g.t)
            extra = {b for b in _locked(g, req.lock, g.t) if b in allocated} - held
            out.append(held | extra if extra else held)
        return out

    def _radix_copies(self, req: _Request) -> list[int]:
        """``publish_on_release``: per pool group, the slots a first resume holds for the call because its
        reused history ends on a whole block (module docstring): the last block computed again while a
        request holds its published page, and in a windowed geometry the block before the locked window
        unless a request holds its published page."""
        extra = [0] * len(self.totals)
        h = req.history
        for i, geometry in enumerate(self.geometries):
            t = geometry.t
            if geometry.kind == "ssm" or h < t or h % t:
                continue
            g = self.group_of[i]

            def held_published(b: int) -> bool:
                pages = self.findable[g].get(self._block_content(req, i, b))
                return bool(pages) and pages[0] in self.holders[g]

            last = h // t - 1
            extra[g] += held_published(last)
            if geometry.kind == "swa":
                locked = _locked(geometry, h, t)
                before = (min(locked) if locked else h // t) - 1
                extra[g] += before >= 0 and not held_published(before)
        return extra

    def _past_sinks(self, geometry: _Geometry) -> int:
        return len(range(0, (max(geometry.sink_blocks, default=-1) + 1) * geometry.t))

    def _cursors(self, cursors: list[int], history: int) -> list[int]:
        """Where each windowed geometry's cursor stands after an eviction check at ``history``."""
        moved = []
        for geometry, cursor in zip(self.geometries, cursors):
            if geometry.kind == "swa":
                oldest = history - self.in_flight + 1 - geometry.window
                if oldest >= cursor + self.interval:
                    block_start = max(p for p in range(0, oldest + 1, geometry.t))
                    cursor = max(self._past_sinks(geometry), block_start)
            moved.append(cursor)
        return moved

    def _start_cursors(self, history: int) -> list[int]:
        """The cursors of a request whose first ``history`` tokens count as evicted already: each at
        the first position of the oldest read position's block (never inside the sinks)."""
        if self.interval == 1:
            return []
        cursors = []
        for geometry in self.geometries:
            cursor = self._past_sinks(geometry)
            if geometry.kind == "swa":
                oldest = history - self.in_flight + 1 - geometry.window
                if oldest >= 0:
                    cursor = max(cursor, max(p for p in range(0, oldest + 1, geometry.t)))
            cursors.append(cursor)
        return cursors

    def _shortfalls(self, needed: list[int], freed: list[int]) -> Outcome:
        lacking = []
        for g, (need, total, used, back) in enumerate(zip(needed, self.totals, self.used, freed)):
            available = total - used + back
            if need > available:
                lacking.append(Shortfall(g, need, available))
        return Outcome(False, tuple(lacking)) if lacking else Outcome(True)

    def _freed(self, req: _Request, i: int, gone) -> int:
        """Slots freed when ``req`` lets go of blocks ``gone`` of geometry ``i``: pages nobody else holds."""
        if not self.sharing:
            return len(gone)
        holders = self.holders[self.group_of[i]]
        return sum(1 for b in gone if holders[req.pages[i][b]] == 1)

    def _move(self, req: _Request, targets: list[frozenset[int]], hits: list[dict[int, tuple]] | None = None,
              history: int | None = None, hold: range | None = None) -> None:
        if self.cache:
            self._move_cached(req, targets, hits, req.history if history is None else history, hold)
            return
        if self.sharing:
            self._move_pages(req, targets, hits)
            return
        held = []
        for i, (old, new) in enumerate(zip(req.held, targets)):
            if new == old:
                held.append(old)  # unchanged: keep the same set (snapshot() compares it by identity)
                continue
            self.used[self.group_of[i]] += len(new - old) - len(old - new)
            held.append(new)
        req.held = held

    def _origin(self, req: _Request, position: int) -> tuple:
        """Where the token at ``position`` of ``req`` was first computed: follow the prefixes back."""
        while req.source is not None and position < req.prefix:
            req = self.requests[req.source]
        return (req.name, position)

    def _block_content(self, req: _Request, i: int, b: int) -> tuple:
        t = self.geometries[i].t
        return (i, tuple(self._origin(req, p) for p in range(b * t, b * t + t)))

    def _let_go(self, req: _Request, i: int, b: int, history: int) -> None:
        holders, pages = self.holders[self.group_of[i]], req.pages[i]
        page = pages.pop(b)
        holders[page] -= 1
        if holders[page]:
            return
        del holders[page]
        if not self.cache:
            return
        g = self.group_of[i]
        if page in self.known or page in self.partial:  # cached, even where another page has that content
            self.entries += 1
            self.kept[g].setdefault(self.content[page], []).append(self.entries)
            self.freed_slots[g][self.entries] = page
        else:
            self._blank_freed(g, 1, self.releasing and self.release_to_tail and self.geometries[i].kind != "swa")

    def _blank_freed(self, g: int, n: int, to_tail: bool = False) -> None:
        """``n`` slots of group ``g`` freed keeping nothing: blank (handed out first), or under
        ``uncached_to_tail`` (or ``to_tail``: a release's, ``release_uncached_to_tail``) the last of the
        freed slots."""
        if not (self.to_tail or to_tail):
            self.blank[g] += n
            return
        for _ in range(n):
            self.entries += 1
            self.freed_slots[g][self.entries] = None

    def _forget(self, g: int, content: tuple, entry: int) -> None:
        entries = self.kept[g][content]
        entries.remove(entry)
        if not entries:
            del self.kept[g][content]

    def _new_slot(self, g: int) -> None:
        """A slot for a page computed now: one that keeps nothing, else the one whose page was cached
        longest ago (that page is lost)."""
        if self.blank[g]:
            self.blank[g] -= 1
            return
        entry = next(iter(self.freed_slots[g]))
        page = self.freed_slots[g].pop(entry)
        if page is None:  # freed keeping nothing (uncached_to_tail)
            return
        self._forget(g, self.content[page], entry)
        if page in self.partial:  # never findable
            self.partial.discard(page)
            return
        self.known.discard(page)
        self.findable[g][self.content[page]].remove(page)

    def _learn(self, req: _Request, done: int) -> None:
        """The pages ``req`` holds whose every position lies below ``done`` become findable by their
        content (in the order they do). ``cache_aligned``: only below the longest length up to ``done``
        that ends on a whole block of every attention geometry (none while that length is 0), under
        EAGLE each geometry one whole block of its own further (the block a later hit matches and gives
        back), and only pages a hit reads. ``cache_prompt_tail``: see :meth:`_learn_prompt_tail`."""
        aligned = done
        if self.aligned_only:
            sizes = [g.t for g in self.geometries if g.kind != "ssm"]
            while any(aligned % size for size in sizes):
                aligned -= 1
        for i, (geometry, pages) in enumerate(zip(self.geometries, req.pages)):
            if geometry.kind == "ssm":
                continue
            reach = done
            if self.aligned_only:
                reach = min(done, aligned + geometry.t) if self.eagle and aligned > 0 else aligned
            for b in sorted(pages):
                page = pages[b]
                if self.aligned_only and not self._read_by_a_hit(i, b):
                    continue
                if page not in self.known and b * geometry.t + geometry.t <= reach:
                    if page in self.partial:  # whole now: its whole content replaces the prefix's
                        self.partial.discard(page)
                        self.content[page] = self._block_content(req, i, b)
                    self.known.add(page)
                    self.findable[self.group_of[i]].setdefault(self.content[page], []).append(page)
            if self.prompt_tail:
                self._learn_prompt_tail(req, i, reach)

    def _learn_prompt_tail(self, req: _Request, i: int, reach: int) -> None:
        """``cache_prompt_tail``: a full-attention geometry whose block size is not the config's names
        the block holding the position just past the prompt's last whole block of the config's size
        (the prompt: the reused tokens and one more; its last position counted only under EAGLE) by
        the positions of that block below it, once ``reach`` covers them, unless the block is findable
        already. Such a page is no hit's: only what is cached when it is freed changes."""
        geometry = self.geometries[i]
        if geometry.kind != "full" or geometry.t == self.t:
            return
        limit = req.prefix + 1 if self.eagle else req.prefix
        end = limit
        while end % self.t:
            end -= 1
        b = end // geometry.t
        page = req.pages[i].get(b)
        if end == 0 or end > reach or end == b * geometry.t or page is None or page in self.known:
            return
        if page not in self.partial:
            self.partial.add(page)
            self.content[page] = (i, tuple(self._origin(req, p) for p in range(b * geometry.t, end)))

    def _hit_reads(self, geometry: _Geometry, length: int) -> set[int]:
        """The blocks of ``geometry`` a hit of ``length`` tokens (on a whole block of it) needs findable:
        what its first uncomputed position reads (or, reading none, the block just before it); under
        EAGLE (no token in flight then) also the block at ``length``, the one given back."""
        j = length // geometry.t
        if self.eagle:
            return set(_held(geometry, length, length, geometry.t, 0) or {j - 1}) | {j}
        return set(_held(geometry, length, length, geometry.t, self.in_flight) or {j - 1})

    def _read_by_a_hit(self, i: int, b: int) -> bool:
        """``cache_aligned``: whether a hit ending on a whole block of every attention geometry
        reads block ``b`` of geometry ``i``: the first such length whose reads reach the block (found by
        stepping token by token), and the blocks it reads (:meth:`_hit_reads`). Under EAGLE, where one
        hit far from position 0 reads as many blocks as the first such length spans or more, every
        block is kept (vLLM's retention mask keeps them all then, even a block no hit reads)."""
        geometry = self.geometries[i]
        if geometry.kind != "swa":
            return True
        sizes = [g.t for g in self.geometries if g.kind != "ssm"]

        def aligned_from(length: int) -> int:
            while any(length % size for size in sizes):
                length += 1
            return length

        if self.eagle:
            step = aligned_from(1)
            far = aligned_from(geometry.window + geometry.t)
            if len(self._hit_reads(geometry, far)) >= step // geometry.t:
                return True
        length = aligned_from(max(1, (b + 1 - (1 if self.eagle else 0)) * geometry.t))
        return b in self._hit_reads(geometry, length)

    def _move_cached(self, req: _Request, targets: list[frozenset[int]], hits: list[dict[int, tuple]] | None,
                     history: int, hold: range | None) -> None:
        """_move_pages with the freed-page cache: every release first (last block first; in the
        hold-until-return order blocks still inside the new capacity after allocating), then every
        hit, then the pages computed now."""
        later = []
        for i, (old, new) in enumerate(zip(req.held, targets)):
            for b in sorted(old - new, reverse=True):
                if hold is not None and b in hold[i]:  # left the window in this call: freed after it allocates
                    later.append((i, b))
                else:
                    self._let_go(req, i, b, history)
        for i, (old, new) in enumerate(zip(req.held, targets)):
            g, pages = self.group_of[i], req.pages[i]
            for b, page in (hits[i].items() if hits is not None else ()):
                if page not in self.holders[g]:  # a cached page: its slot leaves the free queue
                    entry = next(e for e in self.kept[g][self.content[page]] if self.freed_slots[g][e] == page)
                    del self.freed_slots[g][entry]
                    self._forget(g, self.content[page], entry)
                pages[b] = page
                self.holders[g][page] = self.holders[g].get(page, 0) + 1
        for i, (old, new) in enumerate(zip(req.held, targets)):
            g, pages = self.group_of[i], req.pages[i]
            for b in sorted(new - old):
                if b in pages:
                    continue
                self._new_slot(g)
                self.pages_made += 1
                page = (req.name, i, b, self.pages_made)
                self.content[page] = self._block_content(req, i, b)
                pages[b] = page
                self.holders[g][page] = 1
        for i, b in later:
            self._let_go(req, i, b, history)
        req.held = list(targets)
        self.used = [len(h) for h in self.holders]

    def _move_pages(self, req: _Request, targets: list[frozenset[int]], hits: list[dict[int, tuple]] | None) -> None:
        for i, (old, new) in enumerate(zip(req.held, targets)):
            holders, pages = self.holders[self.group_of[i]], req.pages[i]
            for b in old - new:
                page = pages.pop(b)
                holders[page] -= 1
                if not holders[page]:
                    del holders[page]
            for b in new - old:
                if hits is not None and b in hits[i]:
                    page = hits[i][b]
                else:  # computed here, now: a page of its own (a later resume computes it again)
                    self.pages_made += 1
                    page = (req.name, i, b, self.pages_made)
                pages[b] = page
                holders[page] = holders.get(page, 0) + 1
        req.held = list(targets)
        self.used = [len(h) for h in self.holders]

    def _hits(self, req: _Request, targets: list[frozenset[int]]) -> list[dict[int, tuple]]:
        """At a first resume: the blocks to hold whose positions all lie in the shared prefix and that
        the source request still holds, each with the source's page."""
        hits: list[dict[int, tuple]] = [{} for _ in targets]
        source = self.requests.get(req.source) if req.source is not None else None
        if self.cache and not req.resumed:  # any reused prefix is looked up by its content
            return self._found(req, source, targets)
        if source is None or source.state is CLOSED or req.resumed:
            return hits
        for i, (geometry, new) in enumerate(zip(self.geometries, targets)):
            if geometry.kind == "ssm":
                continue
            for b in new - req.held[i]:
                inside = all(p < req.prefix for p in range(b * geometry.t, b * geometry.t + geometry.t))
                if inside and b in source.held[i]:
                    hits[i][b] = source.pages[i][b]
        return hits

    def _found(self, req: _Request, source: _Request, targets: list[frozenset[int]]) -> list[dict[int, tuple]]:
        """With the freed-page cache: each block to hold whose positions all lie in the prefix and whose
        content a page keeps: a live holder's, where it committed every position, else a cached one."""
        hits: list[dict[int, tuple]] = [{} for _ in targets]
        reach = self._reach(req)
        for i, (geometry, new) in enumerate(zip(self.geometries, targets)):
            if geometry.kind == "ssm":
                continue
            for b in sorted(new - req.held[i]):
                if (b + 1) * geometry.t <= reach:
                    page = self._page_of(req, i, b)
                    if page is not None:
                        hits[i][b] = page
        return hits

    def _page_of(self, req: _Request, i: int, b: int):
        """The page that became findable first with the content of ``req``'s block ``b`` of geometry ``i``."""
        pages = self.findable[self.group_of[i]].get(self._block_content(req, i, b))
        return pages[0] if pages else None

    def _reach(self, req: _Request) -> int:
        """With the freed-page cache, at a first resume: the tokens a hit may cover (each geometry takes
        its blocks wholly below): the reused ones, or under EAGLE or the common-prefix rule the hit's."""

        def page_of(i: int, b: int):
            return self._page_of(req, i, b)

        reach = req.prefix
        attention = [g for g in self.geometries if g.kind != "ssm"]
        if self.eagle:
            # EAGLE: the hit's tokens (ending on a whole block of each layer), then in every layer one
            # whole block more that the engine matched and gave back for the drafter to recompute:
            # every layer must find that block too, within the reused tokens; the hit's first
            # uncomputed token reads its window (no token is in flight yet)
            def fits_eagle(length: int) -> bool:
                if length == 0:
                    return True
                if any(length % g.t or length + g.t > req.prefix for g in attention):
                    return False
                # block j is read in every layer: a layer that does not find it rules the length out before
                # its window is listed (a long reused history with nothing cached is then linear, not quadratic)
                if any(page_of(i, length // g.t) is None for i, g in enumerate(self.geometries) if g.kind != "ssm"):
                    return False
                for i, geometry in enumerate(self.geometries):
                    if geometry.kind == "ssm":
                        continue
                    j = length // geometry.t
                    read = (_held(geometry, length, length, geometry.t, 0) or {j - 1}) | {j}
                    if any(page_of(i, b) is None for b in read):
                        return False
                return True

            reach = next(length for length in range(reach, -1, -1) if fits_eagle(length))  # the longest (0 always fits)
        elif self.common_prefix:
            # one hit length for every layer, ending on a whole block of each: the longest whose tokens
            # after it find, in every layer, each block they read (or, reading none, the block just
            # before it)
            def fits(length: int) -> bool:
                if length == 0:
                    return True
                if any(length % g.t for g in attention):
                    return False
                # a full-attention layer reads every block below the length, its last one first
                if any(page_of(i, length // g.t - 1) is None for i, g in enumerate(self.geometries) if g.kind == "full"):
                    return False
                for i, geometry in enumerate(self.geometries):
                    if geometry.kind == "ssm":
                        continue
                    read = _held(geometry, length, length, geometry.t, self.in_flight) or {length // geometry.t - 1}
                    if any(page_of(i, b) is None for b in read):
                        return False
                return True

            reach = next(length for length in range(reach, -1, -1) if fits(length))  # the longest (0 always fits)
        return reach

    def _known_end(self, history: int, capacity: int, resuming: bool) -> int:
        """With cache_scheduled: the positions a step's scheduled tokens reach. With draft slots
        (lookahead), the step's last positions hold drafts, not tokens of the request: of ``capacity -
        history`` new positions at least one is a real token and at most ``lookahead`` are drafts; a
        resize with nothing new schedules nothing (its history is known only as far as earlier steps
        made it), a resume with nothing new knows its reused tokens."""
        if not self.lookahead:
            return capacity
        new = capacity - history
        if new == 0:
            return history if resuming else 0
        drafts = min(self.lookahead, new - 1)
        return capacity - drafts

    def hit_blocks(self, request_id: Hashable) -> int:
        return self.requests[request_id].hit

    def _release_all(self, req: _Request) -> None:
        self.releasing = True
        try:
            self._move(req, [frozenset() for _ in self.geometries])
        finally:
            self.releasing = False
        req.lock = None  # letting go of every block lets go of the tree lock

    # ------------------------------------------------------------------ operations
    def create(self, request_id: Hashable, reused_history: int = 0, share_with: Hashable = None) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        self._count(request_id, "reused_history", reused_history)
        if share_with is not None:
            source = self.requests.get(share_with) if isinstance(share_with, str) else None
            if source is None:
                raise RequestError(request_id, "share_with", share_with, "must name an existing request")
            if source.state is CLOSED and not self.cache:
                raise RequestError(request_id, "share_with", share_with, "request is closed")
            if reused_history > source.history:
                raise RequestError(request_id, "reused_history", reused_history,
                                   f"exceeds the committed history {source.history} of share_with {share_with!r}")
        self.requests[request_id] = _Request(
            SUSPENDED, reused_history, reused_history, reused_history > 0,
            [frozenset() for _ in self.geometries], cursors=self._start_cursors(reused_history),
            name=request_id, source=share_with if self.sharing else None, prefix=reused_history,
            pages=[{} for _ in self.geometries] if self.sharing else None,
        )

    def resume(self, request_id: Hashable) -> Outcome:
        req = self._get(request_id, SUSPENDED)
        was_locked = req.lock
        if self.lock and not req.resumed and req.history > 0:  # its first resume takes the tree lock
            req.lock = req.history
        # load_holds_prefix: the loaded tokens are new ones of a request with nothing computed past its hit
        # (a common-prefix or EAGLE hit found in the cache; else none): nothing past the hit stale yet
        loading = self.load_all and req.pending_copy
        hit = self._reach(req) if loading and self.cache and not req.resumed and (self.eagle or self.common_prefix) else 0
        targets = self._targets(hit if loading else req.history, req.capacity, req)
        radix = self._radix_copies(req) if self.publish and req.pending_copy else None
        moved = self._moved if self.interval > 1 else None
        hits = self._hits(req, targets) if self.sharing else None
        needed = [0] * len(self.totals)
        freed = [0] * len(self.totals)
        copy_slots = [0] * len(self.totals)
        for i, (geometry, old, new) in enumerate(zip(self.geometries, req.held, targets)):
            # A request suspended without freeing (``keep``) still holds its blocks: only the
            # difference is allocated, and what it no longer needs is freed first. A hit takes no slot.
            live = [p for p in hits[i].values() if p in self.holders[self.group_of[i]]] if hits is not None else ()
            needed[self.group_of[i]] += len(new - old) - len(live)
            freed[self.group_of[i]] += self._freed(req, i, old - new)
            if req.pending_copy and self.copies:
                # Reused history ending inside a block: that block is copied into a private slot
                # while its source is still held (SSM: the state snapshot is copied).
                h = req.history
                copies = h > 0 if geometry.kind == "ssm" else h > 0 and (h - 1) // geometry.t == h // geometry.t
                needed[self.group_of[i]] += int(copies)
                copy_slots[self.group_of[i]] += int(copies)
        for g, n in enumerate(radix or ()):
            needed[g] += n
            copy_slots[g] += n
        outcome = self._shortfalls(needed, freed)
        if not outcome.ok:
            req.lock = was_locked
        if outcome.ok:
            self._move(req, targets, hits)
            if moved is not None:
                req.cursors = moved
            if self.cache:  # the copies' slots, once the blocks have theirs (evicting what they cached), given back
                for g, n in enumerate(copy_slots):
                    for _ in range(n):
                        self._new_slot(g)
                for g, n in enumerate(copy_slots):
                    self._blank_freed(g, n)  # given back keeping nothing
            if self.cache:  # what it holds below its history (or capacity) is now findable
                self._learn(req, self._known_end(req.history, req.capacity, True) if self.scheduled else req.history)
            if hits is not None and not req.resumed:
                req.hit = sum(len(h) for h in hits)
            req.state = ACTIVE
            req.pending_copy = False
            req.resumed = True
            req.loaded = loading
        return outcome

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        req = self._get(request_id, ACTIVE)
        self._count(request_id, "capacity", capacity)
        self._count(request_id, "history", history)
        if history < req.history:
            raise RequestError(request_id, "history", history, f"goes backwards from {req.history}")
        if capacity < history:
            raise RequestError(request_id, "capacity", capacity, f"is below history {history}")
        if (self.lazy and not self.keeps_stale) or req.loaded:  # blocks that left the window since the last
            # resize (or a load held) are freed now, for good
            self._move(req, self._targets(req.history, req.capacity, req))
            if self.interval > 1:
                req.cursors = self._moved
            req.loaded = False
        targets = self._targets(history, capacity, req)
        if self.on_growth:  # a geometry whose blocks below the capacity are no more than before keeps what it
            # holds below the capacity (a smaller capacity still cuts)
            targets = [new if g.kind == "ssm" or len(_allocated(capacity, g.t)) > len(_allocated(req.capacity, g.t))
                       else _within(old, capacity, g.t) for g, old, new in zip(self.geometries, req.held, targets)]
        moved = self._moved if self.interval > 1 else None
        needed = [0] * len(self.totals)
        freed = [0] * len(self.totals)
        allocated = [_allocated(capacity, g.t) for g in self.geometries]
        for i, (old, new) in enumerate(zip(req.held, targets)):
            needed[self.group_of[i]] += len(new - old)
            gone = old - new
            if self.hold:  # only blocks past the new capacity are freed before allocating
                gone = {b for b in gone if b not in allocated[i]}
            freed[self.group_of[i]] += self._freed(req, i, gone)
        outcome = self._shortfalls(needed, freed)
        if outcome.ok:
            if self.cache and not self.scheduled and not self.publish:  # committed by this call: findable before it frees
                self._learn(req, history)
            self._move(req, targets, history=history, hold=allocated if self.hold else None)
            if moved is not None:
                req.cursors = moved
            req.capacity, req.history = capacity, history
            if self.cache and not self.publish:  # reserved by this call (or allocated below the history it ends on)
                self._learn(req, self._known_end(history, capacity, False) if self.scheduled else history)
        return outcome

    def commit(self, request_id: Hashable, tokens: int) -> None:
        req = self._get(request_id, ACTIVE)
        self._count(request_id, "tokens", tokens)
        if req.history + tokens > req.capacity:
            raise RequestError(
                request_id, "tokens", tokens, f"history {req.history} + tokens exceeds capacity {req.capacity}"
            )
        req.history += tokens
        if self.cache and not self.scheduled and not self.publish:
            self._learn(req, req.history)
        if not self.lazy:  # freeing lazily, the next resize frees what left the window
            self._move(req, self._targets(req.history, req.capacity, req))
            req.loaded = False
            if self.interval > 1:
                req.cursors = self._moved

    def suspend(self, request_id: Hashable) -> None:
        req = self._get(request_id, ACTIVE)
        if self.suspend_mode is not SuspendMode.KEEP:
            self._release_all(req)
            req.loaded = False
        if self.suspend_mode is SuspendMode.RECOMPUTE:  # the computed tokens are dropped
            req.capacity = req.history = 0
            req.cursors = self._start_cursors(0)
            req.pending_copy = False
        req.state = SUSPENDED

    def close(self, request_id: Hashable) -> None:
        req = self._get(request_id)
        if self.publish and self.cache and req.state is ACTIVE:  # a finished request publishes what it committed
            self._learn(req, req.history)
        self._release_all(req)
        req.state = CLOSED

    def _tables(self, req: _Request) -> tuple[BlockTable, ...]:
        """A request's tables: every allocated block, and which of them are held (as ranges)."""
        tables = []
        for geometry, held in zip(self.geometries, req.held):
            blocks = range(1) if geometry.kind == "ssm" else _allocated(req.capacity, geometry.t)
            tables.append(BlockTable.from_blocks(len(blocks), held))  # every held block is an allocated one
        return tuple(tables)

    def snapshot(self) -> Snapshot:
        """The state as a Snapshot. A request whose state, lengths and held sets equal those of its
        last snapshot is shown by that snapshot again, and one whose held sets and allocated blocks
        do, with its last tables (a step changes one request, most steps no block, and the fuzzer
        observes after every step); :meth:`fresh_snapshot` recomputes everything."""
        requests = []
        for rid, req in self.requests.items():
            if req.state is CLOSED:
                continue
            key = (req.state, req.capacity, req.history, *req.held)
            last = req.shown
            if last is None or last[0] != key:  # the same sets compare by identity, at no cost
                spanned = [len(_allocated(req.capacity, g.t)) for g in self.geometries]
                if last is not None and last[0][3:] == key[3:] and [len(_allocated(last[0][1], g.t)) for g in self.geometries] == spanned:
                    tables = last[1].tables  # the same blocks held and allocated
                else:
                    tables = self._tables(req)
                req.shown = (key, RequestSnapshot(rid, req.state, req.capacity, req.history, tables))
            requests.append(req.shown[1])
        pools = tuple(PoolSnapshot(total, total - used) for total, used in zip(self.totals, self.used))
        return Snapshot(pools, tuple(requests), cached=self._cached())

    def _cached(self) -> tuple:
        """Each cached page as (geometry, block, the request that computed its last position), sorted."""
        return tuple(sorted(
            (content[0], page[2], content[1][-1][0])
            for kept in self.kept for content, entries in kept.items() for entry in entries
            for page in (self.freed_slots[self.group_of[content[0]]][entry],)
        ))

    def fresh_snapshot(self) -> Snapshot:
        """The state as a Snapshot, every request recomputed (what :meth:`snapshot` must equal)."""
        requests = tuple(
            RequestSnapshot(rid, req.state, req.capacity, req.history, self._tables(req))
            for rid, req in self.requests.items()
            if req.state is not CLOSED
        )
        pools = tuple(PoolSnapshot(total, total - used) for total, used in zip(self.totals, self.used))
        return Snapshot(pools, requests, cached=self._cached())


# It walks token positions (the sinks, one per block of a window and of a capacity), so its cost
# grows with lengths: a replay refuses traces beyond these limits (see swafloor.fuzz.replay.check_cost).
# Its minimum search walks every history up to the window plus sinks plus a few blocks: quadratic.
_LIMITS = Limits(max_window_tokens=4096, max_capacity_tokens=10**6)


def _oracle(capabilities: Capabilities, name: str, *, doc: str) -> Callable[[Config], ManagerBackend]:
    """The oracle's factory under one set of capabilities (which semantics a campaign draws)."""

    @factory(capabilities, name=name, limits=_LIMITS)
    def make(config: Config) -> ManagerBackend:
        return ManagerBackend(OracleManager(config))

    make.__name__ = make.__qualname__ = name.replace("-", "_")
    make.__doc__ = doc
    return make


oracle = _oracle(ALL_SEMANTICS, "oracle", doc="The independent token-level oracle.")
oracle_eviction = _oracle(ALL_SEMANTICS_EVICTION, "oracle-eviction",
                          doc="The oracle under eviction intervals above 1 (SGLang's) as well as every other semantics.")
oracle_load = _oracle(ALL_SEMANTICS_LOAD, "oracle-load",
                      doc="The oracle where a first resume's load may hold every loaded token (load_holds_prefix, "
                      "vLLM before 0.14.1) as well as every other semantics.")
oracle_sharing = _oracle(ALL_SEMANTICS_SHARING, "oracle-sharing",
                         doc="The oracle under prefix sharing: requests created on others' prefixes, repeated requests.")
oracle_eagle = _oracle(ALL_SEMANTICS_EAGLE, "oracle-eagle",
                       doc="The oracle under prefix sharing with the EAGLE hit rule and draft slots.")
oracle_refusal = _oracle(REFUSAL_KEEPS_STALE, "oracle-refusal",
                         doc="The oracle under LMDeploy's semantics: a refused resize keeps the blocks that left the "
                         "window (refused_keeps_stale), one token in flight, each step committed before it allocates.")
oracle_growth = _oracle(STALE_FREED_ON_GROWTH, "oracle-growth",
                        doc="The oracle under LMDeploy's semantics where its decode schedule calls the block manager "
                        "only for a sequence that needs a new block: blocks that left the window are freed only by a "
                        "resize that adds a block (stale_freed_on_growth), and never by a refused one.")
oracle_radix = _oracle(RADIX_TREE, "oracle-radix",
                       doc="The oracle under SGLang's radix cache: a request keeps its prompt's last window of SWA "
                       "blocks locked until it is released (prompt_lock), content is findable only once published "
                       "by a first resume or a close (publish_on_release), freed blocks cached, freed lazily.")
oracle_ring = _oracle(WINDOW_RING, "oracle-ring",
                      doc="The oracle under transformers' semantics: sliding windows kept as rings (window_ring), "
                      "freed lazily, a suspension recomputing, each step committed before it allocates.")
oracle_mixed = _oracle(ALL_SEMANTICS_MIXED, "oracle-mixed",
                       doc="The oracle with a block size per life cycle (attention layers with block sizes of their "
                       "own), under every semantics, prefix sharing and eviction intervals included.")
