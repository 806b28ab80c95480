"""The idea of each theorem's proof (or of why a claim fails), in a sentence or two, for readers of
docs/theorems.md. Keyed by theorem name; a test checks that every catalogue theorem has one. The
solver does the proof; these say why it goes through, so a reader can check it by hand.
"""

from __future__ import annotations

__all__ = ["IDEAS"]

IDEAS: dict[str, str] = {
    "window-span": (
        "A run of L tokens starting at offset f of its block ends at offset f + L - 1, so it touches "
        "floor((f + L - 1)/t) + 1 blocks; that is largest when f = t - 1, where it is ceil((L-1)/t) + 1."
    ),
    "decode-sufficient": (
        "A decode step holds the sink blocks plus the blocks of the W tokens [h+1-W, h] (the stale range "
        "removes every earlier block past the sinks, and nothing is allocated past h); by window-span "
        "those W tokens touch at most ceil((W-1)/t) + 1 blocks. Releasing first, a transition never holds "
        "more than its target state, and requests hold disjoint slots, so N of them need at most N floors."
    ),
    "first-floor-history": (
        "Before h = (F-1)*t a decode step has fewer than F blocks allocated (ceil((h+1)/t) < F); at "
        "h = (F-1)*t it has exactly F, and the window [h+1-W, h] still reaches block S, so none is stale."
    ),
    "decode-tight": (
        "At h = (S+1)*t + W - 2 the window starts at the last token of block S, the first block past the "
        "sinks, so it touches the most blocks window-span allows and none of them is a sink block."
    ),
    "step-sufficient": (
        "An n-token step keeps the W + n - 1 tokens [h+1-W, h+n-1] besides the sinks; window-span with "
        "L = W + n - 1 bounds their blocks by ceil((W+n-2)/t) + 1."
    ),
    "step-tight": (
        "The same history as decode-tight starts the kept run at the last token of block S, so the run "
        "touches the most blocks window-span allows, for every n."
    ),
    "full-attention-lower-bound": (
        "Full attention holds every allocated block, a superset of what a window keeps at the same "
        "(h, c); and max(1, F) slots hold ceil(c/t) blocks exactly while c <= max(1, F) * t."
    ),
    "pool-group-sufficient": (
        "Each life cycle's share bounds its own live blocks (decode-sufficient for the two windows, "
        "the length condition for full attention); the proof adds the three bounds, with each given to "
        "Z3 as a lemma first."
    ),
    "ceil-identity": (
        "For t >= 1, ceil(a/t) = floor((a + t - 1)/t) for every integer a; with a = W - 1 that is "
        "upstream's (W + t - 2) // t."
    ),
    "ceil-identity-at-zero": (
        "The identity ceil(a/t) = floor((a + t - 1)/t) holds for negative a too; at a = -1 both sides "
        "are 0 for t >= 2 and -1 for t = 1."
    ),
    "vllm-sizing-covers": (
        "VLLM's ceil((W-1+T)/t) + 1 is step_floor with n = T + 1 tokens, one more than the step needs, "
        "so it covers it; for T = 1 it equals ceil(W/t) + 1, which exceeds ceil((W-1)/t) + 1 exactly when "
        "t divides W - 1."
    ),
    "cpp-sizing-covers": (
        "Ceil(W/t) and ceil((W-1)/t) differ only when W - 1 is a multiple of t, and then by one."
    ),
    "legacy-floor-insufficient": (
        "Any window whose live range straddles a block boundary, or any sink "
        "block beside a window, needs two blocks; only W = 1 without sinks never does."
    ),
    "decode-floor-short-for-multi-token": (
        "An n-token step keeps W + n - 1 tokens, and once that run crosses one more "
        "block boundary than W tokens can, the decode floor is one block short."
    ),
    "same-call-release-transient": (
        "A resize that moves history and capacity together and keeps the block it "
        "made stale until it returns holds the blocks of a 2-token step, one more than the floor when "
        "t divides W - 1."
    ),
    "same-call-release-transient-exact": (
        "The held blocks are live_blocks(h, h+2), a 2-token step's, bounded by step_floor(n = 2), which "
        "is the floor + 1 when t divides W - 1 and the floor otherwise; the worst-case history reaches it."
    ),
    "resume-partial-copy": (
        "The private copy of a partially filled reused block needs a slot while the "
        "source block is still held, one slot above what the resumed request keeps."
    ),
    "resume-partial-copy-exact": (
        "The copy adds exactly one slot when the reused history ends mid-block; what is kept at (h, h) "
        "then spans W - 1 tokens, so the peak exceeds the floor unless W - 1 tokens already reach one "
        "block fewer than W, that is unless (W - 2) % t == 0 (and t = 1 never has a partial block)."
    ),
    "pool-group-tight": (
        "At h = k*t the capacity k*t + 1 opens block k with one token, so a window ending at h starts "
        "ceil((W-1)/t) blocks earlier and touches the most blocks it can; once k >= F_i - 1 that holds "
        "for every SWA life cycle at once, and full attention holds all k + 1 allocated blocks."
    ),
    "mixed-steps-tight": (
        "Past the sinks, moving h by t shifts every kept block by exactly one, so the live-block count of"
        " any step repeats every t tokens and the worst case of decode-tight and step-tight recurs."
    ),
    "full-attention-below-floor": (
        "At the first history where the SWA life cycle holds F, (F-1)*t, full "
        "attention holds all F allocated blocks too, so a full-attention share m < F is short there."
    ),
    "full-attention-floor-exact": (
        "Up to h = (F-1)*t full attention holds ceil((h+1)/t) <= F blocks and the SWA life cycle at most "
        "F; at that history both hold F, so F + m slots serve exactly when m >= F."
    ),
    "in-flight-sufficient": (
        "Blocks are released only on history h - k, so a decode step keeps the W + k tokens [h+1-W-k, h] "
        "besides the sinks; window-span bounds their blocks by ceil((W-1+k)/t) + 1."
    ),
    "in-flight-tight": (
        "Shifting decode-tight's history by k starts the kept run of W + k tokens at the last token of "
        "block S, the most blocks window-span allows; (in_flight_floor - 1)*t is the first such history, "
        "as in first-floor-history."
    ),
    "eviction-floor-sufficient": (
        "A step that is due frees what is stale at h - k, so it holds at most in_flight_floor = "
        "S + ceil((W-1+k+t)/t). One that is not due has h - k + 1 - W < c + e for the cursor c = t*m "
        "(m >= S, the first block past the sinks not freed): it holds the sinks and blocks m .. floor(h/t), "
        "with h <= c + e + W - 2 + k, so at most S + floor((W+e+k-2)/t) + 1 = S + ceil((W-1+k+e)/t)."
    ),
    "eviction-floor-tight": (
        "For e >= t: from the first cursor (t*S) nothing is due until h - k + 1 - W reaches t*S + e, so at "
        "h = S*t + e + W - 2 + k every block from 0 is still held: S + ceil((W-1+k+e)/t). For e < t: at "
        "in-flight-tight's history the window starts at the last token of block S, which is at least e "
        "past any cursor an earlier step set (at most t*S), so the eviction is due and the step holds "
        "in_flight_floor."
    ),
    "prompt-lock-floor-sufficient": (
        "The held blocks are the live ones plus the locked blocks that are stale. The live ones are at most "
        "swa_floor; a locked block is stale only when the window has moved past it, and the lock has at "
        "most ceil((W-1)/t) blocks, so the sum is at most swa_floor + ceil((W-1)/t)."
    ),
    "prompt-lock-floor-tight": (
        "With the prompt ending on block S + ceil((W-1)/t) the lock is the ceil((W-1)/t) blocks after the "
        "sinks; at decode-tight's history shifted to that block the window holds swa_floor - S blocks past "
        "the lock, all apart from it, and the sinks are held too."
    ),
    "load-holds-prefix-floor": (
        "At history 0 no block is stale, so the live blocks are the allocated ones, ceil(c/t). A ceiling is at "
        "most F exactly when its numerator is at most F*t: ceil(c/t) <= F iff c <= F*t, with F = swa_floor."
    ),
    "decode-clock-due-every-e": (
        "d % e == 1 holds at d = 1, e + 1, 2e + 1, ...; 0 % e is 0. For d >= 1 the last such count is "
        "d - ((d-1) % e), at most e - 1 below d, and the counts strictly between have other residues."
    ),
    "decode-clock-floor-sufficient": (
        "A decode i <= e - 1 decodes after the one that freed at r holds the sinks and the blocks of the tokens "
        "[r + 1 - W - k, r + i]: W + k + i tokens, at most in_flight_floor at k + e - 1 by window-span. The "
        "first decode after an extend of n tokens from r keeps [r + 1 - W - k, r + n]: in_flight_floor at k + n."
    ),
    "decode-clock-floor-tight": (
        "Decode 1 is due (1 % e == 1 for e >= 2). Freed at in-flight-tight's history, the kept run starts at "
        "the last token of block S; e - 1 decodes on it is W + k + e - 1 tokens long, the most blocks "
        "window-span allows."
    ),
    "decode-clock-interval-one": (
        "t * max(1, floor((W-1)/t)) is 1 only with t = 1 and floor(W-1) <= 1. Any x % 1 is 0, never 1, so no "
        "decode frees; with the release point fixed, t more tokens of capacity add exactly one block."
    ),
    "forward-clock-no-floor": (
        "(f + e) % e = f % e, so every number such a request gets has the residue of f, and the clock is due "
        "exactly when that residue is 0."
    ),
    "eviction-interval-one": (
        "With e = 1 a step that is not due has h - k + 1 - W <= c, so the stale range at h ends where it "
        "ended at r (floor((h-k+1-W)/t) <= c/t and ranges only grow), and holding what was freed at r is "
        "holding what is stale at h."
    ),
    "refused-keeps-stale-cost": (
        "Both sides hold the allocated blocks [0, ceil((r+n)/t)) less the stale ones, at r - k and at r + d - k: "
        "the stale range only grows with the history, so the difference is the blocks whose last token lies in "
        "[r - k + 1 - W, r + d - k + 1 - W), a run of d tokens, holding the last token of at most ceil(d/t) "
        "blocks; at the worst-case history the window's first token moves onto the first block past the sinks' end."
    ),
    "preallocation-within-free": (
        "ceil(P/t) is the least number of blocks whose t tokens each reach P. An admitted step has n <= F, so "
        "min(n + ceil(P/t), F) lies between n and F and exceeds n by min(ceil(P/t), F - n): the blocks it "
        "takes past its need."
    ),
    "preallocation-keeps-waiting": (
        "The step leaves F - min(n + ceil(P/t), F) = max(0, F - n - ceil(P/t)) slots free. A waiting request "
        "of b blocks with n + b <= F (the spec admits it) fits in that exactly when b <= F - n - ceil(P/t)."
    ),
    "preallocation-never-keeps-waiting": (
        "With one pre-allocated block (P = t = 1) a step of one block in a pool of two takes both, and a "
        "request of one block the spec admits next finds none free."
    ),
    "ring-window-floor": (
        "ceil(min(c, W)/t) <= ceil(W/t) = ceil((W-1)/t) + 1 exactly when t divides W - 1 (else one less); "
        "against the spec: at c <= W nothing is stale (h + 1 - W <= 0), and past W the live blocks are "
        "ceil(c/t) - floor((h+1-W)/t) >= ceil(c/t) - floor((c-W)/t) >= ceil(W/t)."
    ),
    "free-order-cost": (
        "Both orders take the same m slots: the never-used ones and the freed ones are free in either. The front "
        "order evicts a cached slot only past the x uncached and f never-used ones, max(0, m - x - f); the end "
        "order past the f never-used ones evicts the q older cached ones first, then skips the x, so it evicts "
        "min(P, q) + max(0, P - q - x) with P = max(0, m - f): the two differ by at most the x skipped, and not "
        "at all once P >= q + x."
    ),
    "sync-floor-short-in-flight": (
        "One token in flight keeps W + 1 tokens, which can touch one block more than"
        " W tokens whenever t divides W - 1 (already at t = W = 1)."
    ),
    "sync-floor-short-in-flight-exact": (
        "W + 1 kept tokens touch at most ceil(W/t) + 1 blocks, which is ceil((W-1)/t) + 1 plus one "
        "exactly when t divides W - 1 (the arithmetic of cpp-sizing-covers)."
    ),
    "ssm-minimum": (
        "An SSM layer keeps one state page whatever the history, so beside an SWA life cycle the step "
        "holds one page plus the SWA live blocks: decode-sufficient and decode-tight plus one."
    ),
    "stale-is-token-level": (
        "Past the sinks, b < floor((h+1-W)/t) is (b+1)*t <= h+1-W, the last token of b before the window; "
        "when the sinks reach past ceil(h/t) the range is empty and no block past them ends before "
        "h + 1 - W <= h either."
    ),
    "shared-batch-exact": (
        "A holder needs every prefix block except its stale range clipped to the prefix, one interval; a "
        "block is needed by no holder exactly when it lies in every holder's interval, their intersection. "
        "Counting the prefix less that intersection once, plus each holder's blocks past the prefix, is the "
        "batch's need block for block."
    ),
    "sharing-never-raises": (
        "The intersection of the holders' gaps is no larger than any one gap, so the prefix is counted at "
        "most as often as the holders count it; each holder is within its step floor (step-sufficient)."
    ),
    "lookahead-sufficient": (
        "A step holding k2 draft slots and releasing on h - k1 keeps the tokens [h+1-W-k1, h+k2], a run of "
        "W + k1 + k2 tokens, which touches at most ceil((W-1+k1+k2)/t) + 1 blocks past the sinks (window-span)."
    ),
    "drafts-returned-at-commit": (
        "The step is lookahead-sufficient's. After the commit the capacity is h + d: the live blocks are the allocated "
        "[0, ceil((h+d)/t)) less the stale ones at max(0, h+d-k1), the in-flight run [h+d-W-k1+1, h+d-1] of at most "
        "W + k1 - 1 tokens, within in-flight-sufficient's floor; the blocks given back lie past the history (never "
        "stale), ceil(c/t) - ceil((h+d)/t) <= ceil((c-h-d)/t) by the ceiling's subadditivity; at-allocate releases on "
        "h <= h+d at a capacity h + d <= c: a subset of the step's blocks."
    ),
    "lookahead-tight": (
        "At h = (S+1)*t + W - 2 + k1 that run starts at the last token of the first block past the sinks, where "
        "a run touches the most blocks; it is the (k1+k2+1)-token step of step-tight."
    ),
    "hit-window-backed": (
        "In blocks: the hit ends a*(e//a) blocks in, with e = min(r1, M//t) - eagle, so it and the drafter's "
        "block lie below the run's end and within M; the window's first block is checked against r0 on that "
        "aligned length itself, and a null entry is a block before it."
    ),
    "hit-aligned": (
        "The hit is t * a * q for an integer q, or 0."
    ),
    "hit-valid": (
        "Each condition of valid_in_run is what run_hit established: alignment by construction, the end and M "
        "by the pop before the rounding down, the window start by the final check."
    ),
    "hit-longest": (
        "A longer whole-block length either is off the alignment, or ends past min(r1, M//t) - eagle blocks, or "
        "its window starts before the run: the window's first block grows with the length, so if the largest "
        "aligned candidate fails the check every longer one fails it too."
    ),
    "hit-null-accounting": (
        "The null entries are the blocks before the window's first, which for W >= 2 is the stale range at L; "
        "the null block is outside both the free and the used count, so free + used = P - 1."
    ),
    "mixed-pool-group-sufficient": (
        "Each life cycle stays within its own share (the lemmas): the SWA life cycle within its in-flight floor "
        "in t_s at every history (in-flight-sufficient), full attention within ceil(c/t_f) <= its share while "
        "c <= t_f * share; the group holds their sum. The SWA life cycle first holds F at capacity "
        "(F-1)*t_s + 1, which the ceiling full_share_in_blocks keeps within t_f * share."
    ),
    "mixed-pool-group-tight": (
        "Until the first block goes stale nothing is released, so at h = (F-1)*t_s the SWA step holds "
        "ceil(((F-1)*t_s + 1)/t_s) = F blocks and full attention ceil(((F-1)*t_s + 1)/t_f), its share: the sum "
        "is the minimum; with t_s = t_f the ceiling is F."
    ),
    "hit-mixed-valid": (
        "Each run_hit is a multiple of its A / t_i blocks of t_i, so of A, and the minimum of two multiples is "
        "one; each is at most its cap less the drafter's block, so at most L. Where the minimum is L, the life "
        "cycle whose run_hit is larger also returns exactly L (it cannot exceed its cap L + e*t_i less e*t_i), "
        "and run_hit is valid in its run (hit-valid), so L is valid for both."
    ),
    "lone-request-completes": (
        "Every step holds room for at most n = max(min(C, P), 1 + k) tokens past its history (a prefill chunk "
        "min(C, P - h) <= min(C, P), a decode step 1 + k), and live blocks of an m-token step are at most "
        "step_floor(m), which grows with m; full attention allocates ceil((h + m)/t) with h + m <= P + O + k. "
        "A step commits min(C, P - h) >= 1 or 1 token and never passes P + O, so P + O - h falls every step."
    ),
    "vllm-capped-gate-admits-at-chunk-floor": (
        "The cap is ceil((W - 1 + C)/t) + 1 where the chunk floor is ceil((W + C - 2)/t) + 1: one block more "
        "whenever t divides W + C - 2 (always at t = 1), and a long prompt reaches the cap; with drafts the first "
        "step's cdiv(min(C, P) + k, t) can pass the floor too (its chunk and drafts held at once)."
    ),
    "vllm-uncapped-gate-admits-at-chunk-floor": (
        "The gate charges cdiv(P, t), growing with the prompt, while the chunk floor does not depend on P: "
        "any prompt longer than the window and a chunk exceeds it."
    ),
    "sglang-gate-admits-at-chunk-floor": (
        "SGLang reserves at least the window, W - 1 tokens, plus a page, and asks for one token more than that "
        "(its test is strict): a one-token largest step (P = 1 or C = 1), or W <= 2, costs a page more than the "
        "chunk floor ceil((W + n - 2)/t) + 1 when t divides the span."
    ),
    "sglang-prefill-budget-admits-at-chunk-floor": (
        "SGLang rounds the prompt up to whole pages before it reserves: a one-token prompt in a page of t = 2 "
        "reserves the page past a window of W - 1 = 1 token, that window and a page, 4 tokens, strictly below the "
        "free ones: 3 pages, where the rule charges 2 and SGLang's own start-up accepts 2; at 2 pages the "
        "reservation equals the pool, and the chunk cut (the pages above min(O, W - 1) + t) leaves no page."
    ),
    "trtllm-min-quota-holds-floor": (
        "Upstream's minimum S + (W + t - 2) // t + 1 equals the rule's floor S + ceil((W - 1)/t) + 1 for every "
        "W >= 1, so the least quota is the floor's granules, and a quota the manager accepts, rounded up to the "
        "granularity, is at least that: the group's granules hold the floor."
    ),
    "trtllm-prefix-min-quota-holds-floor": (
        "One slot per life cycle is the pre-fix minimum; where a slot is a granule, the least quota holds one "
        "slot, and the floor is 2 as soon as there is a sink or the window spans two blocks."
    ),
    "kept-lone-request-resumes": (
        "A lone request holds what the pool uses, its step's live blocks, at most the step floor of its largest "
        "step (lone-request-completes), so at most the pool; a kept resume needs nothing beyond what it holds."
    ),
    "trtllm-resume-gate-admits-kept-lone-request": (
        "The gate reads use, not need: at the rule's charge a lone request can hold every slot (its worst step "
        "reaches the floor), 100% use, above 0.97, and its own held slots keep it from resuming."
    ),
    "preemption-spares-the-oldest": (
        "The newest running request is at position N - 1, which is at least 1 whenever N >= 2, and always a "
        "running position; so the oldest is preempted only when it runs alone."
    ),
    "hit-covers-written-kv": (
        "The hit is floor(min(w + f, w)/t) = floor(w/t) whole blocks, so its tokens end at floor(w/t)*t <= w, "
        "all written before the lookup; a write is never undone, so they are written at the read however "
        "many of the f tokens in flight run. The next block holds token floor(w/t)*t + t - 1 >= w: not written."
    ),
    "named-hit-covers-written-kv": (
        "Trusting names, the hit ends at floor((w + f)/t)*t, past w whenever the tokens in flight complete a "
        "block; a step dropped before it runs (g < f) never writes those tokens: t = 1, w = 0, f = 1, g = 0."
    ),
    "dropped-step-names-no-hit": (
        "After the drop the names end at floor(min(w + f, w)/t) = floor(w/t) blocks: a block holding a token at or "
        "past w is at index >= floor(w/t), and every block below ends at or before w; a later lookup takes at "
        "most the names."
    ),
    "worker-mask-reads-held-blocks": (
        "A token p >= h + 1 - W lies in block b = floor(p/t), whose last token (b + 1)*t - 1 >= p >= h + 1 - W: "
        "not every token of b is before the window, so b is not stale (a sink block never is)."
    ),
    "drafts-write-allocated-blocks": (
        "The step asks for e + d tokens, so ceil((e + d)/t) blocks are allocated; a draft position p < e + d lies "
        "in block floor(p/t) <= floor((e + d - 1)/t) = ceil((e + d)/t) - 1."
    ),
}
