"""The ``lmdeploy`` backend: LMDeploy's PyTorch engine's block managers (``WindowBlockManager`` for a
sliding window, ``DefaultBlockManager`` for full attention; ``lmdeploy/pytorch/paging/block_manager/``)
driven on a CPU through the protocol, with physical identity (block ids) compared.

**Restricted domain.** SWA and full attention layers, no sink tokens (LMDeploy has none), each life
cycle its own pool (LMDeploy builds one block manager per engine, with one ``window_size``: a config
with several life cycles is served by one block manager each, a step allocating on all of them or on
none), no reused history (LMDeploy's prefix cache, the block trie, is not driven), no SSM state. The
step's gate is the block manager's own ``can_allocate`` (which counts the blocks the window drops as
available); the scheduler's own gate (``try_make_capacity_for``/``evict_for_seq``: free blocks against
``num_required_blocks``, the dropped ones not counted) is not driven: the scheduler's module needs torch
and the whole engine (docs/lmdeploy.md).

LMDeploy is never a dependency of swafloor: it runs in its own pinned venv (``scripts/lmdeploy-venv``)
and its block managers are loaded alone (:mod:`.compat`), with a stand-in for ``SchedulerSequence``.

- ``create(r)``: one stand-in sequence per life cycle (its own ``LogicalTokenBlocks``). No reused history.
- ``resize(r, c, h)``: the sequence shows ``h`` history tokens and ``c - h`` tokens to compute; if every
  block manager's ``can_allocate`` says yes, each one's ``allocate`` (the window manager drops the
  blocks before its window, reuses some for the new blocks and frees the rest, all inside that call),
  else out of blocks with nothing changed. As the release's decode schedule does
  (:func:`.compat.allocates_every_step`, read from its scheduler): where it calls the block manager
  only for a sequence that needs a new block (0.2.5 to 0.4.1, 0.12.0 on), a step for which every block
  manager's own ``num_required_blocks`` is 0 calls nothing (the blocks before the window stay held:
  ``stale_freed_on_growth``); where it calls ``allocate`` for every running sequence at every step
  (0.4.2 to 0.11.1), every step calls them. A smaller capacity calls nothing. An exception raised by LMDeploy (``MemoryError`` from its
  allocator after ``can_allocate`` said yes) is a divergence with its input.
- ``commit(r, n)``: history advances (the sequence's; LMDeploy frees nothing).
- ``suspend(r)``: the scheduler's eviction: ``free`` on every block manager, and the sequence
  recomputes from token 0 (its ``num_ignored_history`` back to 0, as a sequence reset to step 0 has).
- ``close(r)``: ``free`` on every block manager.

Observations are read from LMDeploy's objects: pool usage (``get_num_free_gpu_blocks``), tables (the
block index of the sequence's first logical block is ``num_ignored_history // block_size``, the
manager's own count; in releases whose window manager keeps no such count, 0.2.x, the logical blocks
are the last ones of the sequence's capacity, as that manager drops from the front and appends at the
back: the first is ``ceil(capacity / t) - len(logical_blocks)``), physical identity (the logical blocks' physical ids through the allocator's map,
its GPU free list, the logical blocks' reference counts). Pool totals and lengths are the adapter's.
"""

from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from swafloor.reference import Config, LifeCycleKind, Outcome, RequestError, RequestState, Semantics, SlotMap, build_layout

from ...protocol import Capabilities, Part, Unsupported, factory
from ..common import engine_table_capabilities, open_request
from . import compat

__all__ = ["LmdeployBackend", "lmdeploy", "capabilities", "semantics", "import_lmdeploy"]


def import_lmdeploy() -> dict[str, Any]:
    """LMDeploy's block managers, loaded once (:func:`.compat.load`)."""
    return compat.load()


def _allocates_every_step() -> bool:
    """Whether the LMDeploy importable here calls ``allocate`` at every decode step
    (:func:`.compat.allocates_every_step`); where none is importable, the pinned release's answer (no)."""
    try:
        return bool(compat.load()["allocates_every_step"])
    except Unsupported:
        return False


def semantics() -> Semantics:
    """The reference semantics LMDeploy's window block manager has, as its release's decode schedule calls it."""
    return Semantics(
        # At a step of history h the window manager keeps the blocks from the one holding token h - W:
        # W history tokens plus the one computed, W + 1 in all: the reference's release on history h - 1.
        in_flight_tokens=1,
        free_stale="at-allocate",
        refused_keeps_stale=True,  # blocks are dropped inside allocate_msg only, when it succeeds
        # ... which the decode schedule calls only for a sequence needing a new block (0.2.5-0.4.1, 0.12.0 on)
        stale_freed_on_growth=not _allocates_every_step(),
        suspend="recompute",  # the scheduler's eviction frees every block; the sequence is recomputed
        first_resume_copy=False,
    )


def capabilities() -> Capabilities:
    return engine_table_capabilities(
        shared_pool_groups=False,  # one block manager per life cycle
        reused_history=False,  # LMDeploy's prefix cache (the block trie) is not driven
        semantics=semantics(),
        layer_kinds=[LifeCycleKind.SWA, LifeCycleKind.FULL],
        notes=("gate: the block manager's can_allocate (the scheduler's gate is not driven)",),
    )


class _Request:
    def __init__(self, sequences: list[compat.Sequence]):
        self.sequences = sequences
        self.state = RequestState.SUSPENDED
        self.history = 0
        self.allocated = 0


class LmdeployBackend:
    """LMDeploy's block managers behind the protocol (see the module docstring)."""

    def __init__(self, config: Config):
        parts = import_lmdeploy()
        layout = build_layout(config)
        lcs = layout.life_cycles
        if any(lc.kind is LifeCycleKind.SSM for lc in lcs):
            raise Unsupported("LMDeploy's block managers keep no SSM state (its state manager is not driven)")
        if any(lc.sink_blocks for lc in lcs):
            raise Unsupported("LMDeploy keeps no sink tokens")
        if len(set(layout.pool_group_of)) != len(lcs):
            raise Unsupported("LMDeploy's block manager serves one window: each life cycle gets its own")
        if any(lc.tokens_per_block not in (None, layout.tokens_per_block) for lc in lcs):
            raise Unsupported("LMDeploy has one block size")
        self.t = layout.tokens_per_block
        self.layout = layout
        self.managers = []
        for i, lc in enumerate(lcs):
            blocks = layout.slots[layout.pool_group_of[i]]
            if lc.kind is LifeCycleKind.SWA:
                self.managers.append(compat.build(parts["WindowBlockManager"], blocks, window_size=lc.window))
            else:
                self.managers.append(compat.build(parts["DefaultBlockManager"], blocks))
        self._blocks = parts["LogicalTokenBlocks"]
        self._counts_dropped = parts["counts_dropped"]
        self._every_step = parts["allocates_every_step"]
        self.requests: dict[Hashable, _Request] = {}

    # ------------------------------------------------------------------ helpers
    def _get(self, request_id: Hashable, *states: RequestState) -> _Request:
        return open_request(self.requests, request_id, states)

    def _free(self, req: _Request) -> None:
        for manager, seq in zip(self.managers, req.sequences):
            manager.free(seq)
        req.allocated = 0

    # ------------------------------------------------------------------ operations
    def create(self, request_id: Hashable, reused_history: int = 0) -> None:
        if request_id in self.requests:
            raise RequestError(request_id, "request_id", request_id, "already exists")
        if reused_history:
            raise Unsupported("LMDeploy's reuse is its prefix cache (the block trie, not driven)")
        self.requests[request_id] = _Request([compat.Sequence(self.t, self._blocks()) for _ in self.managers])

    def resume(self, request_id: Hashable) -> Outcome:
        req = self._get(request_id, RequestState.SUSPENDED)
        req.state = RequestState.ACTIVE  # history and allocation are 0: nothing to allocate
        return Outcome(True)

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        req = self._get(request_id, RequestState.ACTIVE)
        req.history = max(req.history, history)
        if capacity < req.allocated:  # LMDeploy never shrinks a sequence's blocks
            return Outcome(True)
        for seq in req.sequences:
            seq.history, seq.capacity = req.history, capacity
        if not self._every_step and not any(m.num_required_blocks(seq) > 0 for m, seq in zip(self.managers, req.sequences)):
            # the release's decode schedule calls nothing for a sequence that needs no new block
            # (compat.allocates_every_step): the blocks before the window stay held
            req.allocated = capacity
            return Outcome(True)
        if not all(m.can_allocate(seq) for m, seq in zip(self.managers, req.sequences)):
            for seq in req.sequences:
                seq.capacity = req.allocated
            return Outcome(False)
        for manager, seq in zip(self.managers, req.sequences):
            manager.allocate(seq)
        req.allocated = capacity
        return Outcome(True)

    def commit(self, request_id: Hashable, tokens: int) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        req.history += tokens
        for seq in req.sequences:
            seq.history = req.history

    def suspend(self, request_id: Hashable) -> None:
        req = self._get(request_id, RequestState.ACTIVE)
        self._free(req)
        req.history = 0
        for seq in req.sequences:
            seq.history = seq.capacity = seq.num_ignored_history = 0
        req.state = RequestState.SUSPENDED

    def close(self, request_id: Hashable) -> None:
        req = self._get(request_id)
        self._free(req)
        req.state = RequestState.CLOSED

    # ------------------------------------------------------------------ observation
    def _held(self, req: _Request) -> list[dict[int, int]]:
        """Per life cycle ``{block index: physical block id}`` from LMDeploy's sequence and allocator."""
        out: list[dict[int, int]] = []
        for manager, seq in zip(self.managers, req.sequences):
            logical = np.asarray(seq.logical_blocks.get_real_blocks())
            if self._counts_dropped:
                first = seq.num_ignored_history // self.t
            else:
                first = -(-req.allocated // self.t) - len(logical)
            physical = manager.allocator.get_physical_blocks(logical).tolist() if len(logical) else []
            out.append({first + i: int(p) for i, p in enumerate(physical)})
        return out

    def slots(self, held: dict[Hashable, tuple[dict[int, int], ...]] | None = None) -> SlotMap:
        if held is None:
            held = {rid: tuple(self._held(r)) for rid, r in self.requests.items() if r.state is not RequestState.CLOSED}
        groups = self.layout.num_pool_groups
        free: list[tuple[tuple[int, int], ...]] = [()] * groups
        refs: list[dict[int, int]] = [{} for _ in range(groups)]
        for i, manager in enumerate(self.managers):
            g = self.layout.pool_group_of[i]
            gpu = manager.allocator.get_phy_allocator("gpu")
            used = gpu._num_blocks - gpu._free_count  # LMDeploy's free list: the ids after the used ones
            free[g] = tuple((int(b), int(b) + 1) for b in gpu._free_blocks[used:].tolist())
            counts = refs[g]
            for r in self.requests.values():
                if r.state is RequestState.CLOSED:
                    continue
                logical = np.asarray(r.sequences[i].logical_blocks.get_real_blocks())
                if len(logical):
                    phys = manager.allocator.get_physical_blocks(logical).tolist()
                    for p, c in zip(phys, manager.allocator.get_ref_count(logical).tolist()):
                        counts[int(p)] = int(c)
        return SlotMap(held, tuple(free), tuple(refs))

    def observe(self) -> dict[Part, Any]:
        totals = tuple(self.layout.slots)
        used = [0] * self.layout.num_pool_groups
        for i, m in enumerate(self.managers):
            used[self.layout.pool_group_of[i]] = m.num_gpu_blocks - m.get_num_free_gpu_blocks()
        lengths, tables, all_held = {}, {}, {}
        for rid, req in self.requests.items():
            if req.state is RequestState.CLOSED:
                continue
            lengths[rid] = (req.state, req.allocated, req.history)
            held = all_held[rid] = tuple(self._held(req))
            blocks = -(-req.allocated // self.t)
            tables[rid] = tuple(tuple(b if b in h else None for b in range(blocks)) for h in held)
        return {Part.POOL_TOTALS: totals, Part.POOL_USED: tuple(used), Part.LENGTHS: lengths, Part.TABLES: tables,
                Part.SLOTS: self.slots(all_held)}


@factory(capabilities(), name="lmdeploy", prepare=import_lmdeploy)
def lmdeploy(config: Config) -> LmdeployBackend:
    """LMDeploy's window block manager (and its default one for full attention)."""
    return LmdeployBackend(config)
