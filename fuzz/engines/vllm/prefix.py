"""The ``vllm-prefix`` backend: vLLM v1's ``KVCacheManager`` with prefix caching on
(``enable_caching=True``), driven on a CPU as the ``vllm`` backend is (:mod:`.vllm`), compared under
prefix sharing with freed blocks cached (``Semantics.cache_freed``).

What caching adds, all vLLM's own doing: every request carries token ids and vLLM's block hasher, so
vLLM hashes each full block of tokens it schedules; a block freed with a hash stays in the pool's
cache (at the end of its free queue; unhashed ones go to the front) until the pool hands it out again;
a waiting request's first step looks its prompt up in that cache (``get_computed_blocks``) and takes
what it finds as computed blocks, the rest of its reused history through the KV-connector load path.

Token ids: a request created on another's prefix (``create(r, k, share_with=s)``) starts with the first
``k`` token ids of ``s``, then one id of its own (vLLM recomputes at least the prompt's last token, so
the prompt runs one past the reused history and the hit can cover all ``k``); any other token is an id
used nowhere else. Before each step the request's tokens are extended (``append_output_token_ids``, as
the engine appends sampled tokens) to the capacity asked for: a step schedules only tokens vLLM knows.

Not served: a window of one token. vLLM's sliding-window manager caches only the blocks a hit can
need (its retention mask); with ``W = 1`` a hit needs none, so none is cached and, in a model with
full attention beside it, no request ever hits (the common hit length is 0): a semantics of its own,
not modelled.

Not driven: ``suspend`` (vLLM's preemption then recomputes, and its resume looks the request's own
blocks up in the cache: a hit the model's recompute suspension does not make). Observed besides what
``vllm`` shows: the content of every cached free block (its hash, named by the request and block it
was first computed for, from the requests' own hash lists), compared with the reference's cache.

``vllm-prefix-eagle``: the same with ``use_eagle=True`` (a hit gives its last matched block back for the
drafter, ``Semantics.eagle``) and :data:`LOOKAHEAD` draft slots: a step of ``n`` new tokens is
``allocate_slots(request, n - d, num_lookahead_tokens=d)`` with ``d = min(LOOKAHEAD, n - 1)`` (at least
one token scheduled), so vLLM caches only up to the scheduled tokens (``Semantics.lookahead_tokens``).
"""

from __future__ import annotations

import itertools
from typing import Any, Hashable

import attrs

from swafloor.reference import Config, Outcome, RequestError, Semantics, SlotMap, build_layout

from ...protocol import Operation, Unsupported, factory
from .compat import release_of
from .order import VLLM_ORDER
from .backend import MAX_MODEL_LEN, VllmBackend, capabilities as vllm_capabilities, load, semantics as vllm_semantics

__all__ = ["VllmPrefixBackend", "VllmPrefixEagleBackend", "vllm_prefix", "vllm_prefix_eagle", "semantics", "capabilities",
           "LOOKAHEAD", "VllmPrefixMixedBackend", "vllm_prefix_mixed", "capabilities_mixed", "VllmPrefixEagleMixedBackend",
           "vllm_prefix_eagle_mixed", "capabilities_eagle_mixed"]


def semantics() -> Semantics:
    """The reference semantics of vLLM's manager with prefix caching (synchronous scheduling)."""
    return attrs.evolve(vllm_semantics(0), prefix_sharing=True, cache_freed=True, hit_rule="common-prefix",
                        cache_scheduled=True)


#: The lost-hit rule of a release whose allocate_slots refuses a step adopting a hit alone (0.14.1-0.30.0):
#: a first resume whose hit would cover its whole reused history, with nothing to compute, takes the hit
#: vLLM's scheduler finds for a prompt ending there (see :meth:`VllmPrefixBackend.resume`).
PROMPT_END = "prompt-end-recomputed"


def capabilities():
    base = vllm_capabilities(0)
    return attrs.evolve(
        base,
        operations=[Operation.CREATE, Operation.RESUME, Operation.RESIZE, Operation.COMMIT, Operation.CLOSE],
        semantics=semantics(),
        prefix_sharing=True,
        notes=("no suspend: a preempted request's resume hits its own cached blocks in vLLM",),
        min_window=2,  # see the module docstring
        lost_hit_rules=(PROMPT_END,),
    )


def load_prefix() -> dict[str, Any]:
    """:func:`~.vllm.load`, then check that this release's block hashes can be read: its ``Request``
    takes a ``block_hasher`` (0.10.2 on), or its manager hashes each request's blocks itself and keeps
    them in ``req_to_block_hashes`` (before; :attr:`.compat.Release.manager_hashes`): else
    :class:`Unsupported`, one line why. A release without the KV-connector load path
    (``num_external_computed_tokens``, before 0.14.1) loads the reused history past a hit as its
    scheduler then did: as new tokens of the first step."""
    from ..common import parameters as _parameters

    v = load()
    allocate = _parameters(v["KVCacheManager"].allocate_slots)
    if "num_new_computed_tokens" not in allocate and "new_computed_blocks" not in allocate:
        raise Unsupported(f"vLLM {release_of(v).version}'s allocate_slots takes no hit (neither "
                          "num_new_computed_tokens nor new_computed_blocks): not driven")
    if release_of(v).manager_hashes:  # its manager hashes each request's blocks (read in req_to_block_hashes)
        return v
    if "block_hasher" not in _parameters(v["Request"]):
        raise Unsupported(f"vLLM {release_of(v).version}'s Request takes no block_hasher and its KVCacheManager "
                          "keeps no req_to_block_hashes (no free_block_hashes): its block hashes cannot be read")
    _sha256(v)
    return v


def _sha256(v: dict[str, Any]) -> Any:
    """vLLM's sha256 block-hash function: ``vllm.utils.hashing.sha256`` (0.11 on), else (0.10.2, where
    ``vllm.utils`` is one module) ``vllm.utils.sha256``; neither: :class:`Unsupported`."""
    import importlib

    for module in ("vllm.utils.hashing", "vllm.utils"):
        try:
            found = getattr(importlib.import_module(module), "sha256", None)
        except ImportError:
            continue
        if callable(found):
            return found
    raise Unsupported(f"vLLM {release_of(v).version} has no sha256 block-hash function (vllm.utils.hashing or vllm.utils)")


def _hashing(v: dict[str, Any], t: int) -> Any:
    """vLLM's block hasher for blocks of ``t`` tokens (sha256, its default), its none-hash set up."""
    if "hasher" not in v:
        from vllm.v1.core import kv_cache_utils

        sha256 = _sha256(v)

        kv_cache_utils.init_none_hash(sha256)
        v["hasher"] = (kv_cache_utils.get_request_block_hasher, sha256, kv_cache_utils)
    make, fn, _ = v["hasher"]
    return make(t, fn)


def _digest(block_hash: Any) -> Any:
    """A request's block hash as a key: its bytes, or (a release whose hash is a named tuple) its
    ``hash_value``."""
    value = getattr(block_hash, "hash_value", None)
    return value if value is not None else bytes(block_hash)


def _key_parts(key: Any, utils: Any) -> tuple[Any, int]:
    """A cached block's key as (digest, group): the bytes with the group id appended (read with
    ``get_block_hash``/``get_group_id``); a named tuple of a hash and a group id; or, with one group,
    the hash itself (0.8.x)."""
    if hasattr(key, "group_id") and hasattr(key, "block_hash"):
        return _digest(key.block_hash), key.group_id
    if hasattr(key, "hash_value"):
        return key.hash_value, 0
    return bytes(utils.get_block_hash(key)), utils.get_group_id(key)


class VllmPrefixBackend(VllmBackend):
    """vLLM's ``KVCacheManager`` with prefix caching on (see the module docstring)."""

    caching = True

    def __init__(self, config: Config):
        if any(getattr(layer, "window", None) == 1 for layer in config.layers):  # (never generated: min_window)
            raise Unsupported("vllm-prefix: a window of 1 token (vLLM's sliding-window manager then caches no "
                              "block: a hit needs none of them, so its retention mask keeps none)")
        self._build(config)

    def _build(self, config: Config) -> None:
        v = load_prefix()
        VllmBackend.__init__(self, config, in_flight=0)
        from vllm.v1.core import kv_cache_utils

        self.utils = kv_cache_utils
        #: the manager hashes each request's blocks (older releases): no block hasher is given
        self.manager_hashes = self.vllm.manager_hashes
        self.block_hasher = None if self.manager_hashes else _hashing(v, self.t)
        self.fresh_ids = itertools.count(1)
        self.tokens: dict[Hashable, list[int]] = {}
        self.roots: dict[Hashable, list[tuple[int | None, Hashable]]] = {}
        self.content: dict[bytes, tuple[int, Hashable]] = {}  # block hash -> (block index, first computed for)
        self.hits_taken: dict[Hashable, int] = {}  # request -> the hit (tokens) its last lookup took

    def _root(self, rid: Hashable, b: int) -> Hashable:
        for end, root in self.roots[rid]:
            if end is None or b < end:
                return root
        return rid

    def create(self, request_id: Hashable, reused_history: int = 0, share_with: Hashable = None) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        roots: list[tuple[int | None, Hashable]] = []
        if share_with is not None:
            if share_with not in self.tokens:
                raise RequestError(request_id, "share_with", share_with, "must name an existing request")
            source = self.requests[share_with].request
            if reused_history > source.num_computed_tokens and not self.requests[share_with].closed:
                raise RequestError(request_id, "reused_history", reused_history, "exceeds the source's history")
            tokens = self.tokens[share_with][:reused_history]
            prefix = reused_history // self.t
            for end, root in self.roots[share_with]:
                roots.append((prefix if end is None else min(end, prefix), root))
                if end is None or end >= prefix:
                    break
        else:
            tokens = [next(self.fresh_ids) for _ in range(reused_history)]
        roots.append((None, request_id))
        tokens.append(next(self.fresh_ids))  # the prompt's own last token: vLLM recomputes at least one
        request = self.vllm.request(str(request_id), tokens, MAX_MODEL_LEN, block_hasher=self.block_hasher)
        request.num_computed_tokens = reused_history  # held by the connector until loaded
        self.tokens[request_id] = list(tokens)
        self.roots[request_id] = roots
        from .backend import _Request

        self.requests[request_id] = _Request(request, reused_history)
        self._learn(request_id)

    def _learn(self, rid: Hashable) -> None:
        """Name every block hash the request has by the request and block it was first computed for."""
        request = self.requests[rid].request
        if self.manager_hashes:  # the manager's own list (filled at the lookup, extended as blocks are cached)
            hashes = self.manager.req_to_block_hashes.get(request.request_id) or []
        else:
            hashes = request.block_hashes
        for b, h in enumerate(hashes):
            self.content.setdefault(_digest(h), (b, self._root(rid, b)))

    def _extend(self, rid: Hashable, capacity: int) -> None:
        """The request's tokens reach ``capacity``: new ids appended, as sampled tokens are."""
        request = self.requests[rid].request
        missing = capacity - request.num_tokens
        if missing > 0:
            new = [next(self.fresh_ids) for _ in range(missing)]
            request.append_output_token_ids(new)
            self.tokens[rid].extend(new)
            self._learn(rid)

    def resume(self, request_id: Hashable) -> Outcome:
        entry = self._get(request_id, self.status.WAITING)
        request = entry.request
        h, c = request.num_computed_tokens, entry.capacity
        if c > h or h > 0:
            request.num_computed_tokens = 0
            request.num_in_flight_tokens = 0
            found, raw, *_ = self.manager.get_computed_blocks(request)
            hit = min(raw, h)  # what the allocation below can take: at most the reused history
            drafts = self._drafts(h, c)
            if c - h - drafts == 0 and hit == h and not self.vllm.adopts_hit_alone:
                # A step adopting the whole reused history as a hit, with nothing to compute or load:
                # this release's allocate_slots refuses it. Looked up as vLLM's scheduler looks up a
                # prompt that ends at the reused history (up to its last token, which it computes):
                # the rest is loaded (lost-hit rule prompt-end-recomputed).
                found, raw = self._lookup_prompt_of(request_id, h)
                hit = min(raw, h)
            self.hits_taken[request_id] = raw  # vLLM's own value, as it is (a hit past h: the harness's `hit`)
            lookahead = {"num_lookahead_tokens": drafts} if drafts else {}
            if self.vllm.external_load:
                blocks = self.manager.allocate_slots(
                    request, c - h - drafts, num_new_computed_tokens=hit, new_computed_blocks=found,
                    num_external_computed_tokens=h - hit, **lookahead)
            elif self.vllm.hit_tokens_given:  # before the KV-connector load path: the loaded tokens are new tokens of the step, as its scheduler asked
                blocks = self.manager.allocate_slots(
                    request, c - hit - drafts, num_new_computed_tokens=hit, new_computed_blocks=found, **lookahead)
            else:  # an allocate_slots that reads the hit's tokens from its blocks (whole blocks, as vLLM found them)
                found, hit = self._whole_blocks(found, hit)
                blocks = self.manager.allocate_slots(request, c - hit - drafts, new_computed_blocks=found, **lookahead)
            if self.manager_hashes:
                self._learn(request_id)
            return self._admitted(request, h, blocks, drafts)
        request.status = self.status.RUNNING
        return Outcome(True)

    def _whole_blocks(self, found: Any, hit: int) -> tuple[list[Any], int]:
        """The hit as an ``allocate_slots`` without ``num_new_computed_tokens`` takes it: the blocks alone,
        its tokens ``len(blocks) * t``. vLLM's lookup finds whole blocks, so the hit the adapter takes (at
        most the reused history) is whole blocks too; one that is not would be changed by this call, so it
        raises instead."""
        if hit % self.t:
            raise AssertionError(f"a hit of {hit} tokens is not whole blocks of {self.t}: this release's "
                                 "allocate_slots takes a hit as its blocks alone")
        return list(found)[:hit // self.t], hit

    def _lookup_prompt_of(self, request_id: Hashable, tokens: int) -> tuple[Any, int]:
        """vLLM's own lookup (``get_computed_blocks``) for a request whose prompt is the first ``tokens``
        token ids of ``request_id`` (a throwaway request, never scheduled: the lookup changes no block):
        the blocks found and the hit, which vLLM stops before the prompt's last token."""
        probe = self.vllm.request(f"{request_id}#prompt", self.tokens[request_id][:tokens], MAX_MODEL_LEN,
                                  block_hasher=self.block_hasher)
        found, raw, *_ = self.manager.get_computed_blocks(probe)
        return found, raw

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        self._get(request_id, self.status.RUNNING)
        self._extend(request_id, capacity)
        outcome = super().resize(request_id, capacity, history)
        if self.manager_hashes:  # the manager hashed the blocks it cached
            self._learn(request_id)
        return outcome

    def close(self, request_id: Hashable) -> None:
        entry = self._get(request_id)
        super().close(request_id)
        if self.manager_hashes:  # a finished request's hashes go, as its scheduler drops them
            self.manager.free_block_hashes(entry.request)

    def suspend(self, request_id: Hashable) -> None:
        raise Unsupported("vllm-prefix does not drive preemption (see the module docstring)")

    def hit_tokens(self, request_id: Hashable) -> int | None:
        """The hit (tokens) the request's last resume took from vLLM's ``get_computed_blocks``, the value
        vLLM returned, unclamped (None: it looked nothing up): read by the harness under
        ``Capabilities.lost_hit_rules``, where one longer than the reused history is a ``hit`` divergence."""
        return self.hits_taken.get(request_id)

    def slots(self) -> SlotMap:
        view = super().slots()
        cached: dict[int, tuple] = {}
        for (block_id, _), in ((r,) for r in view.free[0]):
            key = self.pool.blocks[block_id].block_hash
            if key is None:
                continue
            digest, group = _key_parts(key, self.utils)
            b, root = self._named(digest, group)
            cached[block_id] = (group, b, root)
        return attrs.evolve(view, cached=(cached,))

    def _named(self, digest: bytes, group: Any) -> tuple[Any, Any]:
        """The (hash block, request first computed for) a cached block's hash names; (None, None) when
        no request's hash list has it."""
        return self.content.get(digest, (None, None))


@factory(capabilities(), name="vllm-prefix", prepare=load_prefix, event_order=VLLM_ORDER)
def vllm_prefix(config: Config) -> VllmPrefixBackend:
    """vLLM's v1 block manager with prefix caching on, synchronous scheduling."""
    return VllmPrefixBackend(config)


@factory(attrs.evolve(capabilities(), min_window=1), name="vllm-prefix-any-window", prepare=load_prefix)
def vllm_prefix_any_window(config: Config) -> VllmPrefixBackend:
    """``vllm-prefix`` serving a window of one token too: only for the regression trace that pins why
    ``vllm-prefix`` refuses it (tests/regressions/vllm-prefix-window-one.json)."""
    backend = VllmPrefixBackend.__new__(VllmPrefixBackend)
    VllmPrefixBackend._build(backend, config)
    return backend


#: vllm-prefix-eagle's draft slots per step (vLLM's ``num_lookahead_tokens``; an EAGLE drafter's
#: ``num_speculative_tokens``).
LOOKAHEAD = 3


def eagle_capabilities():
    """vllm-prefix's, under the EAGLE hit rule with :data:`LOOKAHEAD` draft slots."""
    base = capabilities()
    # (an EAGLE hit stops a block before the matched prefix: never the whole reused history, so the
    # prompt-end rule never fires; its hits are compared exactly, as before)
    return attrs.evolve(base, semantics=attrs.evolve(base.semantics, eagle=True, lookahead_tokens=LOOKAHEAD),
                        notes=(*base.notes, f"use_eagle, {LOOKAHEAD} lookahead (draft) slots per step"),
                        lost_hit_rules=())


def load_eagle(mixed: bool = False) -> dict[str, Any]:
    """:func:`load_prefix` (``mixed``: :func:`load_mixed`), then check that this release's manager takes ``use_eagle`` and its
    ``allocate_slots`` ``num_lookahead_tokens``."""
    from ..common import parameters as _parameters

    v = load_mixed() if mixed else load_prefix()
    missing = [what for what, has in (
        ("its KVCacheManager has no use_eagle (no EAGLE hit rule: get_computed_blocks keeps the last matched block)",
         "use_eagle" in _parameters(v["KVCacheManager"].__init__)),
        ("its allocate_slots has no num_lookahead_tokens (no draft slots)",
         "num_lookahead_tokens" in _parameters(v["KVCacheManager"].allocate_slots))) if not has]
    if missing:
        raise Unsupported(f"vLLM {release_of(v).version}: " + "; ".join(missing))
    return v


class _Eagle:
    """``use_eagle=True``; a step of ``n`` new tokens asks its last ``min(k, n - 1)`` as
    ``num_lookahead_tokens`` (draft slots, ``k`` = :data:`LOOKAHEAD`) and the rest as scheduled tokens
    (vLLM caches only up to those: ``Semantics.lookahead_tokens``)."""

    eagle = True

    def _drafts(self, history: int, capacity: int) -> int:
        return min(LOOKAHEAD, capacity - history - 1) if capacity > history else 0


class VllmPrefixEagleBackend(_Eagle, VllmPrefixBackend):
    """``vllm-prefix`` with ``use_eagle=True`` and draft slots (:class:`_Eagle`)."""


@factory(eagle_capabilities(), name="vllm-prefix-eagle", prepare=load_eagle, event_order=VLLM_ORDER)
def vllm_prefix_eagle(config: Config) -> VllmPrefixEagleBackend:
    """vLLM's v1 block manager with prefix caching, ``use_eagle`` and draft (lookahead) slots."""
    return VllmPrefixEagleBackend(config)
# ----------------------------------------------------------------------------- mixed block sizes
def capabilities_mixed():
    """:func:`capabilities`, with full attention at 2t or 4t beside SWA layers at t (vLLM's hybrid
    models): every group from one block pool, hashes at t, hits aligned to the lcm."""
    return attrs.evolve(capabilities(), mixed_block_sizes=True, full_attention_block_multiples=(2, 4),
                        semantics=attrs.evolve(semantics(), cache_aligned=True, cache_prompt_tail=True))


class VllmPrefixMixedBackend(VllmPrefixBackend):
    """``vllm-prefix`` with a block size per KV-cache group (``AttentionLayer.tokens_per_block``): the
    config's ``t`` is vLLM's ``hash_block_size`` (it must divide every group's block size) and the
    scheduler's block size the lcm. With block sizes that differ vLLM's sliding-window groups cache only
    the blocks an aligned hit can read (its retention mask: ``Semantics.cache_aligned``; with one
    size every block of a window of two or more tokens). A group of ``k * t`` tokens per block names a block by the hash of
    its last hash block (vLLM 0.32 on; before, by its hash blocks' hashes concatenated, whose last part
    is that hash), so a cached block named by hash block ``j`` is the block ``j // k``
    that holds it (``(j + 1) / k - 1`` for a whole block; a partially filled block that a release caches
    as a partial prefix entry is named by the last hash block it holds, and reads as the block it is)."""

    def __init__(self, config: Config):
        layout = build_layout(config)
        t = layout.tokens_per_block
        if any(size % t for size in layout.block_sizes):
            raise Unsupported(f"vllm-prefix-mixed: block sizes {list(layout.block_sizes)}: the config's t = {t} "
                              "(vLLM's hash block size) must divide each")
        self.factors = tuple(size // t for size in layout.block_sizes)
        super().__init__(config)

    def _named(self, digest: bytes, group: Any) -> tuple[Any, Any]:
        """A block of ``k`` hash blocks is keyed by the hash of its last hash block (vLLM 0.32 on), or by
        its ``k`` hash blocks' hashes concatenated (before): the last of them names it either way."""
        k = self.factors[group] if isinstance(group, int) and group < len(self.factors) else 1
        found = self.content.get(digest)
        if found is None and k > 1 and isinstance(digest, bytes) and len(digest) % k == 0:
            found = self.content.get(digest[-(len(digest) // k):])
        return found if found is not None else (None, None)

    def slots(self) -> SlotMap:
        view = super().slots()
        cached = {}
        for block_id, (group, j, root) in view.cached[0].items():
            k = self.factors[group] if group is not None and group < len(self.factors) else 1
            cached[block_id] = (group, None if j is None else j // k, root)
        return attrs.evolve(view, cached=(cached,))


def load_mixed() -> dict[str, Any]:
    """:func:`load_prefix`, then check that this release's manager takes a ``hash_block_size`` (a block
    size per group with prefix caching; before it, the manager asserts one block size for all groups)."""
    from ..common import parameters as _parameters

    v = load_prefix()
    if "hash_block_size" not in _parameters(v["KVCacheManager"].__init__):
        if release_of(v).one_group:
            raise Unsupported(f"vLLM {release_of(v).version}'s KVCacheManager serves one KV-cache group (its "
                              "constructor asserts len(kv_cache_groups) == 1) and takes no hash_block_size: no "
                              "full-attention group beside the sliding-window one, so no block size per group")
        raise Unsupported(f"vLLM {release_of(v).version}'s KVCacheManager takes no hash_block_size: with prefix "
                          "caching every group has one block size")
    return v


@factory(capabilities_mixed(), name="vllm-prefix-mixed", prepare=load_mixed)
def vllm_prefix_mixed(config: Config) -> VllmPrefixMixedBackend:
    """``vllm-prefix`` with full attention at a larger block size (2t or 4t) than the SWA layers (t)."""
    return VllmPrefixMixedBackend(config)


# ----------------------------------------------------------------------------- EAGLE with mixed block sizes
def capabilities_eagle_mixed():
    """:func:`capabilities_mixed` under the EAGLE hit rule with :data:`LOOKAHEAD` draft slots: the hit is
    aligned to the lcm and popped, in the order the release does it."""
    base = capabilities_mixed()
    return attrs.evolve(base, semantics=attrs.evolve(base.semantics, eagle=True, lookahead_tokens=LOOKAHEAD),
                        notes=(*base.notes, f"use_eagle, {LOOKAHEAD} lookahead (draft) slots per step"),
                        lost_hit_rules=("align-before-eagle-pop",))


class VllmPrefixEagleMixedBackend(_Eagle, VllmPrefixMixedBackend):
    """``vllm-prefix-mixed`` with ``use_eagle=True`` and draft slots (:class:`_Eagle`)."""


def load_eagle_mixed() -> dict[str, Any]:
    """:func:`load_eagle` with :func:`load_mixed`'s check."""
    return load_eagle(mixed=True)


@factory(capabilities_eagle_mixed(), name="vllm-prefix-eagle-mixed", prepare=load_eagle_mixed)
def vllm_prefix_eagle_mixed(config: Config) -> VllmPrefixEagleMixedBackend:
    """``vllm-prefix-mixed`` with ``use_eagle`` and draft (lookahead) slots."""
    return VllmPrefixEagleMixedBackend(config)
