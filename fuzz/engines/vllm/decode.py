"""vLLM v1's sliding-window block manager driven through decode steps, for ``swafloor bench reference
--against vllm``: the reference's speed measured beside the engine it checks, in one process.

One ``SlidingWindowManager`` over one ``BlockPool`` (prefix caching off; block 0 is vLLM's null block,
so the pool has ``slots + 1`` blocks), driven in vLLM's own order for a synchronous decode step:
free the blocks that fell out of the window at the computed tokens, count the blocks the step
needs, check them against the free blocks, allocate. vLLM is imported only when this runs (it lives in
its own venv, made by ``scripts/vllm-venv``); nothing here restates a swafloor formula.
"""

from __future__ import annotations

import time

__all__ = ["available", "decode_rate", "timed_rounds"]


def available() -> str | None:
    """None when vLLM's block manager imports here, else why not (one line)."""
    try:
        import vllm.v1.core.single_type_kv_cache_manager  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure to import means "not here"
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


def decode_rate(window: int, t: int, requests: int, slots: int, seconds: float, start_history: int) -> dict:
    """Round-robin decode steps on ``requests`` requests (warmed up by decoding from history 0 to
    ``start_history``, untimed), until ``seconds`` pass; steps per second."""
    import torch
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.single_type_kv_cache_manager import SlidingWindowManager
    from vllm.v1.kv_cache_interface import SlidingWindowSpec

    spec = SlidingWindowSpec(block_size=t, num_kv_heads=1, head_size=1, dtype=torch.float16, sliding_window=window)
    pool = BlockPool(num_gpu_blocks=slots + 1, enable_caching=False, hash_block_size=t)
    manager = SlidingWindowManager(
        spec, block_pool=pool, enable_caching=False, kv_cache_group_id=0, scheduler_block_size=t
    )
    ids = [f"r{i}" for i in range(requests)]
    computed = dict.fromkeys(ids, 0)

    def step(rid: str) -> None:
        done = computed[rid]
        manager.remove_skipped_blocks(rid, done)
        need = manager.get_num_blocks_to_allocate(rid, done + 1, [], done, done, done + 1)
        if need > pool.get_num_free_blocks():
            raise AssertionError(f"vLLM: {rid} ran out of blocks at history {done}")
        manager.allocate_new_blocks(rid, done + 1, done + 1)
        computed[rid] = done + 1

    return timed_rounds(step, ids, seconds, start_history, lambda: max(computed.values()))


def timed_rounds(step, ids: list[str], seconds: float, warm_up: int, final_history) -> dict:
    """``warm_up`` untimed rounds of ``step(rid)`` over ``ids``, then timed rounds until ``seconds``
    pass (at least one); steps per second. Shared by both sides of the comparison."""
    for _ in range(warm_up):
        for rid in ids:
            step(rid)
    steps, start = 0, time.perf_counter()
    deadline = start + seconds
    while steps == 0 or time.perf_counter() < deadline:
        for rid in ids:
            step(rid)
        steps += len(ids)
    elapsed = time.perf_counter() - start
    return {"steps": steps, "seconds": round(elapsed, 3), "steps_per_second": round(steps / elapsed),
            "final_history": final_history()}
