"""The differential state machine: Hypothesis picks a config and a sequence of request operations,
drives a backend and the reference in lockstep, and compares them after every operation.

Rules (each made of protocol operations, all recorded in the trace): create (optionally with reused
history; half the time resumed at once), resume, decode steps (``resize(h + 1, h)`` then
``commit(1)``, many in one rule), batched decoding (every request resumed, then rounds of one decode
step per active request: the rule that makes most steps, so Hypothesis's cost per rule is spread
over many compared steps), fused decode steps (``resize(h + 2, h + 1)``: history and capacity advanced in one call, as TensorRT-LLM
steps), n-token steps (draft tokens, some accepted), prefill chunks, advance history (commit), shrink
capacity (a cut of whole blocks plus a remainder, so cuts free tail blocks), reserve ahead (capacity
several blocks past history, nothing committed), suspend, close, and misuse (operations that must be
rejected with the same field; capacity between the old and a new history, ``resize(h + d, h + d + 1)``,
weighted up).

A rule is generated only when the backend supports its operations (and, for misuse, declares the
``errors`` part). For a backend that commits before it allocates (``commit_before_allocate``) no
resize advances history: a fused step becomes ``commit(1)`` then ``resize(h + 2, h + 1)``. For a
backend without capacity cuts no resize lowers capacity (a step asks for at least the capacity it
has) and the shrink rule is off. The first divergence raises :class:`DivergenceFound` carrying the
whole trace, so the minimal failing run Hypothesis ends on is exactly what gets saved.

Lengths and states are read from the reference side after every step (:class:`Lockstep`), so rules
see what the configured semantics did (a recompute suspend resets both lengths to 0).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable

import attrs
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from .compare import Divergence, Result
from .hits import reference_hit_taken
from .lockstep import Lockstep
from .protocol import Operation, Part, Unsupported
from .strategies import block_sizes, configs, default_semantics, has_swa, horizon
from .trace import Step, Trace

__all__ = ["DivergenceFound", "Stats", "build_machine", "MAX_OPEN_REQUESTS", "BATCH_ROUNDS"]

MAX_OPEN_REQUESTS = 4
PICK = st.integers(0, MAX_OPEN_REQUESTS - 1)
BATCH_ROUNDS = 256  # the most rounds of one decode_batch rule, unless the campaign gives its own


class DivergenceFound(AssertionError):
    """Raised by the machine at the first divergence; carries it and the trace that produced it."""

    def __init__(self, divergence: Divergence, trace: Trace):
        self.divergence = divergence
        self.trace = trace
        super().__init__(divergence.describe())


@attrs.define
class Stats:
    """Counters a campaign reads. ``runs``: state machine runs started, including those Hypothesis
    discards (too large, no enabled rule); ``examples``: runs that completed without a divergence
    (what Hypothesis counts toward ``max_examples``); ``steps``: operations applied on each side;
    ``unsupported``: runs whose config the backend refused (:class:`Unsupported`, discarded);
    ``served``: runs whose backend was built, ``served_swa`` those of them with an SWA life cycle,
    ``served_semantics`` those with semantics other than the default;
    ``backend_seconds``/``reference_seconds``: time spent in each side's operations and
    observations (building included); the first divergence's example number (``examples`` before
    it, plus one) and time."""

    runs: int = 0
    examples: int = 0
    steps: int = 0
    unsupported: int = 0
    served: int = 0
    served_swa: int = 0
    served_semantics: int = 0
    created_sharing: int = 0  # requests created under prefix sharing semantics
    on_prefix: int = 0  # of those, created on another request's prefix
    hits: int = 0  # of those, requests whose first resume took at least one shared block
    # First resumes that took a valid hit shorter than the longest (Capabilities.lost_hits), and the
    # first of them: {"example", "step_index", "request", "longest", "taken", "rule", "trace"}; and
    # the count per lost-hit rule.
    lost_hits: int = 0
    lost_hits_by_rule: dict = attrs.field(factory=dict)
    first_lost_hit: dict | None = None
    # Requests created (run on both sides), and those retired: closed on both sides after an accepted
    # outcome slack and left out of every later comparison (a hole the campaign reports: see runner).
    requests: int = 0
    retired: int = 0
    backend_seconds: float = 0.0
    reference_seconds: float = 0.0
    started: float = attrs.field(factory=time.perf_counter)
    first_failure_example: int | None = None
    first_failure_seconds: float | None = None
    on_example: Callable[["Stats"], None] | None = None
    # Divergence classes already reported (Divergence.class_key): an example that meets one ends there,
    # discarded and counted per class in ``masked``, and the campaign goes on (swafloor.fuzz.classes).
    known_classes: frozenset = frozenset()
    masked: dict = attrs.field(factory=dict)


def build_machine(
    backend: Any, against: Any, stats: Stats, batch_rounds: int = BATCH_ROUNDS,
    tokens_per_block: tuple[int, ...] | None = None,
) -> type[RuleBasedStateMachine]:
    """A state machine class comparing ``backend`` with ``against`` (both
    :class:`~swafloor.fuzz.backends.ResolvedBackend`), counting into ``stats``. ``batch_rounds``: the
    most rounds one ``decode_batch`` rule draws (longer runs: more compared steps per Hypothesis draw,
    and longer examples). ``tokens_per_block``: the block sizes configs draw from (a profile's; None:
    every size the strategies draw)."""
    caps = backend.capabilities
    ops = caps.operations
    misuse_allowed = caps.mode(Part.ERRORS) is not None
    commit_first = caps.commit_before_allocate
    cuts = caps.capacity_cuts

    class DifferentialMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            stats.runs += 1
            if stats.on_example is not None:
                stats.on_example(stats)
            self.lock: Lockstep = None  # type: ignore[assignment]
            self.created = 0

        # ------------------------------------------------------------ helpers
        sharing = False
        cached = False
        prefixed: Any = frozenset()

        def _apply(self, step: Step) -> Result:
            before, retired = len(self.lock.lost_hits), len(self.lock.retired)
            divergence, result = self.lock.apply(step)
            stats.steps += 1
            stats.retired += len(self.lock.retired) - retired
            if step.op is Operation.CREATE and result.ok:
                stats.requests += 1
            if len(self.lock.lost_hits) > before:
                self._lost_hit()
            if divergence is not None:
                self._fail(divergence)
            if self.prefixed and step.op is Operation.RESUME and step.request in self.prefixed and result.ok:
                self.prefixed.discard(step.request)  # its first resume: did it hit a shared block?
                stats.hits += reference_hit_taken(self.lock.reference, step.request)
            return result

        def _repeat_sources(self) -> list[str]:
            """Requests with whole committed blocks a repeated request can share: the active ones
            first, else the suspended ones (and, freed blocks cached, the closed ones)."""
            states = ("active", "suspended", "closed") if self.cached else ("active", "suspended")
            whole = [r for r in self._ids(*states) if self.lock.lengths[r][1] >= self.t]
            return [r for r in whole if self._active(r)] or whole

        def _step(self, rid: str, capacity: int, history: int) -> Result:
            """A resize within the backend's domain: never below the capacity held when the backend
            has no capacity cuts."""
            if not cuts:
                capacity = max(capacity, self.lock.lengths[rid][0])
            return self._apply(Step.resize(rid, capacity, history))

        def _lost_hit(self) -> None:
            """Count a lost hit; keep the first with its whole input (a trace that replays it)."""
            stats.lost_hits += 1
            index, rid, longest, taken, rule = self.lock.lost_hits[-1]
            stats.lost_hits_by_rule[rule] = stats.lost_hits_by_rule.get(rule, 0) + 1
            if stats.first_lost_hit is None:
                trace = Trace(config=self.lock.config, steps=tuple(self.lock.steps), backend=backend.name,
                              against=against.name, expect="match")
                stats.first_lost_hit = {"example": stats.examples + 1, "step_index": index, "request": rid,
                                        "longest": longest, "taken": taken, "rule": rule, "trace": trace}

        def _fail(self, divergence: Divergence) -> None:
            key = divergence.class_key
            if key in stats.known_classes:  # a class already reported: this example ends, the campaign goes on
                stats.masked[key] = stats.masked.get(key, 0) + 1
                reject()
            if stats.first_failure_example is None:
                stats.first_failure_example = stats.examples + 1
                stats.first_failure_seconds = time.perf_counter() - stats.started
            trace = Trace(
                config=self.lock.config,
                steps=tuple(self.lock.steps),
                backend=backend.name,
                against=against.name,
                expect="divergence",
                divergence=divergence.to_dict(),
            )
            raise DivergenceFound(divergence, trace)

        def _ids(self, *states: str) -> list[str]:
            return [rid for rid, state in self.lock.states.items() if state in states]

        def _pick(self, pick: int, *states: str) -> str:
            ids = self._ids(*states)
            return ids[pick % len(ids)]

        def _has(self, *states: str) -> bool:
            return bool(self._ids(*states))

        def _active(self, rid: str) -> bool:
            return self.lock.states.get(rid) == "active"

        def teardown(self) -> None:
            failed = self.lock.dispose() if self.lock is not None else None
            if failed is not None and sys.exc_info()[0] is None:  # a clean example whose engine cannot shut down
                raise AssertionError(f"the backend failed to shut down after a clean example: {failed}")
            if self.lock is not None:  # the time each side spent, building included
                stats.backend_seconds += self.lock.backend_seconds
                stats.reference_seconds += self.lock.reference_seconds
            if sys.exc_info()[0] is None:  # called from a finally: no exception means it completed
                stats.examples += 1

        # ------------------------------------------------------------ setup
        @initialize(config=configs(caps, tokens_per_block) if tokens_per_block else configs(caps), data=st.data())
        def build(self, config, data) -> None:
            """Build both sides, then create and resume a first request (every rule needs one)."""
            try:
                self.lock = Lockstep(config, backend.factory, against.factory, caps)
            except Unsupported:
                stats.unsupported += 1
                reject()
            stats.served += 1
            stats.served_swa += has_swa(config)
            stats.served_semantics += not default_semantics(config)
            if self.lock.build_divergence is not None:
                self._fail(self.lock.build_divergence)
            self.sharing = caps.prefix_sharing and config.semantics.prefix_sharing
            self.cached = self.sharing and config.semantics.cache_freed
            self.prefixed: set[str] = set()  # created under sharing, not yet resumed
            self.horizon = horizon(config)
            self.t = config.tokens_per_block
            sizes = block_sizes(config)
            if len(sizes) > 1:  # mixed block sizes: prompts and steps in whole blocks of the lcm, or of t
                self.t = data.draw(st.sampled_from((math.lcm(*sizes), self.t)), label="whole-block unit")
            self.create(data, in_build=True)
            self._apply(Step.resume("r0"))

        # ------------------------------------------------------------ lifetime
        @precondition(lambda self: len(self._ids("suspended", "active")) < MAX_OPEN_REQUESTS)
        @rule(data=st.data())
        def create(self, data, in_build: bool = False, repeats: bool = True) -> None:
            """Create a request (suspended), and as a rule half the time resume it at once (as an
            engine admits a request): most rules need an active request."""
            reused, source = 0, None
            # Under a freed-block cache a closed request's committed blocks may still be cached.
            states = ("active", "suspended", "closed") if self.cached else ("active", "suspended")
            sources = [r for r in self._ids(*states) if self.lock.lengths[r][1] > 0]
            if self.sharing:  # sources holding whole blocks first: only they can give hits
                whole = [r for r in sources if self.lock.lengths[r][1] >= self.t]
                sources = [r for r in whole if self._active(r)] or [r for r in whole if self.cached] or sources
            # (Each sharing choice is drawn as "below the top value": Hypothesis draws small values
            # most, so the common case, sharing, is the small one and examples shrink towards it.)
            if self.sharing and in_build and data.draw(st.integers(0, 3), label="system prompt") < 3:
                # The first request starts from a loaded prompt of whole blocks: the prefix others share.
                reused = self.t * data.draw(st.integers(1, 4), label="prompt blocks")
            elif self.sharing and sources and data.draw(st.integers(0, 7), label="share") < 7:
                # A request on another's committed prefix (a system prompt, a repeated request):
                # most often all of its whole blocks, so that whole blocks are shared.
                whole = data.draw(st.integers(0, 3), label="whole prefix") < 3
                if whole and not in_build and repeats and self._repeat_sources():
                    self.repeat(data)  # whole blocks of a prefix: repeated requests
                    return
                source = sources[data.draw(st.integers(0, len(sources) - 1), label="share with")]
                history = self.lock.lengths[source][1]
                aligned = history - history % self.t
                reused = (aligned or history) if whole else data.draw(st.integers(0, history), label="prefix tokens")
            elif caps.reused_history and data.draw(st.booleans(), label="reuse"):
                reused = data.draw(st.integers(0, self.horizon), label="reused_history")
            rid = f"r{self.created}"
            self.created += 1
            self._apply(Step.create(rid, reused, source))
            if self.sharing:
                stats.created_sharing += 1
                if source is not None:
                    stats.on_prefix += 1
                    self.prefixed.add(rid)
                    if not in_build and data.draw(st.integers(0, 3), label="admit at once") < 3:
                        self._apply(Step.resume(rid))  # a repeated request admitted at once: it hits
                        return
            if not in_build and data.draw(st.booleans(), label="resume at once"):
                self._apply(Step.resume(rid))

        @precondition(lambda self: self.sharing and len(self._ids("suspended", "active")) < MAX_OPEN_REQUESTS)
        @rule(data=st.data())
        def repeat(self, data) -> None:
            """Repeated requests (under prefix sharing): up to three requests on one request's whole
            committed blocks (a shared system prompt, the same prompt sent again), each admitted at
            once, the oldest other open request finishing first where the open requests are at their
            limit; a closed request serves too when freed blocks are cached."""
            sources = self._repeat_sources()
            if not sources:
                self.create(data, repeats=False)
                return
            source = sources[data.draw(st.integers(0, len(sources) - 1), label="repeat")]
            history = self.lock.lengths[source][1]
            reused = history - history % self.t
            for _ in range(3 - data.draw(st.integers(0, 2), label="fewer repeats")):
                if len(self._ids("suspended", "active")) >= MAX_OPEN_REQUESTS:
                    # a request other than the source finishes first, making room
                    done = [r for r in self._ids("suspended", "active") if r != source]
                    if Operation.CLOSE not in ops or not done:
                        return
                    self._apply(Step.close(done[0]))
                rid = f"r{self.created}"
                self.created += 1
                self._apply(Step.create(rid, reused, source))
                stats.created_sharing += 1
                stats.on_prefix += 1
                self.prefixed.add(rid)
                self._apply(Step.resume(rid))

        @precondition(lambda self: self._has("suspended"))
        @rule(pick=PICK)
        def resume(self, pick: int) -> None:
            self._apply(Step.resume(self._pick(pick, "suspended")))

        @precondition(lambda self: Operation.SUSPEND in ops and self._has("active"))
        @rule(pick=PICK, again=st.booleans())
        def suspend(self, pick: int, again: bool) -> None:
            """Suspend an active request; half the time resume it at once (an engine preempting a
            request and admitting it again: under ``suspend=keep`` it still holds its slots)."""
            rid = self._pick(pick, "active")
            self._apply(Step.suspend(rid))
            if again and self.lock.states.get(rid) == "suspended":
                self._apply(Step.resume(rid))

        @precondition(lambda self: Operation.CLOSE in ops and self._has("active", "suspended"))
        @rule(pick=PICK)
        def close(self, pick: int) -> None:
            self._apply(Step.close(self._pick(pick, "active", "suspended")))

        # ------------------------------------------------------------ steps
        @precondition(lambda self: Operation.COMMIT in ops and self._has("active"))
        @rule(pick=PICK, count=st.integers(1, 48))
        def decode(self, pick: int, count: int) -> None:
            """``count`` decode steps: resize(h + 1, h), then commit the token."""
            rid = self._pick(pick, "active")
            for _ in range(count):
                _, h = self.lock.lengths[rid]
                if not self._step(rid, h + 1, h).ok or not self._active(rid):
                    return
                self._apply(Step.commit(rid, 1))

        @precondition(lambda self: self._has("active"))
        @rule(pick=PICK, count=st.integers(1, 48), ahead=st.integers(0, 2))
        def fused_decode(self, pick: int, count: int, ahead: int) -> None:
            """``count`` steps that commit the token in flight and reserve the next one in one
            resize: (h, h + 1) -> (h + 1, h + 2 + ahead); for a backend that commits before it
            allocates, ``commit(1)`` then ``resize(h + 2 + ahead, h + 1)``."""
            rid = self._pick(pick, "active")
            for _ in range(count):
                c, h = self.lock.lengths[rid]
                nh = h + 1 if c > h else h
                if commit_first and nh > h:
                    self._apply(Step.commit(rid, nh - h))
                    if not self._active(rid):
                        return
                if not self._step(rid, nh + 1 + ahead, nh).ok or not self._active(rid):
                    return

        @precondition(lambda self: Operation.COMMIT in ops and self._has("active", "suspended"))
        @rule(rounds=st.integers(1, batch_rounds), fused=st.booleans())
        def decode_batch(self, rounds: int, fused: bool) -> None:
            """Continuous batching: the suspended requests are resumed (admitted) in turn, then
            ``rounds`` rounds in which every active request, in turn, takes a decode step
            (resize(h + 1, h), then commit; half of the batches (``fused``) take fused steps
            instead, as :meth:`fused_decode`); a request that runs out of slots or stops being
            active leaves the batch. Many steps for one rule: most of a campaign's steps."""
            for rid in self._ids("suspended"):
                self._apply(Step.resume(rid))
            batch = self._ids("active")
            for _ in range(rounds):
                for rid in tuple(batch):
                    c, h = self.lock.lengths[rid]
                    if fused and c > h:  # (h, h + 1) -> (h + 1, h + 2) in one call
                        if commit_first:
                            self._apply(Step.commit(rid, 1))
                        if self._active(rid):
                            self._step(rid, h + 2, h + 1)
                        if not self._active(rid) or self.lock.lengths[rid] != (h + 2, h + 1):
                            batch.remove(rid)
                        continue
                    if self._step(rid, h + 1, h).ok and self._active(rid):
                        self._apply(Step.commit(rid, 1))
                    if not self._active(rid) or self.lock.lengths[rid][1] != h + 1:
                        batch.remove(rid)
                if not batch:
                    return

        @precondition(lambda self: Operation.COMMIT in ops and self._has("active"))
        @rule(pick=PICK, n=st.integers(2, 9), accepted=st.integers(0, 9))
        def n_token_step(self, pick: int, n: int, accepted: int) -> None:
            """An n-token step (a token plus drafts): resize(h + n, h), then commit the accepted ones."""
            rid = self._pick(pick, "active")
            _, h = self.lock.lengths[rid]
            if self._step(rid, h + n, h).ok and self._active(rid):
                self._apply(Step.commit(rid, min(n, accepted)))

        @precondition(lambda self: Operation.COMMIT in ops and self._has("active"))
        @rule(pick=PICK, data=st.data())
        def prefill_chunk(self, pick: int, data) -> None:
            """A prefill chunk: resize(h + chunk, h), then commit the chunk."""
            rid = self._pick(pick, "active")
            chunk = data.draw(st.integers(1, self.horizon), label="chunk")
            _, h = self.lock.lengths[rid]
            if self._step(rid, h + chunk, h).ok and self._active(rid):
                self._apply(Step.commit(rid, chunk))

        @precondition(lambda self: Operation.COMMIT in ops and self._has("active"))
        @rule(pick=PICK, tokens=st.integers(0, 8))
        def advance_history(self, pick: int, tokens: int) -> None:
            """Commit up to ``tokens`` tokens already reserved."""
            rid = self._pick(pick, "active")
            c, h = self.lock.lengths[rid]
            self._apply(Step.commit(rid, min(tokens, c - h)))

        @precondition(lambda self: cuts and self._has("active"))
        @rule(pick=PICK, blocks=st.integers(0, 3), rest=st.integers(0, 127), left=st.integers(0, 127))
        def shrink_capacity(self, pick: int, blocks: int, rest: int, left: int) -> None:
            """Give back reserved capacity: resize(max(h, c - cut), h), the cut ``blocks`` whole blocks
            plus a remainder below a block (at least one token). When less than the cut is reserved,
            the rule first reserves the cut plus ``left`` (below a block): resize(h + cut + left, h),
            so that the cut lands ``left`` tokens past history and frees the blocks past it, or none
            when it stays inside the last block."""
            rid = self._pick(pick, "active")
            c, h = self.lock.lengths[rid]
            cut = max(1, blocks * self.t + rest % self.t)
            if c - h < cut:
                if not self._step(rid, h + cut + left % self.t, h).ok or not self._active(rid):
                    return
                c, h = self.lock.lengths[rid]
            self._apply(Step.resize(rid, max(h, c - cut), h))

        @precondition(lambda self: self._has("active"))
        @rule(pick=PICK, blocks=st.integers(1, 4), rest=st.integers(0, 127), advance=st.integers(0, 3))
        def reserve_ahead(self, pick: int, blocks: int, rest: int, advance: int) -> None:
            """Reserve capacity several blocks past history, committing nothing after it:
            resize(h' + d, h') with d = ``blocks`` blocks plus a remainder. With ``advance`` 2 the
            same call first finalizes the tokens already reserved (h' = c, as a fused step does; a
            backend that commits before it allocates commits them first); with ``advance`` 3 it
            finalizes a whole chunk of d tokens (h' = h + d, as a prefill chunk computed in one call
            does) and reserves one token plus the remainder. Either way the call releases blocks
            while it allocates, so out of slots it reports what it would have released."""
            rid = self._pick(pick, "active")
            c, h = self.lock.lengths[rid]
            d = blocks * self.t + rest % self.t
            nh = h if advance < 2 else c if advance == 2 or commit_first else h + d
            if commit_first and nh > h:
                self._apply(Step.commit(rid, nh - h))
                if not self._active(rid):
                    return
            self._step(rid, nh + (1 + rest % self.t if advance == 3 else d), nh)

        # ------------------------------------------------------------ misuse
        @precondition(lambda self: misuse_allowed and self._has("active", "suspended", "closed"))
        @rule(pick=PICK, between=st.sampled_from((True, False)), kind=st.integers(0, 8), d=st.integers(0, 9))
        def misuse(self, pick: int, between: bool, kind: int, d: int) -> None:
            """An operation the manager must reject with a RequestError naming the same field (half
            the time, and first when shrinking: capacity between the old history and a new one)."""
            active, suspended, closed = self._ids("active"), self._ids("suspended"), self._ids("closed")
            if between and active:  # capacity between the old history and a new one
                rid = active[pick % len(active)]
                _, h = self.lock.lengths[rid]
                step = Step.resize(rid, h + d, h + d + 1)
            elif kind <= 4 and active:
                rid = active[pick % len(active)]
                c, h = self.lock.lengths[rid]
                options = [
                    Step.resize(rid, h + d, h + d + 1),  # capacity below history
                    Step.resize(rid, -1, h),  # negative capacity
                    Step.resume(rid),  # already active
                ]
                if h > 0:
                    options.append(Step.resize(rid, c, h - 1))  # history goes backwards
                if Operation.COMMIT in ops:
                    options.append(Step.commit(rid, c - h + 1))  # past the capacity
                step = options[kind % len(options)]
            elif kind == 5 and suspended:
                step = Step.resize(suspended[pick % len(suspended)], 1, 0)  # not active
            elif kind == 6 and closed:
                step = Step.resume(closed[pick % len(closed)])  # closed
            elif kind == 7:
                step = Step.create(next(iter(self.lock.states)))  # duplicate id
            else:
                step = Step.resume("missing")  # unknown request
            self._apply(step)

    DifferentialMachine.__name__ = DifferentialMachine.__qualname__ = "DifferentialMachine"
    return DifferentialMachine
