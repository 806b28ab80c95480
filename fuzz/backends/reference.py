"""The ``reference`` backend: the reference manager itself, behind the backend protocol."""

from __future__ import annotations

from swafloor.reference import Config, Manager

from ..adapter import ManagerBackend
from ..protocol import EXACT_WITH_IDENTITY, factory

__all__ = ["ManagerBackend", "reference"]


@factory(EXACT_WITH_IDENTITY, name="reference")
def reference(config: Config) -> ManagerBackend:
    """The reference manager (release-first order)."""
    return ManagerBackend(Manager(config))
