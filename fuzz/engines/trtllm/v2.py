"""TensorRT-LLM KVCacheManagerV2's whole manager from a source folder, on the CPU (``--backend trtllm-v2``).

The adapter drives a manager shaped as upstream's Python KVCacheManagerV2 (facts in
../shared/facts/upstream.md §1.3 and §10): ``KVCacheManager(KVCacheManagerConfig(...))``,
``create_kv_cache(id=...)`` giving a ``_KVCache`` with ``resume(stream) -> bool``,
``resize(capacity, history_length) -> bool`` (False: out of slots, rolled back), ``commit(tokens)``,
``suspend()``, ``close()``, ``get_base_page_indices(life_cycle)`` (-1 where a block holds no page),
``capacity``, ``history_length``, ``status``; the manager's ``get_storage_statistics()`` (per pool
group ``total``, ``free``, ``evictable``) and ``get_life_cycle_pool_group_indices()``.

What is observed, as upstream shows it: the outcome each call returns; per pool group the slots and
the slots in use, where in use is ``total - free - evictable`` (a committed page out of the window is
evictable cache, which upstream's own resume gate counts as available and drops on demand, so it is
compared with the reference's freed slot); per request its status, capacity and history; per life
cycle the blocks holding a page. How the semantics line up with the reference's
(:class:`~swafloor.reference.Semantics`): a step commits first and then resizes at the current history
(``commit_before_allocate``: upstream advances history by commit); a resize's own stale pages held
until it returns (``hold-until-return``); suspend keeps every page (``keep``: GPU memory only).

Set by the adapter, never compared: ``max_util_for_resume = 1.0`` (the resume gate never refuses;
the reference has no gate), the quota (the config's slots, before any raise to the minimum, times
each pool group's slot size, so upstream's own silent raise is what makes the pools) and its
``initial_pool_ratio``, the tokens committed (ids the adapter makes up). Not driven: reused history
(needs token matching), SSM layers, host tiers.

Two ways to build it: :func:`adapter_factory` over any module namespace holding upstream's names
(the tests' fake manager, tests/trtllm_fake_manager.py), and :func:`trtllm_v2`, the registered
factory, which loads the real upstream from ``--trtllm-source PATH`` (or ``$SWAFLOOR_TRTLLM_SOURCE``)
with the CUDA driver stand-in (:mod:`swafloor.fuzz.engines.trtllm.cuda_standin`) where no device is present.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Hashable

from swafloor.reference import BlockTable, Config, RequestState, Semantics, build_layout
from swafloor.reference.config import BelowMinimum, ReleaseOrder, SuspendMode

from .kv_ops import KvCacheOperations
from ...protocol import Capabilities, Part, Unsupported, factory

__all__ = ["CAPABILITIES", "TrtllmV2Backend", "adapter_factory", "trtllm_v2", "trtllm_v2_reference_quota", "SOURCE_ENV"]

SOURCE_ENV = "SWAFLOOR_TRTLLM_SOURCE"
#: Bytes per size unit of the mapping: slot sizes are then multiples of 2 MiB (upstream's pool
#: granularity), so a quota of whole slots makes pools of exactly those slots.
UNIT_BYTES = 1 << 20

SEMANTICS = Semantics(suspend=SuspendMode.KEEP, release_order=ReleaseOrder.HOLD_UNTIL_RETURN)

CAPABILITIES = Capabilities(
    operations={"create", "resume", "resize", "commit", "suspend", "close"},
    observations={"outcome": "exact", "pool_totals": "exact", "pool_used": "exact", "lengths": "exact",
                  "tables": "exact"},
    layer_kinds={"swa", "full"},
    reused_history=False,
    legacy_floor=False,
    commit_before_allocate=True,
    semantics=SEMANTICS,
    notes=("pool_used is total - free - evictable (upstream's committed stale pages are evictable cache)",
           "set by the adapter: max_util_for_resume=1.0, the quota and initial_pool_ratio, committed token ids"),
)

_STATES = {s.name: s for s in RequestState}
#: Managers whose shutdown failed, kept from the garbage collector (see :meth:`TrtllmV2Backend.dispose`).
_UNCOLLECTED: list[Any] = []


def _quota_slots(config: Config, layout: Any) -> tuple[int, ...]:
    """The slots the adapter asks for: the config's own (below the minimum where it bumps, so that
    upstream's silent raise is exercised), else the layout's; at least 1 per pool group."""
    if config.slots is not None and config.below_minimum is BelowMinimum.BUMP:
        return tuple(max(1, n) for n in config.slots)
    return tuple(layout.slots)


class TrtllmV2Backend(KvCacheOperations):
    """One upstream-shaped manager driven through the protocol."""

    NAME = "trtllm-v2"

    def __init__(self, config: Config, v2: Any, stream: Any = 0, *, max_util_for_resume: float = 1.0,
                 pool_bytes: tuple[int, ...] | None = None, host_tier: bool = False):
        """``max_util_for_resume``, ``pool_bytes`` (the GPU quota per pool group, ours; their shares are
        the ``initial_pool_ratio``) and ``host_tier`` (a host tier of the GPU quota's size) are for
        the progress properties (:mod:`.progress`); the campaigns use the defaults."""
        from .mapping import to_trtllm

        if any(lc.kind.value == "ssm" for lc in build_layout(config).life_cycles):
            raise Unsupported("trtllm-v2: SSM layers are not driven")
        self.v2 = v2
        self.stream = stream
        self.max_util_for_resume = max_util_for_resume
        self.host_tier = host_tier
        self.layout = build_layout(config)
        self.tl = to_trtllm(config, unit_bytes=UNIT_BYTES)
        slots = _quota_slots(config, self.layout)
        sizes = [n * size for n, size in zip(slots, self.tl.slot_sizes)]  # bytes per pool group, ours
        if pool_bytes is not None:
            if len(pool_bytes) != len(sizes) or min(pool_bytes) < 1:
                raise ValueError(f"pool_bytes={pool_bytes!r}: one positive count per pool group ({len(sizes)})")
            sizes = list(pool_bytes)
        self.manager, self.group_map = self._build(config, sizes, list(range(len(sizes))))
        order = [self.group_map[g] for g in range(len(sizes))]  # ours of each upstream pool group
        if order != list(range(len(sizes))):  # upstream numbers its pool groups otherwise: ratios in its order
            shutdown = getattr(self.manager, "shutdown", None)
            if callable(shutdown):
                shutdown()
            self.manager, self.group_map = self._build(config, sizes, order)
        self.caches: dict[Hashable, Any] = {}
        self.committed: dict[Hashable, int] = {}

    def _build(self, config: Config, sizes: list[int], order: list[int]) -> tuple[Any, dict[int, int]]:
        """A manager whose pool group ``i`` (upstream's numbering) gets ``sizes[order[i]]`` bytes, and
        the map from upstream's pool groups to ours."""
        from .mapping import layer_configs

        v2 = self.v2
        tiers = [v2.GpuCacheTierConfig(quota=sum(sizes))]
        if self.host_tier:
            tiers.append(v2.HostCacheTierConfig(quota=sum(sizes)))
        manager = v2.KVCacheManager(v2.KVCacheManagerConfig(
            tokens_per_block=config.tokens_per_block,
            cache_tiers=tiers,
            layers=layer_configs(self.tl, v2),
            max_util_for_resume=self.max_util_for_resume,
            initial_pool_ratio=[sizes[g] / sum(sizes) for g in order],
        ))
        theirs = _life_cycle_pool_groups(manager, len(self.tl.life_cycles))
        group_map: dict[int, int] = {}  # upstream pool group -> ours
        for lc, ours in enumerate(self.tl.pool_group_of):
            if group_map.setdefault(int(theirs[lc]), ours) != ours:
                raise AssertionError(f"trtllm-v2: upstream pool groups {theirs} do not match ours {self.tl.pool_group_of}")
        if sorted(group_map) != list(range(len(sizes))):
            raise AssertionError(f"trtllm-v2: upstream pool groups {theirs} are not {len(sizes)} groups numbered from 0")
        return manager, group_map

    def dispose(self) -> None:
        """Close every request still open, then shut the manager down: upstream's ``shutdown()`` needs
        all its requests closed, and a manager collected with requests open fails its own critical
        assertions (which end the process). Called once the run ends; safe to call twice."""
        if self.manager is None:
            return
        manager, caches = self.manager, dict(self.caches)
        self.manager = None
        self.caches.clear()
        try:
            for kv in caches.values():
                if getattr(getattr(kv, "status", None), "name", None) != "CLOSED":
                    kv.close()
            shutdown = getattr(manager, "shutdown", None)
            if callable(shutdown):
                shutdown()
        except Exception:
            # A manager that cannot shut down (its state broken by a failure already reported) is kept
            # alive: collected, upstream's destructors assert critically and end the process.
            _UNCOLLECTED.append((manager, caches))
            raise

    def observe(self) -> dict:
        groups = self.layout.num_pool_groups
        totals, used = [0] * groups, [0] * groups
        for theirs, s in enumerate(_storage_statistics(self.manager)):
            ours = self.group_map.get(theirs)
            if ours is not None:
                totals[ours] += int(s.total)
                used[ours] += int(s.total) - int(s.free) - int(getattr(s, "evictable", 0))
        lengths, tables = {}, {}
        for rid, kv in self.caches.items():
            name = getattr(kv.status, "name", str(kv.status))
            state = _STATES.get(name, name)
            if state is RequestState.CLOSED:
                continue  # a closed request leaves the observation, as it leaves the reference's snapshot
            lengths[rid] = (state, int(kv.capacity), int(kv.history_length))
            tables[rid] = tuple(_table(_page_indices(self.manager, kv, lc)) for lc in range(len(self.tl.life_cycles)))
        return {Part.POOL_TOTALS: tuple(totals), Part.POOL_USED: tuple(used), Part.LENGTHS: lengths,
                Part.TABLES: tables}


def _life_cycle_pool_groups(manager: Any, num_life_cycles: int) -> list[int]:
    """Upstream's pool group of each life cycle. The Python-era upstream manager exposes it only on its
    storage manager (``manager._storage.get_pool_group_index``); a manager with the public
    ``get_life_cycle_pool_group_indices()`` (the tests' fake, later upstreams) is asked that."""
    public = getattr(manager, "get_life_cycle_pool_group_indices", None)
    if callable(public):
        return [int(g) for g in public()]
    storage = manager._storage
    return [int(storage.get_pool_group_index(lc)) for lc in range(num_life_cycles)]


def _storage_statistics(manager: Any) -> list[Any]:
    """Per upstream pool group its GPU ``total``, ``free`` and ``evictable`` slots: the public
    ``get_storage_statistics()`` where the manager has it, else its storage manager's
    ``get_statistics()`` (GPU level by default), which is where the Python-era upstream keeps them."""
    public = getattr(manager, "get_storage_statistics", None)
    if callable(public):
        return list(public())
    return list(manager._storage.get_statistics())


def _page_indices(manager: Any, kv: Any, life_cycle: int) -> list[int]:
    """The slot of each block of ``kv`` for one life cycle, -1 where it holds none.

    Upstream's ``get_base_page_indices`` serves an active request only (with its debug assertions on
    it asserts ``is_active``; a suspended request's base indices are all -1, its pages held, not
    locked). For a request that is not active, the slots come from ``get_aggregated_page_indices``
    (held pages included), with the blocks stale at its history (upstream's own
    ``get_stale_range``) shown as holding none, as an active request's are. A manager without
    ``get_aggregated_page_indices`` (the tests' fake) is asked ``get_base_page_indices`` always."""
    aggregated = getattr(kv, "get_aggregated_page_indices", None)
    if getattr(kv, "is_active", True) or not callable(aggregated):
        return [int(p) for p in kv.get_base_page_indices(life_cycle)]
    pages = [int(p) for p in aggregated(life_cycle)]
    beg, end = manager._life_cycles[life_cycle].get_stale_range(int(kv.history_length), int(kv.tokens_per_block))
    return [-1 if beg <= b < end else p for b, p in enumerate(pages)]


def _table(pages: Any) -> BlockTable:
    pages = [int(p) for p in pages]
    return BlockTable.from_blocks(len(pages), (b for b, p in enumerate(pages) if p != -1))


def adapter_factory(v2: Any, *, name: str = "trtllm-v2", stream: Any = 0,
                    capabilities: Capabilities = CAPABILITIES) -> Callable[[Config], TrtllmV2Backend]:
    """A factory driving managers built from ``v2`` (a namespace holding upstream's names)."""

    @factory(capabilities, name=name)
    def build(config: Config) -> TrtllmV2Backend:
        return TrtllmV2Backend(config, v2, stream)

    return build


_LOADED: dict[str, tuple[Any, Any]] = {}


def _load_real(path: str) -> tuple[Any, Any]:
    """The upstream package from ``path`` and a stream, with the CUDA stand-in where no device is."""
    if path in _LOADED:
        return _LOADED[path]
    from .whole import load_whole  # noqa: PLC0415 - only with a source

    _LOADED[path] = load_whole(path)
    return _LOADED[path]


def _prepare() -> None:
    path = os.environ.get(SOURCE_ENV)
    if path:
        _load_real(path)


@factory(CAPABILITIES, name="trtllm-v2", prepare=_prepare)
def trtllm_v2(config: Config) -> TrtllmV2Backend:
    """The real upstream from ``$SWAFLOOR_TRTLLM_SOURCE`` (``swafloor fuzz --trtllm-source PATH``);
    raises :class:`Unsupported` with the reason when no source is given or it cannot be loaded."""
    path = os.environ.get(SOURCE_ENV)
    if not path:
        raise Unsupported(f"trtllm-v2: needs a source folder (--trtllm-source PATH or ${SOURCE_ENV})")
    from .loader import LoadError  # noqa: PLC0415

    try:
        v2, stream = _load_real(path)
    except LoadError as exc:
        raise Unsupported(f"trtllm-v2: {exc}") from None
    return TrtllmV2Backend(config, v2, stream)


@factory(CAPABILITIES, name="trtllm-v2-reference-quota", prepare=_prepare)
def trtllm_v2_reference_quota(config: Config) -> TrtllmV2Backend:
    """``trtllm-v2`` on configs without slots of their own only (the others are Unsupported): the quota is
    then the reference's own minimum, so a source whose minimum is lower (the pre-fix rule) does not
    diverge at ``pool_totals`` right after building, and the steps after it are compared. For a
    source whose first divergence, on every config with a quota of its own, is its minimum."""
    if config.slots is not None:
        raise Unsupported("trtllm-v2-reference-quota: configs with slots of their own are left to trtllm-v2")
    return trtllm_v2(config)
