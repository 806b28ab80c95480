"""Where the data plane reads slot ids from: what block table, with slot ids, a wrapped backend shows.

The protocol's ``tables`` part says which blocks hold a slot, not which slot. A backend that shows
physical identity (the ``slots`` part: the reference, its seeded bugs, vLLM) is read through its own
slot ids, each pool's ids given a fixed row of device memory the first time they are seen, so two
blocks the backend puts in one slot share one row, and the data plane checks the backend's own slot
bookkeeping. A data plane wrapping a data plane reads the inner one's ``slot_tables()``. Any other
backend that shows the ``tables`` part runs *table-only*: slots are assigned by a mirror pool (lowest
free slot first, released blocks freed before new ones are taken), so the data plane checks which
blocks it keeps, never its slot bookkeeping, and its capabilities say so. No torch here.

Scheduling and execution apart (:mod:`.execution`): a worker keeps its own block table per request
(:class:`WorkerTable`: ids appended as the scheduler sends them, never shrunk, padded with slot 0 as a
zero-initialised table is), and every slot position records who wrote it (:class:`SlotLedger`).
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from ...protocol import BackendCheckFailed, Part, held_blocks, parts_of, slots_of

__all__ = ["SlotSource", "slot_source", "NoBlockTables", "TABLE_ONLY", "WorkerTable", "SlotLedger", "Written", "PAD"]

Tables = dict  # request id -> list (per life cycle) of {block: slot}

TABLE_ONLY = (
    "table-only: the backend shows no slot ids, so slots are mirrored from its tables part and its slot "
    "bookkeeping is not checked"
)


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


class _Identity(SlotSource):
    """The backend's own slot ids (its ``slots`` part), each mapped to a fixed row of its pool."""

    kind = "the backend's own slot ids"

    def __init__(self, backend: Any, group_of: tuple[int, ...], totals: tuple[int, ...]):
        self.backend = backend
        self.group_of = group_of
        self.totals = totals
        self.rows: list[dict[Any, int]] = [{} for _ in totals]  # per pool group: backend slot id -> row

    def read(self) -> Tables:
        view = slots_of(self.backend, self.backend.observe())
        if view is None:
            raise NoBlockTables("the backend declares the 'slots' part but shows no slot map")
        tables: Tables = {}
        for rid, per_lc in view.held.items():
            mapped = []
            for lc, table in enumerate(per_lc):
                g = self.group_of[lc]
                rows = self.rows[g]
                mine = {}
                for b, s in table.items():
                    row = rows.get(s)
                    if row is None:
                        row = len(rows)
                        if row >= self.totals[g]:
                            raise BackendCheckFailed(
                                f"slots.pool[{g}]",
                                f"the backend has used {row + 1} distinct slot ids in pool group {g}, which has "
                                f"{self.totals[g]} slots (last: {s!r} for {rid}/lc{lc}/block{b})",
                            )
                        rows[s] = row
                    mine[b] = row
                mapped.append(mine)
            tables[rid] = mapped
        return tables


class _Mirror(SlotSource):
    """Slot ids assigned here from the backend's ``tables`` part (table-only)."""

    kind = TABLE_ONLY

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
    if capabilities.mode(Part.SLOTS) is not None:
        return _Identity(backend, group_of, totals)
    if capabilities.mode(Part.TABLES) is not None:
        return _Mirror(backend, group_of, totals)
    raise NoBlockTables("the backend shows no block tables (neither slot ids nor the 'tables' part)")


#: The id a worker's table gives a block it was never sent: a zero-initialised table's padding.
PAD = 0


class WorkerTable:
    """A worker's block table for one request and life cycle: block index -> slot id, as the scheduler
    sent them (a block it never held, say a hit's null entry, has none). Ids are appended and never
    removed, so it keeps ids the manager has freed; a read past what it was sent gets :data:`PAD`."""

    def __init__(self) -> None:
        self.ids: list[int | None] = []

    def extend(self, held: dict[int, int]) -> None:
        """Take the ids of the blocks the manager holds now that this table has not got (an id the
        scheduler sends for a block index replaces the old one; none is ever removed)."""
        for b, slot in sorted(held.items()):
            while len(self.ids) <= b:
                self.ids.append(None)
            self.ids[b] = slot

    def slot(self, b: int) -> tuple[int, bool]:
        """The slot id it gives block ``b`` and whether it was sent one (False: padding)."""
        if b < len(self.ids) and self.ids[b] is not None:
            return self.ids[b], True
        return PAD, False


@attrs.frozen
class Written:
    """Who wrote a slot position: the request and step (``resume``: loaded when resumed) that wrote
    it, the position, and the content: the request whose token it is and the position (``draft``: a
    drafter's KV)."""

    request: str
    position: int
    step: int | str
    owner: str
    draft: bool = False

    def describe(self) -> str:
        what = "draft KV" if self.draft else "KV"
        return (f"{what} of token {self.position} of {self.owner!r}, written by request {self.request!r} "
                f"at step {self.step}")


class SlotLedger:
    """Per pool group and slot, per position in the block, the last :class:`Written` (None: never
    written). A slot keeps what was written into it when the manager frees it or hands it to another
    block, as device memory does."""

    def __init__(self, totals: tuple[int, ...], t: int):
        self.t = t
        self.rows: list[list[list[Written | None]]] = [[[None] * t for _ in range(n)] for n in totals]

    def write(self, group: int, slot: int, offset: int, entry: Written) -> None:
        self.rows[group][slot][offset] = entry

    def read(self, group: int, slot: int, offset: int) -> Written | None:
        return self.rows[group][slot][offset]
