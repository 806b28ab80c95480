"""The ``sglang-eagle-v1`` backend: SGLang's SWA allocator driven as its EAGLE worker v1 allocates, on a
CPU, through the protocol (issue 33).

0.5.7's default EAGLE worker is v1 (``speculative/eagle_worker.py``; spec v2, ``sglang-eagle``, is opt-in
there); from 0.5.13.post1 v1 is gone. What v1 does with the KV of a request (0.5.7,
``EAGLEWorker._draft_preprocess_decode``, ``EagleVerifyInput.prepare_for_verify`` and ``.verify``):

- the prefill is an ordinary extend of exactly the step's tokens (as the ``sglang`` backend allocates);
- each decode first evicts out-of-window SWA slots (``evict_swa``, as ``sglang``), then allocates the
  draft slots, ``num_steps * topk`` tokens, with ``alloc_token_slots(..., backup_state=True)`` and gives
  them back with the allocator's ``restore_state`` before the draft forward runs (the draft KV is
  written into slots the allocator counts as free);
- the verify allocates ``num_draft_tokens`` slots (``alloc_token_slots``), written into the request's row
  after its committed tokens, and at once frees the rejected ones (``token_to_kv_pool_allocator.free`` of
  the slots its ``evict_mask`` marks; page size 1), setting ``kv_allocated_len = kv_committed_len``:
  between steps the request holds only its committed tokens.

Mapping onto the protocol: ``resize(c, h)`` is a decode step whose verify allocates the ``c - h`` new
slots (the token and its draft tokens), its draft phase ``c - h - 1`` slots taken and given back first
(topk 1: ``num_steps = num_draft_tokens - 1``); ``commit(r, n)`` is the verify accepting ``n`` tokens and
freeing the slots past them. The reference's semantics are ``sglang``'s with :data:`LOOKAHEAD` draft slots
(the verify's ``num_draft_tokens = 4`` at EAGLE's usual 3 steps, topk 1: the token and 3 drafts) and
``drafts_returned_at_commit`` (:mod:`swafloor.reference.draft_return`). A commit of a step that is not a
decode (a prefill committing fewer tokens than it allocated, which SGLang never does) frees the same way.

Found by inspecting the release, never by its number (:func:`_v1_source`): the v1 worker's decode
preparation gives its draft slots back (``restore_state``) and its verify sets ``kv_allocated_len`` to
``kv_committed_len``; a release without them is ``unsupported`` naming what it lacks. Page size 1 only:
0.5.7's ``SWATokenToKVPoolAllocator`` has no ``page_size`` (token slots; the base backend refuses a
paged config, and ``swafloor matrix`` draws blocks of one token there).

What is not reachable on a CPU: the worker itself (it takes the scheduler's batch and runs the draft
and target models). The adapter calls the allocation functions it calls (``alloc_token_slots``, the
allocator's ``backup_state``/``restore_state``, ``alloc``, ``free``) with the stand-in chunk cache of
:mod:`.eagle` (no prefix sharing) and writes the verify's slots into the row itself (what
``assign_req_to_token_pool`` writes).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import attrs

from swafloor.reference import Config, Semantics

from ...protocol import Capabilities, Unsupported, factory
from ..common import engine_table_capabilities
from .backend import SglangBackend, _loaded, _Req, import_sglang, semantics as base_semantics
from .eagle import _ChunkCache, _find

__all__ = ["SglangEagleV1Backend", "sglang_eagle_v1", "LOOKAHEAD", "semantics", "capabilities"]

#: The draft slots a v1 decode step's verify holds beyond its token: ``num_draft_tokens - 1`` at EAGLE's
#: usual 4 draft tokens (3 steps, topk 1).
LOOKAHEAD = 4 - 1


def semantics() -> Semantics:
    """``sglang``'s semantics (eviction every token) with :data:`LOOKAHEAD` draft slots given back at the commit."""
    return attrs.evolve(base_semantics(1), lookahead_tokens=LOOKAHEAD, drafts_returned_at_commit=True)


def capabilities() -> Capabilities:
    """``sglang``'s capabilities with the semantics of :func:`semantics`."""
    base = engine_table_capabilities(shared_pool_groups=False, reused_history=False, semantics=semantics())
    return attrs.evolve(base, notes=(*base.notes, f"EAGLE worker v1: {LOOKAHEAD} draft slots a step, the rejected "
                                                  "ones freed at the verify (semantics.drafts_returned_at_commit)"))


def _function(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name == name:
                    return sub
    return None


def _calls(node: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr
               for n in ast.walk(node))


def _assigns(node: ast.AST, target: str, source: str) -> bool:
    """``x.target = y.source`` somewhere in ``node``."""
    return any(isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute)
               and n.targets[0].attr == target and isinstance(n.value, ast.Attribute) and n.value.attr == source
               for n in ast.walk(node))


def _v1_source() -> str:
    """Where the release's v1 worker gives its drafts back, read from its sources (never imported: the
    worker needs the models): Unsupported naming what is missing when it does not."""
    import sglang

    version = _loaded.get("version", "?")
    root = Path(sglang.__file__).parent / "srt" / "speculative"
    worker, info = root / "eagle_worker.py", root / "eagle_info.py"
    if not worker.is_file():
        raise Unsupported(f"SGLang {version} has no EAGLE worker v1 (no speculative/eagle_worker.py): spec v2 only")
    preprocess = _function(ast.parse(worker.read_text(encoding="utf-8")), "EAGLEWorker", "_draft_preprocess_decode")
    if preprocess is None or not _calls(preprocess, "restore_state"):
        raise Unsupported(f"SGLang {version}'s EAGLEWorker._draft_preprocess_decode does not give its draft slots "
                          "back (no restore_state): not the v1 allocation the adapter drives")
    verify = _function(ast.parse(info.read_text(encoding="utf-8")), "EagleVerifyInput", "verify") if info.is_file() else None
    if verify is None or not (_calls(verify, "free") and _assigns(verify, "kv_allocated_len", "kv_committed_len")):
        raise Unsupported(f"SGLang {version}'s EagleVerifyInput.verify does not free the rejected drafts and set "
                          "kv_allocated_len = kv_committed_len (speculative/eagle_info.py)")
    return "speculative/eagle_worker.py:EAGLEWorker._draft_preprocess_decode, speculative/eagle_info.py:EagleVerifyInput.verify"


def _prepare() -> dict[str, Any]:
    """SGLang imported, and the pieces of its v1 allocation found (once)."""
    parts = import_sglang()
    if "spec_v1" not in parts:
        where = _v1_source()
        alloc = ("sglang.srt.mem_cache.common", "sglang.srt.mem_cache.allocation")
        parts["spec_v1"] = dict(where=where, tokens=_find("alloc_token_slots", alloc))
    return parts


class SglangEagleV1Backend(SglangBackend):
    """SGLang's SWA allocator under its EAGLE worker v1's allocation (see the module docstring)."""

    def __init__(self, config: Config):
        self.spec = _prepare()["spec_v1"]
        super().__init__(config, eviction_interval=1)
        if self.t != 1:  # _take refuses it on 0.5.7 already; a release with pages and v1 is not known
            raise Unsupported(f"SGLang {_loaded.get('version', '?')}'s EAGLE worker v1 driven at page size 1 only")
        self.caches = [_ChunkCache(a) for a in self.allocators]

    def _allocate(self, req: _Req, capacity: int) -> bool:
        if not req.allocated:  # the prefill: an extend of exactly its tokens
            return super()._allocate(req, capacity)
        old = req.allocated
        n = capacity - old
        for alloc in self.allocators:  # the scheduler's check before the decode
            if not (n <= alloc.full_available_size() and n <= alloc.swa_available_size()):
                return False
        for a, alloc in enumerate(self.allocators):
            if n > 1:  # the draft phase: its slots taken, then given back before the draft forward
                _, state = self.spec["tokens"](self.caches[a], n - 1, backup_state=True)
                alloc.restore_state(state)
            out = self.spec["tokens"](self.caches[a], n)  # the verify's slots
            self._row(a, req)[old:capacity] = out.to(self._row(a, req).dtype)  # what assign_req_to_token_pool writes
        req.allocated = capacity
        return True

    def commit(self, request_id: Any, tokens: int) -> None:
        super().commit(request_id, tokens)
        req = self.requests[request_id]
        if req.allocated > req.history:  # the verify frees the slots it rejected (evict_mask), at once
            torch = _loaded["torch"]
            for a, alloc in enumerate(self.allocators):
                alloc.free(self._row(a, req)[req.history:req.allocated].to(torch.int64))
            req.allocated = req.history  # kv_allocated_len = kv_committed_len
            self._check_mapping()


@factory(capabilities(), name="sglang-eagle-v1", prepare=_prepare)
def sglang_eagle_v1(config: Config) -> SglangEagleV1Backend:
    """SGLang's SWA allocator as its EAGLE worker v1 allocates and gives back draft slots."""
    return SglangEagleV1Backend(config)
