"""The ``reference`` backend: the reference manager itself, behind the backend protocol."""

from __future__ import annotations

from typing import Hashable

from swafloor.reference import Config, Manager, Outcome, Snapshot

from ..protocol import EXACT_EVERYTHING, factory

__all__ = ["ManagerBackend", "reference"]


class ManagerBackend:
    """Adapts a :class:`~swafloor.reference.Manager` (or a subclass of it) to the protocol."""

    def __init__(self, manager: Manager):
        self.manager = manager

    def create(self, request_id: Hashable, reused_history: int = 0) -> None:
        self.manager.create(request_id, reused_history=reused_history)

    def resume(self, request_id: Hashable) -> Outcome:
        return self.manager.resume(request_id)

    def resize(self, request_id: Hashable, capacity: int, history: int) -> Outcome:
        return self.manager.resize(request_id, capacity, history)

    def commit(self, request_id: Hashable, tokens: int) -> None:
        self.manager.commit(request_id, tokens)

    def suspend(self, request_id: Hashable) -> None:
        self.manager.suspend(request_id)

    def close(self, request_id: Hashable) -> None:
        self.manager.close(request_id)

    def observe(self) -> Snapshot:
        return self.manager.snapshot()


@factory(EXACT_EVERYTHING, name="reference")
def reference(config: Config) -> ManagerBackend:
    """The reference manager (release-first order)."""
    return ManagerBackend(Manager(config))
