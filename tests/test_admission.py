"""Issue 32: the admission rule (reference/admission.py) and the engines' gates (reference/peers.py).

The theorems (lone-request-completes, vllm-*-gate-admits-at-chunk-floor) are in the catalogue; here the
formulas meet hand-computed values and the reference manager runs lone requests at what they charge.
"""

from __future__ import annotations

import itertools

import pytest

from swafloor.proofs import replay
from swafloor.reference import admission, peers


def test_the_rule_charges_a_window_not_a_prompt():
    # Mistral-style SWA: t=16, W=4096, a 100,000-token prompt in 2,048-token chunks, no drafts.
    # The largest step is 2,048 tokens: S + ceil((4096 + 2048 - 2) / 16) + 1 = ceil(6142/16) + 1 = 384 + 1.
    assert admission.largest_step(100_000, 2048, 0) == 2048
    assert admission.swa_admission_blocks(16, 4096, 0, 100_000, 2048, 0) == 385
    # the same prompt's full attention: cdiv(100000, 16) = 6250 to start; 100,000 + 10 outputs: cdiv(100010, 16)
    assert admission.full_admission_blocks(16, 100_000, 0) == 6250
    assert admission.full_run_blocks(16, 100_000, 10, 0) == 6251
    # a decode step with 3 draft slots is a 4-token step: a 2-token prompt's largest step is 4, not 2
    assert admission.largest_step(2, 8, 3) == 4


def test_the_step_schedule_is_chunks_then_one_token_steps():
    P, O, C, k = 5, 2, 2, 1
    h, steps = 0, []
    while h < admission.run_length(P, O):
        steps.append((h, admission.step_tokens(h, P, C, k), admission.advance(h, P, C)))
        h += admission.advance(h, P, C)
    # prefill 2 + 2 + 1, then two decode steps each holding 1 + k = 2 tokens past h and committing 1
    assert steps == [(0, 2, 2), (2, 2, 2), (4, 1, 1), (5, 2, 1), (6, 2, 1)]


def test_vllms_gates_against_the_rule_on_hand_computed_points():
    # before the cap: the whole prompt, cdiv(100000, 16) = 6250 blocks, for a window of 4096 tokens
    assert peers.vllm_admission_blocks(16, 4096, 100_000, 0, 2048, None, False) == 6250
    # with the cap: ceil((4096 - 1 + 2048)/16) + 1 = ceil(6143/16) + 1 = 385, the rule's own 385 here
    assert peers.vllm_admission_blocks(16, 4096, 100_000, 0, 2048, None, True) == 385
    # the cap's extra block: t=4, W=4, C=2: vLLM ceil((3 + 2)/4) + 1 = 3; the rule ceil((4 + 2 - 2)/4) + 1 = 2
    assert peers.vllm_admission_blocks(4, 4, 100, 0, 2, None, True) == 3
    assert admission.swa_admission_blocks(4, 4, 0, 100, 2, 0) == 2
    # a short prompt is charged its own blocks either way: cdiv(5, 4) = 2
    assert peers.vllm_admission_blocks(4, 4, 5, 0, 2, None, True) == 2
    # the gate charges the prompt without the drafts: t=4, P=8, k=3, C=1, W=64: the gate cdiv(8, 4) = 2,
    # the first step cdiv(1 + 3, 4) = 1 (not cdiv(8 + 3, 4) = 3)
    assert peers.vllm_full_sequence_blocks(4, 64, 8, 1, None, True) == 2
    assert peers.vllm_first_step_blocks(4, 8, 1, 3) == 1
    assert peers.vllm_admission_blocks(4, 64, 8, 3, 1, None, True) == 2
    # the first step's check wins: t=1, W=1, P=10, C=2, k=2: the capped gate min(10, ceil((0 + 2)/1) + 1)
    # = 3, the first step's chunk and drafts cdiv(2 + 2, 1) = 4; the rule ceil((1 + 3 - 2)/1) + 1 = 3
    assert peers.vllm_full_sequence_blocks(1, 1, 10, 2, None, True) == 3
    assert peers.vllm_admission_blocks(1, 1, 10, 2, 2, None, True) == 4
    assert admission.swa_admission_blocks(1, 1, 0, 10, 2, 2) == 3
    # a full-attention group (window None) is never capped: cdiv(10, 4) = 3
    assert peers.vllm_full_sequence_blocks(4, None, 10, 2, None, True) == 3
    # groups sharing one pool: the larger of the two sums, max(3 + 2, 1 + 4) = 5, not 3 + 4 = 7
    assert peers.vllm_admission_threshold((3, 2), (1, 4)) == 5


GRID = [(t, W, S, P, O, C, k) for t, W, S, P, O, C, k in itertools.product(
    (1, 2, 3), (1, 3, 4, 6), (0, 1), (1, 4, 7), (1, 2), (1, 3), (0, 1))]


@pytest.mark.parametrize("t, W, S", sorted({g[:3] for g in GRID}))
def test_the_reference_manager_runs_a_lone_request_at_what_the_rule_charges(t, W, S):
    """At a pool of exactly admission.swa_admission_blocks slots, every run of the grid completes on the
    reference manager (its own accounting, check() after each call): the formula and the manager agree
    that the charge suffices (the catalogue's lone-request-completes proves it for all sizes)."""
    from swafloor.reference import AttentionLayer, Config

    for _, _, _, P, O, C, k in (g for g in GRID if g[:3] == (t, W, S)):
        pool = admission.swa_admission_blocks(t, W, S, P, C, k)
        config = Config(tokens_per_block=t, layers=[AttentionLayer(window=W, sink_tokens=S * t)], slots=(pool,))
        d = replay.Driver(config)
        assert replay.lone_run(d, "r0", P, O, C, k) and not d.failures, (P, O, C, k, d.trace)


def test_a_pool_below_the_decode_floor_stops_a_lone_run():
    """The run is not vacuous: with the pre-fix single slot (legacy rule) a lone request of a window
    straddling two blocks fails at a step (t=4, W=4: the decode floor is 2)."""
    from swafloor.reference import AttentionLayer, Config

    config = Config(tokens_per_block=4, layers=[AttentionLayer(window=4)], slots=(1,), floor_rule="legacy")
    d = replay.Driver(config)
    assert not replay.lone_run(d, "r0", 2, 8, 1, 0)
    assert d.failures and d.failures[0].startswith("resize(")


def test_sglangs_budget_on_hand_computed_points():
    # recent SGLang: max(min(extend, chunk), sliding_window_size) + page, sliding_window_size = W - 1
    assert peers.sglang_swa_budget_tokens(16, 4096, 100_000, 2048) == 4095 + 16
    assert peers.sglang_swa_budget_tokens(16, 4096, 100_000, 8192) == 8192 + 16
    # refused when budget >= the SWA tokens left: admitted with budget + 1 = 4112 tokens free, cdiv(4112, 16) pages
    assert peers.sglang_admission_blocks(16, 4096, 100_000, 2048) == 257
    # the over-charge: t=1, W=5, P=1: budget max(1, 4) + 1 = 5 tokens, 6 free pages; the rule's chunk floor is 5
    assert peers.sglang_admission_blocks(1, 5, 1, 1) == 6 and admission.swa_admission_blocks(1, 5, 0, 1, 1, 0) == 5
    # W >= 3 and a chunk of 2 or more: at most the rule (here max(2, 3) + 2 = 5 tokens, 6 free: cdiv(6, 2) = 3;
    # the rule ceil((4 + 2 - 2)/2) + 1 = 3)
    assert peers.sglang_admission_blocks(2, 4, 10, 2) == 3 == admission.swa_admission_blocks(2, 4, 0, 10, 2, 0)


def test_the_resume_gates_on_hand_computed_points():
    # TensorRT-LLM V2: resume fails above 97% use; 97 of 100 passes, 98 does not; 384 of 385 does not
    assert peers.trtllm_resume_admits(97, 100) and not peers.trtllm_resume_admits(98, 100)
    assert not peers.trtllm_resume_admits(384, 385) and peers.trtllm_resume_admits(0, 1)
    assert peers.TRTLLM_MAX_UTIL_FOR_RESUME == (97, 100)
    # the rule: what it lacks against what is free; a full pool resumes a request that holds all it needs
    assert admission.resume_admits(5, 5, 5, 5) and admission.resume_admits(5, 3, 0, 2)
    assert not admission.resume_admits(5, 4, 1, 3)


@pytest.mark.parametrize("gate", ["reference", "trtllm"])
def test_kept_run_through_each_resume_gate(gate):
    """A lone request kept after every step at the rule's charge: the rule's gate resumes it to the end on
    every point of a small grid; TensorRT-LLM's refuses it somewhere (a pool it fills)."""
    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import kept_run

    refused = 0
    for t, W, S, P, O, C, k in GRID:
        pool = admission.swa_admission_blocks(t, W, S, P, C, k)
        config = Config(tokens_per_block=t, layers=[AttentionLayer(window=W, sink_tokens=S * t)], slots=(pool,))
        run = kept_run(config, P, O, chunk=C, lookahead=k, gate=gate)
        if gate == "reference":
            assert run.completed and run.refused_at is None, (t, W, S, P, O, C, k, run)
        else:
            assert run.completed or (run.refused_at is not None and run.used[0] * 100 > 97 * run.total[0])
            refused += not run.completed
    assert gate == "reference" or refused > 0


def test_the_gate_replays_confirm_only_real_refusals():
    r = replay.sglang_gate_refuses({"t": 1, "W": 5, "P": 1, "C": 1, "k": 0})
    assert r.confirmed and "needs 6 free pages" in r.summary, r
    r = replay.sglang_gate_refuses({"t": 2, "W": 4, "P": 10, "C": 2, "k": 0})  # 3 <= 3: admitted
    assert not r.confirmed and r.summary.startswith("NOT REPRODUCED"), r
    point = {"t": 1, "W": 1, "S": 0, "P": 1, "O": 1, "C": 1, "k": 0, "h": 1}
    r = replay.trtllm_resume_refuses({**point, "X": 0})  # holds 1 of 1: 100% use
    assert r.confirmed and "h=1" in r.summary, r
    r = replay.trtllm_resume_refuses({**point, "X": 40})  # 1 of 41: below 97%
    assert not r.confirmed and r.summary.startswith("NOT REPRODUCED"), r
