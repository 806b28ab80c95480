"""Replaying a saved trace: the same steps on two backends, compared after each, as when found."""

from __future__ import annotations

import shlex

import attrs

from swafloor.reference import allocated_blocks
from swafloor.reference.show import bounded

from .backends import resolve
from .compare import Divergence
from .lockstep import Lockstep
from .protocol import BackendRecord, Operation, Unsupported
from .trace import Trace

__all__ = ["ReplayResult", "replay", "replay_command", "check_cost", "MAX_STEP_BLOCKS", "MAX_REPLAY_WORK"]

#: The most blocks a request's capacity may span at any step of a replayed trace: a step may allocate
#: that many, slot by slot, on each side (snapshots themselves cost only the ranges of held blocks).
MAX_STEP_BLOCKS = 1 << 16
#: The most work a whole replay may do, counted as the blocks its snapshots list summed over the
#: steps (plus, for a token-level side, the window positions it walks per step). Fuzzed traces are
#: far below both.
MAX_REPLAY_WORK = 1 << 22


def check_cost(trace: Trace, *sides: BackendRecord) -> None:
    """Refuse, before running anything, a trace whose steps no side can serve in bounded time and
    memory: raises :class:`Unsupported` naming the step and the field. A request's capacity may span
    at most :data:`MAX_STEP_BLOCKS` blocks and the whole replay may do :data:`MAX_REPLAY_WORK`; a side
    whose record has :class:`~swafloor.fuzz.protocol.Limits` (the token-level oracle) is held to those too."""
    config = trace.config
    t = config.tokens_per_block
    per_step = 0  # positions a token-level side walks per step besides the capacity
    for side in sides:
        limit = side.limits.max_window_tokens
        if limit is not None:
            for i, layer in enumerate(config.layers):
                window = getattr(layer, "window", None)
                if window is None:
                    continue
                # the histories its minimum search walks: past the sinks, the window and a few blocks
                span = window + getattr(layer, "sink_tokens", 0) + 3 * t
                if span > limit:
                    raise Unsupported(f"config.layers[{i}].window={bounded(window)}: backend {side.name!r} serves "
                                      f"a window plus sinks plus 3 blocks of at most {limit:,} tokens, here {span:,}")
                per_step = max(per_step, span)
    max_capacity = min((s.limits.max_capacity_tokens or 10**30) for s in sides)
    token_level = any(s.limits.max_capacity_tokens is not None for s in sides)
    lengths: dict[str, tuple[int, int]] = {}
    listed = work = 0  # blocks every snapshot lists now; work so far
    for i, step in enumerate(trace.steps):
        capacity, history = lengths.get(step.request, (0, 0))
        before = allocated_blocks(capacity, t)
        field, value = "op", step.op.value
        if step.op is Operation.CREATE:
            capacity = history = max(step.reused_history, 0)
            field, value = "reused_history", step.reused_history
        elif step.op is Operation.RESIZE:
            capacity, history = max(step.capacity, 0), max(min(step.history, step.capacity), 0)
            field, value = "capacity", step.capacity
        elif step.op is Operation.COMMIT:
            history = max(min(history + step.tokens, capacity), 0)
            field, value = "tokens", step.tokens
        lengths[step.request] = (capacity, history)
        if capacity > max_capacity:
            raise Unsupported(f"steps[{i}].{field}={bounded(value)}: a side of this replay serves "
                              f"capacities of at most {max_capacity:,} tokens")
        spanned = allocated_blocks(capacity, t)
        if spanned > MAX_STEP_BLOCKS:
            raise Unsupported(f"steps[{i}].{field}={bounded(value)}: a capacity of {capacity:,} tokens spans "
                              f"{spanned:,} blocks (a replay compares at most {MAX_STEP_BLOCKS:,} per request)")
        listed += spanned - before
        work += listed + per_step + 1
        if token_level:  # it walks the positions past the history, one by one
            work += capacity - history
        if work > MAX_REPLAY_WORK:
            raise Unsupported(f"steps[{i}]: the replay would compare {work:,} blocks by this step "
                              f"(at most {MAX_REPLAY_WORK:,} in all); split the trace")


@attrs.frozen
class ReplayResult:
    """What replaying gave: the first divergence (None: the two agreed on every step)."""

    backend: str
    against: str
    steps_run: int
    divergence: Divergence | None
    expect: str
    # Lost hits (Capabilities.lost_hit_rules): (step index, request, longest valid hit, hit taken, the
    # rule that yields it), in tokens.
    lost_hits: tuple[tuple[int, str, int, int, str], ...] = ()

    @property
    def diverged(self) -> bool:
        return self.divergence is not None

    @property
    def as_expected(self) -> bool:
        return self.diverged == (self.expect == "divergence")


def replay(
    trace: Trace, backend: str | BackendRecord | None = None, against: str | BackendRecord | None = None
) -> ReplayResult:
    """Replay ``trace`` comparing ``backend`` (default: the trace's) with ``against`` (default: the
    trace's, normally the reference). Raises UnknownBackend for a bad name, or for a ``MODULE:FACTORY``
    that the trace names (only ``backend``/``against`` given here may load a module), Unsupported
    when the backend cannot serve the trace's config."""
    # A name the trace file gives may only be a registered one: replaying a file must not import a
    # module the file chooses. MODULE:FACTORY is honoured only when the caller passes it.
    name = backend if backend is not None else trace.backend
    if name is None:
        name = "reference"
    chosen = name if isinstance(name, BackendRecord) else resolve(
        name, "backend", allow_import=backend is not None
    )
    other_name = against if against is not None else trace.against
    other = other_name if isinstance(other_name, BackendRecord) else resolve(
        other_name, "against", allow_import=against is not None
    )
    check_cost(trace, chosen, other)
    lock = Lockstep(trace.config, chosen.factory, other.factory, chosen.capabilities)
    divergence = lock.build_divergence
    steps_run = 0
    try:
        if divergence is None:
            for step in trace.steps:
                divergence, _ = lock.apply(step)
                steps_run += 1
                if divergence is not None:
                    break
    finally:
        lock.dispose()
    return ReplayResult(chosen.name, other.name, steps_run, divergence, trace.expect, tuple(lock.lost_hits))


def replay_command(path: str, backend: str, against: str = "reference") -> str:
    """The shell command that replays a saved trace."""
    command = f"swafloor replay {shlex.quote(str(path))} --backend {shlex.quote(backend)}"
    if against != "reference":
        command += f" --against {shlex.quote(against)}"
    return command

