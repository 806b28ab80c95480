"""The ``sglang-radix`` backend: SGLang's SWA allocator together with its radix prefix cache
(``UnifiedRadixCache`` with a full and an SWA component, SGLang 0.5.23), driven on a CPU through the
protocol on the prefix-sharing traces, with real token ids.

What is built, per SWA life cycle of the config (as :mod:`.sglang` does): an ``SWAKVPool``, its
``SWATokenToKVPoolAllocator`` (page size ``P = t``), a ``ReqToTokenPool`` and one
``UnifiedRadixCache`` over them, its SWA component's ``sliding_window_size`` the model's window minus
1. Each request is a real SGLang ``Req`` per tree, carrying token ids: a request created on another's
prefix (``create(r, k, share_with=s)``) starts with the first ``k`` ids of ``s``; every other token is
an id used nowhere else, appended as the request's capacity grows (as sampled tokens are).

Driven in the scheduler's order, with SGLang's own functions:

- ``resume(r)`` (admission and prefill): a ``ReqToTokenPool`` row; on a first resume with a prompt
  (history ``h > 0``) the request's own ``init_next_round_input(tree)`` looks its ids up in the tree
  (``match_kv_cache``, at most ``h - 1`` tokens: one is always recomputed), the hit's KV indices
  (``tree.prefix_device_indices``) go into the row and the tree is locked on the node it ended on
  (``tree.lock``); the rest of the prompt is prefilled in chunks of one page (chunked prefill at its
  smallest size, the page): before each chunk but the first the request's window slides
  (``tree.evict_sliding_windows`` at the chunk's start), the tree is evicted
  (``evict_from_tree_cache``, as ``alloc_paged_token_slots_extend`` does) and the chunk is admitted
  only if SGLang's own page accounting (``new_pages_available``) holds it; the chunk is allocated and
  published to the tree (``tree.checkpoint``: what ``cache_unfinished_req`` does after a chunk, the
  lock moving onto its node). A chunk that does not fit refuses the resume: what the request took is
  given back as a retraction gives it (chunks already published stay in the tree, unlocked).
- ``resize(r, c, h)`` (a decode or extend step): ``tree.evict_sliding_windows(req, h)`` (SGLang's
  ``free_swa_out_of_window_slots`` with ``supports_prefix_sharing=True``: the radix cut ``pre_len -
  ceil_P(max(w, P))``, nothing below the tree-owned prefix), then tree eviction, then
  ``alloc_decode`` / ``alloc_extend`` / ``alloc`` for ``[allocated, c)``.
- ``commit(r, n)``: the KV of ``n`` more tokens is computed.
- ``close(r)`` (the request finishes): ``release_kv_cache(checkpoint=True)``'s steps: the committed
  tokens are inserted into the tree (``tree.checkpoint``), the row's own KV is freed
  (``tree.free_kv_row``), the lock is released, the tail past the committed tokens is freed.
- ``suspend(r)`` (retraction): ``release_kv_cache(checkpoint=False)``'s steps; the request then
  recomputes from token 0 (a later resume has nothing to match: matching is at the first resume).

(``release_kv_cache`` itself asserts that nothing is allocated past the committed tokens, which a
protocol close with capacity above history breaks, so its steps are called one by one.)

Pools: SGLang's pools have the reference's sizes (``pool_tokens``; a side the config lacks gets
``UNCOMPARED`` tokens, never short), and its tree is evicted for exactly what each allocation asks.

How it is compared (against the reference with SGLang's semantics plus prefix sharing, freed blocks
cached, and SGLang's radix tree: ``prompt_lock`` and ``publish_on_release``, :mod:`swafloor.reference.radix`):

- ``outcome``: ``retires``. The outcome is SGLang's own page accounting (after its own tree eviction)
  at the reference's pool sizes, against the reference configured to SGLang's radix tree: its tree
  lock keeps a prompt's last window of SWA KV until the request is released (``prompt_lock``), only
  published content (prompts, finished requests) is hit, and a prompt ending on a page boundary
  recomputes its last page before taking the tree's (``publish_on_release``). A difference either way
  retires the request (a hole: counted, and a campaign retiring more than 5% of its requests fails,
  ``too-many-retired``); what is left unmodelled: the radix cut keeps ``ceil_P(max(w, P))`` tokens
  behind the history (not ``w``), one page more than the window at some histories. What keeps a
  refusal honest is also the adapter's own exact accounting below (a leaked page, a lock never
  released, an eviction that frees nothing: each a divergence at its step).
- ``tables``: at-least. Every block the reference holds live must be held by SGLang (its row's full
  pages; an SWA page where its first token maps to an SWA slot): an SWA page freed too early fails
  here. SGLang may hold more (the reasons above).
- ``data`` (the adapter's own check, a ``BackendCheckFailed``): the adapter writes each token's id
  into SGLang's KV buffers (full and SWA) where the allocator placed it; after every operation each
  open request's row must read back its own ids: every full page, and every SWA page its mapping
  still names. A hit on the wrong pages, or a page freed while a request (or the tree, for a
  request's locked prefix) still reads it and handed to another request, fails here.
- ``pool_used`` (the adapter's own checks, each a ``BackendCheckFailed``): exact page accounting per
  pool after every operation (SGLang's pages in use are its tree's plus the open rows' own), and a
  one-sided eviction bound at every allocation (a tree eviction that leaves a pool short while the
  tree had the unlocked pages to cover it). Not compared with the reference's ``pool_used`` (the
  reference's cache and SGLang's tree keep different blocks, in either direction).
- ``slots`` (exact, up to a renaming of page ids): each open request's pages as its row maps them
  (full: SGLang's full page id while its allocator has it in use; SWA: the SWA page id its first token
  maps to), the free pages the allocator's plus those only the tree keeps (evictable, as a cached free
  slot is). The blocks held on both sides must be grouped into pages as the reference groups them into
  slots (the same sharing), and keep their page while held exactly when the reference keeps its slot
  (a checkpoint keeping a request's own copy of a page the tree and another open request hold, every
  count equal, breaks it: the plant ``dedup-keeps-own-copy`` of :mod:`.radix_check`).
- Not compared: cached content, hits. The hit rate of SGLang itself is counted in :data:`STATS`
  (printed by the test) beside the reference's (the campaign's).
"""

from __future__ import annotations

import itertools
import weakref
from array import array
from typing import Any, Hashable

import attrs

from swafloor.reference import (
    Config, LifeCycleKind, Outcome, RequestError, RequestState, Semantics, SlotMap, build_layout,
)

from ...protocol import BackendCheckFailed, Capabilities, Operation, Part, Unsupported, factory
from .backend import (MAX_CONTEXT as _ROW, MAX_REQUESTS as _ROWS, _loaded, allocator_pairs, import_sglang, open_request,
                      pool_tokens, start_step)
from .backend import semantics as _sglang_semantics
from .radix_legacy import OlderTreeApi, SplitReleaseApi, import_legacy

__all__ = ["SglangRadixBackend", "sglang_radix", "semantics", "capabilities", "import_radix", "STATS", "UNCOMPARED"]

MAX_CONTEXT = _ROW
MAX_REQUESTS = _ROWS
#: Requests open at once (the generator's own limit, fuzz/machine.py's MAX_OPEN_REQUESTS; more is refused).
OPEN_LIMIT = 4
#: The size (tokens) of a pool the config does not have (a config without full attention, or without an SWA
#: life cycle: SGLang's allocator always has both): every open row fits, so it never runs short. Its use is
#: still checked (the accounting check), its outcome never decides.
UNCOMPARED = OPEN_LIMIT * MAX_CONTEXT
#: SGLang's own hit counts: requests whose first resume looked a prompt up, and those that hit.
STATS = {"looked_up": 0, "hits": 0, "hit_tokens": 0, "tree_evictions": 0}

_BUILT: dict[tuple[int, int, int, int], list[list[Any]]] = {}


#: The methods of SGLang's tree the adapter calls (found by inspection; releases before 0.5.22 have the
#: older prefix-cache API instead: match_prefix, inc_lock_ref / dec_lock_ref, cache_unfinished_req,
#: cache_finished_req).
TREE_API = ("lock", "unlock", "checkpoint", "evict_sliding_windows", "prefix_device_indices", "free_kv_row",
            "on_release", "full_evictable_size", "swa_evictable_size", "full_protected_size", "swa_protected_size")


def import_radix() -> dict[str, Any]:
    """SGLang's allocator parts (:func:`.sglang.import_sglang`) and its radix cache (once)."""
    s = import_sglang()
    if "radix_api" not in s:
        import importlib

        try:
            UnifiedRadixCache = importlib.import_module("sglang.srt.mem_cache.unified_radix_cache").UnifiedRadixCache
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith("sglang"):
                raise Unsupported(f"SGLang's radix cache is not importable here ({exc}); run sglang-radix in the "
                                  "venv made by scripts/sglang-venv") from exc
            return import_legacy(s, "it has no UnifiedRadixCache")
        missing = [name for name in TREE_API if not callable(getattr(UnifiedRadixCache, name, None))]
        if missing:  # the older prefix-cache API: driven by .radix_legacy, or Unsupported naming what it lacks
            return import_legacy(s, f"its UnifiedRadixCache has no {', '.join(missing)}")
        try:
            from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req, ReqKvInfo
            from sglang.srt.mem_cache.cache_init_params import CacheInitParams
            from sglang.srt.mem_cache.common import evict_from_tree_cache
            from sglang.srt.mem_cache.unified_cache.components import ComponentType
            from sglang.srt.sampling.sampling_params import SamplingParams
        except ImportError as exc:
            raise Unsupported(f"SGLang {s['version']}'s radix cache path is not importable here ({exc})") from exc
        s.update(radix_api="tree", UnifiedRadixCache=UnifiedRadixCache, CacheInitParams=CacheInitParams,
                 ComponentType=ComponentType,
                 Req=Req, ReqKvInfo=ReqKvInfo, FINISH_LENGTH=FINISH_LENGTH, SamplingParams=SamplingParams,
                 evict_from_tree_cache=evict_from_tree_cache)
    return s


def semantics() -> Semantics:
    """The reference semantics ``sglang-radix`` is compared against: SGLang's allocator (evicting every
    token) with prefix sharing and freed blocks cached (a finished request's blocks stay hittable), and
    SGLang's radix tree (``prompt_lock``: the tree lock on a prompt's last window; ``publish_on_release``:
    only published content is hit)."""
    return attrs.evolve(_sglang_semantics(1), prefix_sharing=True, cache_freed=True,
                        prompt_lock=True, publish_on_release=True)


NOTES = (
    "outcome: SGLang's own page accounting at the reference's pool sizes (prompts prefilled in one-page "
    "chunks), against the reference with SGLang's radix tree (prompt_lock, publish_on_release); a difference "
    "either way retires the request (left unmodelled: its radix cut keeps ceil_P(max(w,P)) tokens behind the "
    "history): more than 5% retired fails the campaign",
    "tables: at-least (the radix cut keeps a page more at some histories; a row maps tree pages it no longer reads)",
    "data: every open request's row reads back its own token ids from SGLang's KV buffers (full pages, "
    "and SWA pages still mapped) after every operation",
    "pool_used: SGLang's own page accounting exact after every operation, and tree eviction bounded below "
    "at every allocation; not compared with the reference's count (cache and tree keep different blocks)",
    "slots: exact up to a renaming of page ids: the pages each row maps (full and SWA page ids), the free "
    "pages the allocator's plus those only the tree keeps",
    "not compared: cached content, hits (SGLang's hit rate is counted apart)",
    "matched at the first resume only (a retracted request recomputes with nothing to match)",
)


def capabilities() -> Capabilities:
    return Capabilities(
        operations=[Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.COMMIT, Operation.SUSPEND,
                    Operation.CLOSE],
        observations={Part.OUTCOME: "retires", Part.TABLES: "at-least", Part.SLOTS: "exact"},
        adapter_set=[Part.POOL_TOTALS, Part.LENGTHS],
        layer_kinds=[LifeCycleKind.SWA, LifeCycleKind.FULL],
        sinks=False,
        shared_pool_groups=False,
        reused_history=False,  # a prompt comes with the first request (the sharing generator) or a source
        legacy_floor=True,
        commit_before_allocate=True,
        capacity_cuts=False,
        semantics=semantics(),
        prefix_sharing=True,
        min_window=2,  # SGLang's window is W - 1 tokens: a window of 1 is no window at all
        notes=NOTES,
    )


class _Unit:
    """One tree: an allocator, its row pool and a ``UnifiedRadixCache``, pairing an SWA life cycle
    (or none) with the full life cycle (or none)."""

    def __init__(self, entry: list[Any], swa_lc: int | None, full_lc: int | None, window: int):
        self.allocator, self.rows, self.tree, self.pool = entry[0], entry[1], entry[2], entry[3]
        self.swa_lc, self.full_lc, self.window = swa_lc, full_lc, window
        # Tokens free right after SGLang's clear() (every page but its reserved padding page).
        self.total_full, self.total_swa = self.allocator.full_available_size(), self.allocator.swa_available_size()


class _Request:
    def __init__(self, rid: Hashable, tokens: list[int], reqs: list[Any], shared: bool):
        self.rid = rid
        self.tokens = tokens
        self.reqs = reqs  # one SGLang Req per unit
        self.allocated = 0
        self.history = len(tokens)
        self.state = RequestState.SUSPENDED
        self.resumed = False
        self.shared = shared


class SglangRadixBackend:
    """SGLang's SWA allocator with its radix cache behind the protocol (see the module docstring)."""

    def __init__(self, config: Config):
        s = import_radix()
        layout = build_layout(config)
        self.t = P = layout.tokens_per_block
        self.layout = layout
        lcs = layout.life_cycles
        pairs = allocator_pairs(layout)
        if any(lc.window is not None and lc.window < 2 for lc in lcs):
            raise Unsupported("a window of 1 token: SGLang's window (W - 1) would be empty")
        big = UNCOMPARED  # a side the config does not have (SGLang has no one-sided allocator): never runs short
        self.units: list[_Unit] = []
        for swa_lc, full_lc in pairs:
            size_full, size_swa = pool_tokens(layout, full_lc, big), pool_tokens(layout, swa_lc, big)
            window = lcs[swa_lc].window if swa_lc is not None else MAX_CONTEXT  # full only: an SWA side never evicting
            entry = self._take((size_full, size_swa, P, window - 1))
            self.units.append(_Unit(entry, swa_lc, full_lc, window))
        self.requests: dict[Hashable, _Request] = {}
        self.fresh = itertools.count(1)

    # ------------------------------------------------------------------ building
    def _take(self, key: tuple[int, int, int, int]) -> list[Any]:
        """A (allocator, rows, tree, pool) no live backend owns, reset (``tree.reset()``, the allocator's
        ``clear()``, the rows' ``clear()``), built when there is none."""
        s = _loaded
        entries = _BUILT.setdefault(key, [])
        for entry in entries:
            if entry[4]() is None:
                break
        else:
            size_full, size_swa, P, w = key
            torch = s["torch"]
            from .compat import build

            common = dict(size=size_full, size_swa=size_swa, page_size=P, dtype=torch.float32, device="cpu")
            pool = build(s["SWAKVPool"], dict(common, head_num=1, head_dim=1, swa_attention_layer_ids=[0],
                                              full_attention_layer_ids=[1], enable_kvcache_transpose=False), "SWAKVPool")
            allocator = build(s["Allocator"], dict(common, kvcache=pool, need_sort=False), "SWATokenToKVPoolAllocator")
            rows = build(s["ReqToTokenPool"], dict(size=MAX_REQUESTS, max_context_len=MAX_CONTEXT, device="cpu",
                                                   enable_memory_saver=False), "ReqToTokenPool")
            entry = [allocator, rows, self._build_tree(rows, allocator, P, w), pool, None]
            entries.append(entry)
        entry[4] = weakref.ref(self)
        entry[2].reset()
        entry[0].clear()
        entry[1].clear()
        return entry

    def _get(self, rid: Hashable, *states: RequestState) -> _Request:
        return open_request(self.requests, rid, states)

    # What differs with the tree's API (the older one: .radix_legacy) -----------------------------------
    def _build_tree(self, rows: Any, allocator: Any, P: int, w: int) -> Any:
        """SGLang's tree over ``rows`` and ``allocator``: a ``UnifiedRadixCache`` with FULL and SWA components."""
        s = _loaded
        params = s["CacheInitParams"](
            disable=False, req_to_token_pool=rows, token_to_kv_pool_allocator=allocator, page_size=P,
            sliding_window_size=w, tree_components=(s["ComponentType"].FULL, s["ComponentType"].SWA),
        )
        return s["UnifiedRadixCache"](params)

    @staticmethod
    def _kv(r: Any) -> Any:
        """The KV bookkeeping of SGLang's request ``r`` (``r.kv``, a ``ReqKvInfo``)."""
        return r.kv

    def _radix_cut(self, h: int, w: int) -> int:
        """Where SGLang's radix-path sliding-window free cuts at history ``h`` (window ``w`` tokens,
        exclusive): ``floor_P(h - ceil_P(max(w, P)))``."""
        P = self.t
        return (h - -(-max(w, P) // P) * P) // P * P

    def _dead_lo(self, r: Any) -> int:
        """The first token the sliding-window free may touch: past the tree-owned prefix."""
        return r.kv.swa_dead_lo(self.t)

    def _match(self, unit: _Unit, r: Any) -> int:
        """A first resume's match: the request's own ``init_next_round_input(tree)`` (at most ``h - 1``
        tokens), the tree locked on the node it ended on, the hit's KV indices into the row
        (alloc_for_extend's prefix). Returns the prefix length."""
        r.init_next_round_input(unit.tree)  # match_kv_cache on its prompt, at most h - 1 tokens
        prefix = r.prefix_len
        assert r.kv.cache_protected_len == prefix, (r.kv.cache_protected_len, prefix)
        r.lock = unit.tree.lock(r.last_node)
        if prefix:
            unit.rows.req_to_token[r.kv.req_pool_idx, :prefix] = unit.tree.prefix_device_indices(r).to(
                unit.rows.req_to_token.dtype)
        return prefix

    def _unmatch(self, unit: _Unit, r: Any) -> None:
        """A resume refused before its first chunk: the lock released, the row given back."""
        unit.tree.unlock(r.lock)
        r.lock = None
        self._free_row(unit, r)
        r.kv.cache_protected_len = 0

    @staticmethod
    def _alloc_row(unit: _Unit, r: Any) -> bool:
        """A ``ReqToTokenPool`` row for the request (the pool sets its index); False when none is left."""
        return unit.rows.alloc([r]) is not None

    @staticmethod
    def _free_row(unit: _Unit, r: Any) -> None:
        unit.rows.free(r)

    def _slide(self, unit: _Unit, r: Any, pre_len: int) -> None:
        """The request's window slides to ``pre_len`` (the radix path's ``free_swa_out_of_window_slots``)."""
        r.kv.kv_committed_len = pre_len
        unit.tree.evict_sliding_windows(r, pre_len)

    def _publish(self, unit: _Unit, r: Any, edge: int) -> None:
        """A prefilled chunk up to ``edge`` published to the tree (``cache_unfinished_req``'s checkpoint)."""
        r.kv.kv_committed_len = edge
        r.refresh_fill_ids()
        unit.tree.checkpoint(r, up_to=edge)

    # ------------------------------------------------------------------ SGLang's steps
    def _ids(self, req: _Request, upto: int) -> None:
        """The request's token ids reach ``upto``: fresh ids appended (sampled tokens)."""
        missing = upto - len(req.tokens)
        if missing > 0:
            new = [next(self.fresh) for _ in range(missing)]
            req.tokens.extend(new)
            for r in req.reqs:
                r.output_ids.extend(new)

    def _evict_tree(self, unit: _Unit, tokens: int) -> None:
        """The scheduler's tree eviction before allocating ``tokens`` (SGLang's ``evict_from_tree_cache``),
        checked one-sided on ``pool_used``: where a pool is short of what is asked and the tree's
        unlocked pages of that pool (SGLang's own ``*_evictable_size``) cover the shortfall, the eviction
        must free that pool up to what is asked (an eviction that frees nothing, or too little, breaks
        it here, at the step that allocates). The bound: SGLang may evict more than the shortfall, never
        less while it has the pages; an eviction where the tree cannot cover the shortfall is not judged."""
        alloc, tree = unit.allocator, unit.tree
        target = tokens
        before = alloc.full_available_size(), alloc.swa_available_size()
        evictable = tree.full_evictable_size(), tree.swa_evictable_size()
        _loaded["evict_from_tree_cache"](tree, target)
        after = alloc.full_available_size(), alloc.swa_available_size()
        if after != before:
            STATS["tree_evictions"] += 1
        for pool, was, could, now in zip(("full", "SWA"), before, evictable, after):
            if was < target <= was + could and now < target:
                raise BackendCheckFailed(
                    "pool_used", f"SGLang's tree eviction left its {pool} pool {target - now} tokens short of the "
                    f"{target} asked ({was} free before, {could} evictable in the tree, {now} free after): "
                    f"evictable pages were not freed")

    def _fits(self, unit: _Unit, old: int, new: int) -> bool:
        """The scheduler's admission check for ``[old, new)`` on this unit: tree eviction first
        (``evict_from_tree_cache``), then SGLang's own page accounting (``new_pages_available``, else the
        older scheduler's ``available_size()`` check, :func:`.compat.pages_available`; for ``P = 1`` the
        sub-allocators' ``available_size``), at the reference's pool sizes."""
        P, alloc = self.t, unit.allocator
        n = new - old
        if n <= 0:
            return True
        if P == 1:
            self._evict_tree(unit, n)
            return n <= alloc.full_available_size() and n <= alloc.swa_available_size()
        pages = -(-new // P) - (-(-old // P))
        self._evict_tree(unit, pages * P)
        from .compat import pages_available

        return pages_available(alloc, pages, P)  # new_pages_available, else the older releases' own check

    def _allocate(self, unit: _Unit, r: Any, old: int, new: int) -> None:
        """Allocate ``[old, new)`` of ``r``'s row (its room checked by :meth:`_fits`) and write the
        token ids there."""
        s = _loaded
        torch = s["torch"]
        P, alloc = self.t, unit.allocator
        row = unit.rows.req_to_token[self._kv(r).req_pool_idx]
        n = new - old
        last = torch.tensor([int(row[old - 1]) if old > 0 else -1], dtype=torch.int64)
        pre = torch.tensor([old], dtype=torch.int64)
        seq = torch.tensor([new], dtype=torch.int64)
        from .compat import alloc_pages, paged_cpu

        if P == 1:
            out = alloc.alloc(n)
        elif not paged_cpu(alloc):  # this release's paged allocation is a Triton kernel only (compat)
            out = alloc_pages(alloc, torch, row, old, new, P)
        elif n == 1:
            out = alloc.alloc_decode(seq, seq, last)
        else:
            out = alloc.alloc_extend(pre, pre, seq, seq, last, n)
        if out is None:  # new_pages_available said it fits: SGLang disagreeing with itself is a finding
            raise AssertionError(f"SGLang's allocator returned None for {n} tokens after its own check said they fit")
        row[old:new] = out.to(row.dtype)
        self._kv(r).kv_allocated_len = new

    def _write(self, unit: _Unit, req: _Request, r: Any, lo: int, hi: int) -> None:
        """The forward pass's writes: each token's id into the KV buffers at the row's places."""
        torch = _loaded["torch"]
        if hi <= lo:
            return
        locs = unit.rows.req_to_token[self._kv(r).req_pool_idx, lo:hi].to(torch.int64)
        ids = torch.tensor(req.tokens[lo:hi], dtype=torch.float32).view(-1, 1, 1)
        unit.pool.full_kv_pool.k_buffer[0][locs] = ids
        swa = unit.allocator.full_to_swa_index_mapping[locs]
        live = swa > 0
        unit.pool.swa_kv_pool.k_buffer[0][swa[live]] = ids[live]

    def _release(self, unit: _Unit, req: _Request, r: Any, finished: bool) -> None:
        """``release_kv_cache``'s steps (see the module docstring): insert the committed tokens when
        finished, free the row's own KV, unlock, free the tail, give the row back."""
        tree, P = unit.tree, self.t
        h, allocated = req.history, r.kv.kv_allocated_len
        r.kv.kv_committed_len = h
        if finished:
            r.finished_reason = _loaded["FINISH_LENGTH"](length=len(r.output_ids))
            r.refresh_fill_ids()
            tree.checkpoint(r, up_to=h)
        if r.kv.cache_protected_len < h:
            tree.free_kv_row(r.kv, [(r.kv.cache_protected_len, h)])
        tree.unlock(r.lock)
        r.lock = None
        tail = -(-h // P) * P
        if tail < allocated:
            tree.free_kv_row(r.kv, [(tail, allocated)])
        tree.on_release(r, checkpointed=finished)
        self._free_row(unit, r)
        r.kv.mark_kv_released()

    # ------------------------------------------------------------------ SGLang's own bookkeeping
    def _check(self, resized: _Request | None = None) -> None:
        """After every operation, SGLang's structures agree with each other (each a
        ``BackendCheckFailed`` naming the part): :meth:`_check_pools` (``pool_used``),
        :meth:`_check_locks` (``locks``), :meth:`_check_mapping` (``mapping``), :meth:`_check_cut` (``tables``, the resized request) and
        :meth:`_check_data` (``data``)."""
        self._check_pools()
        self._check_locks()
        self._check_mapping()
        if resized is not None:
            self._check_cut(resized)
        self._check_data()

    def _check_mapping(self) -> None:
        """SGLang's full-to-SWA mapping under identity (:mod:`.mapping`): no full slot, a row's, the
        tree's or a free one, mapped to a freed SWA slot, and no SWA slot mapped from two full slots."""
        from .mapping import check_mapping

        torch = _loaded["torch"]
        for k, unit in enumerate(self.units):
            rows = [(rid, unit.rows.req_to_token[self._kv(req.reqs[k]).req_pool_idx, : req.allocated])
                    for rid, req in self.requests.items() if req.state is RequestState.ACTIVE and req.allocated]
            check_mapping(torch, unit.allocator, rows, self.t, f"unit {k}" if len(self.units) > 1 else "")

    def _own_pages(self, unit: _Unit, req: _Request, r: Any) -> tuple[int, int]:
        """The pages of ``r``'s row past its tree-owned prefix (``cache_protected_len``): (full, SWA-mapped)."""
        torch = _loaded["torch"]
        P = self.t
        lo = self._kv(r).cache_protected_len
        hi = -(-req.allocated // P) * P
        if hi <= lo:
            return 0, 0
        firsts = unit.rows.req_to_token[self._kv(r).req_pool_idx, lo:hi:P].to(torch.int64)
        swa = unit.allocator.full_to_swa_index_mapping[firsts]
        return int(firsts.numel()), int((swa > 0).sum())

    def _check_pools(self) -> None:
        """Exact page accounting, per pool: the pages SGLang's allocator has in use (its size less its
        ``available_size``) are the tree's (``evictable`` + ``protected``, SGLang's own counts) plus each
        open request's own pages (its row past the tree-owned prefix; SWA: those still mapped). A page
        neither free nor held by the tree or a row (a leak), or one counted free while still held, breaks
        it at the operation that did it."""
        P = self.t
        for k, unit in enumerate(self.units):
            alloc, tree = unit.allocator, unit.tree
            own_full = own_swa = 0
            for req in self.requests.values():
                if req.state is RequestState.ACTIVE:
                    full, swa = self._own_pages(unit, req, req.reqs[k])
                    own_full, own_swa = own_full + full, own_swa + swa
            for pool, used, tree_tokens, own in (
                ("full", unit.total_full - alloc.full_available_size(),
                 tree.full_evictable_size() + tree.full_protected_size(), own_full),
                ("SWA", unit.total_swa - alloc.swa_available_size(),
                 tree.swa_evictable_size() + tree.swa_protected_size(), own_swa),
            ):
                if used != tree_tokens + own * P:
                    raise BackendCheckFailed("pool_used", f"SGLang's {pool} pool (unit {k}) has {used // P} pages in "
                                             f"use, but its tree holds {tree_tokens // P} and the open rows {own} "
                                             f"more ({used} tokens in use, the tree's {tree_tokens}, page {P}): "
                                             f"{(used - tree_tokens) // P - own:+d} pages unaccounted for")

    def _check_locks(self) -> None:
        """Exact tree locks: SGLang's ``full_protected_size`` is the union, in tokens, of the prefixes
        the open requests hold locked (each ``tokens[:cache_protected_len]`` while it holds a lock). A
        lock not released when its request closes or is retracted (or taken twice) breaks it there."""
        for k, unit in enumerate(self.units):
            trie: dict[Any, dict] = {}
            count = 0
            for req in self.requests.values():
                r = req.reqs[k]
                if req.state is not RequestState.ACTIVE or r.lock is None:
                    continue
                node = trie
                for token in req.tokens[: self._kv(r).cache_protected_len]:
                    nxt = node.get(token)
                    if nxt is None:
                        nxt = node[token] = {}
                        count += 1
                    node = nxt
            protected = unit.tree.full_protected_size()
            if protected != count:
                raise BackendCheckFailed("locks", f"SGLang's tree (unit {k}) protects {protected} tokens, but the "
                                         f"open requests lock {count} (the union of their tree-owned prefixes)")

    def _check_cut(self, req: _Request) -> None:
        """The stated bound on SWA tables after a resize: with prefix sharing SGLang's radix cut frees each
        own SWA page (at or past ``swa_dead_lo``, the tree-owned prefix) that ends at or before
        ``floor_P(h - ceil_P(max(W - 1, P)))`` (``W - 1`` its window); it may keep more than the reference
        (up to that ``ceil_P(max(W - 1, P))`` behind the history, and the tree's prefix), never a page
        past it: one page kept past the cut (a free that frees nothing) breaks it at that resize."""
        torch = _loaded["torch"]
        P, h = self.t, req.history
        for unit, r in zip(self.units, req.reqs):
            if unit.swa_lc is None:
                continue
            w = unit.window - 1
            cut = self._radix_cut(h, w)
            lo = self._dead_lo(r)
            if cut <= lo:
                continue
            firsts = unit.rows.req_to_token[self._kv(r).req_pool_idx, lo:cut:P].to(torch.int64)
            kept = (unit.allocator.full_to_swa_index_mapping[firsts] > 0).nonzero().view(-1)
            if kept.numel():
                b = lo // P + int(kept[0])
                raise BackendCheckFailed("tables", f"request {req.rid!r}: SWA page {b} (tokens {b * P}-{b * P + P - 1}) "
                                         f"still held after the radix cut at {cut} (history {h}, window {w} + 1, "
                                         f"page {P})")

    # ------------------------------------------------------------------ data plane
    def _check_data(self) -> None:
        torch = _loaded["torch"]
        for rid, req in self.requests.items():
            if req.state is not RequestState.ACTIVE or not req.allocated:
                continue
            want = torch.tensor(req.tokens[: req.allocated], dtype=torch.float32)
            for unit, r in zip(self.units, req.reqs):
                locs = unit.rows.req_to_token[self._kv(r).req_pool_idx, : req.allocated].to(torch.int64)
                got = unit.pool.full_kv_pool.k_buffer[0][locs].view(-1)
                bad = (got != want).nonzero().view(-1)
                if bad.numel():
                    p = int(bad[0])
                    raise BackendCheckFailed("data", f"request {rid!r} token {p}: its full KV page holds id "
                                             f"{got[p]:.0f}, not its own {want[p]:.0f} (slot {int(locs[p])})")
                swa = unit.allocator.full_to_swa_index_mapping[locs]
                mapped = (swa > 0).nonzero().view(-1)
                got = unit.pool.swa_kv_pool.k_buffer[0][swa[mapped]].view(-1)
                bad = (got != want[mapped]).nonzero().view(-1)
                if bad.numel():
                    p = int(mapped[int(bad[0])])
                    raise BackendCheckFailed("data", f"request {rid!r} token {p}: its SWA KV page holds id "
                                             f"{got[int(bad[0])]:.0f}, not its own {want[p]:.0f} "
                                             f"(SWA slot {int(swa[p])})")

    # ------------------------------------------------------------------ operations
    def create(self, request_id: Hashable, reused_history: int = 0, share_with: Hashable = None) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        if share_with is not None:
            source = self.requests.get(share_with)
            if source is None:
                raise RequestError(request_id, "share_with", share_with, "must name an existing request")
            if reused_history > source.history and source.state is not RequestState.CLOSED:
                raise RequestError(request_id, "reused_history", reused_history, "exceeds the source's history")
            tokens = source.tokens[:reused_history]
        else:
            tokens = [next(self.fresh) for _ in range(reused_history)]
        if sum(1 for q in self.requests.values() if q.state is not RequestState.CLOSED) >= OPEN_LIMIT:
            raise Unsupported(f"more than {OPEN_LIMIT} open requests (the generator's limit)")
        s = _loaded
        reqs = [s["Req"](f"{request_id}", "", array("q", tokens), s["SamplingParams"](max_new_tokens=MAX_CONTEXT))
                for _ in self.units]
        for r in reqs:  # the prompt's ids in the container the release keeps output ids in (0.5.7: lists)
            if not isinstance(r.output_ids, array):
                r.origin_input_ids = list(tokens)
        shared = share_with is not None or reused_history > 0
        self.requests[request_id] = _Request(request_id, list(tokens), reqs, shared)

    def resume(self, request_id: Hashable) -> Outcome:
        req = self._get(request_id, RequestState.SUSPENDED)
        h = req.history
        first = not req.resumed
        hit = None
        prefixes = []
        for unit, r in zip(self.units, req.reqs):
            if not self._alloc_row(unit, r):
                raise Unsupported("out of SGLang request rows")
            prefix = 0
            r.lock = None
            if first and h > 0:
                prefix = self._match(unit, r)
                hit = prefix if hit is None else min(hit, prefix)
            prefixes.append(prefix)
        # Chunked prefill, one page a chunk (SGLang's chunked_prefill_size at its smallest, the page size):
        # each chunk slides the request's own SWA window (free_swa_out_of_window_slots at the chunk's start,
        # as before any extend), evicts the tree and is admitted only when SGLang's pools (the reference's
        # sizes) hold it, then is published (checkpoint: cache_unfinished_req after a chunk), so a prompt
        # never needs more SWA pages at once than its window, the radix cut's slack and one chunk.
        P = self.t
        done = list(prefixes)  # per unit: the tokens its row holds
        edge, ok = min(prefixes), True
        while any(d < h for d in done):
            edge = min(edge // P * P + P, h)
            spans = [(k, unit, r) for k, (unit, r) in enumerate(zip(self.units, req.reqs)) if done[k] < edge]
            for k, unit, r in spans:
                if done[k] > prefixes[k]:  # a later chunk: the window slides first
                    self._slide(unit, r, done[k])
            if not all(self._fits(unit, done[k], edge) for k, unit, r in spans):
                ok = False
                break
            for k, unit, r in spans:
                self._allocate(unit, r, done[k], edge)
                self._write(unit, req, r, done[k], edge)
                done[k] = edge
                self._publish(unit, r, edge)  # the chunk's KV is published (cache_unfinished_req)
        if not ok:
            # Not admitted: what the request took is given back as a retraction does (release_kv_cache
            # without the insert); chunks already published stay in the tree, unlocked (evictable).
            for k, (unit, r) in enumerate(zip(self.units, req.reqs)):
                if done[k] > prefixes[k]:
                    req.history = done[k]
                    self._release(unit, req, r, finished=False)
                    r.reset_for_retract()
                else:
                    self._unmatch(unit, r)
            req.history = h
            self._check()
            return Outcome(False)
        if req.shared and first and h > 0:
            STATS["looked_up"] += 1
        for unit, r in zip(self.units, req.reqs):
            self._kv(r).kv_allocated_len = h
            self._kv(r).kv_committed_len = h
        if hit and req.shared:
            STATS["hits"] += 1
            STATS["hit_tokens"] += hit
        req.allocated = h
        req.state = RequestState.ACTIVE
        req.resumed = True
        self._check()
        return Outcome(True)

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        req = start_step(self._get(request_id, RequestState.ACTIVE), capacity, history)
        for unit, r in zip(self.units, req.reqs):
            self._slide(unit, r, req.history)
        ok = True
        if capacity > req.allocated:
            # The engine's check before allocating (every unit): out of pages is an outcome, nothing
            # allocated; the sliding-window free above stands.
            ok = all(self._fits(unit, req.allocated, capacity) for unit in self.units)
            if ok:
                self._ids(req, capacity)
                for unit, r in zip(self.units, req.reqs):
                    self._allocate(unit, r, req.allocated, capacity)
                    self._write(unit, req, r, req.allocated, capacity)
                req.allocated = capacity
        self._check(resized=req)
        return Outcome(ok)

    def commit(self, request_id: Hashable, tokens: int) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        req.history += tokens
        for r in req.reqs:
            self._kv(r).kv_committed_len = req.history

    def suspend(self, request_id: Hashable) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        for unit, r in zip(self.units, req.reqs):
            self._release(unit, req, r, finished=False)
            r.reset_for_retract()
        req.history = req.allocated = 0
        req.state = RequestState.SUSPENDED
        self._check()

    def close(self, request_id: Hashable) -> None:
        req = self._get(request_id)
        if req.state is RequestState.ACTIVE:
            for unit, r in zip(self.units, req.reqs):
                self._release(unit, req, r, finished=True)
        req.state = RequestState.CLOSED
        self._check()

    # ------------------------------------------------------------------ observation
    @staticmethod
    def _free_full(unit: _Unit) -> set[int]:
        """The full pool's free pages, from SGLang's full sub-allocator (free and release lists)."""
        a = unit.allocator.full_attn_allocator
        return set(a.free_pages.tolist()) | (set() if a.release_pages is None else set(a.release_pages.tolist()))

    def _held(self, req: _Request) -> list[dict[int, int]]:
        """Per life cycle, ``{block: page}`` of an open request as SGLang's row maps it: a full page while
        SGLang's allocator has it in use (its full page id), an SWA page while the block's first token
        maps to an SWA slot (its SWA page id)."""
        torch = _loaded["torch"]
        P = self.t
        held: list[dict[int, int]] = [{} for _ in self.layout.life_cycles]
        if req.state is not RequestState.ACTIVE or not req.allocated:
            return held
        for unit, r in zip(self.units, req.reqs):
            firsts = unit.rows.req_to_token[self._kv(r).req_pool_idx, : req.allocated : P].to(torch.int64)
            if unit.full_lc is not None:
                free = self._free_full(unit)
                held[unit.full_lc] = {b: i // P for b, i in enumerate(firsts.tolist()) if i // P not in free}
            if unit.swa_lc is not None:
                swa = unit.allocator.full_to_swa_index_mapping[firsts].tolist()
                held[unit.swa_lc] = {b: i // P for b, i in enumerate(swa) if i > 0}
        return held

    def slots(self, held: dict[Hashable, list[dict[int, int]]] | None = None) -> SlotMap:
        """Physical identity: each open request's pages (:meth:`_held`, SGLang's page ids) and, per pool,
        the pages no open row maps: the allocator's free pages, then the pages only the tree keeps
        (evictable, as a cached free slot is; their count is checked against the tree's own after every
        operation, :meth:`_check_pools`, and its locks by :meth:`_check_locks`)."""
        if held is None:
            held = {rid: self._held(req) for rid, req in self.requests.items() if req.state is not RequestState.CLOSED}
        g_of, P = self.layout.pool_group_of, self.t
        free: list[tuple[tuple[int, int], ...]] = [()] * self.layout.num_pool_groups
        for unit in self.units:
            for lc, sub in ((unit.swa_lc, unit.allocator.swa_attn_allocator), (unit.full_lc, unit.allocator.full_attn_allocator)):
                if lc is None:
                    continue
                listed = [int(x) for x in sub.free_pages.tolist()]
                if getattr(sub, "release_pages", None) is not None:
                    listed += [int(x) for x in sub.release_pages.tolist()]
                mapped = {page for per_lc in held.values() for page in per_lc[lc].values()}
                pages = self.layout.slots[g_of[lc]]
                tree_only = sorted(set(range(1, pages + 1)) - set(listed) - mapped)
                free[g_of[lc]] = tuple((i, i + 1) for i in listed + tree_only)
        return SlotMap(held, tuple(free))

    def observe(self) -> dict[Part, Any]:
        P = self.t
        lengths: dict[Hashable, tuple[Any, int, int]] = {}
        tables: dict[Hashable, tuple[tuple[int | None, ...], ...]] = {}
        all_held: dict[Hashable, list[dict[int, int]]] = {}
        for rid, req in self.requests.items():
            if req.state is RequestState.CLOSED:
                continue
            lengths[rid] = (req.state, req.allocated, req.history)
            held = all_held[rid] = self._held(req)
            blocks = -(-req.allocated // P)
            tables[rid] = tuple(tuple(b if b in h else None for b in range(blocks)) for h in held)
        return {
            Part.POOL_TOTALS: tuple(self.layout.slots),
            Part.LENGTHS: lengths,
            Part.TABLES: tables,
            Part.SLOTS: self.slots(all_held),
        }


class SglangLegacyRadixBackend(OlderTreeApi, SglangRadixBackend):
    """``sglang-radix`` on releases before the tree API: the older prefix-cache API's steps
    (:class:`~.radix_legacy.OlderTreeApi`), everything else this module's."""


class SglangSplitReleaseRadixBackend(SplitReleaseApi, SglangRadixBackend):
    """``sglang-radix`` on a tree with the older match and publication but a release split into steps
    (:class:`~.radix_legacy.SplitReleaseApi`: 0.5.21), everything else this module's."""


@factory(capabilities(), name="sglang-radix", prepare=import_radix)
def sglang_radix(config: Config) -> SglangRadixBackend:
    """SGLang's SWA allocator with its radix prefix cache: UnifiedRadixCache (FULL + SWA components) with
    its tree API, else the older prefix-cache API on the class the release's registry builds (SWARadixCache
    or UnifiedRadixCache)."""
    api = import_radix().get("radix_api")
    if api == "legacy":
        return SglangLegacyRadixBackend(config)
    if api == "split":
        return SglangSplitReleaseRadixBackend(config)
    return SglangRadixBackend(config)
