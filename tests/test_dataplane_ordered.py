"""The ordered data plane (:mod:`swafloor.fuzz.engines.dataplane.ordered`) on a fake engine: no vLLM, no
torch; each test drives a handful of protocol operations and checks what the worker's ledger holds.

- Accepted drafts (issue 34, ``read-other-token@commit`` on ``dataplane:vllm-prefix-eagle``): a commit that
  covers draft positions of the step that executed makes the target verify them (its KV, not the
  drafter's, at those positions), also when the drafts are accepted over two commits; the next step's
  query reads the target's KV there.
- A write into a block another request holds too (a prefix-cache hit's block) is ``write-shared`` at the
  operation where the writing step executes, naming the other holder.
"""

from __future__ import annotations

from typing import Any

import pytest

from swafloor.fuzz.engines.dataplane.ordered import OrderedPlane
from swafloor.fuzz.protocol import BackendCheckFailed, EventOrder
from swafloor.reference import AttentionLayer, Config, Outcome, SlotMap

ORDER = EventOrder(steps_in_flight=4, close_drops=True, suspend_drops=True, first_step_drops=False, why="test")


class FakeEngine:
    """One SWA life cycle, one token per block, slot ids handed out in order, never freed (the pool is
    large): a step of ``n`` new tokens has ``min(drafts, n - 1)`` lookahead slots at its end, as the
    vLLM EAGLE adapter maps it. ``alias`` makes the next allocation of ``alias[0]`` hand out the slot of
    block ``alias[2]`` of request ``alias[1]`` (both then hold it)."""

    def __init__(self, drafts: int = 3):
        self.drafts = drafts
        self.held: dict[str, dict[int, int]] = {}
        self.next = 0
        self.handed: dict[str, list[int]] = {}
        self.drafted: dict[str, int] = {}
        self.capacity: dict[str, int] = {}
        self.alias: tuple[str, str, int] | None = None

    def _step_drafts(self, h: int, c: int) -> int:
        return min(self.drafts, c - h - 1) if c > h else 0

    def _grow(self, rid: str, capacity: int) -> list[int]:
        table, new = self.held[rid], []
        for b in range(len(table), capacity):
            if self.alias is not None and self.alias[0] == rid:
                table[b] = self.held[self.alias[1]][self.alias[2]]
                self.alias = None
            else:
                table[b] = self.next
                self.next += 1
            new.append(table[b])
        return new

    def create(self, rid: str, reused_history: int = 0, share_with: str | None = None) -> None:
        self.held[rid] = {}  # (a hit on share_with's blocks: made by ``alias``)
        self.capacity[rid] = reused_history

    def resume(self, rid: str) -> Outcome:
        h = self.capacity[rid]
        self._grow(rid, max(h, 1))
        self.handed[rid] = list(self.held[rid].values())
        self.drafted[rid] = 0
        return Outcome(True)

    def resize(self, rid: str, capacity: int, history: int) -> Outcome:
        self.handed[rid] = self._grow(rid, capacity)
        self.drafted[rid] = self._step_drafts(history, capacity)
        self.capacity[rid] = capacity
        return Outcome(True)

    def commit(self, rid: str, tokens: int) -> None:
        pass

    def close(self, rid: str) -> None:
        del self.held[rid]

    def observe(self) -> dict:
        return {}

    def slots(self) -> SlotMap:
        return SlotMap({rid: (dict(t),) for rid, t in self.held.items()}, ((),))

    def handed_out(self, rid: str) -> tuple[list[int], ...] | None:
        got = self.handed.pop(rid, None)
        return None if got is None else (got,)

    def step_drafts(self, rid: str) -> int:
        return self.drafted.get(rid, 0)


def _plane(engine: FakeEngine, window: int = 2) -> OrderedPlane:
    return OrderedPlane(engine, Config(1, [AttentionLayer(window)]), ORDER)


def _at(plane: OrderedPlane, rid: str, position: int) -> Any:
    slot = plane.requests[rid].rows[0][position]
    return plane.ledger[(0, slot)][0]


def test_accepted_drafts_are_verified_by_the_target():
    # tests/regressions/dataplane-vllm/eagle-commits-draft-slots.json, on the fake engine
    engine = FakeEngine()
    plane = _plane(engine)
    plane.create("r0", 1)
    assert plane.resume("r0").ok
    assert plane.resize("r0", 3, 1).ok  # token 1 scheduled, position 2 a draft slot
    plane.commit("r0", 2)  # the draft at 2 accepted
    written = _at(plane, "r0", 2)
    assert not written.draft and (written.owner, written.position) == ("r0", 2), written
    assert plane.steps == 3 and plane.executed_at[2] == plane.ops - 1  # the verification: a step of its own, here
    assert plane.resize("r0", 4, 3).ok
    plane.commit("r0", 1)  # query 3 reads position 2: the target's KV
    assert not _at(plane, "r0", 3).draft


def test_drafts_accepted_over_two_commits_are_each_verified():
    # tests/regressions/dataplane-vllm/eagle-drafts-accepted-over-two-commits.json, on the fake engine
    engine = FakeEngine()
    plane = _plane(engine)
    plane.create("r0", 1)
    assert plane.resume("r0").ok
    assert plane.resize("r0", 4, 1).ok  # token 1 scheduled, positions 2 and 3 draft slots
    plane.commit("r0", 2)
    assert not _at(plane, "r0", 2).draft and _at(plane, "r0", 3).draft  # 3 still the drafter's
    plane.commit("r0", 1)
    assert not _at(plane, "r0", 3).draft
    assert plane.resize("r0", 5, 4).ok
    plane.commit("r0", 1)  # query 4 reads position 3


def test_rejected_drafts_stay_the_drafters_until_the_next_step_writes_them():
    engine = FakeEngine()
    plane = _plane(engine)
    plane.create("r0", 1)
    assert plane.resume("r0").ok
    assert plane.resize("r0", 4, 1).ok
    plane.commit("r0", 1)  # no draft accepted: nothing verified
    assert plane.steps == 2 and _at(plane, "r0", 2).draft
    assert plane.resize("r0", 3, 2).ok
    plane.commit("r0", 1)  # the next step computes position 2: the target's now
    assert not _at(plane, "r0", 2).draft


def test_a_draft_write_into_a_block_another_request_holds_is_write_shared():
    engine = FakeEngine()
    plane = _plane(engine, window=4)
    plane.create("r1")
    assert plane.resume("r1").ok
    assert plane.resize("r1", 2, 0).ok
    plane.commit("r1", 1)  # r1's token 0 written in its block 0
    plane.create("r0")
    assert plane.resume("r0").ok
    engine.alias = ("r0", "r1", 0)  # r0's next block is r1's block 0, held by both
    assert plane.resize("r0", 2, 0).ok  # token 0 scheduled, position 1 a draft slot: r1's block 0
    with pytest.raises(BackendCheckFailed) as raised:
        plane.commit("r0", 1)
    assert raised.value.field == "write-shared[r0][0][1]", raised.value.field
    assert "'r1' block 0" in str(raised.value) and "draft position 1" in str(raised.value), raised.value
    assert "KV of token 0 of 'r1'" in str(raised.value), raised.value


def test_a_hit_taken_before_its_filling_step_runs_is_written_by_that_step():
    # vLLM names a block when it schedules the step that fills it: another request can hit it before the
    # step runs; the step then writes its own tokens there (not write-shared), and the hit reads them
    engine = FakeEngine(drafts=0)
    plane = _plane(engine, window=4)
    plane.create("r0", 2)
    assert plane.resume("r0").ok  # its load of positions 0 and 1 in flight
    plane.create("r1", 2, share_with="r0")
    engine.alias = ("r1", "r0", 0)
    assert plane.resume("r1").ok
    assert plane.resize("r0", 3, 2).ok
    plane.commit("r0", 1)
    written = _at(plane, "r0", 0)
    assert (written.owner, written.position, written.draft) == ("r0", 0, False), written
