"""Counterexamples replayed on the reference manager.

Each replay builds a :class:`~swafloor.reference.Manager` with the counterexample's parameters (one
SWA life cycle: window ``W``, ``S * t`` sink tokens, so ``S`` sink blocks), drives requests through
the counterexample's history with the manager's own operations, and reports the step that fails
(or the peak that exceeds the floor). ``confirmed`` is True only when every step before that one
succeeded and that one really failed: a replay that cannot reproduce its counterexample says so.
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping

import attrs

from swafloor.reference import AttentionLayer, Config, Manager, Semantics, admission, build_layout, floors, peers

from .theorem import Replay

__all__ = [
    "legacy_deadlock",
    "multi_token_step",
    "full_attention_short",
    "in_flight_short",
    "same_call_transient",
    "resume_copy",
    "lone_run",
    "Driver",
    "vllm_gate_refuses",
    "sglang_gate_refuses",
    "trtllm_resume_refuses",
    "named_hit_reads_unwritten",
    "serve_lasso",
    "serving_livelocks",
    "growth_keeps_stale",
]


class _Driver:
    """A manager whose every call is recorded with its outcome and followed by ``check()``."""

    def __init__(self, config: Config, release_order: str = "release-first", below_fixed: bool = False):
        """``below_fixed``: the replay is of a post-fix claim whose pool lies below the fixed rule's
        minimum; the config is built under the legacy rule only so that the manager accepts those slots
        (the rule changes nothing else the manager does), and the trace says so."""
        self.manager = Manager(config, release_order=release_order)
        layers = ", ".join(f"(window={x.window}, sink_tokens={x.sink_tokens})" for x in config.layers)
        extra = ""
        if config.pool_groups is not None:
            extra += f", pool_groups={config.pool_groups}"
        if config.semantics.in_flight_tokens:
            extra += f", in_flight_tokens={config.semantics.in_flight_tokens}"
        rule = f"floor_rule={config.floor_rule.value}"
        if below_fixed:
            fixed = build_layout(attrs.evolve(config, floor_rule="fixed", slots=None)).min_slots
            rule = (f"slots below the fixed rule's minimum {tuple(fixed)}, accepted for this replay "
                    "(the rule only validates slots)")
        self.trace: list[str] = [
            f"Manager(t={config.tokens_per_block}, layers=[{layers}], slots={config.slots}{extra}, "
            f"{rule}, release_order={release_order})"
        ]
        self.failures: list[str] = []

    def call(self, op: str, rid: Hashable, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.manager, op)(rid, *args, **kwargs)
        shown = ", ".join([repr(rid), *map(str, args), *(f"{k}={v}" for k, v in kwargs.items())])
        line = f"{op}({shown})"
        if result is not None:
            line += f" -> {result.describe()}"
            if not result:
                self.failures.append(line)
        self.trace.append(line)
        self.manager.check()
        return result


def _config(t: int, window: int, sink_blocks: int, slots: int, rule: str = "fixed") -> Config:
    return Config(
        tokens_per_block=t,
        layers=[AttentionLayer(window=window, sink_tokens=sink_blocks * t)],
        slots=(slots,),
        floor_rule=rule,
    )


def _decode_to(d: _Driver, rids: tuple[Hashable, ...], h: int) -> bool:
    """Create, resume and decode the requests in lockstep (all resize, then all commit) from history
    0 to ``h``; True when every call succeeded."""
    for rid in rids:
        d.call("create", rid)
        if not d.call("resume", rid):
            return False
    for k in range(h):
        for rid in rids:
            if not d.call("resize", rid, k + 1, k):
                return False
        for rid in rids:
            d.call("commit", rid, 1)
    return True


def _verdict(d: _Driver, reached: bool, failed: Any, what: str) -> Replay:
    confirmed = reached and failed is not None and not failed and len(d.failures) == 1
    if confirmed:
        summary = f"{what}: {d.failures[0]}"
    elif not reached:
        summary = f"NOT REPRODUCED: an earlier step failed: {d.failures[:1]}"
    else:
        summary = f"NOT REPRODUCED: {what} succeeded"
    return Replay(confirmed, summary, tuple(d.trace))


def legacy_deadlock(cex: Mapping[str, int]) -> Replay:
    """The pre-fix pool (one slot per life cycle) and a lone request decoding to history ``h``."""
    t, w, s, h = cex["t"], cex["W"], cex["S"], cex["h"]
    d = _Driver(_config(t, w, s, floors.legacy_floor(), rule="legacy"))
    reached = _decode_to(d, ("r0",), h)
    failed = d.call("resize", "r0", h + 1, h) if reached else None
    return _verdict(d, reached, failed, f"decode step at h={h} with {floors.legacy_floor()} slot")


def multi_token_step(cex: Mapping[str, int]) -> Replay:
    """A pool at the decode floor; decode to ``h``, then one ``n``-token step."""
    t, w, s, h, n = cex["t"], cex["W"], cex["S"], cex["h"], cex["n"]
    floor = floors.swa_floor(t, w, s)
    d = _Driver(_config(t, w, s, floor))
    reached = _decode_to(d, ("r0",), h)
    failed = d.call("resize", "r0", h + n, h) if reached else None
    return _verdict(d, reached, failed, f"{n}-token step at h={h} with the decode floor {floor}")


def full_attention_short(cex: Mapping[str, int]) -> Replay:
    """One SWA life cycle and full attention in one pool group of ``F + m`` slots (the legacy rule, so
    the manager accepts a full-attention share below the floor); a lone request decodes to ``h``."""
    t, w, s, m, h = cex["t"], cex["W"], cex["S"], cex["m"], cex["h"]
    floor = floors.swa_floor(t, w, s)
    config = Config(
        tokens_per_block=t,
        layers=[AttentionLayer(window=w, sink_tokens=s * t), AttentionLayer()],
        pool_groups=(0, 0),
        slots=(floor + m,),
        floor_rule="legacy",
    )
    d = _Driver(config, below_fixed=True)
    reached = _decode_to(d, ("r0",), h)
    failed = d.call("resize", "r0", h + 1, h) if reached else None
    return _verdict(d, reached, failed, f"decode step at h={h} with SWA floor {floor} + full attention {m}")


def in_flight_short(cex: Mapping[str, int]) -> Replay:
    """A pool at the synchronous floor, one token in flight (``Semantics(in_flight_tokens=1)``; the
    legacy rule, so the manager accepts a pool below the in-flight floor); a lone request decodes to
    ``h``."""
    t, w, s, h = cex["t"], cex["W"], cex["S"], cex["h"]
    floor = floors.swa_floor(t, w, s)
    config = Config(
        tokens_per_block=t,
        layers=[AttentionLayer(window=w, sink_tokens=s * t)],
        slots=(floor,),
        floor_rule="legacy",
        semantics=Semantics(in_flight_tokens=1),
    )
    d = _Driver(config, below_fixed=True)
    reached = _decode_to(d, ("r0",), h)
    failed = d.call("resize", "r0", h + 1, h) if reached else None
    return _verdict(d, reached, failed, f"decode step at h={h} with one token in flight at the floor {floor}")


def same_call_transient(cex: Mapping[str, int]) -> Replay:
    """Decode steps as single resizes that advance history and capacity together (from ``(k, k+1)``
    to ``(k+1, k+2)``), holding the blocks they make stale until they return, at the floor; then the
    same step with one slot more, to show the peak is the floor + 1."""
    t, w, s, h = cex["t"], cex["W"], cex["S"], cex["h"]
    floor = floors.swa_floor(t, w, s)

    def run(slots: int) -> tuple[_Driver, bool, Any]:
        d = _Driver(_config(t, w, s, slots), release_order="hold-until-return")
        d.call("create", "r0")
        reached = bool(d.call("resume", "r0")) and bool(d.call("resize", "r0", 1, 0))
        for k in range(h):
            reached = reached and bool(d.call("resize", "r0", k + 2, k + 1))
        d.manager.reset_peaks()
        return d, reached, (d.call("resize", "r0", h + 2, h + 1) if reached else None)

    d, reached, failed = run(floor)
    replay = _verdict(d, reached, failed, f"one-call step from h={h} holding stale blocks, {floor} slots")
    roomy, roomy_reached, ok = run(floor + 1)
    peak = roomy.manager.peak_used(0)
    roomy.trace.append(f"peak_used(0) = {peak} during that step (floor {floor})")
    confirmed = replay.confirmed and roomy_reached and bool(ok) and peak > floor
    summary = replay.summary + (f"; with {floor + 1} slots it succeeds at peak {peak}" if confirmed else "")
    return Replay(confirmed, summary, replay.trace + ("-- again with one slot more --",) + tuple(roomy.trace))


def resume_copy(cex: Mapping[str, int]) -> Replay:
    """A request reusing ``h`` committed tokens resumed for the first time, at the floor and with one
    slot more (observing the peak)."""
    t, w, s, h = cex["t"], cex["W"], cex["S"], cex["h"]
    floor = floors.swa_floor(t, w, s)
    d = _Driver(_config(t, w, s, floor))
    d.call("create", "r0", reused_history=h)
    failed = d.call("resume", "r0")
    replay = _verdict(d, True, failed, f"first resume reusing {h} tokens at the floor {floor}")
    roomy = _Driver(_config(t, w, s, floor + 1))
    roomy.call("create", "r0", reused_history=h)
    ok = roomy.call("resume", "r0")
    peak = roomy.manager.peak_used(0)
    roomy.trace.append(f"peak_used(0) = {peak} (floor {floor})")
    confirmed = replay.confirmed and bool(ok) and peak > floor
    summary = replay.summary + (f"; with {floor + 1} slots it succeeds at peak {peak}" if confirmed else "")
    return Replay(confirmed, summary, replay.trace + ("-- again with one slot more --",) + tuple(roomy.trace))


def lone_run(d: _Driver, rid: Hashable, prompt: int, output: int, chunk: int, lookahead: int) -> bool:
    """:func:`swafloor.reference.admission.lone_run` on the driver's manager, each call traced."""
    return admission.lone_run(d.call, rid, prompt, output, chunk, lookahead)


def vllm_gate_refuses(capped: bool):
    """The replay of a vLLM admission-gate refutation: the counterexample's lone request (one output
    token) run on the reference manager with one SWA life cycle and a pool at the rule's chunk floor
    (admission.swa_admission_blocks, no sinks). Confirmed when the run completes there while vLLM's gate
    (peers.vllm_admission_blocks) charges more than the pool has: the gate keeps waiting a request the
    pool serves."""

    def run(cex: Mapping[str, int]) -> Replay:
        t, w, p, c, k = cex["t"], cex["W"], cex["P"], cex["C"], cex["k"]
        pool = admission.swa_admission_blocks(t, w, 0, p, c, k)
        charged = peers.vllm_admission_blocks(t, w, p, k, c, None, capped)
        d = _Driver(_config(t, w, 0, pool))
        completed = lone_run(d, "r0", p, 1, c, k)
        gate = "capped" if capped else "uncapped"
        d.trace.append(f"vLLM's {gate} admission gate charges {charged} blocks; the pool has {pool}")
        confirmed = completed and not d.failures and charged > pool
        if confirmed:
            summary = (f"a lone request (P={p}, C={c}, k={k}) completes in {pool} slots, the rule's chunk floor, "
                       f"but vLLM's {gate} gate charges {charged}: it waits forever")
        elif not completed:
            summary = f"NOT REPRODUCED: the run failed at the chunk floor {pool}: {d.failures[:1]}"
        else:
            summary = f"NOT REPRODUCED: vLLM's {gate} gate charges {charged} <= {pool}"
        return Replay(confirmed, summary, tuple(d.trace))

    run.__name__ = f"vllm_{'capped' if capped else 'uncapped'}_gate_refuses"
    return run


def sglang_gate_refuses(cex: Mapping[str, int]) -> Replay:
    """The replay of the SGLang budget's refutation: the counterexample's lone request (one output token)
    run on the reference manager with one SWA life cycle and a pool at the rule's chunk floor
    (admission.swa_admission_blocks, no sinks). Confirmed when it completes there while SGLang's budget
    (peers.sglang_admission_blocks) asks for more free pages than the pool has."""
    t, w, p, c, k = cex["t"], cex["W"], cex["P"], cex["C"], cex["k"]
    pool = admission.swa_admission_blocks(t, w, 0, p, c, k)
    charged = peers.sglang_admission_blocks(t, w, p, c)
    d = _Driver(_config(t, w, 0, pool))
    completed = lone_run(d, "r0", p, 1, c, k)
    d.trace.append(f"SGLang's SWA budget is {peers.sglang_swa_budget_tokens(t, w, p, c)} tokens: admitted with "
                   f"{charged} free pages; the pool has {pool}")
    confirmed = completed and not d.failures and charged > pool
    if confirmed:
        summary = (f"a lone request (P={p}, C={c}, k={k}) completes in {pool} slots, the rule's chunk floor, "
                   f"but SGLang's budget needs {charged} free pages: it waits forever")
    elif not completed:
        summary = f"NOT REPRODUCED: the run failed at the chunk floor {pool}: {d.failures[:1]}"
    else:
        summary = f"NOT REPRODUCED: SGLang's budget needs {charged} <= {pool}"
    return Replay(confirmed, summary, tuple(d.trace))


def sglang_prefill_budget_refuses(cex: Mapping[str, int]) -> Replay:
    """The replay of the current SGLang gate's refutation: the counterexample's lone request (``O`` output
    tokens, chunk ``C``) run on the reference manager with one SWA life cycle at the pool the claim names,
    the larger of the rule's chunk floor and SGLang's least SWA pool (peers.sglang_min_swa_pages). Confirmed
    when it completes there while SGLang's threshold (peers.sglang_prefill_budget_blocks) is above it."""
    t, w, p, c, o = cex["t"], cex["W"], cex["P"], cex["C"], cex["O"]
    pool = max(admission.swa_admission_blocks(t, w, 0, p, c, 0), peers.sglang_min_swa_pages(t, w))
    charged = peers.sglang_prefill_budget_blocks(t, w, p, c, o, True)
    d = _Driver(_config(t, w, 0, pool))
    completed = lone_run(d, "r0", p, o, c, 0)
    whole, shrunk = peers.sglang_prefill_budget_parts(t, w, p, c, o)
    d.trace.append(f"SGLang admits at {whole} pages whole, at {shrunk} with its chunk cut: {charged}; its start-up "
                   f"accepts {peers.sglang_min_swa_pages(t, w)}; the pool has {pool}")
    confirmed = completed and not d.failures and charged > pool
    if confirmed:
        summary = (f"a lone request (P={p}, C={c}, O={o}) completes in {pool} slots, a pool SGLang's start-up "
                   f"accepts at or above the rule's chunk floor, but SGLang admits only at {charged} pages: it waits "
                   "forever")
    elif not completed:
        summary = f"NOT REPRODUCED: the run failed at {pool}: {d.failures[:1]}"
    else:
        summary = f"NOT REPRODUCED: SGLang admits at {charged} <= {pool}"
    return Replay(confirmed, summary, tuple(d.trace))


def trtllm_resume_refuses(cex: Mapping[str, int]) -> Replay:
    """The replay of the resume-gate refutation: the counterexample's lone request run on the reference
    manager, suspended with its slots kept after every step and resumed through a resume gate
    (scheduler.kept_run), in a pool X slots above the rule's charge. Confirmed when, through the rule's
    gate (admission.resume_admits), it completes while TensorRT-LLM V2's (peers.trtllm_resume_admits),
    asked from the counterexample's step on, refuses it after exactly that step: a lone request that
    holds what it needs waits forever."""
    from swafloor.reference.scheduler import kept_run

    t, w, s, p, o, c, k, x = (cex[n] for n in ("t", "W", "S", "P", "O", "C", "k", "X"))
    pool = admission.swa_admission_blocks(t, w, s, p, c, k) + x
    config = _config(t, w, s, pool)
    ours = kept_run(config, p, o, chunk=c, lookahead=k, gate="reference")
    theirs = kept_run(config, p, o, chunk=c, lookahead=k, gate="trtllm", gate_from=cex["h"])
    trace = (f"pool {pool} (rule's charge + {x}); P={p}, O={o}, C={c}, k={k}, suspended (kept) after each step",
             f"the rule's resume gate: {'completed' if ours.completed else 'stopped'} after {ours.steps} steps",
             f"TensorRT-LLM's resume gate: refused after the step at h={theirs.refused_at} with use "
             f"{list(theirs.used)} of {list(theirs.total)}" if theirs.refused_at is not None
             else f"TensorRT-LLM's resume gate: {'completed' if theirs.completed else 'stopped'}")
    confirmed = ours.completed and theirs.refused_at == cex["h"]
    if confirmed:
        summary = (f"a lone request kept in {pool} slots resumes through the rule's gate to completion, but "
                   f"TensorRT-LLM's gate refuses it at h={theirs.refused_at} (use {theirs.used[0]} of "
                   f"{theirs.total[0]}, above 97%): it waits forever")
    else:
        summary = "NOT REPRODUCED: " + "; ".join(trace[1:])
    return Replay(confirmed, summary, trace)


#: A manager whose every call is recorded with its outcome and followed by ``check()`` (for replays
#: written elsewhere, e.g. the tests' lone runs).
Driver = _Driver


def named_hit_reads_unwritten(cex: Mapping[str, int]) -> Replay:
    """The replay of the refutation of a lookup that trusts every name a step registered when it was
    scheduled: the reference's execution layer (reference/execution.py) with that lookup as its
    ``hit_blocks`` hook, on a manager with one full-attention life cycle and prefix sharing. Writer
    ``a`` executes ``w`` tokens one a step, then schedules ``f`` one-token steps and one more (so the
    manager can share all ``w + f``), left in flight; reader ``r`` is created on its content (the
    lookup); ``g`` of the writer's steps execute and the rest are dropped (an abort). Confirmed when the
    reader's hit holds a token no executed step wrote: its KV was never written when the reader reads."""
    from swafloor.reference import SuspendMode, execution
    from swafloor.reference.hooks import ExecutionHooks

    t, w, f, g = cex["t"], cex["w"], cex["f"], cex["g"]
    semantics = Semantics(prefix_sharing=True, in_flight_tokens=f, suspend=SuspendMode.RECOMPUTE, first_resume_copy=False)
    config = Config(t, [AttentionLayer()], slots=(w + f + 2 * t + 2,), semantics=semantics)
    trusting = ExecutionHooks(hit_blocks=lambda named_end, written, tpb: execution.named_blocks(named_end, tpb))
    ex = execution.Execution(Manager(config), trusting)
    trace: list[str] = []
    ex.create("a")
    ex.resume("a")
    done: set[int] = set()
    for _ in range(w):
        ex.schedule("a", 1)
        step = ex.execute()
        done.update(range(step.start, step.end))
    trace.append(f"a: {w} tokens scheduled and executed one a step (KV written for {sorted(done)})")
    for _ in range(f + 1):
        ex.schedule("a", 1)
    trace.append(f"a: {f + 1} one-token steps scheduled, in flight: named up to token {w + f + 1}")
    hit = ex.create("r", share_with="a")
    trace.append(f"r: created on a's content: the lookup takes {hit} tokens (named blocks, written or not)")
    for _ in range(g):
        step = ex.execute()
        done.update(range(step.start, step.end))
    dropped = ex.drop("a", "abort")
    trace.append(f"a: {g} steps executed, then aborted: steps {[s.number for s in dropped]} dropped, never run")
    unwritten = [p for p in range(hit) if p not in done]
    trace.append(f"r reads its hit's tokens {list(range(hit))}: KV written for {sorted(p for p in done if p < hit)}")
    if unwritten:
        return Replay(True, f"a hit of {hit} tokens taken while {f} named tokens were in flight covers token(s) "
                            f"{unwritten}, whose step was dropped: r reads KV that was never written", tuple(trace))
    return Replay(False, f"NOT REPRODUCED: the hit of {hit} tokens is all written", tuple(trace))


def trtllm_quota_short(cex: Mapping[str, int]) -> Replay:
    """The replay of the pre-fix quota's refutation: on the first layout where the counterexample's quota
    (accepted: at or above _min_quota_for_level with one slot per life cycle) gives the group fewer
    granules than the floor's, the most slots those granules hold (counted one by one) as the pool, and a
    lone request decoding until a step fails. Confirmed when one does (with the floor's slots none does)."""
    from swafloor.reference.peers import TRTLLM_QUOTA_LAYOUTS

    t, w, s, q = cex["t"], cex["W"], cex["S"], cex["Q"]
    floor = floors.swa_floor(t, w, s)
    for sizes, g in TRTLLM_QUOTA_LAYOUTS:
        granules = -(-q // g)
        least = peers.trtllm_min_quota((floors.legacy_floor(),), (sizes,), g)
        if granules * g < least:
            continue
        held = 0
        while sum(-(-(held + 1) * size // g) for size in sizes) <= granules:
            held += 1
        if held >= floor:
            continue
        d = _Driver(_config(t, w, s, held, rule="legacy"))
        last = s * t + 3 * (w + t)
        reached = _decode_to(d, ("r0",), last)
        roomy = _Driver(_config(t, w, s, floor))
        fine = _decode_to(roomy, ("r0",), last)
        confirmed = not reached and len(d.failures) == 1 and fine
        summary = (f"quota {q} B (layout {sizes}, granularity {g}) is accepted (least {least} B) and holds {held} "
                   f"slot(s), below the floor {floor}: " + (d.failures[0] if d.failures else "no step failed")
                   + ("" if fine else "; NOT REPRODUCED: the floor's pool failed too"))
        return Replay(confirmed, summary if confirmed or not d.failures else "NOT REPRODUCED: " + summary, tuple(d.trace))
    return Replay(False, f"NOT REPRODUCED: no layout leaves quota {q} B below the floor {floor}", ())


def serve_lasso(prompts: tuple[int, ...], outputs: tuple[int, ...], pool: int, victim: Any,
                steps: int) -> tuple[list[tuple], int | None, int | None]:
    """The serving loop itself (:func:`~swafloor.reference.scheduler.serve` on the reference manager, one
    full-attention pool group of ``pool`` slots at one token per block, chunk 1, the requests arriving at step
    0) for at most ``steps`` steps: the state it reports after each step (``on_step``) and the first lasso,
    ``(i, j)`` with the state after step ``j`` equal to the state after step ``i < j`` and a request not done
    there, or ``(None, None)``. The states are indexed as the transition system's: ``states[k]`` after ``k``
    steps (``states[0]`` before step 0)."""
    from swafloor.reference.scheduler import Arrival, loop_start, serve

    config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
    arrivals = [Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(zip(prompts, outputs))]
    lengths = tuple(p + o for p, o in zip(prompts, outputs))
    states: list[tuple] = [loop_start(len(arrivals))]
    serve(config, arrivals, chunk=1, victim=victim, max_steps=steps, on_step=lambda _, state: states.append(state))
    seen: dict[tuple, int] = {}
    for j, state in enumerate(states):
        if state in seen and any(h < L for h, L in zip(state[0], lengths)):
            return states, seen[state], j
        seen.setdefault(state, j)
    return states, None, None


def serving_livelocks(victim: Any, steps: int):
    """The replay of a refuted "no state repeats with a request not done": the counterexample's three requests
    (``P0, O0, P1, O1, P2, O2``) through :func:`~swafloor.reference.scheduler.serve` itself, in a pool ``X``
    slots above the largest request's whole run, under ``victim``, and the same inputs through the transition
    system (``scheduler.loop_step`` on ints). Confirmed when serve's states (read back from the manager after
    each step) are the transition system's, serve reaches at some step ``j <= steps`` the state it was in after
    step ``i < j`` with a request not done (so it repeats ``i .. j`` forever: the loop is a function of that
    state), and serve run to its own step limit reports a livelock."""
    from swafloor.reference.scheduler import Arrival, loop_start, loop_step, serve

    def run(cex: Mapping[str, int]) -> Replay:
        prompts = tuple(cex[f"P{i}"] for i in range(3))
        outputs = tuple(cex[f"O{i}"] for i in range(3))
        pool = max(p + o for p, o in zip(prompts, outputs)) + cex["X"]
        states, i, j = serve_lasso(prompts, outputs, pool, victim, steps)
        model = [loop_start(3)]
        for _ in range(len(states) - 1):
            model.append(loop_step(model[-1], pool, prompts, outputs, victim))
        same = [tuple(map(tuple, m)) for m in model] == states
        config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
        arrivals = [Arrival(f"r{n}", 0, p, o) for n, (p, o) in enumerate(zip(prompts, outputs))]
        long_run = serve(config, arrivals, chunk=1, victim=victim)
        trace = [f"pool {pool} (the largest run + {cex['X']}); prompts {list(prompts)}, outputs {list(outputs)}, "
                 f"victim {getattr(victim, 'value', victim)}, all arriving at step 0"]
        trace += [f"after {k} steps: histories {list(st[0])}, running {list(st[1])}, waiting {list(st[2])}"
                  for k, st in enumerate(states) if k and (j is None or k <= j)]
        trace.append(f"serve's states {'are' if same else 'are NOT'} the transition system's, step by step")
        trace.append(f"serve to its own limit: livelock at step {long_run.livelock_at}, finished "
                     f"{list(long_run.finished)}")
        confirmed = same and j is not None and long_run.livelock_at is not None
        if confirmed:
            stuck = [f"r{n}" for n, (h, L) in enumerate(zip(states[j][0], (p + o for p, o in zip(prompts, outputs))))
                     if h < L]
            summary = (f"serve (pool {pool}, prompts {list(prompts)}, outputs {list(outputs)}) is after {j} steps "
                       f"where it was after {i}, with {', '.join(stuck)} not done: it repeats those {j - i} steps "
                       f"forever (serve to its own limit: livelock at step {long_run.livelock_at})")
        else:
            summary = "NOT REPRODUCED: " + "; ".join(trace[-2:]) + ("" if j is not None else "; no state repeats")
        return Replay(confirmed, summary, tuple(trace))

    return run


def growth_keeps_stale(cex: Mapping[str, int]) -> Replay:
    """One request on two managers with a sliding-window layer, under LMDeploy's release (``free_stale =
    at-allocate``, ``refused_keeps_stale``) with and without ``stale_freed_on_growth``, through the same calls:
    a prefill of ``r`` tokens, a step of ``n`` at ``r`` (it adds a block), the tokens up to ``h = r + d``, then a
    decode step at ``h`` (it adds none). Confirmed when every call succeeds on both and the manager with the
    option holds more than ``growth_kept_blocks(t, n) - 1`` slots above the one without."""
    from swafloor.reference import refusal
    from swafloor.reference.semantics import FreeStale

    t, w, s, n, r, dd = cex["t"], cex["W"], cex["S"], cex["n"], cex["r"], cex["d"]
    h = r + dd
    used, traces = [], []
    for growth in (True, False):
        semantics = Semantics(free_stale=FreeStale.AT_ALLOCATE, refused_keeps_stale=True,
                              stale_freed_on_growth=growth)
        config = Config(tokens_per_block=t, layers=[AttentionLayer(window=w, sink_tokens=s * t)], slots=None,
                        semantics=semantics)
        slots = max(build_layout(config).min_slots[0], -(-(h + 1) // t) + 1)
        d = _Driver(attrs.evolve(config, slots=(slots,)))
        d.call("create", "r0")
        d.call("resume", "r0")
        if r:
            d.call("resize", "r0", r, 0)
            d.call("commit", "r0", r)
        d.call("resize", "r0", r + n, r)
        d.call("commit", "r0", n)
        if dd > n:
            d.call("resize", "r0", h, r + n)
            d.call("commit", "r0", dd - n)
        d.call("resize", "r0", h + 1, h)
        pool = d.manager.snapshot().pools[0]
        used.append(pool.total - pool.free)
        traces += [f"stale_freed_on_growth={growth}:", *d.trace, f"-> {pool.total - pool.free} slots held",
                   *(f"FAILED {f}" for f in d.failures)]
        if d.failures:
            return Replay(False, f"NOT REPRODUCED: a call failed (stale_freed_on_growth={growth}): "
                                 f"{d.failures[0]}", tuple(traces))
    kept, claimed = used[0] - used[1], refusal.growth_kept_blocks(t, n) - 1
    confirmed = kept > claimed
    summary = (f"the decode step at h={h} (the last step that added a block: {n} tokens at r={r}) holds {used[0]} "
               f"slots with stale_freed_on_growth, {used[1]} without: {kept} kept, above the claimed {claimed}")
    return Replay(confirmed, summary if confirmed else f"NOT REPRODUCED: {summary}", tuple(traces))


def preallocation_keeps_waiting(cex: Mapping[str, int]) -> Replay:
    """One full-attention layer of ``t`` tokens per block in a pool of ``F`` slots under
    ``preallocate_tokens = P``: request ``a`` steps to ``n`` blocks, then request ``b`` to ``b`` blocks
    (which the spec's pool, holding ``a``'s ``n``, would admit)."""
    t, P, n, F, b = cex["t"], cex["P"], cex["n"], cex["F"], cex["b"]
    config = Config(tokens_per_block=t, layers=[AttentionLayer(window=None)], slots=(F,),
                    semantics=Semantics(preallocate_tokens=P))
    d = _Driver(config)
    d.trace.append(f"semantics: preallocate_tokens={P}")
    d.call("create", "a")
    reached = bool(d.call("resume", "a")) and bool(d.call("resize", "a", n * t, 0))
    d.call("create", "b")
    reached = reached and bool(d.call("resume", "b"))
    failed = d.call("resize", "b", b * t, 0) if reached else None
    return _verdict(d, reached, failed, f"a waiting request of {b} blocks after a step of {n} blocks pre-allocated "
                                        f"ceil({P}/{t}) more, {F} slots")
