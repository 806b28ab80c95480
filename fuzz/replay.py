"""Replaying a saved trace: the same steps on two backends, compared after each, as when found."""

from __future__ import annotations

import shlex

import attrs

from .backends import ResolvedBackend, resolve
from .compare import Divergence
from .lockstep import Lockstep
from .trace import Trace

__all__ = ["ReplayResult", "replay", "replay_command"]


@attrs.frozen
class ReplayResult:
    """What replaying gave: the first divergence (None: the two agreed on every step)."""

    backend: str
    against: str
    steps_run: int
    divergence: Divergence | None
    expect: str

    @property
    def diverged(self) -> bool:
        return self.divergence is not None

    @property
    def as_expected(self) -> bool:
        return self.diverged == (self.expect == "divergence")


def replay(
    trace: Trace, backend: str | ResolvedBackend | None = None, against: str | ResolvedBackend | None = None
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
    chosen = name if isinstance(name, ResolvedBackend) else resolve(
        name, "backend", allow_import=backend is not None
    )
    other_name = against if against is not None else trace.against
    other = other_name if isinstance(other_name, ResolvedBackend) else resolve(
        other_name, "against", allow_import=against is not None
    )
    lock = Lockstep(trace.config, chosen.factory, other.factory, chosen.capabilities)
    divergence = lock.build_divergence
    steps_run = 0
    if divergence is None:
        for step in trace.steps:
            divergence, _ = lock.apply(step)
            steps_run += 1
            if divergence is not None:
                break
    return ReplayResult(chosen.name, other.name, steps_run, divergence, trace.expect)


def replay_command(path: str, backend: str, against: str = "reference") -> str:
    """The shell command that replays a saved trace."""
    command = f"swafloor replay {shlex.quote(str(path))} --backend {shlex.quote(backend)}"
    if against != "reference":
        command += f" --against {shlex.quote(against)}"
    return command

