"""The theorem catalogue: what ``swafloor prove`` discharges.

Every goal is built by calling reference functions, looked up through their modules at call time
(``floors.swa_floor``, not a name bound at import) so that a patched reference (a mutation) changes
the goals with it. Goals use only the arithmetic kernel and the connectives of :mod:`.symbolic`, so
the same function runs on Z3 terms (the proof) and on ints (the bounded check).

Unless a theorem says otherwise its variables are t >= 1 tokens per block, W >= 1 window tokens,
S >= 0 sink blocks, h >= 0 history tokens and n >= 1 tokens per step, all unbounded.
"""

from __future__ import annotations

from typing import Any

from swafloor.reference import arith, floors, lifecycle, peers

from . import replay
from .symbolic import H, STEP, S, T, W, Var, all_of, implies, negate, upto
from .theorem import Attempt, Expected, Theorem

__all__ = ["CATALOGUE", "by_name"]

PROVED, REFUTED = Expected.PROVED, Expected.REFUTED


def _live(h: Any, c: Any, t: Any, w: Any, s: Any) -> Any:
    return lifecycle.live_blocks(h, c, t, w, s)


def _full(h: Any, c: Any, t: Any) -> Any:
    """Live blocks of a full-attention life cycle (no window, nothing stale)."""
    return lifecycle.live_blocks(h, c, t, None, 0)


def _is_ceiling(k: Any, x: Any, t: Any) -> Any:
    """``k = ceil(x / t)`` by the ceiling's defining inequalities ``(k - 1) * t < x <= k * t``."""
    return all_of((k - 1) * t < x, x <= k * t)


# ----------------------------------------------------------------------------- window-span
L = upto("L", "consecutive tokens", 1, 72, "L <= 72")
F0 = upto("f", "first token of the run", 0, lambda env: 3 * env["t"] - 1, "f < 3*t")
B = upto("b", "block the run starts in", 0, 3, "b <= 3")


def window_span(t, L, f, b):
    most = lifecycle.window_span_blocks(L, t)
    return (
        lifecycle.blocks_touched(f, L, t) <= most,
        lifecycle.blocks_touched(b * t + t - 1, L, t) == most,
    )


# ----------------------------------------------------------------------------- decode and n-token steps
def decode_sufficient(t, W, S, h):
    return _live(h, h + 1, t, W, S) <= floors.swa_floor(t, W, S)


def decode_tight(t, W, S):
    h = floors.worst_case_history(t, W, S)
    return _live(h, h + 1, t, W, S) == floors.swa_floor(t, W, S)


def _decode_tight_exists(t, W, S):
    import z3

    h = z3.Int("h_witness", t.ctx)
    return z3.Exists([h], all_of(h >= 0, _live(h, h + 1, t, W, S) == floors.swa_floor(t, W, S)))


def step_sufficient(t, W, S, h, n):
    return _live(h, h + n, t, W, S) <= floors.step_floor(t, W, S, n)


def step_tight(t, W, S, n):
    h = floors.worst_case_history(t, W, S)
    worst = floors.step_floor(t, W, S, n)
    return (
        _live(h, h + n, t, W, S) == worst,
        _is_ceiling(worst - S - 1, W + n - 2, t),
    )


def decode_transition(t, W, S, h):
    floor = floors.swa_floor(t, W, S)
    return (
        lifecycle.transition_peak(h, h, h + 1, t, W, S, False) <= floor,  # resize(h+1, h) from (h, h)
        lifecycle.transition_peak(h, h + 1, h + 2, t, W, S, False) <= floor,  # resize(h+2, h+1) from (h, h+1)
    )


# ----------------------------------------------------------------------------- full attention, pool groups
def full_attention_lower_bound(t, W, S, h):
    floor = floors.swa_floor(t, W, S)
    minimum = floors.full_attention_floor(floor)
    worst = floors.worst_case_history(t, W, S)
    return (
        _full(h, h + 1, t) >= _live(h, h + 1, t, W, S),
        _full(worst, worst + 1, t) >= floor,
        (_full(h, h + 1, t) <= minimum) == (h + 1 <= floors.full_attention_max_capacity(t, minimum)),
    )


W2 = upto("W2", "window of a second SWA life cycle", 1, 2, "W2 <= 2")
S2 = upto("S2", "sink blocks of the second SWA life cycle", 0, 1, "S2 <= 1")


def _group_minimum(t, W, S, W2, S2):
    """The pool group's minimum: both SWA floors plus full attention's (the larger SWA floor)."""
    fa, fb = floors.swa_floor(t, W, S), floors.swa_floor(t, W2, S2)
    return fa, fb, floors.full_attention_floor(arith.imax(fa, fb))


def _group_length(env):
    """The largest history whose decode step is within full attention's length."""
    _, _, full_minimum = _group_minimum(env["t"], env["W"], env["S"], env["W2"], env["S2"])
    return floors.full_attention_max_capacity(env["t"], full_minimum) - 1


H_GROUP = upto("h", "history: tokens already computed", 0, _group_length, "every h + 1 within that length")


def pool_group_sufficient(t, W, S, W2, S2, h):
    fa, fb, full_minimum = _group_minimum(t, W, S, W2, S2)
    within_length = h + 1 <= floors.full_attention_max_capacity(t, full_minimum)
    need = _live(h, h + 1, t, W, S) + _live(h, h + 1, t, W2, S2) + _full(h, h + 1, t)
    return implies(within_length, need <= fa + fb + full_minimum)


def _pool_group_lemmas(t, W, S, W2, S2, h):
    fa, fb, full_minimum = _group_minimum(t, W, S, W2, S2)
    within_length = h + 1 <= floors.full_attention_max_capacity(t, full_minimum)
    return (
        _live(h, h + 1, t, W, S) <= fa,
        _live(h, h + 1, t, W2, S2) <= fb,
        implies(within_length, _full(h, h + 1, t) <= full_minimum),
    )


# ----------------------------------------------------------------------------- concurrency
REQUESTS = upto("N", "requests", 1, 2, "N <= 2")


def _others_values(env):
    """The most the hypothesis U <= (N - 1) * floor admits."""
    return [(env["N"] - 1) * floors.swa_floor(env["t"], env["W"], env["S"])]


OTHERS = Var("U", "slots the other N - 1 requests hold", 0, _others_values, "U = (N-1)*floor, the most allowed")


def concurrency(t, W, S, N, U, h):
    floor = floors.swa_floor(t, W, S)
    return implies(U <= (N - 1) * floor, U + _live(h, h + 1, t, W, S) <= N * floor)


def concurrency_minus_one(t, W, S, h, N):
    return N * _live(h, h + 1, t, W, S) <= N * floors.swa_floor(t, W, S) - 1


# ----------------------------------------------------------------------------- peers' formulas
def ceil_identity(t, W, S):
    term = peers.upstream_window_term(t, W)
    return (
        term == arith.cdiv(W - 1, t),
        _is_ceiling(term, W - 1, t),
        peers.upstream_swa_floor(t, W, S) == floors.swa_floor(t, W, S),
    )


def ceil_identity_at_zero(t):
    term = peers.upstream_window_term(t, 0)
    return term == arith.cdiv(-1, t), _is_ceiling(term, -1, t)


def vllm_sizing_covers(t, W, n):
    return (
        peers.vllm_blocks_per_request(t, W, n) >= floors.step_floor(t, W, 0, n),
        (peers.vllm_blocks_per_request(t, W, 1) > floors.swa_floor(t, W, 0)) == (arith.fmod(W - 1, t) == 0),
    )


def cpp_sizing_covers(t, W):
    cpp, floor = peers.trtllm_cpp_blocks(t, W), floors.swa_floor(t, W, 0)
    return cpp >= floor, (cpp > floor) == (arith.fmod(W - 1, t) == 0)


# ----------------------------------------------------------------------------- refutations
def legacy_floor_serves(t, W, S, h):
    return _live(h, h + 1, t, W, S) <= floors.legacy_floor()


def decode_floor_serves_multi_token(t, W, S, h, n):
    return _live(h, h + n, t, W, S) <= floors.swa_floor(t, W, S)


def _hold_peak(t, W, S, h):
    """The peak of a one-call decode step from (h, h + 1) to (h + 1, h + 2) that holds the blocks it
    makes stale until it returns."""
    return lifecycle.transition_peak(h, h + 1, h + 2, t, W, S, True)


def same_call_within_floor(t, W, S, h):
    return _hold_peak(t, W, S, h) <= floors.swa_floor(t, W, S)


def same_call_exact(t, W, S, h):
    floor, peak = floors.swa_floor(t, W, S), _hold_peak(t, W, S, h)
    aligned = arith.fmod(W - 1, t) == 0
    return (
        peak <= floor + 1,
        implies(peak > floor, aligned),
        implies(aligned, _hold_peak(t, W, S, floors.worst_case_history(t, W, S)) == floor + 1),
    )


def _same_call_lemmas(t, W, S, h):
    two, floor = floors.step_floor(t, W, S, 2), floors.swa_floor(t, W, S)
    aligned = arith.fmod(W - 1, t) == 0
    return (
        _hold_peak(t, W, S, h) <= two,
        _hold_peak(t, W, S, floors.worst_case_history(t, W, S)) == two,
        implies(negate(aligned), two == floor),
        implies(aligned, two == floor + 1),
    )


def _resume_peak(t, W, S, h):
    return lifecycle.first_resume_peak(h, h, t, W, S)


def resume_within_floor(t, W, S, h):
    return _resume_peak(t, W, S, h) <= floors.swa_floor(t, W, S)


def _resume_exceeds(t, W):
    """The claimed condition for the first-resume copy to need the floor + 1."""
    return all_of(t >= 2, negate(all_of(W >= 2, arith.fmod(W - 2, t) == 0)))


def _resume_witness(t, W, S):
    """A history just past a block boundary, far enough past the sinks and a window."""
    return (S + floors.window_blocks(t, W)) * t + 1


def resume_exact(t, W, S, h):
    floor, peak, exceeds = floors.swa_floor(t, W, S), _resume_peak(t, W, S, h), _resume_exceeds(t, W)
    return (
        peak <= floor + 1,
        implies(peak > floor, exceeds),
        implies(exceeds, _resume_peak(t, W, S, _resume_witness(t, W, S)) == floor + 1),
    )


def _resume_witness_divisions(t, W, S, h):
    """Stage 1: the divisions at the witness history x = q*t + 1, and when the blocks W - 1 and W
    tokens can touch differ."""
    x, q = _resume_witness(t, W, S), S + floors.window_blocks(t, W)
    return (
        implies(t >= 2, arith.fmod(x, t) == 1),
        implies(t >= 2, arith.fdiv(x, t) == q),
        implies(t >= 2, arith.cdiv(x, t) == q + 1),
        implies(t >= 2, arith.fdiv(x + 1 - W, t) == q - arith.cdiv(W - 2, t)),
        implies(_resume_exceeds(t, W), lifecycle.window_span_blocks(W - 1, t) == floors.window_blocks(t, W)),
        implies(
            all_of(W >= 2, arith.fmod(W - 2, t) == 0),
            lifecycle.window_span_blocks(W - 1, t) + 1 <= floors.window_blocks(t, W),
        ),
    )


def _resume_witness_peak(t, W, S, h):
    """Stage 2: the peak at the witness."""
    x = _resume_witness(t, W, S)
    return implies(t >= 2, _resume_peak(t, W, S, x) == S + lifecycle.window_span_blocks(W - 1, t) + 1)


def _resume_peak_bounds(t, W, S, h):
    """Stage 3: what bounds the peak at any h."""
    partial = lifecycle.partial_block(h, t)
    return (
        _live(h, h, t, W, S) <= floors.swa_floor(t, W, S),
        implies(t == 1, negate(partial)),
        implies(partial, _live(h, h, t, W, S) <= S + lifecycle.window_span_blocks(W - 1, t)),
    )


# ----------------------------------------------------------------------------- the catalogue
CATALOGUE: tuple[Theorem, ...] = (
    Theorem(
        "window-span",
        "L >= 1 consecutive tokens touch at most ceil((L-1)/t)+1 blocks, and a run starting at offset "
        "t-1 of any block b touches exactly that many.",
        PROVED,
        (T, L, F0, B),
        window_span,
    ),
    Theorem(
        "decode-sufficient",
        "A one-token step (capacity c = h+1) never has more live blocks than the SWA floor "
        "S + ceil((W-1)/t) + 1.",
        PROVED,
        (T, W, S, H),
        decode_sufficient,
    ),
    Theorem(
        "decode-tight",
        "For every (t, W, S) the history h = (S+1)*t + W - 2 has exactly the floor's live blocks at "
        "c = h+1, so no smaller floor serves decode.",
        PROVED,
        (T, W, S),
        decode_tight,
        attempts=(
            Attempt(
                "forall-exists",
                "For every (t, W, S) there exists h >= 0 with live blocks = the floor (no witness given).",
                _decode_tight_exists,
            ),
        ),
    ),
    Theorem(
        "step-sufficient",
        "An n-token step (c = h+n) never has more live blocks than S + ceil((W+n-2)/t) + 1 "
        "(floors.step_floor).",
        PROVED,
        (T, W, S, H, STEP),
        step_sufficient,
    ),
    Theorem(
        "step-tight",
        "At h = (S+1)*t + W - 2 an n-token step has exactly step_floor live blocks, and step_floor - S - 1 "
        "is the ceiling of (W+n-2)/t (by the ceiling's defining inequalities): the worst case is "
        "S + ceil((W+n-2)/t) + 1.",
        PROVED,
        (T, W, S, STEP),
        step_tight,
    ),
    Theorem(
        "decode-transition",
        "Releasing before allocating, the peak inside a decode step from h to h+1 is at most the floor, "
        "both for resize(h+1, h) from (h, h) then commit, and for one resize from (h, h+1) to (h+1, h+2) "
        "(the peaks bound every resting state, which is what a step keeps).",
        PROVED,
        (T, W, S, H),
        decode_transition,
    ),
    Theorem(
        "full-attention-lower-bound",
        "At every h a full-attention life cycle has at least as many live blocks as an SWA one (at c = h+1), "
        "so at the SWA worst case it needs >= the SWA floor F and no smaller pool serves it; and its post-fix "
        "minimum max(1, F) serves one request's decode step exactly while c = h+1 <= max(1, F) * t tokens.",
        PROVED,
        (T, W, S, H),
        full_attention_lower_bound,
    ),
    Theorem(
        "pool-group-sufficient",
        "A pool group holding two SWA life cycles (W, S) and (W2, S2) and full attention, sized at the sum of "
        "their post-fix minimums (full attention: max(1, larger SWA floor)), serves one request's decode "
        "step at every history h with h+1 within full attention's length max(1, F) * t.",
        PROVED,
        (T, W, S, W2, S2, H_GROUP),
        pool_group_sufficient,
        lemmas=(_pool_group_lemmas,),
    ),
    Theorem(
        "concurrency",
        "N requests decoding at any histories are served by N x floor slots, for every N >= 1, by induction "
        "on N: if the other N-1 hold U <= (N-1) x floor slots, a request at any history h fits beside them.",
        PROVED,
        (T, W, S, REQUESTS, OTHERS, H),
        concurrency,
    ),
    Theorem(
        "ceil-identity",
        "Upstream's (W + t - 2) // t equals ceil((W-1)/t) for W >= 1 (by the kernel's cdiv and by the "
        "ceiling's defining inequalities), so upstream's floor S + (W+t-2)//t + 1 is floors.swa_floor.",
        PROVED,
        (T, W, S),
        ceil_identity,
    ),
    Theorem(
        "ceil-identity-at-zero",
        "At W = 0 the identity still holds: (t - 2) // t = ceil(-1/t) for every t >= 1 (the issue expected "
        "it to fail at W = 0; it does not).",
        PROVED,
        (T,),
        ceil_identity_at_zero,
    ),
    Theorem(
        "vllm-sizing-covers",
        "vLLM's per-request sizing ceil((W-1+T)/t) + 1 is at least the n-token worst case for n = T "
        "(no sinks); with T = 1 it exceeds the floor exactly when (W-1) % t == 0.",
        PROVED,
        (T, W, STEP),
        vllm_sizing_covers,
    ),
    Theorem(
        "cpp-sizing-covers",
        "TRT-LLM C++'s ceil(W/t) + 1 is at least the floor (no sinks), and exceeds it exactly when "
        "(W-1) % t == 0.",
        PROVED,
        (T, W),
        cpp_sizing_covers,
    ),
    Theorem(
        "legacy-floor-insufficient",
        "Claim: one slot per SWA life cycle (the pre-fix minimum) serves a lone request's decode steps "
        "at every history.",
        REFUTED,
        (T, W, S, H),
        legacy_floor_serves,
        replay=replay.legacy_deadlock,
    ),
    Theorem(
        "decode-floor-short-for-multi-token",
        "Claim: the decode floor serves an n-token step (n >= 2) at every history.",
        REFUTED,
        (T, W, S, H, STEP.at_least(2)),
        decode_floor_serves_multi_token,
        replay=replay.multi_token_step,
    ),
    Theorem(
        "concurrency-minus-one",
        "Claim: N x floor - 1 slots serve N >= 2 requests decoding in lockstep at every (aligned) history.",
        REFUTED,
        (T, W, S, H, REQUESTS.at_least(2)),
        concurrency_minus_one,
        replay=replay.concurrency_short,
    ),
    Theorem(
        "same-call-release-transient",
        "Claim: a one-call decode step from (h, h+1) to (h+1, h+2) that holds the blocks it makes stale "
        "until it returns stays within the floor.",
        REFUTED,
        (T, W, S, H),
        same_call_within_floor,
        replay=replay.same_call_transient,
    ),
    Theorem(
        "same-call-release-transient-exact",
        "Holding the blocks a one-call decode step makes stale, its peak is at most the floor + 1, exceeds "
        "the floor only when (W-1) % t == 0, and then reaches floor + 1 at h = (S+1)*t + W - 2.",
        PROVED,
        (T, W, S, H),
        same_call_exact,
        lemmas=(_same_call_lemmas,),
    ),
    Theorem(
        "resume-partial-copy",
        "Claim: a first resume that copies a reused, partially filled block into a fresh slot while the "
        "source is still held stays within the floor at every reused history h.",
        REFUTED,
        (T, W, S, H),
        resume_within_floor,
        replay=replay.resume_copy,
    ),
    Theorem(
        "resume-partial-copy-exact",
        "That first resume peaks at most at the floor + 1; it exceeds the floor only when t >= 2 and not "
        "(W >= 2 and (W-2) % t == 0), and then reaches floor + 1 at h = (S + ceil((W-1)/t) + 1)*t + 1.",
        PROVED,
        (T, W, S, H),
        resume_exact,
        lemmas=(_resume_witness_divisions, _resume_witness_peak, _resume_peak_bounds),
    ),
)


def by_name(name: str) -> Theorem:
    for theorem in CATALOGUE:
        if theorem.name == name:
            return theorem
    raise KeyError(name)
