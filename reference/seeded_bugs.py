"""The seeded bugs: one list of the deliberate errors swafloor's checks must catch, each bug once.

A row names a bug once and says where it is seeded and what catches it:

- ``theorems``: the theorems of the catalogue it flips. :mod:`swafloor.proofs.mutations` seeds it as
  a patch of the reference's formulas and checks that each of these changes outcome (``swafloor
  bench proofs`` scores them). Empty: not seeded in the formulas.
- ``campaigns``: the fuzz campaigns that catch it, :data:`TABLE_ONLY` (``swafloor fuzz --backend
  mutant:NAME``, compared on block tables, slot counts and slot ids) and :data:`DATA_PLANE`
  (``dataplane:mutant:NAME``, attention through its tables): :mod:`swafloor.fuzz.backends.mutants`
  builds it as the manager with this one behaviour changed; and :data:`ORACLE` (``swafloor fuzz
  --backend oracle --mutate-reference NAME``): the reference itself carries the bug and the
  independent oracle must notice (:mod:`swafloor.fuzz.backends.reference_mutants` builds it; ``covers``
  names the part of the spec it breaks); and :data:`SCHEDULER` (the serving loop's campaigns,
  :mod:`swafloor.fuzz.scheduler_campaigns`: lone requests through an admission gate, a request suspended
  and resumed after every step, growing requests preempting each other; run with the formula's patch
  applied, as ``swafloor serve-sim`` would run it); and :data:`EXECUTION` (the data plane of scheduling
  and execution as separate events, :mod:`swafloor.fuzz.engines.dataplane.execution`: every slot
  carries its writer, the worker reads through its own tables; the bug's hook replaced in
  :class:`~.hooks.ExecutionHooks`). The tests check each campaign named catches it.
  Empty: not seeded in a backend.

The docs' table is generated from this list. Data only: nothing here runs or imports anything of
swafloor's.
"""

from __future__ import annotations

import attrs

__all__ = ["SeededBug", "SEEDED_BUGS", "TABLE_ONLY", "DATA_PLANE", "ORACLE", "SCHEDULER", "EXECUTION", "CAMPAIGNS",
           "seeded_bug", "BREAKS", "BREAKS_IN_EXECUTION", "RESULT", "HIT", "part_of", "BREAKS_IN_DATA_PLANE", "SEEN_LATER", "SHOWN", "LATER", "breaks"]

#: ``swafloor fuzz --backend mutant:NAME``: the mutant's tables and counts against the reference's.
TABLE_ONLY = "table-only"
#: ``swafloor fuzz --backend dataplane:mutant:NAME``: attention computed through the mutant's tables.
DATA_PLANE = "data plane"
#: ``swafloor fuzz --backend oracle --mutate-reference NAME``: the oracle against the bugged reference.
ORACLE = "oracle"
#: the scheduler campaigns (``swafloor.fuzz.scheduler_campaigns``), the reference's formula patched.
SCHEDULER = "scheduler"
#: the execution data plane (``swafloor.fuzz.engines.dataplane.execution``): schedule, execute, drop.
EXECUTION = "execution"
CAMPAIGNS = (TABLE_ONLY, DATA_PLANE, ORACLE, SCHEDULER, EXECUTION)


def _campaigns(value: tuple[str, ...]) -> tuple[str, ...]:
    value = tuple(value)
    unknown = [c for c in value if c not in CAMPAIGNS]
    if unknown:
        raise ValueError(f"SeededBug.campaigns: {unknown} are not campaigns {CAMPAIGNS}")
    return value


@attrs.frozen
class SeededBug:
    """One seeded bug: ``name`` (``mutant:NAME`` / ``reference-mutant:NAME`` as a backend), what it
    changes, the theorems it flips, the campaigns that catch it, the part of the spec it breaks."""

    name: str
    description: str
    theorems: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    campaigns: tuple[str, ...] = attrs.field(default=(), converter=_campaigns)
    covers: str = ""


SEEDED_BUGS: tuple[SeededBug, ...] = (
    SeededBug("legacy-floor", "the pre-fix SWA floor: one slot per life cycle",
              ("decode-sufficient", "decode-tight", "pool-group-tight"), (TABLE_ONLY,)),
    SeededBug("no-inflight-token", "the live window is [h-W, h-1]: the in-flight token's +1 dropped (stale "
              "blocks released one token late)", ("decode-sufficient", "in-flight-sufficient", "stale-is-token-level"),
              (TABLE_ONLY, DATA_PLANE)),
    SeededBug("floor-division", "the SWA floor's window term is floor((W-1)/t) + 1 instead of the ceiling",
              ("decode-sufficient", "step-sufficient", "in-flight-sufficient"), (TABLE_ONLY, ORACLE), covers="sizing"),
    SeededBug("ignore-sinks", "the sink blocks left out: S taken as 0 (in the floor and the n-token worst case; "
              "the manager also releases them)", ("decode-sufficient", "step-sufficient"), (TABLE_ONLY,)),
    SeededBug("allocate-before-release", "blocks made stale by a resize stay held until it returns "
              "(hold-until-return), so the transient peak can exceed the pool", (), (TABLE_ONLY,)),
    SeededBug("release-inflight-block", "the block of the token in flight (position h) is freed when nothing "
              "else keeps it", (), (TABLE_ONLY, DATA_PLANE)),
    SeededBug("shared-slot", "a block taken while another active request holds slots of its pool group gets "
              "that request's lowest slot: one slot serves two requests (tables and counts unchanged: "
              "physical identity sees it)", (), (TABLE_ONLY, DATA_PLANE)),
    SeededBug("cpp-floor", "the SWA floor is the looser S + ceil(W/t) + 1",
              ("decode-tight", "first-floor-history", "pool-group-tight")),
    SeededBug("full-attention-floor-one", "full attention's minimum is 1 slot, not max(1, largest SWA floor)",
              ("full-attention-floor-exact", "pool-group-tight"), (ORACLE,), covers="sizing"),
    SeededBug("ssm-minimum-zero", "an SSM life cycle's minimum is 0 slots, not its one state page", ("ssm-minimum",)),
    SeededBug("release-one-too-many", "the stale range ends one block late: a live block is released",
              ("decode-tight", "step-tight", "pool-group-tight", "stale-is-token-level")),
    SeededBug("resize-peak-hold-as-release", "resize_peak ignores hold_stale: blocks made stale by the call are "
              "counted as released before it allocates",
              ("same-call-release-transient", "same-call-release-transient-exact")),
    SeededBug("first-resume-no-copy", "first_resume_peak leaves out the transient copy slot",
              ("resume-partial-copy", "resume-partial-copy-exact")),
    SeededBug("worst-case-history-late", "worst_case_history is one token late: (S+1)*t + W - 1 + k",
              ("decode-tight", "step-tight", "in-flight-tight")),
    SeededBug("in-flight-floor-ignores-k", "the in-flight floor is the synchronous floor for every k",
              ("in-flight-sufficient", "in-flight-tight"), (ORACLE,), covers="semantics.in_flight_tokens"),
    SeededBug("first-floor-at-worst-case", "the first history at the floor is (S+1)*t + W - 2 (issue 12)",
              ("first-floor-history",)),
    SeededBug("eviction-floor-without-block", "the eviction-interval floor is S + ceil((W-1+k+e)/t): max(e, t) "
              "read as e, so below a block's worth of interval it falls under the in-flight floor",
              ("eviction-floor-sufficient", "eviction-floor-tight")),
    # Admission and preemption (issue 32): seeded in the formulas, caught by the scheduler campaigns.
    SeededBug("admission-charges-prompt", "admission charges an SWA life cycle cdiv(P, t), the prompt's blocks, "
              "instead of the floor of the request's largest step", ("lone-request-completes", "kept-lone-request-resumes"),
              (SCHEDULER,)),
    SeededBug("resume-gate-at-full-utilisation", "the resume gate refuses whenever the pool group is fully used, "
              "the slots the suspended request itself holds included (TensorRT-LLM's max_util_for_resume at 1.0, "
              "read as a strict bound)", ("kept-lone-request-resumes",), (SCHEDULER,)),
    SeededBug("preempt-newest-other", "a step that runs out of slots always preempts the newest other running "
              "request, never itself while another runs: two growing requests preempt each other in turn",
              ("preemption-spares-the-oldest",), (SCHEDULER,)),
    # Scheduling and execution apart (issue 34): seeded in the formulas of execution.py and as a hook of the
    # execution layer, caught by the execution data plane at the step that reads or writes wrongly.
    SeededBug("names-trusted-before-execution", "a lookup takes every block named at schedule, its KV written or "
              "not, and a drop keeps the names: the hashes a step registered survive its free before it runs, "
              "and a hit reads KV that was never written",
              ("hit-covers-written-kv", "dropped-step-names-no-hit"), (EXECUTION,)),
    SeededBug("draft-write-without-block", "a step asks for its tokens only, no lookahead slots, while its drafter "
              "writes KV at the draft positions after it: through a block the request does not hold",
              ("drafts-write-allocated-blocks",), (EXECUTION,)),
    SeededBug("worker-mask-one-late", "the worker's mask starts one token before the live window (h - W): it "
              "reads through an id of its table (never shrunk) that the manager freed",
              ("worker-mask-reads-held-blocks",), (EXECUTION,)),
    # Seeded in the reference itself, for the oracle (swafloor.fuzz.backends.reference_mutants).
    SeededBug("released-on-history", "blocks released on h instead of h - k (the tokens in flight "
              "ignored)",
              (), (ORACLE,), covers="semantics.in_flight_tokens"),
    SeededBug("released-one-early", "blocks released on max(0, h - k) + 1: the first position the "
              "token in flight reads is lost",
              (), (ORACLE,), covers="the live window"),
    SeededBug("sinks-released", "sink blocks released like any other block", (), (ORACLE,), covers="sink blocks"),
    SeededBug("interval-ignored", "stale blocks freed at every step whatever the eviction interval",
              (), (ORACLE,), covers="semantics.eviction_interval"),
    SeededBug("eviction-one-late", "an eviction interval above 1 due one token late",
              (), (ORACLE,), covers="semantics.eviction_interval"),
    SeededBug("decode-clock-from-zero", "under the decode clock (eviction_clock decodes) a decode frees at "
              "d % e == 0: its request's first decode frees, then every e-th, one decode early",
              ("decode-clock-due-every-e",)),
    SeededBug("lookahead-ignored", "pools sized as if there were no draft slots (lookahead tokens read as 0)",
              (), (ORACLE,), covers="semantics.lookahead_tokens"),
    SeededBug("one-block-size", "every life cycle in the config's block size: a layer's own "
              "tokens_per_block ignored (pools bumped to that layout's minimum)",
              (), (ORACLE,), covers="block sizes per life cycle (layers[i].tokens_per_block)"),
    SeededBug("full-share-same-size-only", "full attention's share counts only the SWA life cycles of its own "
              "block size (the others' floors dropped, not converted)",
              ("mixed-pool-group-sufficient", "mixed-pool-group-tight"), (ORACLE,),
              covers="sizing, block sizes per life cycle"),
    SeededBug("hit-aligned-to-t", "a common-prefix hit aligned to the config's block size, not to the lcm of "
              "the life cycles' block sizes", (), (ORACLE,), covers="semantics.hit_rule, block sizes per life cycle"),
    SeededBug("cache-aligned-swapped", "every freed block cached where only those an aligned hit reads "
              "should be, and back", (), (ORACLE,), covers="semantics.cache_aligned"),
    SeededBug("prompt-tail-swapped", "the block a prompt ends inside named by the prompt's whole hash blocks "
              "where it should not be, and back", (), (ORACLE,), covers="semantics.cache_prompt_tail"),
    SeededBug("cache-freed-ignored", "freed blocks keep nothing: no cached content and no hit on a freed block",
              (), (ORACLE,), covers="semantics.cache_freed"),
    SeededBug("hit-rule-swapped", "the other hit rule: one hit length for every life cycle where each has its "
              "own, and back", (), (ORACLE,), covers="semantics.hit_rule"),
    SeededBug("cache-scheduled-swapped", "a block's content counts as computed once scheduled where it should be "
              "once committed, and back", (), (ORACLE,), covers="semantics.cache_scheduled"),
    SeededBug("uncached-to-tail-swapped", "a freed block that keeps nothing joins the free queue's end where it "
              "should go to its front, and back", (), (ORACLE,), covers="semantics.uncached_to_tail"),
    SeededBug("release-tail-for-windows", "a sliding window's release too puts the freed blocks that keep nothing "
              "at the free queue's end, where under release_uncached_to_tail only a life cycle without a window "
              "does (hook release_to_tail)", (), (ORACLE,), covers="semantics.release_uncached_to_tail"),
    SeededBug("load-holds-prefix-swapped", "a first resume's load holds a block for every loaded token where it "
              "should hold the live ones only, and back", (), (ORACLE,), covers="semantics.load_holds_prefix"),
    SeededBug("load-ignores-hit", "a first resume's load holds a block for every reused token even past a "
              "prefix-cache hit, where it should hold the hit's live blocks and the loaded ones", (), (ORACLE,),
              covers="semantics.load_holds_prefix"),
    SeededBug("lazy-frees-at-commit", "at-allocate releases at commit anyway",
              (), (ORACLE,), covers="semantics.free_stale"),
    SeededBug("at-commit-frees-lazily", "at-commit releases nothing at commit, only at the next "
              "resize",
              (), (ORACLE,), covers="semantics.free_stale"),
    SeededBug("lazy-release-undone", "at-allocate's release at the start of a resize is undone when "
              "the allocation fails",
              (), (ORACLE,), covers="semantics.free_stale, failure path"),
    SeededBug("refused-step-frees-stale", "under refused_keeps_stale a resize still frees the blocks that left "
              "the window before its gate, and that release stands when it is refused",
              (), (ORACLE,), covers="semantics.refused_keeps_stale, failure path"),
    SeededBug("stale-freed-without-growth", "under stale_freed_on_growth a resize that adds no block still frees "
              "the blocks that left the window",
              (), (ORACLE,), covers="semantics.stale_freed_on_growth"),
    SeededBug("prompt-lock-never-taken", "under prompt_lock no request keeps its prompt's last window locked: "
              "its SWA blocks are freed once the window leaves them",
              (), (ORACLE,), covers="semantics.prompt_lock"),
    SeededBug("prompt-lock-kept-after-release", "under prompt_lock the tree lock outlives a suspension that "
              "frees the request's blocks: recomputing, it keeps its first prompt's last window again",
              (), (ORACLE,), covers="semantics.prompt_lock, semantics.suspend"),
    SeededBug("published-at-commit", "under publish_on_release content is named as it is committed (as "
              "without the option), not only when a resume or a close publishes it",
              (), (ORACLE,), covers="semantics.publish_on_release"),
    SeededBug("close-publishes-nothing", "under publish_on_release a finished request publishes nothing: only "
              "prompts are ever findable",
              (), (ORACLE,), covers="semantics.publish_on_release"),
    SeededBug("recomputed-last-block-uncharged", "under publish_on_release a first resume whose reused history "
              "ends on a whole block holds no slot for computing that block again (nor for the block before "
              "the locked window)",
              (), (ORACLE,), covers="semantics.publish_on_release"),
    SeededBug("ring-never-wraps", "under window_ring a window never wraps onto its ring: past W tokens it takes a "
              "new block every t tokens", (), (ORACLE,), covers="semantics.window_ring"),
    SeededBug("recompute-keeps-slots", "a recompute suspend frees no slot",
              (), (ORACLE,), covers="semantics.suspend"),
    SeededBug("recompute-keeps-lengths", "a recompute suspend keeps capacity and history",
              (), (ORACLE,), covers="semantics.suspend"),
    SeededBug("release-forgets-lengths", "a release suspend drops the computed tokens, as recompute "
              "does",
              (), (ORACLE,), covers="semantics.suspend"),
    SeededBug("keep-frees", "a keep suspend frees every slot", (), (ORACLE,), covers="semantics.suspend"),
    SeededBug("kept-resume-charges-all", "resuming a request that kept its slots checks room for all "
              "its blocks again",
              (), (ORACLE,), covers="semantics.suspend, failure path"),
    SeededBug("copy-per-layer", "the first-resume copy slot charged per layer, not per life cycle",
              (), (ORACLE,), covers="semantics.first_resume_copy"),
    SeededBug("copy-when-aligned", "the first-resume copy slot charged for a block-aligned reused "
              "history too",
              (), (ORACLE,), covers="semantics.first_resume_copy"),
    SeededBug("no-ssm-snapshot-copy", "no copy slot for the SSM state snapshot",
              (), (ORACLE,), covers="semantics.first_resume_copy"),
    SeededBug("copy-switch-ignored", "the copy slot charged with first_resume_copy off",
              (), (ORACLE,), covers="semantics.first_resume_copy"),
    SeededBug("copy-never", "no copy slot with first_resume_copy on",
              (), (ORACLE,), covers="semantics.first_resume_copy"),
    SeededBug("hold-uncharged", "hold-until-return does not charge the held-back blocks in its "
              "feasibility check",
              (), (ORACLE,), covers="semantics.release_order"),
    SeededBug("hold-leaks", "hold-until-return never gives back the slots of the blocks it held until"
              " it returned",
              (), (ORACLE,), covers="semantics.release_order"),
    SeededBug("release-order-swapped", "each release order behaves as the other",
              (), (ORACLE,), covers="semantics.release_order"),
    SeededBug("interleaved-pool-groups", "life cycle i served from pool group i mod G whatever the "
              "map",
              (), (ORACLE,), covers="pool-group mapping"),
    SeededBug("sorted-pool-groups", "the pool-group map taken as monotone (sorted)",
              (), (ORACLE,), covers="pool-group mapping"),
    SeededBug("failed-resize-keeps-partial", "a failed resize keeps its allocations in the pool "
              "groups that had room",
              (), (ORACLE,), covers="failure path"),
    SeededBug("failed-resize-keeps-history", "a failed resize keeps the new history",
              (), (ORACLE,), covers="failure path"),
    SeededBug("shortfall-without-released", "a shortfall reports only free slots as available, not "
              "the blocks the step releases",
              (), (ORACLE,), covers="failure path"),
    SeededBug("shared-freed-when-stale-for-one", "a shared block is freed when it is stale for one holder, "
              "though another still holds it", ("shared-batch-exact",), (TABLE_ONLY, DATA_PLANE, ORACLE),
              covers="semantics.prefix_sharing"),
    SeededBug("shared-counted-per-holder", "a shared block is counted once per holder (pool use and batch "
              "sizing)", ("shared-batch-exact",), (TABLE_ONLY,)),
    SeededBug("hit-holds-null-blocks", "a cache hit also holds the prefix blocks outside its window (its null "
              "entries; the manager's: those whose content a held or cached slot keeps)",
              ("shared-batch-exact",), (TABLE_ONLY,)),
    SeededBug("eagle-pops-first-block", "with EAGLE a cache hit gives back the first block of the matched window "
              "instead of the last: the hit keeps the block the drafter must recompute (one block too long)",
              ("hit-window-backed", "hit-valid", "hit-longest"), (ORACLE,), covers="semantics.eagle"),
    SeededBug("align-after-pop", "the hit is matched against the cached run after the EAGLE pop but aligned "
              "only afterwards: rounding down to the alignment moves the first uncomputed token's window before "
              "the run, onto null blocks (in one pass over the runs; a manager that iterates to the longest hit's "
              "fixed point, as the reference does, is unchanged by it)", ("hit-window-backed", "hit-valid")),
    SeededBug("align-before-pop", "the matched prefix is aligned first and the EAGLE pop taken after: the hit "
              "is no multiple of the alignment when the block size is below it", ("hit-aligned", "hit-valid", "hit-longest"),
              (ORACLE,), covers="semantics.eagle"),
    SeededBug("preallocation-in-tokens", "a step pre-allocates preallocate_tokens blocks where it should take "
              "ceil(P / t): the tokens counted as blocks (a step of vLLM 0.8.3's holds up to t times too many)",
              ("preallocation-within-free",)),
    SeededBug("null-counted-free", "the pool's shared null block is counted as free (or evictable): a hit "
              "admitted on that count can be handed the null block", ("hit-null-accounting",), (ORACLE,),
              covers="pool accounting"),
    SeededBug("eagle-ignored", "the EAGLE hit rule read as off: no block is given back to the drafter",
              (), (ORACLE,), covers="semantics.eagle"),
    SeededBug("draft-slots-named", "a step's draft slots counted as scheduled tokens: blocks holding only "
              "drafts become findable content", (), (ORACLE,), covers="semantics.lookahead_tokens"),
    SeededBug("drafts-kept-at-commit", "under drafts_returned_at_commit a commit keeps the step's capacity "
              "(draft_return.returned_capacity, the manager's return_drafts): the draft slots stay held to the "
              "next step, as under lookahead_tokens alone", ("drafts-returned-at-commit",)),
)


def seeded_bug(name: str) -> SeededBug:
    """The row named ``name``; KeyError when there is none."""
    for bug in SEEDED_BUGS:
        if bug.name == name:
            return bug
    raise KeyError(name)


#: A call's result: ok or out of slots (``outcome``) and, out of slots, the shortfall it reports
#: (``shortfalls``): one value, the call's :class:`~swafloor.reference.Outcome`.
RESULT = ("outcome", "shortfalls")
#: A hit: what the first resume asks and takes, and which freed blocks stay cached.
HIT = RESULT + ("pool_used", "cached")

#: Per seeded bug that a fuzz campaign catches: the observable parts it breaks (the fuzz harness's
#: part names). It counts as caught only when the first divergence is in one of them; a divergence
#: anywhere else (its own snapshot refusing to be taken, a pool size the adapter set itself) is not a
#: catch. Sizing bugs break what an undersized pool does: a call runs out of slots at the step the
#: pool runs short (``pool_totals`` is never what catches them: a campaign scoring them leaves it out).
BREAKS: dict[str, tuple[str, ...]] = {
    # sizing: the pool runs short at a step the floor serves
    "legacy-floor": RESULT,
    "floor-division": RESULT,
    "ignore-sinks": RESULT + ("tables",),  # also releases the sink blocks
    "full-attention-floor-one": RESULT,
    "in-flight-floor-ignores-k": RESULT,
    "lookahead-ignored": RESULT,
    "full-share-same-size-only": RESULT,
    # which blocks are held
    "no-inflight-token": RESULT + ("tables",),  # an extra block held: in the table, or the call runs out holding it
    "release-inflight-block": ("tables",),
    # the blocks a call releases change what it needs: the call's result at that step, or the table after it
    "released-on-history": RESULT + ("tables",),
    "released-one-early": RESULT + ("tables",),
    "sinks-released": RESULT + ("tables",),
    "interval-ignored": RESULT + ("tables",),
    "eviction-one-late": RESULT + ("tables",),
    "load-holds-prefix-swapped": RESULT + ("tables",),  # the first resume holds other blocks, or runs out
    "load-ignores-hit": RESULT + ("tables",),  # the first resume past a hit holds more blocks, or runs out
    "lazy-frees-at-commit": ("tables",),
    "at-commit-frees-lazily": ("tables",),
    "lazy-release-undone": RESULT + ("tables",),
    "refused-step-frees-stale": RESULT + ("tables",),
    "stale-freed-without-growth": RESULT + ("tables",),
    # the tree lock: which blocks are held (the table), and what a call then needs (its result)
    "prompt-lock-never-taken": RESULT + ("tables",),
    "prompt-lock-kept-after-release": RESULT + ("tables",),
    "ring-never-wraps": RESULT + ("tables",),
    "keep-frees": ("tables",),
    "one-block-size": RESULT + ("tables",),  # blocks counted in the wrong size: the call asks the wrong count
    # the transient peak of one call
    "allocate-before-release": RESULT,
    "hold-uncharged": RESULT,
    "release-order-swapped": RESULT,
    "kept-resume-charges-all": RESULT,
    "shortfall-without-released": ("shortfalls",),
    # the first-resume copy: slots charged for the call only
    "copy-per-layer": RESULT,
    "copy-when-aligned": RESULT,
    "no-ssm-snapshot-copy": RESULT,
    "copy-switch-ignored": RESULT,
    "copy-never": RESULT,
    # slots in use
    "hold-leaks": ("pool_used",),
    "recompute-keeps-slots": ("pool_used",),
    "failed-resize-keeps-partial": ("pool_used",),
    # which pool group serves a life cycle: the call asks the wrong group (its shortfall names it), the
    # slots are used in the wrong group
    "interleaved-pool-groups": RESULT + ("pool_used",),
    "sorted-pool-groups": RESULT + ("pool_used",),
    "null-counted-free": ("pool_used",),
    "shared-counted-per-holder": ("pool_used",),
    "shared-freed-when-stale-for-one": ("pool_used", "cached"),  # the slot freed (and, cached, listed free)
    # lengths
    "recompute-keeps-lengths": ("lengths",),
    "release-forgets-lengths": ("lengths",),
    "failed-resize-keeps-history": ("lengths",),
    # physical identity
    "shared-slot": ("slots",),
    # the cache: which freed blocks keep their content (``cached``) and so which hit a first resume
    # takes, seen in what that resume asks (its result) and takes (``pool_used``: a hit on a held slot
    # takes none); the oracle campaigns show no hit length of their own
    "hit-aligned-to-t": HIT,
    "cache-aligned-swapped": HIT,
    "prompt-tail-swapped": HIT,
    # no cache: a closed request's blocks are gone, so a create sharing its prefix is refused (``errors``)
    "cache-freed-ignored": HIT + ("errors",),
    "hit-rule-swapped": HIT,
    "cache-scheduled-swapped": HIT,
    "uncached-to-tail-swapped": HIT,
    "release-tail-for-windows": HIT,
    "eagle-pops-first-block": HIT,
    "eagle-ignored": HIT,
    "align-before-pop": HIT,
    "draft-slots-named": HIT,
    # publication: what is findable (a later resume's hit: its result and slots) and what a freed block
    # keeps cached; the recomputed last block's slot is taken for the call only (its result, and the cached
    # page its slot evicts)
    "published-at-commit": HIT,
    "close-publishes-nothing": HIT,
    "recomputed-last-block-uncharged": RESULT + ("cached",),
    # the held null blocks are slots in use (``pool_used``) or, where the pool has none to spare, the
    # resume that holds them runs out (its result: ``shortfalls``/``outcome``) at the same step
    "hit-holds-null-blocks": ("pool_used",) + RESULT,
}


def part_of(field: str) -> str:
    """The part a divergence's field names: ``tables[r0][1][4]`` -> ``tables``, ``slots.cached`` ->
    ``slots``."""
    return field.split("[", 1)[0].split(".", 1)[0]


#: Per seeded bug the data plane catches (``dataplane:mutant:NAME``): the parts it breaks there. The
#: data plane compares the attention each step computes through the tables (``data``), outcomes,
#: lengths and errors, not tables, slot counts or slot ids.
BREAKS_IN_DATA_PLANE: dict[str, tuple[str, ...]] = {
    "release-inflight-block": ("data",),  # the token in flight reads a block no slot holds
    "shared-slot": ("data",),  # one request's write overwrites another's
    "shared-freed-when-stale-for-one": ("data",),  # the other holder reads a slot handed out again
    # an extra block held: no data lost; where the pool has no slot for it the call runs out
    # (``outcome``), or a lone decoding request at the floor does (``liveness``)
    "no-inflight-token": ("outcome", "liveness"),
}


#: Per seeded bug the execution data plane catches: the parts it breaks there, the field's part of each
#: divergence it raises (``read``: a query read a slot that is unwritten, holds another token, or through
#: an id the manager does not hold for it; ``write``: a step wrote through a block the request does not hold).
BREAKS_IN_EXECUTION: dict[str, tuple[str, ...]] = {
    "names-trusted-before-execution": ("read",),  # the reader reads the hit's never-written slot
    "draft-write-without-block": ("write",),  # the drafter writes past the request's table
    "worker-mask-one-late": ("read",),  # the mask reads through a freed id
}


def breaks(name: str, campaign: str) -> tuple[str, ...]:
    """The parts the seeded bug ``name`` breaks, as ``campaign`` observes them."""
    if campaign == EXECUTION:
        return BREAKS_IN_EXECUTION[name]
    return BREAKS_IN_DATA_PLANE[name] if campaign == DATA_PLANE else BREAKS[name]


#: Relations of :data:`SEEN_LATER`. ``SHOWN``: the bug's first effect is on state no observation reads
#: (the content named for a held block, a prefix record, a pending copy); it is caught at the first step
#: its effect reaches what an observation reads or a call returns, exactly. ``LATER``: its effect is in
#: no part the campaign compares; it is caught where it shows in one, at a later step.
SHOWN = "when shown"
LATER = "later"

#: A seeded bug fires at the first operation in which its changed hook has an effect (what the call
#: returns or the state it leaves differs from the spec's: :mod:`swafloor.fuzz.firing`); a campaign
#: catches it at that step. Where its effect can only become visible at a later step, the pair
#: (bug, campaign) is listed here: the relation and why. A divergence before the firing, or after it
#: with no relation stated, is no catch.
SEEN_LATER: dict[tuple[str, str], tuple[str, str]] = {
    # the prefix cache: a bug in what content is named first changes what a block is named while it is
    # held (no observation reads that); it shows once the block is freed (the cached free blocks) or a
    # later first resume hits it, or misses it (what that resume asks and takes)
    ("cache-aligned-swapped", ORACLE): (SHOWN, "which held blocks are named (only those an aligned hit reads, or "
                                              "all) shows once they are freed and cached, or a later resume hits them"),
    ("prompt-tail-swapped", ORACLE): (SHOWN, "the content named for the held block a prompt ends inside shows once "
                                            "that block is freed and cached, or a later resume hits it"),
    ("cache-freed-ignored", ORACLE): (SHOWN, "a request's prefix record differs from its create on; it shows when a "
                                            "closed request's blocks are gone: a later create sharing them is refused"),
    ("cache-scheduled-swapped", ORACLE): (SHOWN, "a step names its held blocks' content when scheduled rather than "
                                                "committed (or back): seen once such a block is freed and cached, or hit"),
    ("eagle-ignored", ORACLE): (SHOWN, "with EAGLE read as off, what a step names of its held blocks differs; it "
                                      "shows once they are freed and cached, or a later resume's hit keeps a block"),
    ("published-at-commit", ORACLE): (SHOWN, "a commit names its held blocks' content where only a resume or a "
                                            "close should: seen once such a block is freed and cached, or hit"),
    ("uncached-to-tail-swapped", ORACLE): (LATER, "which free slot a block takes differs at once (the oracle names no "
                                                 "slot); it shows once a slot taken evicts another cached block than "
                                                 "the spec's: the cached free blocks, or a later resume's hit"),
    ("release-tail-for-windows", ORACLE): (LATER, "where a window's release puts a freed slot that keeps nothing "
                                                 "shows only once a slot taken evicts another cached block than the "
                                                 "spec's: the cached free blocks, or a later resume's hit"),
    ("draft-slots-named", ORACLE): (SHOWN, "the held blocks holding only draft slots are named: seen once they are "
                                          "freed and cached, or a later resume hits them"),
    # hits on slots others still hold: its null entries take no slot and no table lists them (the slot
    # map shows them, but identity compares only blocks both sides hold); they show as a slot still in
    # use when the last other holder lets go, or where a resume holding them runs out of slots
    ("hit-holds-null-blocks", TABLE_ONLY): (LATER, "the null entries it holds share slots their other holders still "
                                                   "hold: no table and no count shows them until those let go"),
    # the data plane compares no slot ids or counts: a slot two requests hold, or one handed out again
    # while another still holds it, shows in the data when the other request next reads it
    ("shared-slot", DATA_PLANE): (LATER, "the shared slot is overwritten by the request that took it; the data plane "
                                         "sees it when the first holder next reads that block"),
    # the lookup fires when the reader is created on content whose naming step is still in flight; what it
    # took shows when the reader's step reads that block, after the naming step was dropped
    ("names-trusted-before-execution", EXECUTION): (LATER, "the lookup takes blocks whose KV is not yet written "
                                                           "when the reader is created; the read of one, after the "
                                                           "step that named it was dropped, is the reader's step"),
    ("shared-freed-when-stale-for-one", DATA_PLANE): (LATER, "the slot freed under another holder shows in the data "
                                                             "once it is taken and written again and that holder reads it"),
}
