"""vLLM's order of a step's events, as the data plane drives it (:class:`~swafloor.fuzz.protocol.EventOrder`,
:mod:`swafloor.fuzz.engines.dataplane.ordered`).

Read from vLLM 0.33.0's v1 scheduler (``vllm/v1/core/sched/scheduler.py``) and block manager
(``vllm/v1/core/kv_cache_manager.py``):

- the scheduler calls ``allocate_slots`` when it schedules a step, and ``allocate_slots`` itself registers
  the hashes of the blocks the step's tokens fill (``cache_blocks`` up to ``min(computed + new tokens,
  num_tokens)``): names are given at schedule time, before the worker has written the KV;
- the worker receives the block ids in the scheduler's output (a newly scheduled request every block it
  holds, ``get_blocks``; a running request the new blocks ``allocate_slots`` returned) and appends them to
  its own block table; the step's KV is written when the model runs it; the scheduler counts the tokens
  computed when the output returns (``update_from_output``);
- a request the scheduler preempts in the same round after scheduling it (the priority policy:
  ``scheduled_running_reqs.remove(preempted_req)``, then ``_preempt_request`` frees its blocks) loses the
  step: it is never run, while the hashes ``allocate_slots`` registered stay on the freed blocks. The block
  manager sees exactly ``allocate_slots`` then ``free``, which is what a protocol ``close`` after a
  ``resize`` drives (the adapter drives no preemption: ``vllm-prefix`` serves no ``suspend``): so a close
  drops the request's step in flight (``close_drops``). Only a running request's step: the scheduler
  schedules waiting requests after the running ones and preempts only in the running loop, so a request
  newly scheduled (its first step since it started) runs that step before any preemption can reach it
  (``first_step_drops=False``: a close executes it first);
- with synchronous scheduling every step of a round runs before the next round is scheduled; the
  requests of one round are in flight together (:data:`STEPS_IN_FLIGHT` steps at most, here).
"""

from __future__ import annotations

from ...protocol import EventOrder

__all__ = ["VLLM_ORDER", "STEPS_IN_FLIGHT"]

#: The most steps scheduled and not yet run (one round of requests).
STEPS_IN_FLIGHT = 4

VLLM_ORDER = EventOrder(
    steps_in_flight=STEPS_IN_FLIGHT,
    close_drops=True,
    suspend_drops=True,
    first_step_drops=False,
    why="allocate_slots registers hashes at schedule (cache_blocks); the model runner writes KV when the step "
        "runs; a request preempted in the round that scheduled it is freed without its step running",
)
