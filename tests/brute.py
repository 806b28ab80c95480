"""A token-level brute force of the block geometry, written without the reference's formulas.

It lists tokens, marks the live ones, and collects the blocks they fall in. Tests compare the
reference's closed forms against it. Nothing here divides except ``p // t`` (the block of a token).
"""

from __future__ import annotations


def block_of(p: int, t: int) -> int:
    return p // t


def allocated(c: int, t: int) -> set[int]:
    """Blocks that hold at least one of the tokens ``0 .. c-1``."""
    return {block_of(p, t) for p in range(c)}


def sink_block_set(sink_tokens: int, t: int) -> set[int]:
    return {block_of(p, t) for p in range(sink_tokens)}


def live_tokens(h: int, c: int, window: int | None, sink_tokens: int) -> tuple[range, range]:
    """Tokens a step at history ``h`` and capacity ``c`` attends to or writes, as two runs: the
    sinks, and the window ``[h+1-W, h]`` (token ``h`` in flight) with the step's new tokens up to
    ``c-1``. Full attention attends to every token."""
    last = max(h, c - 1)
    if window is None:
        return range(0), range(0, last + 1)
    return range(0, sink_tokens), range(max(0, h + 1 - window), last + 1)


def live_set(h: int, c: int, t: int, window: int | None, sink_tokens: int) -> set[int]:
    """Blocks holding a live token, among the blocks the capacity allocates (``b * t < c``)."""
    sinks, run = live_tokens(h, c, window, sink_tokens)
    blocks = set(map(t.__rfloordiv__, sinks)) | set(map(t.__rfloordiv__, run))
    return {b for b in blocks if b * t < c}


def stale_set(h: int, t: int, window: int | None, sink_tokens: int, upto: int) -> set[int]:
    """Blocks ``< upto`` past the sink blocks whose every token lies before the window at ``h``."""
    if window is None:
        return set()
    sinks = sink_block_set(sink_tokens, t)
    return {
        b
        for b in range(upto)
        if b not in sinks and all(p < h + 1 - window for p in range(b * t, b * t + t))
    }


def touched(first: int, length: int, t: int) -> int:
    return len({block_of(p, t) for p in range(first, first + length)})


def worst_step_need(t: int, window: int, sink_tokens: int, n: int, horizon: int) -> tuple[int, int]:
    """The most live blocks of an n-token step (capacity h+n) over ``h < horizon``, and the first h."""
    best, at = -1, -1
    for h in range(horizon):
        need = len(live_set(h, h + n, t, window, sink_tokens))
        if need > best:
            best, at = need, h
    return best, at
