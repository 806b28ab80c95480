"""Known engine behaviours that a matrix cell's divergence class is named by (issue 33), engine-neutral.

A matrix cell reports each divergence class it met (``part@operation``, :mod:`swafloor.fuzz.classes`).
A :class:`Known` behaviour of an engine holds on releases ``[first, since)`` and backends, and shows as
the classes of its regression traces (``tests/regressions/``, each diverging as its class on its
release). :func:`names` names a class met on a release and backend by every known behaviour whose
range holds it. A class key match names a candidate, not a proof: the trace is what shows it, and a
class no entry names is a candidate bug, unnamed. Each room keeps its own list (``verdicts.py``, release data read by the matrix machinery).
"""

from __future__ import annotations

from typing import Iterable

import attrs

from .matrix import release_key

__all__ = ["Known", "names"]


@attrs.frozen
class Known:
    """An engine behaviour with a verdict: ``kind`` (``bug``: fixed upstream by ``fix``; ``engine limitation``:
    a config the engine refuses inside its own code until ``fix`` lifts it), on releases ``[first, since)``
    (``first``: the first release checked to have it; ``since``: the first without it), seen on
    ``backends`` as each class of ``traces`` (class key -> regression trace)."""

    name: str
    traces: dict[str, str]
    backends: tuple[str, ...]
    first: str
    since: str
    fix: str  # the upstream change (owner/repo#N first where the tracker has one, then what it did)
    kind: str = "bug"

    def applies(self, release: str, backend: str) -> bool:
        return backend in self.backends and release_key(self.first) <= release_key(release) < release_key(self.since)

    @property
    def label(self) -> str:
        """How a matrix cell names it: ``NAME (bug, FIX)`` or ``NAME (engine limitation, lifted by FIX)``."""
        ref = self.fix.split(" ")[0] if "#" in self.fix.split(" ")[0] else f"fixed in {self.since}"
        return f"{self.name} (engine limitation, lifted by {ref})" if self.kind == "engine limitation" else \
            f"{self.name} ({self.kind}, {ref})"


def names(known: Iterable[Known], release: str, backend: str, class_key: str) -> list[str]:
    """The labels of the ``known`` behaviours of ``release`` on ``backend`` that show as ``class_key``."""
    return [k.label for k in known if class_key in k.traces and k.applies(release, backend)]
