"""Physical identity: the integrity rules on hand-made slot maps, the renaming comparison, the
reference's own slot map, and the seeded bug that only identity (or data) can see."""

from __future__ import annotations

import random

import pytest

from swafloor.fuzz.identity import IdentityTracker, integrity
from swafloor.fuzz.lockstep import Lockstep
from swafloor.fuzz.backends import resolve
from swafloor.fuzz.trace import Step
from swafloor.reference import AttentionLayer, Config, Manager, SlotMap, SsmLayer, build_layout

ONE_GROUP = (0,)


def view(held, free, ref_counts=None):
    return SlotMap(held, tuple(free), ref_counts)


def test_a_consistent_map_passes():
    v = view({"a": ({0: 5, 1: 7},), "b": ({3: 6},)}, [((1, 5),)], ({5: 1, 7: 1, 6: 1},))
    assert integrity(v, (7,), ONE_GROUP) is None


@pytest.mark.parametrize(
    "held, free, counts, total, field, words",
    [
        ({"a": ({0: 5},), "b": ({0: 5},)}, [((0, 5),)], None, 6, "slots.pool[0].slot[5]", "holds slot 5 for 2 blocks"),
        ({"a": ({0: 5},)}, [((0, 3), (2, 5))], None, 6, "slots.pool[0].free", "lists slot 2 twice"),
        ({"a": ({0: 2},)}, [((0, 5),)], None, 5, "slots.pool[0].slot[2]", "also lists it as free"),
        ({"a": ({0: 5},)}, [((0, 4),)], None, 6, "slots.pool[0].total", "a leak"),
        ({"a": ({0: 5},)}, [((0, 6),)], None, 6, "slots.pool[0].slot[5]", "also lists it as free"),
        ({"a": ({0: 5},)}, [((0, 5),)], ({5: 2},), 6, "slots.pool[0].ref_count[5]", "counts 2 references"),
        ({"a": ({0: 5},)}, [((0, 5),)], ({5: 1, 3: 1},), 6, "slots.pool[0].ref_count[3]", "which no block holds"),
    ],
)
def test_each_broken_rule_is_named(held, free, counts, total, field, words):
    found = integrity(view(held, free, counts), (total,), ONE_GROUP)
    assert found is not None and found[0] == field and words in found[3], found


def test_renaming_is_accepted_and_moves_are_not():
    tracker = IdentityTracker(ONE_GROUP)
    ref = view({"a": ({0: 0, 1: 1},)}, [((2, 4),)])
    got = view({"a": ({0: 7, 1: 3},)}, [((1, 3),)])  # other names, the same structure
    assert tracker.compare(ref, got) is None
    # A block keeps its slot on both sides: fine; a new block may take any free id.
    ref2 = view({"a": ({0: 0, 1: 1, 2: 2},)}, [((3, 4),)])
    got2 = view({"a": ({0: 7, 1: 3, 2: 1},)}, [((2, 3),)])
    assert tracker.compare(ref2, got2) is None
    # The backend moves block 1 to another slot while the reference keeps it.
    got3 = view({"a": ({0: 7, 1: 2, 2: 1},)}, [((3, 4),)])
    found = tracker.compare(ref2, got3)
    assert found is not None and found[0] == "slots[a][0][1]" and "moved" in found[3], found


def test_the_same_sharing_is_required():
    tracker = IdentityTracker(ONE_GROUP)
    ref = view({"a": ({0: 0},), "b": ({0: 1},)}, [()])
    got = view({"a": ({0: 4},), "b": ({0: 4},)}, [()])
    found = tracker.compare(ref, got)
    assert found is not None and "in one slot" in found[3], found


def _random_steps(rng: random.Random, n: int):
    """A random mix of every operation on up to three requests (errors allowed: the manager refuses)."""
    steps = []
    for _ in range(n):
        rid = f"r{rng.randrange(3)}"
        op = rng.choice(["create", "resume", "resize", "resize", "resize", "commit", "suspend", "close"])
        if op == "create":
            steps.append(Step.create(rid, rng.randrange(0, 12)))
        elif op == "resume":
            steps.append(Step.resume(rid))
        elif op == "resize":
            h = rng.randrange(0, 30)
            steps.append(Step.resize(rid, h + rng.randrange(0, 6), h))
        elif op == "commit":
            steps.append(Step.commit(rid, rng.randrange(1, 3)))
        elif op == "suspend":
            steps.append(Step.suspend(rid))
        else:
            steps.append(Step.close(rid))
    return steps


def test_the_reference_slot_map_keeps_integrity_on_random_traces():
    """The spec's own slot map, after every step of random traces on several configs, passes every
    integrity rule and compares with itself (a check of the check: the rules are not vacuous, see the
    cases above)."""
    rng = random.Random(7)
    configs = [
        Config(2, [AttentionLayer(window=3, sink_tokens=1), AttentionLayer(), SsmLayer()], pool_groups=[0, 0, 1], slots=[40, 3]),
        Config(3, [AttentionLayer(window=5), AttentionLayer(window=2)], pool_groups=[0, 1]),
        Config(1, [AttentionLayer(window=1)]),
    ]
    for config in configs:
        layout = build_layout(config)
        for _ in range(20):
            manager = Manager(config)
            for step in _random_steps(rng, 40):
                try:
                    _apply(manager, step)
                except Exception:  # noqa: BLE001 - refused misuse and out-of-slots leave state intact
                    pass
                found = integrity(manager.slots(), tuple(layout.slots), tuple(layout.pool_group_of), "reference")
                assert found is None, found


def _apply(manager, step):
    op = step.op.value
    if op == "create":
        manager.create(step.request, reused_history=step.reused_history)
    elif op == "resize":
        manager.resize(step.request, step.capacity, step.history)
    elif op == "commit":
        manager.commit(step.request, step.tokens)
    else:
        getattr(manager, op)(step.request)


def test_shared_slot_is_seen_at_the_step_that_shares():
    config = Config(1, [AttentionLayer(window=2)])
    steps = [Step.create("r0"), Step.resume("r0"), Step.create("r1", 1), Step.resize("r0", 1, 0), Step.resume("r1")]
    backend, reference = resolve("mutant:shared-slot"), resolve("reference")
    lock = Lockstep(config, backend.factory, reference.factory, backend.capabilities)
    seen = None
    for i, step in enumerate(steps):
        found, _ = lock.apply(step)
        if found is not None:
            seen = (i, found)
            break
    assert seen is not None and seen[0] == 4 and seen[1].field.startswith("slots"), seen
    clean = Lockstep(config, reference.factory, reference.factory, reference.capabilities)
    assert all(clean.apply(step)[0] is None for step in steps)
