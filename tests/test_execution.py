"""Scheduling and execution as separate events (issue 34): the reference's layer (reference/execution.py)
and the execution data plane (fuzz/engines/dataplane/execution.py) with its seeded bugs."""

from __future__ import annotations

import pytest

from swafloor.fuzz.engines.dataplane import execution as plane_module
from swafloor.fuzz.engines.dataplane.execution import BUG_HOOKS, ExecutionDivergence, ExecutionPlane, campaign
from swafloor.fuzz.engines.dataplane.tables import PAD, WorkerTable
from swafloor.reference import AttentionLayer, Config, Manager, RequestError, Semantics, SuspendMode
from swafloor.reference.execution import Execution, Step
from swafloor.reference.hooks import ExecutionHooks
from swafloor.reference.seeded_bugs import BREAKS_IN_EXECUTION, EXECUTION, LATER, SEEDED_BUGS, SEEN_LATER


def _config(t=1, window=2, k=1, slots=32, suspend=SuspendMode.RECOMPUTE, sinks=0):
    semantics = Semantics(prefix_sharing=True, in_flight_tokens=k, suspend=suspend, first_resume_copy=False)
    return Config(t, [AttentionLayer(window, sinks * t)], slots=(slots,), semantics=semantics)


def _layer(**kw) -> Execution:
    ex = Execution(Manager(_config(**kw)))
    ex.create("a")
    ex.resume("a")
    return ex


# ----------------------------------------------------------------------------- the layer
def test_a_step_is_named_when_scheduled_and_written_only_when_executed():
    ex = _layer(t=2, k=2)
    step = ex.schedule("a", 3)
    assert isinstance(step, Step) and (step.start, step.end, step.capacity) == (0, 3, 3)
    assert ex.named("a") == 1 and ex.written("a") == 0  # block 0 named, nothing written
    assert ex.lookup("a") == 0  # named but unwritten: no hit
    assert ex.manager.record_of("a").history == 0 and ex.manager.record_of("a").capacity == 3
    assert ex.execute() == step and ex.written("a") == 3
    assert ex.manager.record_of("a").history == 3  # nothing later in flight: committed
    assert ex.execute() is None


def test_a_hit_waits_for_the_kv_and_a_dropped_step_names_nothing():
    ex = _layer(t=1, k=1)
    ex.schedule("a", 1)
    ex.execute()
    ex.schedule("a", 1)  # token 1 in flight
    ex.schedule("a", 1)  # token 2: 1 token in flight before it
    assert ex.named("a") == 3 and ex.written("a") == 1
    assert ex.lookup("a") == 1  # only the written token, though the manager could share 2
    dropped = ex.drop("a", "abort")
    assert [s.start for s in dropped] == [1, 2] and ex.queue == []
    assert ex.named("a") == 1  # the dropped steps' names revoked, the written block kept


def test_steps_in_flight_are_bounded_by_in_flight_tokens():
    ex = _layer(t=1, k=1)
    ex.schedule("a", 1)
    ex.schedule("a", 1)
    with pytest.raises(RequestError) as err:
        ex.schedule("a", 1)
    assert err.value.field == "tokens" and "in flight" in str(err.value)
    assert [s.number for s in ex.queue] == [0, 1] and ex.runs["a"].scheduled == 2  # state intact


def test_bad_input_names_the_field_and_changes_nothing():
    ex = _layer()
    for kwargs, field in (({"tokens": 0}, "tokens"), ({"tokens": 1, "drafts": -1}, "drafts")):
        with pytest.raises(RequestError) as err:
            ex.schedule("a", **kwargs)
        assert err.value.field == field
    with pytest.raises(RequestError) as err:
        ex.drop("a", "later")
    assert err.value.field == "how" and "later" in str(err.value)
    assert ex.queue == [] and ex.manager.record_of("a").capacity == 0
    with pytest.raises(RequestError) as err:
        ex.create("c", share_with="nobody")
    assert err.value.field == "share_with" and "nobody" in str(err.value) and "c" not in ex.runs
    ex.create("s")  # suspended: a preemption of it is refused before anything changes
    with pytest.raises(RequestError) as err:
        ex.drop("s", "preempt")
    assert err.value.field == "request_id" and ex.manager.state_of("s").value == "suspended"
    released = Execution(Manager(_config(suspend=SuspendMode.RELEASE)))
    released.create("b")
    released.resume("b")
    with pytest.raises(RequestError) as err:
        released.drop("b", "preempt")
    assert err.value.field == "how" and "recompute" in str(err.value)


def test_a_later_step_keeps_the_draft_slots_of_a_step_in_flight():
    ex = _layer(t=2, k=2)
    first = ex.schedule("a", 1, drafts=2)
    second = ex.schedule("a", 1)
    assert first.capacity == 3 and second.capacity == 3  # not cut to 2 while step 0's drafter writes 1, 2


# ----------------------------------------------------------------------------- the worker's table
def test_a_worker_table_is_appended_never_shrunk_and_padded():
    table = WorkerTable()
    table.extend({0: 5, 2: 7})
    table.extend({2: 7, 3: 1})  # block 0 freed by the manager: the worker keeps its id
    assert table.slot(0) == (5, True) and table.slot(1) == (PAD, False) and table.slot(3) == (1, True)
    assert table.slot(9) == (PAD, False)


# ----------------------------------------------------------------------------- directed scenarios
def _names_scenario(plane: ExecutionPlane) -> None:
    """r1 has two steps in flight; r3 is created on its content; r1 is aborted before they run; r3 reads."""
    plane.create("r1")
    plane.resume("r1")
    plane.schedule("r1", 3)
    plane.schedule("r1", 1)
    plane.create("r3", share_with="r1")
    plane.resume("r3")
    plane.drop("r1", "abort")
    plane.schedule("r3", 1)
    plane.execute()


def test_the_spec_reads_its_own_recomputed_prefix_where_the_naming_step_was_dropped():
    plane = ExecutionPlane(_config(t=1, window=4, k=3))
    _names_scenario(plane)
    assert plane.fired == [] and plane.ex.runs["r3"].hit == 0


def test_names_trusted_before_execution_is_a_read_of_never_written_kv():
    plane = ExecutionPlane(_config(t=1, window=4, k=3), BUG_HOOKS["names-trusted-before-execution"])
    with pytest.raises(ExecutionDivergence) as err:
        _names_scenario(plane)
    d = err.value
    assert d.field == "read[r3][0][3]" and d.step == 2 and d.event == 9
    assert "unwritten slot position" in d.message and "query 3 of 'r3'" in d.message and "slot" in d.message
    assert plane.fired[0][0] == 5  # the lookup, when r3 was created


def _draft_scenario(plane: ExecutionPlane) -> None:
    plane.create("a")
    plane.resume("a")
    plane.create("b")
    plane.resume("b")
    plane.schedule("b", 2)
    plane.execute()
    plane.schedule("a", 2, drafts=2)  # tokens 0, 1 in block 0; drafts 2, 3 in block 1
    plane.execute()


def test_draft_write_without_block_is_a_write_at_its_step_naming_the_slot_it_hits():
    assert ExecutionPlane(_config(t=2, window=4, k=0)).fired == []
    spec = ExecutionPlane(_config(t=2, window=4, k=0))
    _draft_scenario(spec)
    assert spec.fired == []
    plane = ExecutionPlane(_config(t=2, window=4, k=0), BUG_HOOKS["draft-write-without-block"])
    with pytest.raises(ExecutionDivergence) as err:
        _draft_scenario(plane)
    d = err.value
    assert d.field == "write[a][0][2]" and d.step == 1
    assert plane.fired[0][1] == 1  # fired in the same step's schedule
    assert "padding" in d.message and "slot 0" in d.message and "'b' block 0" in d.message  # b's block, written by b
    assert "written by request 'b' at step 0" in d.message


def _mask_scenario(plane: ExecutionPlane) -> None:
    plane.create("a")
    plane.resume("a")
    for _ in range(3):
        plane.schedule("a", 1)
        plane.execute()


def test_worker_mask_one_late_reads_through_an_id_the_manager_freed():
    spec = ExecutionPlane(_config(t=1, window=1, k=0))
    _mask_scenario(spec)
    assert spec.fired == []
    plane = ExecutionPlane(_config(t=1, window=1, k=0), BUG_HOOKS["worker-mask-one-late"])
    with pytest.raises(ExecutionDivergence) as err:
        _mask_scenario(plane)
    d = err.value
    assert d.field == "read[a][0][1]" and d.step == 1 and plane.fired[0][:2] == (d.event, 1)
    assert "outside the live window" in d.message and "which the manager no longer holds" in d.message
    # the freed slot was handed to block 1: the stale id reads token 1 where token 0 was meant
    assert "another token than token 0 of 'a'" in d.message and "token 1 of 'a', written by request 'a' at step 1" in d.message


# ----------------------------------------------------------------------------- the campaign
def test_the_execution_campaign_is_the_seeded_bugs_of_its_list():
    assert set(BUG_HOOKS) == {b.name for b in SEEDED_BUGS if EXECUTION in b.campaigns} == set(BREAKS_IN_EXECUTION)


def test_the_spec_passes_the_campaign():
    result = campaign(None, examples=120, seed=0)
    assert result.divergence is None and result.examples == 120


@pytest.mark.parametrize("name", sorted(BUG_HOOKS))
def test_each_seeded_bug_is_caught_in_the_part_it_breaks_at_its_step(name):
    result = campaign(name, examples=150, seed=0)
    d = result.divergence
    assert d is not None, f"{name} not caught in {result.examples} examples"
    assert d.field.split("[", 1)[0] in BREAKS_IN_EXECUTION[name], d.field
    assert result.fired, "caught, but its hook never fired"
    event, step, _ = result.fired[0]
    assert event <= d.event
    if (name, EXECUTION) in SEEN_LATER:
        assert SEEN_LATER[(name, EXECUTION)][0] == LATER
    else:  # at the step it fired
        assert step == d.step, (result.fired[0], d.event, d.step)


def test_the_module_command_exits_2_on_bad_input_and_0_when_each_bug_is_caught(capsys):
    assert plane_module.main(["no-such-bug"]) == 2
    assert "no-such-bug" in capsys.readouterr().err
    assert plane_module.main(["worker-mask-one-late", "--examples", "5"]) == 0
    assert "caught in example 0" in capsys.readouterr().out


def test_hooks_replace_one_behaviour_each_and_default_to_the_spec():
    assert ExecutionHooks() == ExecutionHooks(None, None, None, None)
    ex = Execution(Manager(_config()), BUG_HOOKS["worker-mask-one-late"])
    assert ex.mask_of(5, 2) == 3 and Execution(Manager(_config())).mask_of(5, 2) == 4


def test_the_named_lookup_refutation_replays_on_the_reference_and_only_where_a_step_is_dropped():
    from swafloor.proofs import replay

    confirmed = replay.named_hit_reads_unwritten({"t": 1, "w": 0, "f": 1, "g": 0})
    assert confirmed.confirmed and "never written" in confirmed.summary and confirmed.trace
    for cex in ({"t": 2, "w": 3, "f": 2, "g": 2}, {"t": 1, "w": 2, "f": 0, "g": 0}):  # nothing dropped
        assert not replay.named_hit_reads_unwritten(cex).confirmed, cex
