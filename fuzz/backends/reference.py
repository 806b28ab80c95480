"""The ``reference`` backend: the reference manager itself, behind the backend protocol."""

from __future__ import annotations

from swafloor.reference import Config, Manager

from ..adapter import ManagerBackend
from ..protocol import ALL_SEMANTICS, factory

__all__ = ["ManagerBackend", "reference"]


@factory(ALL_SEMANTICS, name="reference")
def reference(config: Config) -> ManagerBackend:
    """The reference manager, in the release order its config's semantics name."""
    return ManagerBackend(Manager(config))
