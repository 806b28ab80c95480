"""Where the data plane reads slot ids from: what block table, with slot ids, a wrapped backend shows.

The protocol's ``tables`` part says which blocks hold a slot, not which slot. A backend that knows its
slot ids shows them by an optional method ``slot_tables()`` returning ``{request id: per life cycle
{block: slot id}}`` (slot ids within the life cycle's pool group). The reference manager and its
mutants are read directly (its per-request ``held`` maps). For any other backend that shows the
``tables`` part, slots are assigned by a mirror pool (lowest free slot first, released blocks freed
before new ones are taken), so the data plane checks *which blocks* it keeps, not its slot
bookkeeping. No torch here.
"""

from __future__ import annotations

from typing import Any, Callable

from swafloor.reference import Manager

from ...compare import held_blocks, parts_of
from ...protocol import Part

__all__ = ["SlotSource", "slot_source", "NoBlockTables"]

Tables = dict  # request id -> list (per life cycle) of {block: slot}


class NoBlockTables(Exception):
    """The wrapped backend shows neither slot ids nor the ``tables`` part."""


class SlotSource:
    """``read()`` gives the current slot tables of every request the backend holds blocks for."""

    kind = "abstract"

    def read(self) -> Tables:  # pragma: no cover - interface
        raise NotImplementedError


class _Declared(SlotSource):
    """The backend's own ``slot_tables()``."""

    kind = "the backend's slot_tables()"

    def __init__(self, method: Callable[[], Any]):
        self.method = method

    def read(self) -> Tables:
        return {rid: [dict(t) for t in tables] for rid, tables in self.method().items()}


class _ReferenceManager(SlotSource):
    """The reference manager (or a subclass): its per-request block -> slot maps."""

    kind = "the reference manager's slot ids"

    def __init__(self, manager: Manager):
        self.manager = manager

    def read(self) -> Tables:
        # The manager's own record of which slot each block holds (read-only access).
        return {rid: [dict(held) for held in req.held] for rid, req in self.manager._requests.items()}


class _Mirror(SlotSource):
    """Slot ids assigned here from the backend's ``tables`` part."""

    kind = "slots mirrored from the tables part"

    def __init__(self, backend: Any, group_of: tuple[int, ...], totals: tuple[int, ...]):
        self.backend = backend
        self.group_of = group_of
        self.free = [list(range(n)) for n in totals]  # kept sorted: the lowest is taken first
        self.tables: Tables = {}

    def read(self) -> Tables:
        shown = parts_of(self.backend.observe()).get(Part.TABLES, {})
        for rid in [r for r in self.tables if r not in shown]:
            for lc, held in enumerate(self.tables.pop(rid)):
                self._give(lc, held.values())
        wanted = {rid: [held_blocks(table) for table in tables] for rid, tables in shown.items()}
        for rid, per_lc in wanted.items():  # release first
            mine = self.tables.setdefault(rid, [{} for _ in per_lc])
            for lc, blocks in enumerate(per_lc):
                gone = [b for b in mine[lc] if b not in blocks]
                self._give(lc, [mine[lc].pop(b) for b in gone])
        for rid, per_lc in wanted.items():
            mine = self.tables[rid]
            for lc, blocks in enumerate(per_lc):
                for b in sorted(blocks - mine[lc].keys()):
                    pool = self.free[self.group_of[lc]]
                    if not pool:
                        raise NoBlockTables(f"the tables part holds more blocks than pool group {self.group_of[lc]} has slots")
                    mine[lc][b] = pool.pop(0)
        return {rid: [dict(h) for h in tables] for rid, tables in self.tables.items()}

    def _give(self, lc: int, slots) -> None:
        pool = self.free[self.group_of[lc]]
        pool.extend(slots)
        pool.sort()


def slot_source(backend: Any, capabilities: Any, group_of: tuple[int, ...], totals: tuple[int, ...]) -> SlotSource:
    """The best source of slot ids the backend offers."""
    declared = getattr(backend, "slot_tables", None)
    if callable(declared):
        return _Declared(declared)
    manager = getattr(backend, "manager", None)
    if isinstance(manager, Manager):
        return _ReferenceManager(manager)
    if capabilities.mode(Part.TABLES) is not None:
        return _Mirror(backend, group_of, totals)
    raise NoBlockTables("the backend shows no block tables (neither slot_tables() nor the 'tables' part)")
