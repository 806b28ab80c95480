"""The ``sglang-eagle`` backend: SGLang's SWA allocator driven as its speculative (EAGLE, spec v2) worker
allocates, on a CPU, through the protocol (issue 33).

What SGLang's EAGLE worker does with the KV of a request (0.5.23, ``speculative.eagle_utils``'s
``eagle_prepare_for_decode`` and ``mem_cache.allocation``'s ``alloc_for_spec_decode``):

- the prefill (the request's first step) is an ordinary extend: exactly the step's tokens
  (``alloc_extend``, as the ``sglang`` backend allocates);
- each decode step first evicts out-of-window SWA pages (``maybe_evict_swa``, as ``sglang``), then
  reserves draft slots: the new allocated length is SGLang's ``page_aligned_decode_alloc_lens`` of the
  committed length and the step's reserve, ``max(allocated, ceil_P(committed + reserve))`` (whole
  pages), allocated with ``alloc_paged_token_slots_extend`` (page size above 1) or ``alloc_token_slots``
  (page size 1) and written into the request's ``req_to_token`` row;
- the verify commits the accepted tokens (``kv_committed_len`` advances); the rejected drafts' slots
  are NOT freed on this release (spec v2 keeps the page-aligned reservation and writes the next drafts
  over them): what a step rejects stays allocated up to the reservation;
- a finished or retracted request gives back its row in SGLang's two ranges (``release_kv_cache``): the
  owned part ``[0, committed)`` and the over-allocated tail ``[ceil_P(committed), allocated)``, merged
  by SGLang's ``coalesce_ranges`` and freed by ``free_kv_row_segments``.

Mapping onto the protocol: ``resize(c, h)`` is a decode step whose reserve is the step's new tokens,
``c - h`` (the token plus its draft tokens: the protocol's lookahead, ``Semantics.lookahead_tokens``), so
SGLang allocates ``ceil_P(c)``: the same pages as the reference's ``ceil(c / t)`` blocks at ``t = P``.
``commit(r, n)`` is the verify accepting ``n`` tokens. The backend's semantics carry
:data:`LOOKAHEAD` draft slots (``S + ceil((W - 1 + k) / t) + 1``): SGLang's own reserve per decode,
``2 * max(num_steps * topk, num_draft_tokens)`` (``get_alloc_reserve_per_decode``), at EAGLE's usual
3 steps, topk 1 and 4 draft tokens, is 8 tokens: the token and 7 draft slots.

What is not reachable on a CPU, and what the adapter does instead: ``eagle_prepare_for_decode`` takes
SGLang's ``ScheduleBatch`` (its scheduler, not importable here), and ``alloc_for_spec_decode`` writes
the row with ``assign_req_to_token_pool_func``: a Triton kernel (``assign_req_to_token_pool``), or on
SGLang's CPU build ``sgl_kernel.assign_req_to_token_pool_cpu``, not installed. The adapter calls the
functions those make their allocation with (``page_aligned_decode_alloc_lens``,
``get_last_loc_torch``, ``alloc_paged_token_slots_extend`` / ``alloc_token_slots``) with a stand-in
prefix cache (no prefix sharing: SGLang's chunk cache) and writes the returned slots into the row
itself (what the kernel writes). ``alloc_extend_swa_tail`` is not on this path: SGLang calls it only
when a disaggregated decode server preallocates for transferred KV (``disaggregation.decode``).

Older releases (issue 33), each piece found by inspecting the release, never by its number:

- the decode lengths: ``page_aligned_decode_alloc_lens`` from 0.5.19; before, the spec v2 preparation
  computes them inline (``eagle_utils.eagle_prepare_for_decode``, else the v2 mixin's
  ``EagleDraftInputV2Mixin.prepare_for_decode``), read from its source (:func:`_page_aligned`):
  rounded up to whole pages (0.5.16-0.5.18, the same arithmetic) or token granular, ``max(allocated,
  committed + reserve)`` (0.5.13.post1-0.5.15; 0.5.7 adds ``committed + reserve - allocated``, the same
  length here since a step only allocates past its allocation): :class:`_InlineLens` computes what the
  release's preparation computes. Token granular or not, the same pages are held (the paged allocator
  hands out whole pages); SGLang's ``kv_allocated_len`` is not page-aligned there (sgl-project/sglang#31616
  describes the tail of the last page it leaves unrecorded);
- paged slots: where the paged ``alloc_extend`` is a Triton kernel only (every release before 0.5.22)
  the adapter places them as it does for the ``sglang`` backend on those releases
  (:func:`.compat.alloc_pages`: the rest of the last page, then whole pages from both sub-allocators);
- the release: ``coalesce_ranges`` from 0.5.20; before, each range is freed by its own call (the two never
  share a page: the tail starts at ``ceil_P(committed)``).

0.5.7's default EAGLE worker is the v1 worker (``speculative/eagle_worker.py``; spec v2 is opt-in there,
``SGLANG_ENABLE_SPEC_V2`` off by default, switched on by its server args for EAGLE on MiMoV2Flash, an
SWA model); from 0.5.13.post1 v2 is the default and v1 is gone. v1 reserves differently and is driven
by ``sglang-eagle-v1`` (:mod:`.eagle_v1`): its draft slots are allocated and given back within the step
(``backup_state`` / ``restore_state`` around the draft), its verify allocates ``num_draft_tokens`` slots
and frees the rejected ones at once (``kv_allocated_len = kv_committed_len``): between steps it holds only
the committed tokens, the reference's ``drafts_returned_at_commit`` (docs/fuzzing-engines.md, SGLang).

Observations are the ``sglang`` backend's (:mod:`.backend`); lengths are the protocol's (``c``), SGLang's
page-aligned ``kv_allocated_len`` is kept apart (never compared: it is the same pages).
"""

from __future__ import annotations

import importlib
from typing import Any

import attrs

from swafloor.reference import Config, Semantics

from ...protocol import Capabilities, Unsupported, factory
from ..common import engine_table_capabilities
from .backend import SglangBackend, _loaded, _Req, import_sglang, semantics as base_semantics

__all__ = ["SglangEagleBackend", "sglang_eagle", "LOOKAHEAD", "RESERVE", "semantics", "capabilities"]

#: SGLang's reserve per decode step at EAGLE's 3 steps, topk 1, 4 draft tokens: twice (the overlap
#: scheduler's double buffer) the larger of steps x topk and draft tokens (``get_alloc_reserve_per_decode``).
RESERVE = 2 * max(3 * 1, 4)
#: The draft slots a decode step holds beyond its token (the reference's ``lookahead_tokens``).
LOOKAHEAD = RESERVE - 1


def semantics() -> Semantics:
    """``sglang``'s semantics (eviction every token) with :data:`LOOKAHEAD` draft slots."""
    return attrs.evolve(base_semantics(1), lookahead_tokens=LOOKAHEAD)


def capabilities() -> Capabilities:
    """``sglang``'s capabilities with the draft slots of :func:`semantics`."""
    base = engine_table_capabilities(shared_pool_groups=False, reused_history=False, semantics=semantics())
    return attrs.evolve(base, notes=(*base.notes, f"EAGLE spec v2: page-aligned reserve per decode, {LOOKAHEAD} "
                                                  "draft slots (semantics.lookahead_tokens)"))


def _find(name: str, modules: tuple[str, ...], required: bool = True) -> Any:
    for module in modules:
        try:
            found = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(found, name):
            return getattr(found, name)
    if not required:
        return None
    version = _loaded.get("version", "?")
    raise Unsupported(f"SGLang {version} has no {name} (in {', '.join(modules)}): no spec v2 decode allocation")


#: Where releases put their spec v2 decode preparation (the step that sizes a decode's allocation):
#: ``eagle_utils.eagle_prepare_for_decode`` (0.5.15 on), else the v2 mixin's ``prepare_for_decode``.
_PREPARATIONS = (("speculative/eagle_utils.py", None, "eagle_prepare_for_decode"),
                 ("speculative/eagle_info_v2.py", "EagleDraftInputV2Mixin", "prepare_for_decode"))


def _preparation_source() -> tuple[str, Any]:
    """The release's spec v2 decode preparation, read from its source file (never imported: it takes the
    scheduler's batch): ``(where, its ast node)``; Unsupported naming the places looked at when none."""
    import ast
    from pathlib import Path

    import sglang

    root = Path(sglang.__file__).parent / "srt"
    for file, cls, name in _PREPARATIONS:
        path = root / file
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls] if cls else [tree]
        for scope in scopes:
            for node in scope.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return f"{file}:{cls + '.' if cls else ''}{name}", node
    version = _loaded.get("version", "?")
    looked = ", ".join(f"{cls + '.' if cls else ''}{name} in {file}" for file, cls, name in _PREPARATIONS)
    raise Unsupported(f"SGLang {version} has no page_aligned_decode_alloc_lens and no spec v2 decode preparation ({looked})")


def _page_aligned(node: Any) -> bool | None:
    """Whether a decode preparation rounds the next allocated length up to whole pages: it computes the
    length (``nxt = ...``, or 0.5.7's ``x = ...`` added to the allocated length) from the committed
    length, with a floor division by ``page_size`` (aligned) or without (token granular); None when
    the preparation computes no such length."""
    import ast

    for sub in ast.walk(node):
        if not isinstance(sub, ast.Assign) or len(sub.targets) != 1 or not isinstance(sub.targets[0], ast.Name):
            continue
        if sub.targets[0].id not in ("nxt", "x"):
            continue
        names = {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(sub.value)
                 if isinstance(n, (ast.Attribute, ast.Name))}
        if "kv_committed_len" not in names:
            continue
        return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv) and isinstance(n.right, ast.Name)
                   and n.right.id == "page_size" for n in ast.walk(sub.value))
    return None


class _InlineLens:
    """The decode allocation lengths of a release whose preparation computes them inline (before
    ``page_aligned_decode_alloc_lens``, 0.5.19): the same call as that function, the next allocated length
    ``max(allocated, committed + reserve)`` rounded up to whole pages where the release's preparation
    rounds it (0.5.16-0.5.18), token granular where it does not (0.5.7-0.5.15: the pages held are the
    same, SGLang's ``kv_allocated_len`` is not page-aligned). ``where`` names the release's code read."""

    def __init__(self, aligned: bool, where: str):
        self.aligned, self.where = aligned, where

    def __call__(self, reqs: list[Any], *, reserve: int, page_size: int) -> tuple[list[int], list[int], int]:
        cur, nxt = [], []
        for r in reqs:
            end = r.kv.kv_committed_len + reserve
            if self.aligned:
                end = -(-end // page_size) * page_size
            cur.append(r.kv.kv_allocated_len)
            nxt.append(max(r.kv.kv_allocated_len, end))
        return cur, nxt, sum(n - c for c, n in zip(cur, nxt))


def _decode_lens() -> Any:
    """SGLang's ``page_aligned_decode_alloc_lens`` where the release has it, else :class:`_InlineLens` as the
    release's decode preparation computes the lengths (read from its source)."""
    found = _find("page_aligned_decode_alloc_lens", ("sglang.srt.mem_cache.allocation_sizing",), required=False)
    if found is not None:
        return found
    where, node = _preparation_source()
    aligned = _page_aligned(node)
    if aligned is None:
        version = _loaded.get("version", "?")
        raise Unsupported(f"SGLang {version}'s {where} computes no next allocated length from kv_committed_len "
                          "(no spec v2 decode allocation the adapter recognises)")
    return _InlineLens(aligned, where)


def _prepare() -> dict[str, Any]:
    """SGLang imported, and the pieces of its speculative decode allocation found (once)."""
    parts = import_sglang()
    if "spec" not in parts:
        alloc = ("sglang.srt.mem_cache.allocation", "sglang.srt.mem_cache.common")
        parts["spec"] = dict(
            lens=_decode_lens(),
            extend=_find("alloc_paged_token_slots_extend", alloc),
            tokens=_find("alloc_token_slots", alloc),
            last_loc=_find("get_last_loc_torch", alloc),
            # absent before 0.5.20: each range is freed by its own call (no seam inside a page to merge)
            coalesce=_find("coalesce_ranges", ("sglang.srt.mem_cache.common",), required=False),
        )
    return parts


class _ChunkCache:
    """The prefix cache SGLang's allocation functions are given: its allocator, no prefix sharing (what
    SGLang's chunk cache says; nothing is evicted from a tree). The adapter's stand-in, never observed."""

    def __init__(self, allocator: Any):
        self.token_to_kv_pool_allocator = allocator

    @staticmethod
    def supports_prefix_sharing() -> bool:
        return False

    @staticmethod
    def is_chunk_cache() -> bool:  # what releases before 0.5.22 ask instead (evict_from_tree_cache)
        return True

    def available_and_evictable_str(self) -> str:  # SGLang's out-of-memory message reads it
        return self.token_to_kv_pool_allocator.debug_print()

    def pretty_print(self) -> None:
        return None


class _SpecReq:
    """The request fields ``page_aligned_decode_alloc_lens`` reads (``kv.kv_allocated_len``,
    ``kv.kv_committed_len``)."""

    def __init__(self, allocated: int, committed: int):
        self.kv = self
        self.kv_allocated_len = allocated
        self.kv_committed_len = committed


class SglangEagleBackend(SglangBackend):
    """SGLang's SWA allocator under its EAGLE worker's allocation (see the module docstring)."""

    def __init__(self, config: Config):
        self.spec = _prepare()["spec"]
        super().__init__(config, eviction_interval=1)
        from .compat import paged_cpu

        # where the paged alloc_extend is a Triton kernel only (before 0.5.22), the adapter places the slots
        # as it does for the sglang backend on those releases (compat.alloc_pages)
        self.paged_cpu = self.t == 1 or paged_cpu(self.allocators[0])
        self.caches = [_ChunkCache(a) for a in self.allocators]
        self.kv_allocated: dict[int, int] = {}  # id(request) -> SGLang's kv_allocated_len

    def _allocate(self, req: _Req, capacity: int) -> bool:
        if not req.allocated:  # the prefill: an extend of exactly its tokens
            if not super()._allocate(req, capacity):
                return False
            self.kv_allocated[id(req)] = capacity
            return True
        from .compat import alloc_pages, pages_available

        torch = _loaded["torch"]
        P = self.t
        cur = self.kv_allocated[id(req)]
        committed = req.history
        _, nxts, needed = self.spec["lens"]([_SpecReq(cur, committed)], reserve=capacity - committed, page_size=P)
        nxt = int(nxts[0])
        if needed:
            pages = -(-nxt // P) - (-(-cur // P))
            for alloc in self.allocators:  # the scheduler's check before the decode (check_decode_mem)
                if not pages_available(alloc, pages, P):
                    return False
            for a, alloc in enumerate(self.allocators):
                row_id = req.kvs[a].req_pool_idx
                row = self._row(a, req)
                if P == 1:
                    out = self.spec["tokens"](self.caches[a], needed)
                elif not self.paged_cpu:  # alloc_paged_token_slots_extend would call the Triton alloc_extend
                    out = alloc_pages(alloc, torch, row, cur, nxt, P)
                    if out is None:  # pages_available said yes just above
                        raise AssertionError(f"SGLang allocator {a}: no pages after its capacity check said yes")
                else:
                    indices = torch.tensor([row_id], dtype=torch.int64)
                    cur_t = torch.tensor([cur], dtype=torch.int64)
                    nxt_t = torch.tensor([nxt], dtype=torch.int64)
                    last = self.spec["last_loc"](self.rows[a].req_to_token, indices, cur_t).to(torch.int64)
                    out = self.spec["extend"](self.caches[a], cur_t, cur_t, nxt_t, nxt_t, last, needed,
                                              req_pool_indices=indices, batch=None)
                row[cur:nxt] = out.to(row.dtype)  # what assign_req_to_token_pool writes
            self.kv_allocated[id(req)] = nxt
        req.allocated = capacity
        return True

    def _free_row(self, req: _Req) -> None:
        from .compat import release_row

        allocated = self.kv_allocated.pop(id(req), req.allocated)
        if allocated:
            P = self.t
            owned = min(req.history, allocated)
            tail = -(-owned // P) * P
            ranges = [(0, owned)] + ([(tail, allocated)] if tail < allocated else [])
            if self.spec["coalesce"] is not None:
                ranges = self.spec["coalesce"](ranges)
            for a, alloc in enumerate(self.allocators):
                row = self._row(a, req)
                evicted = self._evicted(a, req) if self.windows[a] else 0
                segments = [(row[s:e].to(_loaded["torch"].int64), s) for s, e in ranges if e > s]
                if _loaded["free_kv_row_segments"] is not None:
                    _loaded["free_kv_row_segments"](alloc, segments, swa_evicted_seqlen=evicted)
                else:
                    for indices, _ in segments:
                        release_row(_loaded, alloc, indices, evicted)
        for kv in req.kvs:
            kv.component_evicted_seqlens.clear()
        req.allocated = 0


@factory(capabilities(), name="sglang-eagle", prepare=_prepare)
def sglang_eagle(config: Config) -> SglangEagleBackend:
    """SGLang's SWA allocator as its EAGLE (spec v2) worker allocates draft slots."""
    return SglangEagleBackend(config)
