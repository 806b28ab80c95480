"""The thin adapter from a manager-shaped object to the backend protocol.

Anything with the reference manager's six operations and ``snapshot()`` (the reference
:class:`~swafloor.reference.Manager`, its subclasses, the oracle's manager) becomes a
:class:`~swafloor.fuzz.protocol.Backend`. It imports no formulas, so the oracle can use it too.
"""

from __future__ import annotations

from typing import Any, Hashable

from swafloor.reference import Outcome, SlotMap, Snapshot

__all__ = ["ManagerBackend"]


class ManagerBackend:
    """Adapts a :class:`~swafloor.reference.Manager`, a subclass of it, or any object with the same
    six operations and ``snapshot()`` (the oracle's manager) to the protocol."""

    def __init__(self, manager: Any):
        self.manager = manager

    def create(self, request_id: Hashable, reused_history: int = 0, **sharing: Any) -> None:
        self.manager.create(request_id, reused_history=reused_history, **sharing)

    def resume(self, request_id: Hashable, **hit: Any) -> Outcome:
        """``hit``: ``hit_tokens=N`` (a lost hit the backend took: see ``Capabilities.lost_hits``)."""
        return self.manager.resume(request_id, **hit)

    def longest_hit(self, request_id: Hashable) -> int | None:
        """The manager's longest valid hit for the request's first resume (None: no such lookup)."""
        return self.manager.longest_hit(request_id)

    def hit_is_valid(self, request_id: Hashable, tokens: int) -> bool:
        return self.manager.hit_is_valid(request_id, tokens)

    def rule_hit(self, request_id: Hashable, rule: str) -> int | None:
        """The hit the lost-hit rule ``rule`` yields for the request's first resume (None: no such lookup)."""
        return self.manager.rule_hit(request_id, rule)

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

    def slots(self) -> SlotMap | None:
        """The manager's slot map (physical identity), or None when it keeps no slot ids (the oracle)."""
        method = getattr(self.manager, "slots", None)
        return method() if callable(method) else None
