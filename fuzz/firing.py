"""When a seeded bug fires, and whether a campaign caught it there (issue 28 §5).

A seeded bug (a ``mutant:NAME`` backend, or a ``reference-mutant:NAME`` standing in for the
reference) is the spec's :class:`~swafloor.reference.Manager` with one behaviour changed through a
named hook. It **fires** at the first operation in which that change has an effect: :func:`watch`
runs every operation the mutant's manager is asked (create, resume, resize, commit, suspend, close)
on a *twin* as well, the unmutated spec built from the same config, and compares what the call
returns (its :class:`~swafloor.reference.Outcome` with its shortfalls, or the error it raises) and the
state it leaves (:func:`effect`): what an observation reads (each request's state, lengths, held
blocks and their slots; each pool group's slots in use as its free count shows them, its freed ids,
shared slots and cached free content) and what only a later operation shows (the content named for
held blocks, prefix records, a pending first-resume copy). The pool's size is left out (a sizing bug
changes it at construction: it fires where a call runs short, or reports another shortfall, not
before), and so are peaks and the manager's own cursors and caches (``released_to``, ``evicted_on``,
snapshot caches, the no-change box): bookkeeping, not an effect. A bug may also fire at construction
(step -1: a pool's free count). Until the first difference the twin and the mutant are the same
manager in the same state, so the twin's answer is exactly what the unmutated hook would have given;
once the difference shows the twin is dropped.

:func:`replay_firing` replays a campaign's trace with the mutant's side watched and reports the step
at which it fired (``fired_at``), the step its effect first showed (``shown_at``: later only when it
first changed hidden state) and the step and field of the divergence the replay sees; :func:`judge`
says whether that counts as caught: in a part the bug breaks
(:func:`swafloor.reference.seeded_bugs.breaks`), at the step it fired, or, where the list states a
relation (:data:`~swafloor.reference.seeded_bugs.SEEN_LATER`), at the step its effect first showed
(``SHOWN``) or after the firing (``LATER``). A divergence earlier than the firing, in another part,
or later with no relation stated, is no catch.
"""

from __future__ import annotations

import enum
from typing import Any, Callable

import attrs

from swafloor.reference import Config, Manager, RequestError
from swafloor.reference.seeded_bugs import SEEN_LATER, SHOWN, breaks, part_of

__all__ = ["Firing", "Fired", "OPERATIONS", "effect", "judge", "replay_firing", "watch", "watched", "watched_record"]

#: The manager's operations a watch runs on the twin too.
OPERATIONS = ("create", "resume", "resize", "commit", "suspend", "close")
#: Fields of a request record that are bookkeeping (cursors, caches), not an effect.
_BOOKKEEPING = frozenset({"released_to", "evicted_on", "snapshot", "snapshot_key", "capacity_from", "capacity_below",
                          "history_from", "history_below"})


def _value(obj: Any, skip: frozenset = frozenset()) -> Any:
    """A comparable value of an attrs instance or plain object (its fields, recursively for attrs)."""
    if isinstance(obj, enum.Enum):
        return obj.value
    if attrs.has(type(obj)):
        return tuple((f.name, _value(getattr(obj, f.name))) for f in attrs.fields(type(obj)) if f.name not in skip)
    if isinstance(obj, dict):
        return tuple(sorted(((repr(k), _value(v)) for k, v in obj.items())))
    if isinstance(obj, (list, tuple)):
        return tuple(_value(v) for v in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return tuple(sorted((k, _value(v)) for k, v in vars(obj).items() if k not in skip))
    return obj


def effect(manager: Any) -> tuple[tuple, tuple]:
    """What an operation leaves that a bug can change, as ``(shown, hidden)``. ``shown``: what a
    later observation can read with no further operation: per request its state, lengths and held
    blocks with their slots; per pool group its slots in use as its free count shows them (``total -
    free``; the size itself, which a sizing bug changes at construction, left out), its freed ids in
    hand-out order (not the never-used ones, which depend on the size) and the content its cached free
    slots keep; the shared slots and their holders.
    ``hidden``: state that shows only through a later operation: each request's pending first-resume
    copy and prefix record (its prefix, the content it named), and the content named for its slots."""
    shown: list = []
    hidden: list = []
    for rid in manager.request_ids():
        record = manager.record_of(rid)
        prefix = manager.prefix_of(record) if hasattr(manager, "prefix_of") else None
        shown.append((rid, _value(record, _BOOKKEEPING | {"pending_copy"})))
        hidden.append((rid, record.pending_copy, _value(prefix)))
    try:
        seen = manager.snapshot()
    except Exception as exc:  # a mutant's own snapshot may refuse to be taken: that is shown too
        shown.append(("snapshot", type(exc).__name__, str(exc)[:200]))
    else:
        shown.append(("snapshot", tuple(p.total - p.free for p in seen.pools), _value(seen.sharing), _value(seen.cached)))
    # each pool group's freed ids in hand-out order (a pool no life cycle reaches has freed none)
    pools = {manager.pool_group_of[lc]: manager.pool_of(lc) for lc in range(len(manager.layout.life_cycles))}
    shown.append(tuple(tuple(pools[g].freed()) if g in pools else () for g in range(manager.layout.num_pool_groups)))
    hidden.append(tuple(sorted(repr(key) for pool in pools.values() for key in pool.content.values())))
    return tuple(shown), tuple(hidden)


def _result(call: Callable[[], Any]) -> tuple[tuple[str, Any], Any, BaseException | None]:
    """What a call returned, or the error it raised (its type and field): ``(comparable, value, error)``."""
    try:
        value = call()
    except RequestError as exc:
        return ("raised", (type(exc).__name__, getattr(exc, "field", None))), None, exc
    except Exception as exc:  # a mutant's own crash is an effect too
        return ("raised", (type(exc).__name__, str(exc)[:200])), None, exc
    return ("returned", _value(value)), value, None


class Firing:
    """A watch on one seeded bug's manager: ``fired`` (None until it fires) names the first operation
    whose result or effect differs from the spec's twin and what differed; ``shown`` the first whose
    result or shown effect differs (the same operation, unless the bug first changes only hidden
    state: :func:`effect`); ``calls`` counts the watched calls."""

    def __init__(self, manager: Any, config: Config):
        self.manager = manager
        self.twin: Any = Manager(config)
        self.fired: str | None = None
        self.shown: str | None = None
        self.calls = 0
        self.compare("built")  # a bug may show before any operation (a pool's free count)

    def run(self, op: str, original: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        self.calls += 1
        if self.twin is None:  # shown already: the twin no longer shares the mutant's state
            return original(*args, **kwargs)
        expected, _, _ = _result(lambda: getattr(self.twin, op)(*args, **kwargs))
        got, value, error = _result(lambda: original(*args, **kwargs))
        call = f"{op}{args}" + (f" {kwargs}" if kwargs else "")
        if got != expected:
            difference = f"{call}: {got[0]} {got[1]!r} where the spec {expected[0]} {expected[1]!r}"
            self.fired = self.fired or difference
            self.shown = difference
            self.twin = None
        else:
            self.compare(call)
        if error is not None:
            raise error
        return value

    def compare(self, call: str) -> None:
        """Compare the mutant's effect with the twin's after ``call``; drop the twin once it shows."""
        (ours, ours_hidden), (theirs, theirs_hidden) = effect(self.manager), effect(self.twin)
        if ours != theirs:
            self.shown = f"{call}: left {_difference(ours, theirs)}"
            self.fired = self.fired or self.shown
            self.twin = None
        elif self.fired is None and ours_hidden != theirs_hidden:
            self.fired = f"{call}: left (hidden) {_difference(ours_hidden, theirs_hidden)}"


def watch(manager: Any, config: Config) -> Firing:
    """Watch ``manager`` (a seeded bug built from ``config``): each of its operations also runs on the
    unmutated spec's twin until the first whose result or effect differs. Returns the watch."""
    firing = Firing(manager, config)
    for op in OPERATIONS:
        original = getattr(manager, op)

        def watched_op(*args: Any, _op: str = op, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            return firing.run(_op, _original, args, kwargs)

        setattr(manager, op, watched_op)
    return firing


def watched(factory: Callable[[Config], Any], firings: list) -> Callable[[Config], Any]:
    """``factory`` (it builds a :class:`~swafloor.fuzz.adapter.ManagerBackend` of a seeded bug) with
    the manager of each backend it builds watched; each watch is appended to ``firings``."""

    def make(config: Config) -> Any:
        backend = factory(config)
        firings.append(watch(backend.manager, config))
        return backend

    return make


def _difference(ours: tuple, theirs: tuple) -> str:
    """The first entry in which two effects differ, for the report."""
    for x, y in zip(ours, theirs):
        if x != y:
            return f"{x!r} where the spec leaves {y!r}"[:600]
    return f"{ours!r} where the spec leaves {theirs!r}"[:600]



def watched_record(record: Any, firings: list) -> Any:
    """A backend record of a seeded bug whose factory watches each manager it builds (into ``firings``)."""
    return attrs.evolve(record, factory=watched(record.factory, firings))


@attrs.frozen
class Fired:
    """A replay of a campaign's trace with the seeded bug watched: the step at which it fired
    (``fired_at``; None: never) and why, and the step and field of the first divergence (``seen_at``,
    ``field``; None: none)."""

    fired_at: int | None
    why: str | None
    seen_at: int | None
    field: str | None
    shown_at: int | None = None

    @property
    def part(self) -> str | None:
        return None if self.field is None else part_of(self.field)


def replay_firing(trace: Any, backend: Any, against: Any, firings: list) -> Fired:
    """Replay ``trace`` step by step, ``backend`` against ``against`` (one of them a
    :func:`watched_record`, its watches appended to ``firings``), as the campaign compared them."""
    from .lockstep import Lockstep

    lock = Lockstep(trace.config, backend.factory, against.factory, backend.capabilities)
    fired_at = why = shown_at = None

    def note(i: int) -> None:
        nonlocal fired_at, why, shown_at
        if fired_at is None:
            done = [f for f in firings if f.fired is not None]
            if done:
                fired_at, why = i, done[0].fired
        if shown_at is None and any(f.shown is not None for f in firings):
            shown_at = i

    note(-1)
    if lock.build_divergence is not None:
        return Fired(fired_at, why, -1, lock.build_divergence.field, shown_at)
    for i, step in enumerate(trace.steps):
        found, _ = lock.apply(step)
        note(i)
        if found is not None:
            return Fired(fired_at, why, i, found.field, shown_at)
    return Fired(fired_at, why, None, None, shown_at)


def judge(name: str, campaign: str, fired: Fired) -> str | None:
    """None when the campaign caught the seeded bug ``name`` where it fired: the divergence in a part it
    breaks (in ``campaign``), at the step it fired, or later only where
    :data:`~swafloor.reference.seeded_bugs.SEEN_LATER` states why; else why it is no catch."""
    if fired.seen_at is None:
        return f"{name} ({campaign}): no divergence"
    parts = breaks(name, campaign)
    if fired.part not in parts:
        return f"{name} ({campaign}): diverged in {fired.field} at step {fired.seen_at}, not in {'/'.join(parts)}"
    if fired.fired_at is None:
        return f"{name} ({campaign}): diverged in {fired.field} at step {fired.seen_at} but never fired"
    if fired.seen_at < fired.fired_at:
        return (f"{name} ({campaign}): diverged in {fired.field} at step {fired.seen_at}, before it fired "
                f"(step {fired.fired_at})")
    if fired.seen_at == fired.fired_at:
        return None
    late = (f"{name} ({campaign}): fired at step {fired.fired_at} ({fired.why}) but diverged only at step "
            f"{fired.seen_at} ({fired.field})")
    relation = SEEN_LATER.get((name, campaign))
    if relation is None:
        return f"{late}, and no relation is stated for it"
    if relation[0] == SHOWN and fired.seen_at != fired.shown_at:
        return f"{late}, not at the step its effect first showed (step {fired.shown_at})"
    return None
