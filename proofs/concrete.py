"""The bounded concrete check: the theorem's own goal function evaluated on integers, exhaustively
over each variable's bounded range, in the theorem's variable order. The first failing point is
therefore the lexicographically smallest counterexample within the bounds, the same order the
solver minimises in, so the two counterexamples can be compared exactly.

The points are enumerated as numpy integer columns (one per variable, rows in lexicographic order; a
few values of the first variable at a time, so a refutation that fails early never builds the rest),
and the goal function runs on whole blocks of rows at a time: the reference's
arithmetic kernel and the connectives of :mod:`.symbolic` work elementwise on numpy arrays. Without
numpy the same points are evaluated one at a time on Python ints (:func:`check_scalar`, also the
cross-check of the vectorised path in the tests).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import attrs

from .theorem import Theorem, goal_parts

__all__ = ["ConcreteCheck", "check", "check_scalar", "evaluate", "merge", "BLOCK_ROWS"]

BLOCK_ROWS = 1 << 16  # the most rows per vectorised goal evaluation (1 << 18 was slower: arrays past the cache)
FIRST_BLOCK_ROWS = 1 << 12  # the first block; each next one doubles (a refutation fails early)


@attrs.frozen
class ConcreteCheck:
    """``holds``: no point of the bounded ranges failed. ``points``: goal evaluations made.
    ``counterexample``: the first failing point, if any."""

    holds: bool
    points: int
    seconds: float
    counterexample: dict[str, int] | None = None


def _truth(value: Any) -> bool:
    if type(value) is tuple:
        return all(value)
    return value


def evaluate(theorem: Theorem, point: Mapping[str, int]) -> tuple[bool, bool]:
    """``(admissible, holds)`` of the goal at one point (ints): whether the point is in the domain
    (every variable at least its lower bound), and whether the goal holds there."""
    values = [point[name] for name in theorem.variable_names]
    admissible = all(x >= v.lower for x, v in zip(values, theorem.variables))
    return admissible, bool(_truth(theorem.goal(*values)))


class _Reads(dict):
    """An environment that records which names a range function read."""

    def __init__(self, pairs: Any, read: set[str]):
        super().__init__(pairs)
        self.read = read

    def __getitem__(self, name: str) -> int:
        self.read.add(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self.read.add(name)  # type: ignore[arg-type]
        return super().__contains__(name)

    def _all(self) -> None:
        self.read.update(dict.keys(self))

    def __iter__(self) -> Any:
        self._all()
        return super().__iter__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def items(self) -> Any:
        self._all()
        return super().items()

    def values(self) -> Any:
        self._all()
        return super().values()

    def copy(self) -> dict:
        self._all()
        return dict(self.items())

    def __len__(self) -> int:
        self._all()
        return super().__len__()


def _ranges(var: Any, names: list[str], cols: list[Any]) -> tuple[Any, Any]:
    """``(counts, flat)``: the dependent variable's range on every row of ``cols`` (how many values
    each row gets, and the values one row after another). The range function runs once per
    combination of the names it reads (a range depends on a few of the variables before it, the rows
    on all of them), on the first row with that combination; the ranges are then spread to the rows
    by numpy. Exact for a deterministic range function: once the set of names read is stable, every
    row agrees with its representative on every name that call read, so its own call would read the
    same names and return the same range. A call that reads a new name starts it over."""
    import numpy as np

    rows = len(cols[0])
    read: set[str] = set()
    while True:
        index = [i for i, name in enumerate(names) if name in read]
        if index:
            keys = np.stack([cols[i] for i in index], axis=1)
            _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        else:
            first, inverse = np.zeros(1, dtype=np.int64), np.zeros(rows, dtype=np.int64)
        before = len(read)
        ranges = []
        for row in zip(*(c[first].tolist() for c in cols)):  # each combination's first row
            ranges.append(list(var.values(_Reads(zip(names, row), read))))
            if len(read) != before:
                break
        if len(read) == before:
            break
    lengths = np.array([len(r) for r in ranges], dtype=np.int64)
    pool = np.array([x for r in ranges for x in r], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    counts = lengths[inverse]
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    within = np.arange(total, dtype=np.int64) - np.repeat(offsets, counts)
    return counts, pool[np.repeat(starts[inverse], counts) + within]


def _columns(theorem: Theorem, chunk: int, chunks: int, first: Any = None) -> list[Any]:
    """Every bounded point as one numpy column per variable, rows in lexicographic order (``first``:
    only these values of the first variable, else every m-th from the k-th)."""
    import numpy as np

    variables = theorem.variables
    if first is None:
        first = list(variables[0].values({}))[chunk::chunks]
    cols = [np.array(first, dtype=np.int64)]
    for i, var in enumerate(variables[1:], start=1):
        if var.constant:
            vals = np.fromiter(var.values({}), dtype=np.int64)
            rows = len(cols[0])
            cols = [np.repeat(c, len(vals)) for c in cols] + [np.tile(vals, rows)]
            continue
        counts, flat = _ranges(var, [v.name for v in variables[:i]], cols)
        cols = [np.repeat(c, counts) for c in cols] + [flat]
    return cols


def _batches(theorem: Theorem, chunk: int, chunks: int) -> Any:
    """The columns a few values of the first variable at a time (one, then twice as many each time),
    in order: a refutation that fails early never enumerates the rest of the grid."""
    values = list(theorem.variables[0].values({}))[chunk::chunks]
    lo, size = 0, 1
    while lo < len(values):
        yield _columns(theorem, chunk, chunks, values[lo:lo + size])
        lo, size = lo + size, 2 * size


def check(theorem: Theorem, first: tuple[int, int] = (0, 1)) -> ConcreteCheck:
    """Evaluate the goal at every point of the bounded ranges, stopping at the first failing block.

    ``first = (k, m)`` keeps every m-th value of the first variable, starting at the k-th: the chunks
    ``(0, m) .. (m - 1, m)`` split the check between m workers."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency; kept for a bare interpreter
        return check_scalar(theorem, first)
    start = time.perf_counter()
    points, failing, size = 0, None, FIRST_BLOCK_ROWS
    for cols in _batches(theorem, *first):
        rows, lo = len(cols[0]), 0
        while lo < rows:
            hi = min(rows, lo + size)
            ok = np.ones(hi - lo, dtype=bool)
            for part in goal_parts(theorem.goal(*(c[lo:hi] for c in cols))):
                ok &= np.broadcast_to(np.asarray(part, dtype=bool), ok.shape)
            points += hi - lo
            if not ok.all():
                failing = lo + int(np.argmin(ok))
                break
            lo, size = hi, min(BLOCK_ROWS, 2 * size)
        if failing is not None:
            break
    seconds = time.perf_counter() - start
    if failing is None:
        return ConcreteCheck(True, points, seconds)
    cex = {name: int(c[failing]) for name, c in zip(theorem.variable_names, cols)}
    return ConcreteCheck(False, points, seconds, cex)


def check_scalar(theorem: Theorem, first: tuple[int, int] = (0, 1)) -> ConcreteCheck:
    """:func:`check` one point at a time on Python ints (stops at the first failing point)."""
    variables = theorem.variables
    chunk, chunks = first
    last = len(variables) - 1
    goal = theorem.goal
    values = [0] * len(variables)
    env: dict[str, int] = {}
    points = 0

    def search(i: int) -> bool:  # True when a counterexample was found (left in ``values``)
        nonlocal points
        var = variables[i]
        domain = var.values(env)
        if i == 0:
            domain = list(domain)[chunk::chunks]
        if i < last:
            for x in domain:
                values[i] = env[var.name] = x
                if search(i + 1):
                    return True
            return False
        for x in domain:
            values[i] = x
            points += 1
            value = goal(*values)
            if not (all(value) if type(value) is tuple else value):
                return True
        return False

    start = time.perf_counter()
    found = search(0)
    seconds = time.perf_counter() - start
    counterexample = dict(zip(theorem.variable_names, values)) if found else None
    return ConcreteCheck(not found, points, seconds, counterexample)


def merge(parts: list[ConcreteCheck]) -> ConcreteCheck:
    """Chunks split the first variable's values, so the smallest failing point is the smallest of the
    chunks' first failures."""
    failures = [p.counterexample for p in parts if p.counterexample is not None]
    first = min(failures, key=lambda cex: list(cex.values())) if failures else None
    return ConcreteCheck(first is None, sum(p.points for p in parts), sum(p.seconds for p in parts), first)
