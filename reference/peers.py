"""How peer systems size a sliding-window life cycle, written on the arithmetic kernel.

These are the published sizing rules of other KV-cache managers (see the project's upstream facts),
kept here so that proofs compare them with :func:`~.floors.swa_floor` on ints and on Z3 terms alike.
``t`` is tokens per block, ``window`` the window ``W`` in tokens.
"""

from __future__ import annotations

from typing import Any

from .arith import cdiv, fdiv, imax, imin, ite

__all__ = [
    "upstream_window_term",
    "upstream_swa_floor",
    "vllm_blocks_per_request",
    "trtllm_cpp_blocks",
    "sglang_request_pages",
    "vllm_full_sequence_blocks",
    "vllm_first_step_blocks",
    "vllm_admission_threshold",
    "vllm_admission_blocks",
    "sglang_swa_budget_tokens",
    "sglang_admission_blocks",
    "sglang_swa_kv_tokens",
    "sglang_prefill_budget_parts",
    "sglang_prefill_budget_blocks",
    "sglang_min_swa_pages",
    "sglang_whole_run_blocks",
    "sglang_window_headroom_tokens",
    "sglang_window_headroom_parts",
    "sglang_window_headroom_blocks",
    "TRTLLM_MAX_UTIL_FOR_RESUME",
    "trtllm_resume_admits",
    "trtllm_grains_for_slots",
    "trtllm_min_quota",
    "trtllm_quota_accepted",
]


def upstream_window_term(t: Any, window: Any) -> Any:
    """The window term of TensorRT-LLM's post-fix floor as upstream writes it: ``(W + t - 2) // t``."""
    return fdiv(window + t - 2, t)


def upstream_swa_floor(t: Any, window: Any, sink_blocks: Any) -> Any:
    """TensorRT-LLM's post-fix SWA floor in upstream's spelling: ``S + (W + t - 2) // t + 1``."""
    return sink_blocks + upstream_window_term(t, window) + 1


def vllm_blocks_per_request(t: Any, window: Any, max_tokens: Any, max_model_len: Any = None) -> Any:
    """vLLM v1's per-request blocks for a sliding window: ``ceil(min(W - 1 + T, max_model_len) / t) + 1``
    where ``T`` is the most tokens one step batches (no sink term; no cap when ``max_model_len`` is None)."""
    span = window - 1 + max_tokens
    if max_model_len is not None:
        span = imin(span, max_model_len)
    return cdiv(span, t) + 1


def trtllm_cpp_blocks(t: Any, window: Any) -> Any:
    """The older TensorRT-LLM C++ manager's blocks per sequence past the window: ``ceil(W / t) + 1``
    (it allocates the next block before detaching the one leaving the window; it rejects sinks)."""
    return cdiv(window, t) + 1


def sglang_request_pages(t: Any, window: Any, request_tokens: Any) -> Any:
    """SGLang's per-request SWA budget in pages: ``min(input + max_new, W)`` tokens plus one page,
    ``ceil(min(L, W) / t) + 1`` for a request of ``L`` tokens. Its SWA pool itself is a user-set ratio
    of the full pool, with no window-derived floor."""
    return cdiv(imin(request_tokens, window), t) + 1


def vllm_full_sequence_blocks(t: Any, window: Any, prompt: Any, max_batched: Any, max_model_len: Any,
                              capped: Any) -> Any:
    """vLLM v1's full-sequence admission gate for one group of a new request with no prefix hit
    (``allocate_slots(..., full_sequence_must_fit=True)``, or ``can_fit_full_sequence`` before it moved
    there): the blocks of ``request.num_tokens``, the prompt alone, ``cdiv(P, t)`` (no draft slots);
    for a sliding-window group where the release has the recycling-aware cap
    (``max_admission_blocks_per_request``), at most :func:`vllm_blocks_per_request` with
    ``T = max_batched`` (its ``max_in_flight_tokens``). ``window`` None: a full-attention group (never
    capped)."""
    charged = cdiv(prompt, t)
    if window is None:
        return charged
    return ite(capped, imin(charged, vllm_blocks_per_request(t, window, max_batched, max_model_len)), charged)


def vllm_first_step_blocks(t: Any, prompt: Any, chunk: Any, lookahead: Any) -> Any:
    """The check ``allocate_slots`` makes after the gate, for the step it is asked to allocate: a new
    request's first chunk, ``min(C, P)`` tokens, plus the ``k`` lookahead slots its scheduler passes to
    every request it schedules (prefill included), uncapped: ``cdiv(min(C, P) + k, t)`` per group,
    sliding-window or full (nothing of a new request is skipped yet)."""
    return cdiv(imin(chunk, prompt) + lookahead, t)


def vllm_admission_threshold(gates: Any, first_steps: Any) -> Any:
    """vLLM's admission of a new request into one block pool its groups share: the gate and the first
    step's check each ask the free blocks for their sum over the groups, so it admits at the larger
    sum, ``max(sum(gates), sum(first_steps))`` blocks."""
    total_gate, total_first = 0, 0
    for g in gates:
        total_gate = total_gate + g
    for f in first_steps:
        total_first = total_first + f
    return imax(total_gate, total_first)


def vllm_admission_blocks(t: Any, window: Any, prompt: Any, lookahead: Any, max_batched: Any, max_model_len: Any,
                          capped: Any) -> Any:
    """What vLLM v1 charges a new request, with no prefix hit, for one group alone in its pool (the
    scheduler's chunk is its token budget, ``C = max_batched``): the larger of the full-sequence gate
    (:func:`vllm_full_sequence_blocks`, ``cdiv(P, t)``, capped where the release caps) and the first
    step's own check (:func:`vllm_first_step_blocks`, ``cdiv(min(C, P) + k, t)``)."""
    return vllm_admission_threshold((vllm_full_sequence_blocks(t, window, prompt, max_batched, max_model_len, capped),),
                                    (vllm_first_step_blocks(t, prompt, max_batched, lookahead),))


def sglang_swa_budget_tokens(t: Any, window: Any, prompt: Any, chunk: Any) -> Any:
    """SGLang's SWA budget for a request it admits (``PrefillAdder._swa_budget_for_req`` of 0.5.13.post1 to
    0.5.15.post1, the releases read; 0.5.16 subtracts the window from the allocation and caps the chunk,
    :func:`sglang_window_headroom_blocks`, 0.5.17-0.5.20 add the decode headroom of
    :func:`sglang_swa_kv_tokens`, 0.5.21 on moved the gate out of ``PrefillAdder``:
    :func:`sglang_prefill_budget_blocks`): the tokens of its next allocation, ``min(extend, chunk)``, floored
    at the window it will hold while decoding (``sliding_window_size``, SGLang's exclusive window ``W - 1``),
    plus one page: ``max(min(P, C), W - 1) + t`` tokens (a new request's extend is its prompt, not rounded
    to pages: ``add_one_req`` passes ``req.extend_input_len``; no sinks, no drafts)."""
    return imax(imin(prompt, chunk), window - 1) + t


def sglang_admission_blocks(t: Any, window: Any, prompt: Any, chunk: Any) -> Any:
    """SGLang's SWA admission gate as a charge in free SWA pages: it refuses when the budget is at
    least the SWA tokens left (``swa_needed >= rem_swa_tokens``), so it admits only with
    ``budget + 1 <= free * t`` tokens free: ``cdiv(budget + 1, t)`` pages (0.5.13.post1-0.5.15.post1)."""
    return cdiv(sglang_swa_budget_tokens(t, window, prompt, chunk) + 1, t)


def sglang_swa_kv_tokens(t: Any, window: Any, extend: Any, output: Any, allocated: Any) -> Any:
    """SGLang's peak SWA reservation for a request (``estimate_swa_kv_tokens`` in
    ``mem_cache/prefill_budget.py``, 0.5.21-0.5.23; the same sum in ``PrefillAdder._swa_budget_for_req`` of
    0.5.17-0.5.20), no host hit: with its window ``w = W - 1`` (SGLang's exclusive ``sliding_window_size``)
    positive, what this pass allocates past the window, ``max(allocated - w, 0)``, plus the request's own
    window, ``min(extend + output, w)``, plus one page; with ``w <= 0`` (``W = 1``) the whole run,
    ``extend + output + t``. ``allocated`` is the pass's allocation (``min(extend, chunk)``, chunked)."""
    w = window - 1
    return ite(w <= 0, extend + output + t, imax(allocated - w, 0) + imin(extend + output, w) + t)


def sglang_prefill_budget_parts(t: Any, window: Any, prompt: Any, chunk: Any, output: Any) -> tuple[Any, Any]:
    """The two routes by which SGLang 0.5.17-0.5.23 admits a new request (no prefix hit) to an idle SWA
    pool of ``N`` pages (``SWAPrefillBudget.check_prefill``, asked by ``PrefillAdder.add_one_req``, 0.5.21
    on; before, ``PrefillAdder._swa_budget_for_req`` with ``max_new_tokens`` and ``_swa_chunk_cap``, read
    in 0.5.17-0.5.20's ``managers/schedule_policy.py``: the same sums, and for a lone request on an idle
    pool their "never fits" of 0.5.18 on is the refusal itself), each as the least ``N`` it admits at:

    - whole: the reservation of :func:`sglang_swa_kv_tokens` for the page-rounded prompt
      (``extend = cdiv(P, t) * t``; ``allocated = min(extend, C)``) must be below the free SWA tokens
      (``needed < N * t``): ``cdiv(needed + 1, t)`` pages;
    - a shrunk chunk (chunked prefill only): where the reservation is at least the whole SWA pool (it never
      fits), the chunk is cut to the page-floored SWA tokens left above the headroom of an empty pass
      (:func:`sglang_swa_kv_tokens` at ``extend = 0``: ``min(O, w) + t``), and admitted when that is
      positive: ``N * t - headroom >= t``, ``cdiv(headroom, t) + 1`` pages.
    """
    extend = cdiv(prompt, t) * t
    whole = cdiv(sglang_swa_kv_tokens(t, window, extend, output, imin(extend, chunk)) + 1, t)
    shrunk = cdiv(sglang_swa_kv_tokens(t, window, 0, output, 0), t) + 1
    return whole, shrunk


def sglang_prefill_budget_blocks(t: Any, window: Any, prompt: Any, chunk: Any, output: Any, chunked: Any = True) -> Any:
    """SGLang's admission threshold for a lone new request in SWA pages, 0.5.17-0.5.23 (the pinned release):
    the lesser route of :func:`sglang_prefill_budget_parts` with chunked prefill on (``chunked``), the whole
    route alone with it off (the reservation then allocates the whole prompt: ``allocated = extend``, the
    ``chunk`` ignored). Its full-attention pool's check (``P + O + t`` tokens below the free ones) is not
    part of this charge."""
    whole, shrunk = sglang_prefill_budget_parts(t, window, prompt, chunk, output)
    extend = cdiv(prompt, t) * t
    unchunked = cdiv(sglang_swa_kv_tokens(t, window, extend, output, extend) + 1, t)
    return ite(chunked, imin(whole, shrunk), unchunked)


def sglang_whole_run_blocks(t: Any, prompt: Any, output: Any) -> Any:
    """SGLang's admission of a lone new request to an idle hybrid SWA model where ``PrefillAdder`` has no
    SWA budget of its own (0.5.7, read from ``managers/schedule_policy.py``: ``rem_total_tokens`` is the
    lesser of the full and the SWA pool's free tokens, asked for ``extend_input_len + max_new_tokens``,
    refused when that is at least the free tokens): the whole run, unrounded, against the SWA pool, no
    window: ``cdiv(P + O + 1, t)`` pages (0.5.7's allocator is token-granular: ``t = 1``)."""
    return cdiv(prompt + output + 1, t)


def sglang_window_headroom_tokens(t: Any, window: Any, allocated: Any) -> Any:
    """SGLang 0.5.16's SWA budget for a request (``PrefillAdder._swa_budget_for_req``, read from 0.5.16's
    ``managers/schedule_policy.py``): what the pass allocates past the window, ``max(allocated - w, 0)``,
    plus a whole window of decode headroom and a page (``_swa_reserved_tokens``: ``w + t``), with
    ``w = W - 1`` (SGLang's exclusive ``sliding_window_size``), whatever the run's length (0.5.17 caps the
    headroom at the run's own window: :func:`sglang_swa_kv_tokens`)."""
    w = window - 1
    return imax(allocated - w, 0) + w + t


def sglang_window_headroom_parts(t: Any, window: Any, prompt: Any, chunk: Any) -> tuple[Any, Any]:
    """The two routes by which SGLang 0.5.16 admits a lone new request (no prefix hit) to an idle SWA pool
    of ``N`` pages (``PrefillAdder.add_one_req``), each as the least ``N`` it admits at:

    - whole: the budget of :func:`sglang_window_headroom_tokens` for the page-rounded prompt
      (``real_input_tokens = cdiv(P, t) * t``; ``allocated = min(extend, C)``) must be below the free SWA
      tokens (refused when ``swa_needed >= rem_swa_tokens``): ``cdiv(budget + 1, t)`` pages;
    - a shrunk chunk (chunked prefill only; ``_swa_chunk_cap``): where the budget is at least the free SWA
      tokens, the chunk is cut to the page-floored free tokens above ``w + t`` and admitted when that is at
      least a page: ``cdiv(w + t, t) + 1`` pages.
    """
    extend = cdiv(prompt, t) * t
    whole = cdiv(sglang_window_headroom_tokens(t, window, imin(extend, chunk)) + 1, t)
    shrunk = cdiv(sglang_window_headroom_tokens(t, window, 0), t) + 1
    return whole, shrunk


def sglang_window_headroom_blocks(t: Any, window: Any, prompt: Any, chunk: Any, chunked: Any = True) -> Any:
    """SGLang 0.5.16's admission threshold for a lone new request in SWA pages: the lesser route of
    :func:`sglang_window_headroom_parts` with chunked prefill on, the whole route alone with it off (the
    budget then allocates the whole page-rounded prompt, the ``chunk`` ignored)."""
    whole, shrunk = sglang_window_headroom_parts(t, window, prompt, chunk)
    extend = cdiv(prompt, t) * t
    unchunked = cdiv(sglang_window_headroom_tokens(t, window, extend) + 1, t)
    return ite(chunked, imin(whole, shrunk), unchunked)


def sglang_min_swa_pages(t: Any, window: Any) -> Any:
    """The least SWA pool, in pages, SGLang's start-up accepts (``validate_swa_pool_size``, 0.5.23; the same
    test in ``model_executor/pool_configurator.py`` from 0.5.16, none before: it refuses a pool of ``N * t``
    tokens with ``W - 1 + t >= N * t``): ``fdiv(W - 1 + t, t) + 1`` pages."""
    return fdiv(window - 1 + t, t) + 1


#: TensorRT-LLM V2's default ``max_util_for_resume`` (0.97, as its C++ binding's default), as a fraction.
TRTLLM_MAX_UTIL_FOR_RESUME = (97, 100)


def trtllm_resume_admits(used: Any, total: Any, util_num: Any = 97, util_den: Any = 100) -> Any:
    """TensorRT-LLM V2's resume gate for one pool group: ``resume()`` fails when the group's use is above
    ``max_util_for_resume = util_num / util_den``; it admits when ``used / total <= util_num / util_den``,
    that is ``used * util_den <= util_num * total``. It looks at use only, not at what the request
    holds or needs (a request suspended with its pages held counts them against itself)."""
    return used * util_den <= util_num * total


#: The pool layouts the quota theorems range over: (slot sizes of a pool group's pools in bytes, the
#: granularity of a cache level's quota in bytes): one pool at one byte a granule, one at two, and two
#: pools of unequal slots at four.
TRTLLM_QUOTA_LAYOUTS = (((1,), 1), ((3,), 2), ((2, 5), 4))


def trtllm_grains_for_slots(slots: Any, slot_sizes: Any, granularity: Any) -> Any:
    """The granules a pool group of TensorRT-LLM V2 takes for ``slots`` slots: each of its pools (one per
    slot size in ``slot_sizes``, bytes a slot) rounded up to the level's granularity on its own,
    ``sum(cdiv(slots * s, g))``. A group given ``G`` granules holds the most ``n`` with this at most ``G``."""
    total = 0
    for size in slot_sizes:
        total = total + cdiv(slots * size, granularity)
    return total


def trtllm_min_quota(min_slots: Any, slot_sizes: Any, granularity: Any) -> Any:
    """TensorRT-LLM V2's least quota for a cache level (``_min_quota_for_level``), in bytes: per pool group
    its minimum slots (``min_slots[i]``) times each of its pools' slot size (``slot_sizes[i]``), rounded up
    to the granularity, summed: ``g * sum(trtllm_grains_for_slots(min_slots[i], slot_sizes[i], g))``.
    Its minimum slots were one per life cycle before PR #15588 (constraints only raise them), the sum of
    the life cycles' floors after."""
    total = 0
    for slots, sizes in zip(min_slots, slot_sizes):
        total = total + trtllm_grains_for_slots(slots, sizes, granularity)
    return total * granularity


def trtllm_quota_accepted(quota: Any, min_quota: Any, granularity: Any) -> Any:
    """Whether TensorRT-LLM V2 runs a cache level at ``quota`` bytes: it rounds the quota up to the
    granularity and refuses one below the least quota (``adjust_cache_level`` raises; at construction the
    quota is raised to it): ``cdiv(quota, g) * g >= min_quota``."""
    return cdiv(quota, granularity) * granularity >= min_quota
