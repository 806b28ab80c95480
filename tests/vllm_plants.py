"""Bugs planted in vLLM's own ``BlockPool`` (monkeypatched, in the vLLM venv), for tests/test_vllm.py.

Each plant fires once per pool (so a Hypothesis example replays the same), at the first call where it
can, and keeps vLLM's free-block *count* right, so
that only physical identity (block ids, ref counts, the free queue's links) can show it:

- ``alias``: ``get_new_blocks`` hands out a block another request still holds (its ref count raised)
  instead of the block it popped, which goes back to the queue.
- ``leak``: ``free_blocks`` drops one block: its ref count falls to 0 but it never rejoins the queue.
- ``double-free``: when a request is freed (finished or preempted), ``free_blocks`` frees one of its
  blocks a second time (vLLM's own ``free_blocks`` again: its ref count falls below zero; the queue
  and its count are untouched). Fired only there, not in the free that precedes an allocation, where
  vLLM's own assert on a reused block's ref count would see it first.
- ``requeue``: ``free_blocks`` puts one block it freed on the queue a second time (the linked list
  is then corrupt).
- ``eagle-drop-skipped`` (for ``vllm-prefix-eagle-mixed``, not a ``BlockPool`` plant): every KV-cache
  group's ``find_longest_cache_hit`` is called with ``drop_eagle_block=False``, so no group gives the
  matched block back to the drafter and the hit can run one block past the longest valid EAGLE hit
  (the bug of vLLM's first EAGLE prefix caching). It fires at a lookup whose hit it lengthens; the
  harness (``Capabilities.lost_hits``) must call that a ``hit`` divergence, at that step.
- ``hit-dropped`` (for ``vllm-prefix-eagle-mixed``): the hybrid coordinator's ``find_longest_cache_hit``
  returns no hit (0 tokens, no blocks) wherever vLLM found one: a shorter hit that is always valid, on
  every lookup, and one no declared lost-hit rule yields; it must be a ``hit`` divergence at the first
  lookup it shortens.
- ``lookahead-not-handed`` (for ``dataplane:vllm-prefix-eagle``, issue 34): ``KVCacheManager.allocate_slots``
  allocates as vLLM does, but where the last block it allocates serves only the lookahead (draft) slots
  the block list it returns (what the scheduler hands the worker) leaves that block out: the manager holds
  it, every count and table is vLLM's, and the drafter writes its KV through no block of its table. It
  fires at the schedule; the data plane must see the draft write when that step executes.
- ``hashes-kept-after-drop`` (for ``dataplane:vllm-prefix``, issue 34): vLLM's scheduler frees a request
  newly scheduled before its first step runs (vLLM 0.33.0 never does: it preempts only running requests),
  the hashes ``allocate_slots`` registered for the step (its KV-connector load included) kept on the freed
  blocks, as vLLM's free keeps them: the data plane's ``planted_order`` with ``first_step_drops``. It fires
  at the close that drops such a step; the data plane must see the later hit's read of the KV never written
  (seen later, at the operation where the reading step executes: no count differs before).
- ``worker-mask-one-late`` (for ``dataplane:vllm-prefix``, issue 34): the worker's mask starts one token
  before the reference's live window (the data plane's ``worker_hooks``, ``ExecutionHooks.mask_start``):
  it fires where a query's mask takes a position before its window, and must be seen there.
- ``hit-past-history`` (for ``vllm-prefix-eagle-mixed``): ``KVCacheManager.get_computed_blocks`` reports a
  hit of the whole prompt (the reused history plus its last token: one past what any lookup may reuse)
  wherever vLLM found one, its blocks unchanged; the adapter must report that raw value, a ``hit``
  divergence at that step whose backend value is the planted one.

``python -m tests.vllm_plants NAME [EXAMPLES [BACKEND]]`` runs the ci profile of ``vllm`` (or BACKEND,
e.g. ``dataplane:vllm``) with the plant,
replays the shrunk trace step by step with the plant fresh, and prints one JSON line: the divergence
(field, step index) and the step index at which the plant fired.
"""

from __future__ import annotations

import functools
import json
import sys

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.lockstep import Lockstep
from swafloor.fuzz.runner import run_campaign

PLANTS = ("alias", "leak", "double-free", "requeue", "eagle-drop-skipped", "hit-dropped", "hit-past-history",
          "lookahead-not-handed", "worker-mask-one-late", "hashes-kept-after-drop")


class Plant:
    def __init__(self, name: str):
        from vllm.v1.core.block_pool import BlockPool
        from vllm.v1.core.kv_cache_manager import KVCacheManager

        self.manager_class, self.manager_free = KVCacheManager, KVCacheManager.free

        self.name = name
        self.fired = False
        self.planted: list[int] = []  # hit-past-history: the hits it reported
        self.pool_class = BlockPool
        self.originals = {"get_new_blocks": BlockPool.get_new_blocks, "free_blocks": BlockPool.free_blocks}

    def install(self) -> None:
        plant = self
        if self.name == "eagle-drop-skipped":
            self._skip_the_eagle_drop()
            return
        if self.name == "hit-dropped":
            self._drop_every_hit()
            return
        if self.name == "hit-past-history":
            self._hit_past_history()
            return
        if self.name == "lookahead-not-handed":
            self._withhold_the_lookahead_block()
            return
        if self.name == "worker-mask-one-late":
            self._mask_one_late()
            return
        if self.name == "hashes-kept-after-drop":
            self._drop_first_steps()
            return
        get_new_blocks, free_blocks = self.originals["get_new_blocks"], self.originals["free_blocks"]

        def aliasing_get_new_blocks(pool, num_blocks):
            blocks = get_new_blocks(pool, num_blocks)
            if _fired(pool) or not blocks:
                return blocks
            taken = {b.block_id for b in blocks}
            held = [b for b in pool.blocks if b.ref_cnt > 0 and not b.is_null and b.block_id not in taken]
            if not held:
                return blocks
            popped, victim = blocks[0], held[0]
            popped.ref_cnt -= 1
            pool.free_block_queue.prepend_n([popped])
            pool.free_block_queue.num_free_blocks -= 1  # the count stays what vLLM expects
            victim.ref_cnt += 1
            plant.fire(pool)
            return [victim, *blocks[1:]]

        def leaking_free_blocks(pool, ordered_blocks):
            blocks = list(ordered_blocks)
            real = [b for b in blocks if not b.is_null and b.ref_cnt == 1]
            if _fired(pool) or not real:
                return free_blocks(pool, blocks)
            dropped = real[0]
            free_blocks(pool, [b for b in blocks if b is not dropped])
            dropped.ref_cnt -= 1  # released, but never queued
            pool.free_block_queue.num_free_blocks += 1  # the count stays what vLLM expects
            plant.fire(pool)

        def double_freeing_free_blocks(pool, ordered_blocks):
            blocks = list(ordered_blocks)
            real = [b for b in blocks if not b.is_null and b.ref_cnt == 1]
            free_blocks(pool, blocks)
            if _fired(pool) or not real or not getattr(pool, "_swafloor_freeing_request", False):
                return
            free_blocks(pool, [real[0]])  # the same block freed again
            plant.fire(pool)

        def requeueing_free_blocks(pool, ordered_blocks):
            blocks = list(ordered_blocks)
            real = [b for b in blocks if not b.is_null and b.ref_cnt == 1]
            free_blocks(pool, blocks)
            if _fired(pool) or not real:
                return
            pool.free_block_queue.append_n([real[0]])  # queued a second time
            pool.free_block_queue.num_free_blocks -= 1  # the count stays what vLLM expects
            plant.fire(pool)

        patch = {
            "alias": ("get_new_blocks", aliasing_get_new_blocks),
            "leak": ("free_blocks", leaking_free_blocks),
            "double-free": ("free_blocks", double_freeing_free_blocks),
            "requeue": ("free_blocks", requeueing_free_blocks),
        }[self.name]
        setattr(self.pool_class, *patch)
        if self.name == "double-free":  # mark the frees of a whole request (KVCacheManager.free)
            manager_class, manager_free = self.manager_class, self.manager_free

            def freeing_request(manager, request):
                pool = manager.block_pool
                pool._swafloor_freeing_request = True
                try:
                    return manager_free(manager, request)
                finally:
                    pool._swafloor_freeing_request = False

            manager_class.free = freeing_request

    def _skip_the_eagle_drop(self) -> None:
        from vllm.v1.core import kv_cache_coordinator

        plant, coordinator = self, kv_cache_coordinator.HybridKVCacheCoordinator
        original = coordinator.find_longest_cache_hit
        self.originals_coordinator = (coordinator, original)

        def without_the_drop(manager, block_hashes, max_cache_hit_length):
            groups = manager.attention_groups
            dropped = original(manager, block_hashes, max_cache_hit_length)
            manager.attention_groups = [g._replace(use_eagle=False) for g in groups]
            try:
                kept = original(manager, block_hashes, max_cache_hit_length)
            finally:
                manager.attention_groups = groups
            if kept[1] != dropped[1]:
                plant.fired = True
            return kept

        coordinator.find_longest_cache_hit = without_the_drop

    def _drop_every_hit(self) -> None:
        from vllm.v1.core import kv_cache_coordinator

        plant, coordinator = self, kv_cache_coordinator.HybridKVCacheCoordinator
        original = coordinator.find_longest_cache_hit
        self.originals_coordinator = (coordinator, original)

        def no_hit(manager, block_hashes, max_cache_hit_length):
            found = original(manager, block_hashes, max_cache_hit_length)
            if found[1] <= 0:
                return found
            plant.fired = True
            return (tuple([] for _ in found[0]), 0, *(0 for _ in found[2:]))

        coordinator.find_longest_cache_hit = no_hit

    def _hit_past_history(self) -> None:
        plant, manager_class = self, self.manager_class
        original = manager_class.get_computed_blocks
        self.originals_manager = (manager_class, "get_computed_blocks", original)

        def past_history(manager, request):
            found = original(manager, request)
            if found[1] <= 0:
                return found
            plant.fired = True
            plant.planted.append(request.num_tokens)  # the whole prompt: one past the reusable tokens
            return (found[0], request.num_tokens, *found[2:])

        manager_class.get_computed_blocks = past_history

    def _withhold_the_lookahead_block(self) -> None:
        from vllm.v1.core.kv_cache_manager import KVCacheBlocks
        from vllm.v1.request import RequestStatus

        plant, manager_class = self, self.manager_class
        original = manager_class.allocate_slots
        self.originals_manager = (manager_class, "allocate_slots", original)

        @functools.wraps(original)  # (its signature is what the adapter inspects)
        def withholding(manager, request, num_new_tokens, *args, **kwargs):
            got = original(manager, request, num_new_tokens, *args, **kwargs)
            lookahead = kwargs.get("num_lookahead_tokens", 0)
            if got is None or not lookahead or request.status != RequestStatus.RUNNING:
                return got  # (a newly scheduled request is handed every block it holds)
            end = request.num_computed_tokens + num_new_tokens  # the scheduled tokens' end
            groups, changed = [], False
            held_per_group = manager.coordinator.get_blocks(request.request_id)
            for blocks, held, single in zip(got.blocks, held_per_group, manager.coordinator.single_type_managers):
                size = single.block_size
                if blocks and (len(held) - 1) * size >= end:  # its last block holds only lookahead slots
                    blocks, changed = list(blocks[:-1]), True
                groups.append(list(blocks))
            if not changed:
                return got
            plant.fired = True
            return KVCacheBlocks(tuple(groups))

        manager_class.allocate_slots = withholding

    def _mask_one_late(self) -> None:
        from swafloor.fuzz.engines.dataplane import ordered
        from swafloor.reference import lifecycle
        from swafloor.reference.hooks import ExecutionHooks

        plant = self
        self.originals_hooks = ordered.worker_hooks

        def one_late(h, window):
            start = lifecycle.window_start(h, window)
            if start - 1 >= 0:
                plant.fired = True  # the mask takes a position before the window
            return start - 1

        ordered.worker_hooks = ExecutionHooks(mask_start=one_late)

    def _drop_first_steps(self) -> None:
        import attrs

        from swafloor.fuzz.engines.dataplane import ordered
        from swafloor.fuzz.engines.vllm.order import VLLM_ORDER

        self.originals_order = ordered.planted_order
        ordered.planted_order = attrs.evolve(VLLM_ORDER, first_step_drops=True)

    def uninstall(self) -> None:
        for attr, original in self.originals.items():
            setattr(self.pool_class, attr, original)
        self.manager_class.free = self.manager_free
        if hasattr(self, "originals_coordinator"):
            coordinator, original = self.originals_coordinator
            coordinator.find_longest_cache_hit = original
        if hasattr(self, "originals_manager"):
            owner, attr, original = self.originals_manager
            setattr(owner, attr, original)
        if hasattr(self, "originals_hooks"):
            from swafloor.fuzz.engines.dataplane import ordered

            ordered.worker_hooks = self.originals_hooks
        if hasattr(self, "originals_order"):
            from swafloor.fuzz.engines.dataplane import ordered

            ordered.planted_order = self.originals_order

    def fire(self, pool) -> None:
        pool._swafloor_plant_fired = True
        self.fired = True

    def reset(self) -> None:
        self.fired = False
        self.planted = []


def _fired(pool) -> bool:
    return getattr(pool, "_swafloor_plant_fired", False)


#: Divergence classes vLLM itself shows on ``dataplane:vllm-prefix`` (with verdicts in tests/regressions/dataplane-vllm/):
#: a plant's campaign on a data plane runs with them known, so that the plant's own class is found. None: the ci
#: profile meets none on the pinned release (docs/fuzzing-engines.md).
NATIVE_DATAPLANE_CLASSES: frozenset[str] = frozenset()


def run(name: str, examples: int, name_of_backend: str) -> dict:
    plant = Plant(name)
    plant.install()
    known = NATIVE_DATAPLANE_CLASSES if name_of_backend.startswith("dataplane:") else frozenset()
    try:
        result = run_campaign(name_of_backend, profile="ci", examples=examples, out_dir=None, known_classes=known)
        row: dict = {"plant": name, "backend": name_of_backend, "examples": examples,
                     "result": "pass" if result.divergence is None else "divergence"}
        if result.divergence is None:
            return row
        d = result.divergence
        row.update(field=d.field, step_index=d.step_index, reason=d.reason, steps=len(result.trace.steps),
                   first_failure_example=result.first_failure_example)
        # Replay the shrunk trace with the plant fresh: the step at which it fires is where it must be seen.
        plant.reset()
        backend, against = resolve(name_of_backend), resolve("reference")
        lock = Lockstep(result.trace.config, backend.factory, against.factory, backend.capabilities)
        fired_at = seen_at = None
        for i, step in enumerate(result.trace.steps):
            found, _ = lock.apply(step)
            if plant.fired and fired_at is None:
                fired_at = i
            if found is not None:
                seen_at = i
                row["replay_field"] = found.field
                row["replay_values"] = [found.reference, found.backend]
                row["replay_message"] = getattr(found.backend, "message", None) or ""
                break
        plane = getattr(lock, "backend", None)
        if hasattr(plane, "executed_at") and seen_at is not None:  # the data plane in an engine's order
            message = row["replay_message"]
            number = int(message.split("step ", 1)[1].split()[0].rstrip(",)")) if "step " in message else None
            row.update(step=number, scheduled_at=plane.scheduled_at.get(number), executed_at=plane.executed_at.get(number),
                       dropped=plane.dropped)
            firsts = [op for op, _, first in plane.dropped if first]
            if name == "hashes-kept-after-drop" and firsts:  # it fires where a first step is dropped
                fired_at = firsts[0]
        row.update(fired_at=fired_at, seen_at=seen_at, planted=plant.planted)
        return row
    finally:
        plant.uninstall()


def main(argv: list[str]) -> int:
    examples = int(argv[0])
    for spec in argv[1:]:
        name, _, name_of_backend = spec.partition("@")
        print(json.dumps(run(name, examples, name_of_backend or "vllm"), default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
