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

import json
import sys

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.lockstep import Lockstep
from swafloor.fuzz.runner import run_campaign

PLANTS = ("alias", "leak", "double-free", "requeue", "eagle-drop-skipped", "hit-dropped", "hit-past-history")


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

    def fire(self, pool) -> None:
        pool._swafloor_plant_fired = True
        self.fired = True

    def reset(self) -> None:
        self.fired = False
        self.planted = []


def _fired(pool) -> bool:
    return getattr(pool, "_swafloor_plant_fired", False)


def run(name: str, examples: int, name_of_backend: str) -> dict:
    plant = Plant(name)
    plant.install()
    try:
        result = run_campaign(name_of_backend, profile="ci", examples=examples, out_dir=None)
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
                break
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
