"""The data plane's device side: paged KV tensors, deterministic token data, and attention and an SSM
recurrence computed through block tables, beside the same computation on dense copies.

This module imports torch; nothing imports it until a ``dataplane:`` backend is built.

Storage. One float32 device tensor ``kv`` of shape ``[total slots + 1, 2, t, heads, head_dim]``;
pool group ``g`` is the view ``kv[offset_g : offset_g + slots_g]`` (``[slots, K/V, t, heads,
head_dim]``). The last row is a poison row that reads of a block holding no slot are sent to.
Every row starts as poison (:data:`POISON`, outside the range of real data), and a slot that no
request holds any more is poisoned again, so data that was never written or was released cannot be
read back as if it were still there. An SSM life cycle keeps a request's state (``[heads,
head_dim]``) in row 0 of the K half of the slot its table gives for block 0.

Data. Keys, values, queries and SSM inputs of token ``p`` of a request are a hash of (campaign
seed, request id, life cycle, kind, ``p``, head, dim), uniform in ``[-1, 1)`` with 24-bit
resolution (exact in float32): any two requests, life cycles or positions differ.

Outputs. Token ``q`` of an SWA life cycle attends to the positions of its sink blocks
(``p < S * t``) and its window ``[q + 1 - W, q]``; full attention to ``[0, q]``; both by scaled
dot-product attention in float64. The SSM state after position ``p`` is
``s_p = a * s_{p-1} + x_p`` (``a`` = :data:`SSM_DECAY`), the output of token ``q`` is ``s_q``.

Formulas restated on purpose. Which positions a token attends to (sinks, window) is written here
again, token by token, and never taken from the reference's block formulas (stale ranges, live
blocks): the dense side of each check is then an independent statement of what attention reads, as
the oracle (:mod:`swafloor.fuzz.backends.oracle`) is an independent statement of what a manager holds.
"""

from __future__ import annotations

import zlib
from typing import Any, Sequence

import attrs
import torch
import torch.nn.functional as F

from swafloor.reference import LifeCycleKind

__all__ = ["Engine", "Writer", "Mismatch", "Row", "token_data", "POISON", "ATOL", "RTOL", "QUERY_CHUNK"]

HEADS = 2
HEAD_DIM = 8
#: What a row holds before it is written and after its slot is released.
POISON = 1024.0
SSM_DECAY = 0.875
#: The tolerance of an output: ``|paged - dense| <= ATOL + RTOL * |dense|`` (float64 arithmetic on
#: float32 storage; an SSM state is rounded to float32 each time it is stored).
ATOL = 1e-5
RTOL = 1e-5
#: Every in-flight token of a step is computed; attention takes them in pieces of this many queries
#: (a piece is a row of its own), at most ``PIECES_PER_CALL`` pieces per attention call, so a long
#: chunked step costs memory in proportion to the piece, not to the chunk.
QUERY_CHUNK = 64
PIECES_PER_CALL = 32
_SCAN_CHUNK = 256
_FULL_WINDOW = 1 << 40
_M32 = 0xFFFFFFFF
KIND_K, KIND_V, KIND_Q, KIND_X = 0, 1, 2, 3


# --------------------------------------------------------------------------- deterministic data
def _mix_int(x: int) -> int:
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x046B2D95) & _M32
    return x ^ (x >> 16)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """The same 32-bit mix on an int64 tensor of values in ``[0, 2**32)`` (products stay below 2**63)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x046B2D95) & _M32
    return x ^ (x >> 16)


def request_seed(campaign_seed: int, request_id: Any) -> int:
    return _mix_int(zlib.crc32(str(request_id).encode()) ^ _mix_int(campaign_seed))


def _base(rseed: int, life_cycle: int, kind: int) -> int:
    return _mix_int(_mix_int(rseed ^ (life_cycle * 0x9E3779B1)) ^ (kind * 0x85EBCA77))


def token_data(bases: torch.Tensor, positions: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """float32 ``[*positions.shape, heads, head_dim]`` in ``[-1, 1)``; ``bases`` broadcasts against
    ``positions`` (one per request, life cycle and kind)."""
    lanes = torch.arange(heads * head_dim, device=positions.device).view(heads, head_dim)
    idx = (positions.unsqueeze(-1).unsqueeze(-1) * (heads * head_dim) + lanes) & _M32
    b = bases.unsqueeze(-1).unsqueeze(-1)
    x = _mix(_mix(idx ^ b) ^ (b >> 3))
    return (x & 0xFFFFFF).to(torch.float32) * (2.0**-23) - 1.0


def ssm_scan(state: torch.Tensor, x: torch.Tensor, decay: float = SSM_DECAY) -> torch.Tensor:
    """States after each input: ``s_j = decay * s_{j-1} + x_j`` from ``s_{-1} = state``; float64.
    ``state``: ``[..., H, D]``, ``x``: ``[..., n, H, D]``; returns ``[..., n, H, D]``. Computed in
    chunks with ``s_j = a^j (a s_{-1} + sum_{i<=j} a^{-i} x_i)``, no loop per token."""
    out = []
    s = state
    n = x.shape[-3]
    for lo in range(0, n, _SCAN_CHUNK):
        chunk = x[..., lo : lo + _SCAN_CHUNK, :, :]
        j = torch.arange(chunk.shape[-3], device=x.device, dtype=torch.float64)
        up = torch.pow(torch.tensor(decay, dtype=torch.float64, device=x.device), j)
        acc = torch.cumsum(chunk / up[:, None, None], dim=-3)
        states = up[:, None, None] * (decay * s.unsqueeze(-3) + acc)
        out.append(states)
        s = states[..., -1, :, :]
    if not out:
        return x.new_zeros(x.shape, dtype=torch.float64)
    return torch.cat(out, dim=-3)


# --------------------------------------------------------------------------- records
@attrs.frozen
class Writer:
    """Who last wrote a slot: ``action`` is ``wrote`` (tokens computed), ``loaded`` (history filled on
    resume), ``state`` (an SSM state stored) or ``released`` (poisoned: no request holds it)."""

    request: str
    life_cycle: int
    block: int
    action: str

    def describe(self) -> str:
        if self.action == "released":
            return f"released by request {self.request!r} (life cycle {self.life_cycle}, block {self.block})"
        return f"request {self.request!r} ({self.action} life cycle {self.life_cycle}, block {self.block})"


@attrs.frozen
class Row:
    """One (request, life cycle) to compute: its table ``{block: slot}``, lengths and data seed."""

    request: str
    rseed: int
    life_cycle: int
    table: dict
    history: int
    capacity: int


@attrs.frozen
class Mismatch:
    """What the data check found: the divergence field and a message naming token, life cycle, block,
    slot and the slot's last writer."""

    field: str
    message: str


def _query_positions(h: int, c: int) -> list[int]:
    return list(range(h, c))


def _pieces(rows: list["Row"]) -> list["Row"]:
    """Each attention row cut into rows of at most ``QUERY_CHUNK`` in-flight tokens (a token's output
    depends on its position alone, so a piece is checked as its own row)."""
    out = []
    for r in rows:
        if r.capacity - r.history <= QUERY_CHUNK:
            out.append(r)
            continue
        for lo in range(r.history, r.capacity, QUERY_CHUNK):
            out.append(attrs.evolve(r, history=lo, capacity=min(r.capacity, lo + QUERY_CHUNK)))
    return out


class Engine:
    """Paged KV storage for one config and the batched checks. ``totals``: slots per pool group."""

    def __init__(
        self,
        layout: Any,
        totals: Sequence[int],
        device: str,
        seed: int = 0,
        heads: int = HEADS,
        head_dim: int = HEAD_DIM,
    ):
        self.t = layout.tokens_per_block
        self.life_cycles = layout.life_cycles
        self.group_of = tuple(layout.pool_group_of)
        self.totals = tuple(int(n) for n in totals)
        self.offsets = [0]
        for n in self.totals:
            self.offsets.append(self.offsets[-1] + n)
        self.poison_row = self.offsets[-1]
        self.device = torch.device(device)
        if self.device.type == "cpu":
            # Small tensors: more threads only add synchronization (100x slower on a busy machine).
            torch.set_num_threads(1)
        self.seed = seed
        self.heads, self.head_dim = heads, head_dim
        self.kv = torch.full(
            (self.poison_row + 1, 2, self.t, heads, head_dim), POISON, dtype=torch.float32, device=self.device
        )
        #: one view per pool group: ``[slots, K/V, t, heads, head_dim]``
        self.pools = [self.kv[self.offsets[g] : self.offsets[g + 1]] for g in range(len(self.totals))]
        self.last_writer: dict[tuple[int, int], Writer] = {}
        #: slots written or poisoned since the wrapper last checked (it re-checks the requests holding them)
        self.touched: set[tuple[int, int]] = set()
        self._dense: dict[tuple[int, int], torch.Tensor] = {}  # (rseed, lc) -> [L, 2, H, D] float32
        #: the worker's mask on the paged side, ``mask_start(q, W)`` -> first position a query reads (sinks
        #: apart); None: the window restated here (``q + 1 - W``). The dense side never takes it.
        self.mask_start: Any = None
        self._states: dict[tuple[int, int], torch.Tensor] = {}  # (rseed, lc) -> [L, H, D] float64

    # ------------------------------------------------------------------ dense copies
    def _positions(self, lo: int, hi: int) -> torch.Tensor:
        return torch.arange(lo, hi, device=self.device, dtype=torch.int64)

    def series(self, rseed: Any, lc: int, length: int) -> torch.Tensor:
        """The request's dense copy for a life cycle: positions ``[0, length)`` (at least) of its keys,
        values, queries and SSM inputs, ``[L, 4, H, D]`` float32 (grown and kept). ``rseed``: a request's
        seed, or, for a request on another's prefix, its segments ``((end, seed), ..., (None, seed))``:
        positions below ``end`` are that seed's (the same tokens, the same data), the rest the last's."""
        have = self._dense.get((rseed, lc))
        if have is not None and have.shape[0] >= length:
            return have
        if isinstance(rseed, tuple):
            new_len = max(length, 2 * (0 if have is None else have.shape[0]), 16)
            pieces, start = [], 0
            for end, seed in rseed:
                stop = new_len if end is None else min(end, new_len)
                if stop > start:
                    pieces.append(self.series(seed, lc, stop)[start:stop])
                    start = stop
            full = torch.cat(pieces)
            self._dense[(rseed, lc)] = full
            return full
        new_len = max(length, 2 * (0 if have is None else have.shape[0]), 16)
        start = 0 if have is None else have.shape[0]
        pos = self._positions(start, new_len)
        kinds = (KIND_K, KIND_V, KIND_Q, KIND_X)
        bases = torch.tensor([[_base(rseed, lc, k)] for k in kinds], device=self.device, dtype=torch.int64)
        fresh = token_data(bases, pos.unsqueeze(0).expand(len(kinds), -1), self.heads, self.head_dim).transpose(0, 1)
        full = fresh if have is None else torch.cat([have, fresh])
        self._dense[(rseed, lc)] = full
        return full

    def dense_kv(self, rseed: int, lc: int, length: int) -> torch.Tensor:
        """Keys and values of positions ``[0, length)`` (at least), ``[L, 2, H, D]``."""
        return self.series(rseed, lc, length)[:, :2]

    def ssm_inputs(self, rseed: int, lc: int, lo: int, hi: int) -> torch.Tensor:
        return self.series(rseed, lc, hi)[lo:hi, KIND_X].to(torch.float64)

    def dense_states(self, rseed: int, lc: int, length: int) -> torch.Tensor:
        """SSM states after positions ``[0, length)`` (at least), ``[L, H, D]`` float64."""
        have = self._states.get((rseed, lc))
        if have is not None and have.shape[0] >= length:
            return have
        new_len = max(length, 2 * (0 if have is None else have.shape[0]), 16)
        start = 0 if have is None else have.shape[0]
        s0 = have[-1] if have is not None else torch.zeros(
            self.heads, self.head_dim, dtype=torch.float64, device=self.device
        )
        fresh = ssm_scan(s0, self.ssm_inputs(rseed, lc, start, new_len))
        full = fresh if have is None else torch.cat([have, fresh])
        self._states[(rseed, lc)] = full
        return full

    def _state_before(self, rseed: int, lc: int, history: int) -> torch.Tensor:
        """The state after history ``h`` (positions ``[0, h)``), zeros when ``h == 0``."""
        if history == 0:
            return torch.zeros(self.heads, self.head_dim, dtype=torch.float64, device=self.device)
        return self.dense_states(rseed, lc, history)[history - 1]

    # ------------------------------------------------------------------ writes
    def _row(self, lc: int, slot: int) -> int:
        return self.offsets[self.group_of[lc]] + slot

    def write(self, request: str, rseed: int, lc: int, table: dict, lo: int, hi: int, action: str,
              blocks: set | None = None) -> None:
        """Write keys and values of positions ``[lo, hi)`` into the slots ``table`` gives their blocks
        (only ``blocks``, when given). A block holding no slot is skipped: that data is lost."""
        if hi <= lo:
            return
        t = self.t
        first, last = lo // t, (hi - 1) // t
        slots = []
        for b in range(first, last + 1):
            s = table.get(b)
            if s is None or (blocks is not None and b not in blocks):
                slots.append(-1)
            else:
                slots.append(s)
                self.last_writer[(self.group_of[lc], s)] = Writer(request, lc, b, action)
                self.touched.add((self.group_of[lc], s))
        if all(s < 0 for s in slots):
            return
        pos = self._positions(lo, hi)
        slot_of = torch.tensor(slots, device=self.device, dtype=torch.int64)[pos // t - first]
        keep = slot_of >= 0
        rows = slot_of[keep] + self.offsets[self.group_of[lc]]
        pos = pos[keep]
        self.kv[rows, :, pos % t] = self.dense_kv(rseed, lc, hi)[pos]

    def store_state(self, request: str, rseed: int, lc: int, slot: int | None, history: int, action: str) -> None:
        """Store the SSM state after history ``h`` (computed densely: a load) in ``slot``."""
        if slot is None:
            return
        self.kv[self._row(lc, slot), 0, 0] = self._state_before(rseed, lc, history).to(torch.float32)
        self.last_writer[(self.group_of[lc], slot)] = Writer(request, lc, 0, action)
        self.touched.add((self.group_of[lc], slot))

    def advance_state(self, request: str, lc: int, rseed: int, slot: int | None, h0: int, h1: int) -> None:
        """History advanced over ``[h0, h1)``: read the state from the slot, run the recurrence over
        those tokens' inputs, store it back."""
        if slot is None or h1 <= h0:
            return
        row = self._row(lc, slot)
        s = self.kv[row, 0, 0].to(torch.float64)
        s = ssm_scan(s, self.ssm_inputs(rseed, lc, h0, h1))[-1]
        self.kv[row, 0, 0] = s.to(torch.float32)
        self.last_writer[(self.group_of[lc], slot)] = Writer(request, lc, 0, "state")
        self.touched.add((self.group_of[lc], slot))

    def poison(self, slots: list[tuple[int, int]], releasers: list[Writer]) -> None:
        """Slots no request holds any more: their data is gone."""
        if not slots:
            return
        rows = torch.tensor([self.offsets[g] + s for g, s in slots], device=self.device, dtype=torch.int64)
        self.kv[rows] = POISON
        for key, who in zip(slots, releasers):
            self.last_writer[key] = who
        self.touched.update(slots)

    # ------------------------------------------------------------------ the checks
    def check(self, rows: list[Row]) -> Mismatch | None:
        """Compute the in-flight tokens of every row through the tables and on dense copies; the first
        mismatch, or None."""
        attention = [r for r in rows if self.life_cycles[r.life_cycle].kind is not LifeCycleKind.SSM]
        ssm = [r for r in rows if self.life_cycles[r.life_cycle].kind is LifeCycleKind.SSM]
        found = None
        pieces = _pieces(attention)
        for at in range(0, len(pieces), PIECES_PER_CALL):
            found = self._check_attention(pieces[at : at + PIECES_PER_CALL])
            if found is not None:
                break
        if found is None and ssm:
            found = self._check_ssm(ssm)
        return found

    def _blocks_read(self, row: Row, queries: list[int]) -> list[int]:
        lc = self.life_cycles[row.life_cycle]
        t = self.t
        last = queries[-1] // t
        if lc.window is None:
            return list(range(0, last + 1))
        first = max(0, (queries[0] + 1 - lc.window) // t)
        if self.mask_start is not None:  # the worker's mask: its blocks, wherever it starts
            first = max(0, min(first, self.mask_start(queries[0], lc.window) // t))
        sinks = list(range(0, min(lc.sink_blocks, first)))
        return sinks + list(range(first, last + 1))

    def _check_attention(self, rows: list[Row]) -> Mismatch | None:
        dev, t, H, D = self.device, self.t, self.heads, self.head_dim
        R = len(rows)
        queries = [_query_positions(r.history, r.capacity) for r in rows]
        blocks = [self._blocks_read(r, q) for r, q in zip(rows, queries)]
        nq = max(len(q) for q in queries)
        nb = max(len(b) for b in blocks)
        index, block_ids, qpos, windows, sinks = [], [], [], [], []
        for r, q, bl in zip(rows, queries, blocks):
            g_off = self.offsets[self.group_of[r.life_cycle]]
            get = r.table.get
            index.append([self.poison_row if get(b) is None else g_off + get(b) for b in bl]
                         + [self.poison_row] * (nb - len(bl)))
            block_ids.append(bl + [-1] * (nb - len(bl)))
            qpos.append(q + [q[0]] * (nq - len(q)))
            lc = self.life_cycles[r.life_cycle]
            windows.append(_FULL_WINDOW if lc.window is None else lc.window)
            sinks.append(0 if lc.window is None else lc.sink_blocks * t)
        index_t = torch.tensor(index, device=dev, dtype=torch.int64)  # [R, NB]
        qpos_t = torch.tensor(qpos, device=dev, dtype=torch.int64)  # [R, Q]
        counts = torch.tensor([len(q) for q in queries], device=dev)
        qvalid = torch.arange(nq, device=dev) < counts.unsqueeze(1)
        win = torch.tensor(windows, device=dev, dtype=torch.int64).view(R, 1, 1)
        sink = torch.tensor(sinks, device=dev, dtype=torch.int64).view(R, 1, 1)
        blk = torch.tensor(block_ids, device=dev, dtype=torch.int64)  # [R, NB]
        lane = torch.arange(t, device=dev, dtype=torch.int64)
        kpos = torch.where(blk.unsqueeze(-1) >= 0, blk.unsqueeze(-1) * t + lane, -1).view(R, nb * t)
        top = max(r.capacity for r in rows)
        series = [self.series(r.rseed, r.life_cycle, top) for r in rows]
        q = torch.stack([x[p, KIND_Q] for x, p in zip(series, qpos_t)]).to(torch.float64)  # [R, Q, H, D]

        # the paged side: one gather through the tables
        gathered = self.kv[index_t]  # [R, NB, 2, t, H, D]
        paged = gathered.permute(0, 2, 1, 3, 4, 5).reshape(R, 2, nb * t, H, D)
        mask = self._mask(qpos_t, kpos, win, sink)  # [R, Q, L]
        if self.mask_start is not None:  # the worker's mask: from mask_start(q, W), sinks kept
            lo_t = torch.tensor([[0 if self.life_cycles[r.life_cycle].window is None
                                  else self.mask_start(q, self.life_cycles[r.life_cycle].window) for q in qs]
                                 for r, qs in zip(rows, qpos)], device=dev, dtype=torch.int64)
            k = kpos.unsqueeze(1)
            mask = (k >= 0) & (k <= qpos_t.unsqueeze(-1)) & ((k >= lo_t.unsqueeze(-1)) | (k < sink))

        # the dense side: each request's dense copy at the positions its tokens attend to (sinks and
        # the window, chosen by position alone)
        qmin, qmax = qpos_t.min(1).values, qpos_t.max(1).values
        lo = (qmin + 1 - win.view(R)).clamp(min=0)
        head = torch.minimum(sink.view(R), lo)  # sink positions below the window
        length = int((head + qmax + 1 - lo).max())
        j = torch.arange(length, device=dev, dtype=torch.int64).unsqueeze(0)
        dpos = torch.where(j < head.unsqueeze(1), j, lo.unsqueeze(1) + j - head.unsqueeze(1))
        dpos = torch.where(dpos <= qmax.unsqueeze(1), dpos, -1)  # [R, Ld]
        dense = torch.stack([x[p, :2] for x, p in zip(series, dpos.clamp(min=0))])  # [R, Ld, 2, H, D]
        dmask = self._mask(qpos_t, dpos, win, sink)

        # one attention call for both sides (the dense rows after the paged ones, padded and masked)
        width = max(nb * t, length)
        keys = torch.zeros(2 * R, width, 2, H, D, dtype=torch.float32, device=dev)
        keys[:R, : nb * t] = paged.transpose(1, 2)
        keys[R:, :length] = dense
        both = torch.zeros(2 * R, nq, width, dtype=torch.bool, device=dev)
        both[:R, :, : nb * t] = mask
        both[R:, :, :length] = dmask
        out = self._attend(torch.cat([q, q]), keys[:, :, 0], keys[:, :, 1], both)
        out_paged, out_dense = out[:R], out[R:]

        diff = (out_paged - out_dense).abs()
        over = (diff > ATOL + RTOL * out_dense.abs()).flatten(2).any(-1) & qvalid  # [R, Q]
        # every key and value read, compared exactly with the token data of its position
        needed = (mask & qvalid.unsqueeze(-1)).any(1)  # [R, L]
        at = kpos.clamp(0, top - 1)
        expected = torch.stack([x[p, :2] for x, p in zip(series, at)])
        wrong = needed & (paged.transpose(1, 2) != expected).flatten(2).any(-1)
        if not bool((over.any() | wrong.any())):
            return None
        return self._diagnose_attention(rows, queries, qpos_t, kpos, mask, over, wrong, diff, paged)
    @staticmethod
    def _mask(qpos: torch.Tensor, kpos: torch.Tensor, win: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
        q = qpos.unsqueeze(-1)  # [R, Q, 1]
        k = kpos.unsqueeze(1)  # [R, 1, L]
        return (k >= 0) & (k <= q) & ((k > q - win) | (k < sink))

    @staticmethod
    def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``q``: [R, Q, H, D]; ``k``, ``v``: [R, L, H, D]; ``mask``: [R, Q, L]; float64 out [R, Q, H, D]."""
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2).to(torch.float64),
            v.transpose(1, 2).to(torch.float64),
            attn_mask=mask.unsqueeze(1),
        )
        return out.transpose(1, 2)

    def _where(self, row: Row, position: int) -> tuple[int, int | None, str]:
        """Block, slot and what the slot holds, for a position of a row."""
        block = position // self.t
        slot = row.table.get(block)
        g = self.group_of[row.life_cycle]
        if slot is None:
            return block, None, f"block {block}, which holds no slot in its table (pool group {g})"
        who = self.last_writer.get((g, slot))
        writer = "never written" if who is None else f"last written by {who.describe()}"
        return block, slot, f"block {block}, slot {slot} of pool group {g}, {writer}"

    def _diagnose_attention(self, rows, queries, qpos, kpos, mask, over, wrong, diff, paged) -> Mismatch:
        for i, row in enumerate(rows):
            lc = self.life_cycles[row.life_cycle]
            if bool(wrong[i].any()):
                col = int(torch.nonzero(wrong[i])[0])
                position = int(kpos[i, col])
                readers = [j for j in range(len(queries[i])) if bool(mask[i, j, col])]
                token = int(qpos[i, readers[0]]) if readers else queries[i][0]
                j = readers[0] if readers else 0
                block, slot, where = self._where(row, position)
                got = paged[i, :, col]
                found = "poison (no data)" if bool((got == POISON).all()) else "another token's data"
                return Mismatch(
                    f"data[{row.request}][{row.life_cycle}][{token}]",
                    f"request {row.request!r}, life cycle {row.life_cycle} ({lc.describe()}): token {token} "
                    f"reads position {position} through {where}: found {found}, not the key and value "
                    f"written for position {position}; output off by {float(diff[i, j].max()):.3g} "
                    f"(tolerance {ATOL:g} + {RTOL:g} * |expected|)",
                )
        for i, row in enumerate(rows):
            if bool(over[i].any()):
                j = int(torch.nonzero(over[i])[0])
                token = int(qpos[i, j])
                lc = self.life_cycles[row.life_cycle]
                return Mismatch(
                    f"data[{row.request}][{row.life_cycle}][{token}]",
                    f"request {row.request!r}, life cycle {row.life_cycle} ({lc.describe()}): token {token}: the "
                    f"output through the block table differs from the dense one by {float(diff[i, j].max()):.3g} "
                    f"(tolerance {ATOL:g} + {RTOL:g} * |expected|) although every key and value read matches",
                )
        raise AssertionError("diagnose called without a mismatch")

    def _check_ssm(self, rows: list[Row]) -> Mismatch | None:
        dev, H, D = self.device, self.heads, self.head_dim
        counts = [r.capacity - r.history for r in rows]  # every in-flight token, in one scan
        n = max(counts)
        R = len(rows)
        index = [
            self.poison_row if r.table.get(0) is None else self._row(r.life_cycle, r.table[0]) for r in rows
        ]
        state = self.kv[torch.tensor(index, device=dev, dtype=torch.int64), 0, 0].to(torch.float64)  # [R, H, D]
        x = torch.zeros(R, n, H, D, dtype=torch.float64, device=dev)
        expected = torch.zeros(R, n, H, D, dtype=torch.float64, device=dev)
        for i, (r, k) in enumerate(zip(rows, counts)):
            x[i, :k] = self.ssm_inputs(r.rseed, r.life_cycle, r.history, r.history + k)
            expected[i, :k] = self.dense_states(r.rseed, r.life_cycle, r.history + k)[r.history : r.history + k]
        got = ssm_scan(state, x)
        valid = torch.tensor([[j < k for j in range(n)] for k in counts], device=dev)
        diff = (got - expected).abs()
        over = (diff > ATOL + RTOL * expected.abs()).flatten(2).any(-1) & valid
        if not bool(over.any()):
            return None
        i = int(torch.nonzero(over.any(-1))[0])
        row = rows[i]
        j = int(torch.nonzero(over[i])[0])
        _, _, where = self._where(row, 0)
        lc = self.life_cycles[row.life_cycle]
        return Mismatch(
            f"data[{row.request}][{row.life_cycle}][{row.history + j}]",
            f"request {row.request!r}, life cycle {row.life_cycle} ({lc.describe()}): token {row.history + j} "
            f"reads the state after history {row.history} through {where}: output off by "
            f"{float(diff[i, j].max()):.3g} (tolerance {ATOL:g} + {RTOL:g} * |expected|)",
        )


def device_name(requested: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; ``cuda`` must be available."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available to torch")
    return requested

