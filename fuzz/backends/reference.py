"""The ``reference`` backend: the reference manager itself, behind the backend protocol."""

from __future__ import annotations

from swafloor.reference import Config, Manager

from ..adapter import ManagerBackend
from ..protocol import REFERENCE_CAPABILITIES, factory

__all__ = ["ManagerBackend", "reference"]


@factory(REFERENCE_CAPABILITIES, name="reference")
def reference(config: Config) -> ManagerBackend:
    """The reference manager, in the release order its config's semantics name."""
    return ManagerBackend(Manager(config))
