"""The source-level check: upstream's CPU-safe KVCacheManagerV2 code against the reference.

Six comparisons, each exhaustive on a small grid and then by Hypothesis beyond it:

- ``stale``: ``AttnLifeCycle.get_stale_range`` against :func:`~swafloor.reference.stale_range`;
- ``scratch``: ``compute_scratch_range`` against :func:`~swafloor.reference.scratch_range`;
- ``registry``: ``LifeCycleRegistry`` built from a layer list against the reference's life cycles;
- ``min_slots``: ``StorageManager._compute_min_slots_from_constraints`` (no constraint, and one
  described batch) against the reference's per-pool-group minimum under the post-fix and the pre-fix
  rule; which one the source implements is reported;
- ``batch_slots``: ``StorageManager._compute_slots_for_batch`` against the blocks the reference says
  the batch's requests hold (shared system-prompt blocks once, scratch blocks at their fraction);
- ``accounting``: the storage manager's ``new_gpu_slots`` / ``release_slot`` / out-of-slots path /
  ``get_statistics`` through a lone request's decode steps, on pools sized to upstream's own
  minimum, against the reference manager (stand-in storage; nothing evictable).

Ranges are compared as sets of blocks (upstream leaves empty ranges unclamped, e.g. ``[3, 2)``).

Two kinds of verdict. **Upstream's own**: every value above is computed by upstream's functions and
compared with the reference's; in ``accounting`` the out-of-slots outcome is upstream's
``new_gpu_slots`` raising or not and the statistics are its ``get_statistics``, but which blocks are
released and allocated at each step is the reference's plan (release first, then allocate).
**The reference's verdict on upstream's numbers**: how many lone decodes run out of slots on pools of
upstream's own minimum is the reference manager's answer on those pools (or, when upstream's pools
hold fewer than one slot per life cycle, which the reference manager refuses, the reference's
required blocks counted against them).

An exception raised inside upstream code is a failure with its input, recorded like a mismatch (exit
1), whatever its type: an ``AttributeError`` one module raises reading another's class (files from
different commits?) or a ``TypeError`` from a call upstream makes is upstream's failure, not "could
not run" (:meth:`Checker.upstream_raised` says whose an exception is, by the innermost frame that
is upstream's or ours). An exception of our own (the loader, a stand-in, the checker) in one
comparison is recorded as *could not run* with its input (exit 2 when nothing was found); a mismatch
found elsewhere still makes the run fail. Our own code reading a name this source lacks is an API
difference: the check cannot run (``LoadError``, exit 2).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
import traceback
from fractions import Fraction
from typing import Any, Callable, Iterator

import attrs

from swafloor.reference import sharing
from swafloor.reference import (
    AttentionLayer,
    Config,
    ConfigError,
    FloorRule,
    Manager,
    Outcome,
    Shortfall,
    SsmLayer,
    SwafloorError,
    build_layout,
    scratch_range,
    sink_blocks_for,
    stale_range,
)

from .mapping import TrtllmLayout, layer_configs, to_trtllm
from .signals import Disagreement
from .standins import storage_manager

__all__ = ["Mismatch", "Report", "Checker", "CHECKS", "RULE_POST_FIX", "RULE_PRE_FIX", "Disagreement",
           "UpstreamRaised"]

CHECKS = ("stale", "scratch", "registry", "min_slots", "batch_slots", "accounting")
RULE_POST_FIX = "post-fix"
RULE_PRE_FIX = "pre-fix"
RULE_TEXT = {
    RULE_POST_FIX: "post-fix: SWA floor S + ceil((W-1)/t) + 1, full attention at the largest floor, SSM 1",
    RULE_PRE_FIX: "pre-fix: 1 slot per life cycle",
    "undetermined": "undetermined: no checked config tells the two rules apart",
    "neither": "neither rule: upstream's minimum matches neither",
}


class UpstreamRaised(Exception):
    """An exception raised inside upstream code (or a stand-in it called); carries where."""

    def __init__(self, exc: BaseException, where: str):
        self.exc = exc
        self.where = where
        super().__init__(f"{type(exc).__name__}: {exc}" + (f" ({where})" if where else ""))

    def to_dict(self) -> dict:
        return {"raised": type(self.exc).__name__, "message": str(self.exc)[:300], "where": self.where}


@attrs.frozen
class Mismatch:
    """One disagreement (or one exception raised by upstream code), with the whole input.
    ``detail``: more about it, e.g. the lone request that runs out on an undersized pool."""

    check: str
    input: dict
    upstream: Any
    reference: Any
    detail: dict | None = None

    def to_dict(self) -> dict:
        out = {"check": self.check, "input": self.input, "upstream": self.upstream, "reference": self.reference}
        if self.detail is not None:
            out["detail"] = self.detail
        return out


@attrs.define
class Report:
    source: str
    stand_ins: tuple[str, ...]
    rawref: str
    rule: str = "undetermined"
    counts: dict = attrs.Factory(lambda: {c: 0 for c in CHECKS})
    mismatch_counts: dict = attrs.Factory(lambda: {c: 0 for c in CHECKS})
    mismatches: list = attrs.Factory(list)  # the first of each check
    rule_votes: dict = attrs.Factory(lambda: {RULE_POST_FIX: 0, RULE_PRE_FIX: 0, "both": 0, "neither": 0})
    decode_runs: int = 0
    decode_out_of_slots: int = 0
    windowed_runs: int = 0  # lone decodes of configs without full attention (their pools never need to grow)
    windowed_out_of_slots: int = 0
    first_out_of_slots: dict | None = None
    raised_counts: dict = attrs.Factory(lambda: {c: 0 for c in CHECKS})  # of mismatch_counts: upstream raised
    below_reference_model: int = 0  # accounting runs on pools under 1 slot per life cycle (reference plan counted)
    not_run: list = attrs.Factory(list)  # comparisons that could not run: {"check", "input", "error"} (first 10)
    not_run_count: int = 0
    fatal: str | None = None  # why the run stopped early (e.g. an inconsistent source)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.mismatch_counts.values())

    @property
    def complete(self) -> bool:
        """Every comparison ran (none stopped by an error of ours, no early stop)."""
        return self.fatal is None and not self.not_run_count

    def verdicts(self) -> dict:
        """The two kinds of verdict, apart (see the module docstring)."""
        return {
            "upstream": {
                "what": "values computed by upstream's own functions, compared with the reference's; in "
                        "accounting, upstream's new_gpu_slots/release_slot/get_statistics driven by the "
                        "reference's plan (which blocks to release and allocate; release first)",
                "comparisons": dict(self.counts),
                "mismatches": dict(self.mismatch_counts),
                "raised": dict(self.raised_counts),
            },
            "reference": {
                "what": "the reference's verdict on upstream's numbers: a lone request decoding on pools of "
                        "upstream's own minimum, run by the reference manager on those pools (or, below one "
                        "slot per life cycle, the reference's required blocks counted against them)",
                "lone_decode_runs": self.decode_runs,
                "lone_decode_out_of_slots": self.decode_out_of_slots,
                "windowed_lone_decode_runs": self.windowed_runs,
                "windowed_lone_decode_out_of_slots": self.windowed_out_of_slots,
                "first_windowed_out_of_slots": self.first_out_of_slots,
                "runs_below_one_slot_per_life_cycle": self.below_reference_model,
            },
        }

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "ok": self.ok,
            "complete": self.complete,
            "fatal": self.fatal,
            "not_run": list(self.not_run),
            "not_run_count": self.not_run_count,
            "verdicts": self.verdicts(),
            "rule": self.rule,
            "rule_text": RULE_TEXT.get(self.rule, self.rule),
            "comparisons": dict(self.counts),
            "total_comparisons": sum(self.counts.values()),
            "mismatches": dict(self.mismatch_counts),
            "first_mismatches": [m.to_dict() for m in self.mismatches],
            "min_slots_votes": dict(self.rule_votes),
            "lone_decode_runs": self.decode_runs,
            "lone_decode_out_of_slots": self.decode_out_of_slots,
            "windowed_lone_decode_runs": self.windowed_runs,
            "windowed_lone_decode_out_of_slots": self.windowed_out_of_slots,
            "first_windowed_out_of_slots": self.first_out_of_slots,
            "stand_ins": list(self.stand_ins),
            "rawref": self.rawref,
            "seconds": round(self.seconds, 2),
        }


def _blocks(rng: Any) -> frozenset[int]:
    lo, hi = int(rng[0]), int(rng[1])
    return frozenset(range(lo, hi))


def _config_input(config: Config) -> dict:
    data = config.to_dict()
    return {k: data[k] for k in ("tokens_per_block", "layers", "pool_groups")}


def _set_partitions(items: list[int]) -> Iterator[list[int]]:
    """Every assignment of ``items`` to pool groups numbered by first use (each set partition once)."""
    def rec(i: int, labels: list[int], used: int) -> Iterator[list[int]]:
        if i == len(items):
            yield list(labels)
            return
        for g in range(used + 1):
            labels.append(g)
            yield from rec(i + 1, labels, max(used, g + 1))
            labels.pop()
    yield from rec(0, [], 0)


class Checker:
    """Runs the comparisons against one loaded source. ``progress(phase, done, total)`` is called
    now and then; ``examples`` is the Hypothesis budget per comparison beyond the grid."""

    def __init__(self, upstream: Any, *, examples: int = 200, seed: int = 0, grid: str = "small",
                 progress: Callable[[str, int, int], None] | None = None, hold_to: str = RULE_POST_FIX):
        self.up = upstream
        self.lcr = upstream["_life_cycle_registry"]
        self.cfg = upstream["_config"]
        self.sm = upstream["_storage_manager"]
        self.oop = upstream["_exceptions"].OutOfPagesError
        if hold_to not in (RULE_POST_FIX, RULE_PRE_FIX):
            raise ValueError(f"hold_to must be {RULE_POST_FIX!r} or {RULE_PRE_FIX!r}, got {hold_to!r}")
        self.hold_to = hold_to  # the rule upstream's minimum is held to: the floor, unless pre-fix is expected
        self.examples = examples
        self.seed = seed
        self.grid = grid
        self.progress = progress or (lambda phase, done, total: None)
        self.report = Report(str(upstream.source), upstream.stand_ins, upstream.rawref_origin)
        self._source_dir = os.path.realpath(str(upstream.source)) + os.sep
        self._pending_min: list[tuple] = []

    # ------------------------------------------------------------------ bookkeeping
    def _record(self, check: str, agree: bool, make_input: Callable[[], dict], upstream: Any, reference: Any,
                detail: dict | None = None) -> bool:
        self.report.counts[check] += 1
        if agree:
            return True
        self.report.mismatch_counts[check] += 1
        raised = isinstance(upstream, dict) and "raised" in upstream
        if not any(m.check == check and _is_raise(m) == raised for m in self.report.mismatches):
            self.report.mismatches.append(Mismatch(check, make_input(), upstream, reference, detail))
        return False

    def _raised(self, check: str, make_input: Callable[[], dict], raised: UpstreamRaised, reference: Any) -> bool:
        """An exception raised by upstream code: a failure of ``check`` with its input."""
        self.report.raised_counts[check] += 1
        return self._record(check, False, make_input, raised.to_dict(), reference)

    def _in_source(self, filename: str) -> bool:
        return os.path.realpath(filename).startswith(self._source_dir)

    def upstream_raised(self, exc: BaseException) -> UpstreamRaised | None:
        """``exc`` as an exception raised by upstream code, or None when it is ours.

        Whose it is: the innermost frame of its traceback that is either in the source folder
        (upstream's) or in swafloor's own package (ours: the loader, the stand-ins, the checker);
        library frames between are skipped. An ``AttributeError`` or ``TypeError`` raised in upstream's
        frame is upstream's like any other exception (a read of another module's class that lacks the
        attribute, a call with arguments the callee does not take): a failure with its input, exit 1,
        never "could not run". A :class:`~swafloor.fuzz.engines.trtllm.standins.StandInMisuse` is upstream's
        too: the stand-in refusing a call that breaks upstream's own contract (e.g. more slots than
        are free). Any other exception raised in our stand-ins is ours."""
        from .standins import StandInMisuse

        if isinstance(exc, (Disagreement, SwafloorError, KeyboardInterrupt)):
            return None
        frames = traceback.extract_tb(exc.__traceback__)
        upstream = [f for f in frames if self._in_source(f.filename)]
        if not upstream:
            return None
        for frame in reversed(frames):
            if self._in_source(frame.filename):
                break
            if self._is_ours(frame.filename) and not isinstance(exc, StandInMisuse):
                return None  # raised by our own code (a stand-in upstream called): could not run
        last = frames[-1]
        where = f"{os.path.basename(last.filename)}:{last.lineno} in {last.name}"
        if last is not upstream[-1]:
            where += f", called from {os.path.basename(upstream[-1].filename)}:{upstream[-1].lineno} in {upstream[-1].name}"
        where += _whose_object(exc)
        return UpstreamRaised(exc, where)

    def _is_ours(self, filename: str) -> bool:
        return os.path.realpath(filename).startswith(_OURS)

    def _api_difference(self, exc: BaseException) -> None:
        """Our own code read an attribute this source's class or module does not have: the source's
        API differs from what the check drives (it cannot run)."""
        from .loader import LoadError

        if not isinstance(exc, AttributeError):
            return
        obj, name = getattr(exc, "obj", None), getattr(exc, "name", None)
        if obj is None or name is None:
            return
        cls = obj if isinstance(obj, (type, type(sys))) else type(obj)
        module = obj if isinstance(obj, type(sys)) else sys.modules.get(getattr(cls, "__module__", "") or "")
        module_file = getattr(module, "__file__", None)
        if module_file is not None and self._in_source(module_file):
            raise LoadError(f"{getattr(cls, '__name__', cls)}.{name} in {os.path.basename(module_file)}",
                            "this source's API differs from what the check drives") from None

    def guard(self, check: str, make_input: Callable[[], dict], fn: Callable[..., bool], *args: Any) -> bool:
        """Run one comparison. An error of ours is recorded as *could not run* (with its input) and
        the run goes on; an inconsistent source or an API difference ends the run."""
        try:
            return bool(fn(*args))
        except KeyboardInterrupt:
            raise
        except SwafloorError as exc:
            if type(exc).__name__ == "LoadError":
                raise
            self._could_not_run(check, make_input, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - ours: recorded, never hidden
            self._api_difference(exc)
            self._could_not_run(check, make_input, exc)
            return False

    def _could_not_run(self, check: str, make_input: Callable[[], dict], exc: BaseException) -> None:
        self.report.not_run_count += 1
        if len(self.report.not_run) < 10:
            try:
                the_input = make_input()
            except Exception as inner:  # noqa: BLE001
                the_input = {"unavailable": repr(inner)[:200]}
            frames = traceback.extract_tb(exc.__traceback__)
            where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
            self.report.not_run.append({"check": check, "input": the_input,
                                        "error": f"{type(exc).__name__}: {exc}"[:300], "where": where})

    # ------------------------------------------------------------------ single comparisons
    def stale(self, t: int, window: int | None, sink_tokens: int, h: int) -> bool:
        want = stale_range(h, t, window, sink_blocks_for(sink_tokens, t))

        def the_input() -> dict:
            return {"tokens_per_block": t, "window": window, "sink_tokens": sink_tokens, "history": h}

        try:
            lc = self.lcr.AttnLifeCycle.make(window, sink_tokens or None, t)
            got = lc.get_stale_range(h, t)
            got_blocks, shown = _blocks(got), [int(got[0]), int(got[1])]
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("stale", the_input, raised, list(want))
        return self._record("stale", got_blocks == _blocks(want), the_input, shown, list(want))

    def scratch(self, t: int, window: int | None, sink_tokens: int, h: int, c: int, rewind: int) -> bool:
        if window is None:
            want = (0, 0)
        else:
            want = scratch_range(h, c, t, window, sink_blocks_for(sink_tokens, t), rewind)

        def the_input() -> dict:
            return {"tokens_per_block": t, "window": window, "sink_tokens": sink_tokens, "history": h,
                    "capacity": c, "max_rewind_len": rewind}

        try:
            lc = self.lcr.AttnLifeCycle.make(window, sink_tokens or None, t)
            got = self.lcr.compute_scratch_range(lc, h, c, t, rewind)
            got_blocks, shown = _blocks(got), [int(got[0]), int(got[1])]
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("scratch", the_input, raised, list(want))
        return self._record("scratch", got_blocks == _blocks(want), the_input, shown, list(want))

    def _registry(self, tl: TrtllmLayout) -> Any:
        layers = layer_configs(tl, self.cfg)
        holder = _LayerList(tl.tokens_per_block, layers)
        return self.lcr.LifeCycleRegistry(holder), layers

    def registry(self, config: Config) -> tuple[bool, Any, TrtllmLayout]:
        tl = to_trtllm(config)
        want = {"life_cycle_of_layer": list(tl.life_cycle_of_layer), "life_cycles": [list(x) for x in tl.life_cycles]}
        try:
            registry, layers = self._registry(tl)
            got_ids = [int(registry.get_id(self.lcr.make_life_cycle(layer, tl.tokens_per_block))) for layer in layers]
            got_lcs = []
            for lc in registry.get():
                if isinstance(lc, self.lcr.AttnLifeCycle):
                    got_lcs.append(("full" if lc.window_size is None else "swa", lc.window_size, int(lc.num_sink_blocks)))
                else:
                    got_lcs.append(("ssm", None, 0))
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("registry", lambda: _config_input(config), raised, want), None, tl
        got = {"life_cycle_of_layer": got_ids, "life_cycles": [list(x) for x in got_lcs]}
        ok = self._record("registry", got == want, lambda: _config_input(config), got, want)
        return ok, registry, tl

    def _upstream_min(self, registry: Any, tl: TrtllmLayout, constraints: list, reuse: Any = None) -> list[int]:
        sm = storage_manager(self.up, tl, registry)
        return [int(x) for x in self.sm.StorageManager._compute_min_slots_from_constraints(
            sm, constraints, tl.tokens_per_block, reuse)]

    def min_slots(self, config: Config, registry: Any, tl: TrtllmLayout) -> bool:
        fixed = list(build_layout(attrs.evolve(config, floor_rule=FloorRule.FIXED)).min_slots)
        legacy = list(build_layout(attrs.evolve(config, floor_rule=FloorRule.LEGACY)).min_slots)
        try:
            got = self._upstream_min(registry, tl, [])
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("min_slots", lambda: _config_input(config), raised,
                                {"post-fix": fixed, "pre-fix": legacy})
        votes = self.report.rule_votes
        if got == fixed and got == legacy:
            votes["both"] += 1
        elif got == fixed:
            votes[RULE_POST_FIX] += 1
        elif got == legacy:
            votes[RULE_PRE_FIX] += 1
        else:
            votes["neither"] += 1
        self._pending_min.append((config, registry, tl, got, fixed, legacy))
        self.report.counts["min_slots"] += 1
        return got in (fixed, legacy)

    def min_slots_with_batch(self, config: Config, registry: Any, tl: TrtllmLayout, requests: list[tuple[int, int]],
                             sys_len: int, rewind: int | None) -> bool:
        need = batch_need(tl, requests, sys_len, rewind)

        def the_input() -> dict:
            return {**_config_input(config), "constraint": {"requests": [list(r) for r in requests],
                    "system_prompt_length": sys_len, "max_rewind_len": rewind}}

        try:
            batch = self._batch(requests, sys_len)
            reuse = None if rewind is None else self.cfg.SwaScratchReuseConfig(max_rewind_len=rewind)
            got = self._upstream_min(registry, tl, [batch], reuse)
            floor_no_batch = self._upstream_min(registry, tl, [])
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("min_slots", the_input, raised, {"batch_need": need})
        want = [max(a, b) for a, b in zip(floor_no_batch, need)]
        return self._record("min_slots", got == want, the_input, got, want)

    def _batch(self, requests: list[tuple[int, int]], sys_len: int) -> Any:
        descs = [self.cfg.KVCacheDesc(capacity=c, history_length=h) for c, h in requests]
        return self.cfg.BatchDesc(descs, sys_len)

    def batch_slots(self, config: Config, registry: Any, tl: TrtllmLayout, requests: list[tuple[int, int]],
                    sys_len: int, rewind: int | None) -> bool:
        want = batch_need(tl, requests, sys_len, rewind)

        def the_input() -> dict:
            return {**_config_input(config), "requests": [list(r) for r in requests],
                    "system_prompt_length": sys_len, "max_rewind_len": rewind}

        try:
            sm = storage_manager(self.up, tl, registry)
            reuse = None if rewind is None else self.cfg.SwaScratchReuseConfig(max_rewind_len=rewind)
            got = [int(x) for x in self.sm.StorageManager._compute_slots_for_batch(
                sm, self._batch(requests, sys_len), tl.tokens_per_block, reuse)]
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("batch_slots", the_input, raised, want)
        return self._record("batch_slots", got == want, the_input, got, want)

    def accounting(self, config: Config, registry: Any, tl: TrtllmLayout, extra: int, steps: int) -> bool:
        """A lone request decodes ``steps`` tokens on pools of upstream's minimum plus ``extra`` slots."""
        try:
            floor = self._upstream_min(registry, tl, [])
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            return self._raised("accounting", lambda: {**_config_input(config), "extra_slots": extra}, raised, None)
        slots = [n + extra for n in floor]
        return self.lone_decode(config, registry, tl, slots, steps, extra=extra)["agree"]

    def lone_decode(self, config: Config, registry: Any, tl: TrtllmLayout, slots: list[int], steps: int, *,
                    extra: int | None = None) -> dict:
        """One request resumes at history 0 and decodes ``steps`` tokens on upstream's storage manager
        with ``slots`` slots per pool group. The reference's plan says which blocks each life cycle holds
        at each step (release first, then allocate in one call); upstream's ``new_gpu_slots`` says
        whether they fit (its verdict) and ``get_statistics`` what is used. The reference's verdict on
        the same pools comes from the reference manager, or, when the pools hold fewer than one slot per
        life cycle (which the reference manager refuses to build), from its required blocks counted
        against them. With ``extra`` given (the accounting comparison) every step is recorded and
        counted; without, it only returns what happened (to show an undersized pool run out).

        Returns ``{"agree", "ran_out", "upstream_ran_out", "steps"}``."""
        record = extra is not None
        t = tl.tokens_per_block
        n_lc = len(tl.life_cycles)
        try:
            mgr: Manager | None = Manager(attrs.evolve(config, slots=tuple(slots), floor_rule=FloorRule.LEGACY))
            plan = mgr
        except ConfigError:  # below one slot per life cycle: the reference manager refuses such pools
            mgr = None
            plan = Manager(attrs.evolve(config, slots=None))  # required blocks depend on the config only
            if record:
                self.report.below_reference_model += 1
        log: list[str] = []
        result: dict = {"agree": True, "ran_out": None, "upstream_ran_out": None, "steps": log,
                        "reference_outcome": None, "history": None}

        def the_input() -> dict:
            out = {**_config_input(config), "slots": list(slots), "steps": log[-12:]}
            if extra is not None:
                out["extra_slots"] = extra
            return out

        def check(agree: bool, got: Any, want: Any) -> bool:
            if record:
                return self._record("accounting", agree, the_input, got, want)
            if not agree:
                result["agree"] = False
            return agree

        try:
            sm = storage_manager(self.up, tl, registry, slots)
        except Exception as exc:
            if (raised := self.upstream_raised(exc)) is None:
                raise
            result["agree"] = False
            if record:
                self._raised("accounting", the_input, raised, None)
            return result
        held: list[dict[int, Any]] = [dict() for _ in tl.life_cycles]

        def used() -> list[int]:
            out = [0] * tl.num_pool_groups
            for lc in range(n_lc):
                out[tl.pool_group_of[lc]] += len(held[lc])
            return out

        def move(h: int, c: int, what: str, ref_step: Callable[[], Any] | None) -> bool | None:
            """One step; returns the reference's verdict (None: stop, a failure was recorded)."""
            targets = [set(plan.required_blocks(lc, h, c)) for lc in range(n_lc)]
            if mgr is not None:
                outcome = None if ref_step is None else ref_step()
                ref_ok = True if outcome is None else bool(outcome)
                if not ref_ok and result["reference_outcome"] is None:
                    result["reference_outcome"] = outcome
            else:
                need = [0] * tl.num_pool_groups
                for lc in range(n_lc):
                    need[tl.pool_group_of[lc]] += len(targets[lc])
                ref_ok = all(n <= s for n, s in zip(need, slots))
                if not ref_ok and result["reference_outcome"] is None:
                    result["reference_outcome"] = Outcome(False, tuple(
                        Shortfall(g, n, s) for g, (n, s) in enumerate(zip(need, slots)) if n > s))
            try:
                released = []
                for lc in range(n_lc):
                    for b in sorted(set(held[lc]) - targets[lc]):
                        sm.release_slot(lc, 0, held[lc].pop(b))
                        released.append((lc, b))
                wanted = [sorted(targets[lc] - set(held[lc])) for lc in range(n_lc)]
                try:
                    got_slots = sm.new_gpu_slots([len(w) for w in wanted])
                    up_ok = True
                except self.oop:
                    up_ok = False
                if up_ok:
                    for lc in range(n_lc):
                        held[lc].update(zip(wanted[lc], got_slots[lc]))
                else:  # as upstream's resize does: take the released blocks back
                    again = sm.new_gpu_slots([sum(1 for x, _ in released if x == lc) for lc in range(n_lc)])
                    for lc in range(n_lc):
                        held[lc].update(zip([b for x, b in released if x == lc], again[lc]))
                stats = [[int(s.total), int(s.free), int(s.evictable)] for s in sm.get_statistics()]
            except Exception as exc:
                if (raised := self.upstream_raised(exc)) is None:
                    raise
                log.append(f"{what} -> upstream raised {type(exc).__name__}")
                result["agree"] = False
                result["raised"] = raised.to_dict()
                if record:
                    self._raised("accounting", the_input, raised, "ok" if ref_ok else "out of slots")
                return None
            log.append(f"{what} -> upstream {'ok' if up_ok else 'out of slots'}, reference {'ok' if ref_ok else 'out of slots'}")
            if not up_ok and result["upstream_ran_out"] is None:
                result["upstream_ran_out"] = what
            if mgr is not None:
                want = [[p.total, p.free, 0] for p in mgr.snapshot().pools]
            else:
                want = [[s, s - u, 0] for s, u in zip(slots, used())]
            if not (check(up_ok == ref_ok, up_ok, ref_ok) and check(stats == want, stats, want)):
                return None
            return ref_ok

        if mgr is not None:
            mgr.create("r")
        ref_ok = move(0, 0, "resume at 0", (lambda: mgr.resume("r")) if mgr is not None else None)
        windowed = all(lc[0] != "full" for lc in tl.life_cycles)
        if ref_ok is None:
            result["agree"] = False
            return result
        if record:
            self.report.decode_runs += 1
            self.report.windowed_runs += windowed
        h = 0
        while ref_ok and h < steps:
            ref_ok = move(h, h + 1, f"resize(capacity={h + 1}, history={h})",
                          (lambda h=h: mgr.resize("r", h + 1, h)) if mgr is not None else None)
            if ref_ok is None:
                result["agree"] = False
                return result
            if not ref_ok:
                break
            if mgr is not None:
                mgr.commit("r", 1)
            ref_ok = move(h + 1, h + 1, f"commit(1) at history {h}", None)
            if ref_ok is None:
                result["agree"] = False
                return result
            h += 1
        if not ref_ok:
            result["ran_out"] = log[-1].split(" -> ")[0]
            result["history"] = h
            if record:
                self.report.decode_out_of_slots += 1
                self.report.windowed_out_of_slots += windowed
                if windowed and self.report.first_out_of_slots is None:
                    self.report.first_out_of_slots = {**_config_input(config), "slots": list(slots), "history": h}
        return result

    # ------------------------------------------------------------------ the runs
    def run(self) -> Report:
        """Every phase; a mismatch found anywhere stays in the report whatever a later phase does. An
        inconsistent source or an API difference stops the run (``report.fatal``)."""
        start = time.monotonic()
        self._pending_min = []
        try:
            self._preflight()
            self._grid()
            self._hypothesis()
        except SwafloorError as exc:  # LoadError (an API difference): this source cannot be checked further
            self.report.fatal = f"{type(exc).__name__}: {exc}"
        finally:
            self._decide_rule()
            self.report.seconds = time.monotonic() - start
        return self.report

    def _preflight(self) -> None:
        """Build the registry and the floor of one config holding every kind of layer, so that a source
        whose files do not fit together stops here (before any comparison) rather than midway."""
        config = Config(tokens_per_block=4, layers=[AttentionLayer(), AttentionLayer(window=5, sink_tokens=1), SsmLayer()])
        tl = to_trtllm(config)
        try:
            registry, layers = self._registry(tl)
            for layer in layers:
                registry.get_id(self.lcr.make_life_cycle(layer, tl.tokens_per_block))
            self._upstream_min(registry, tl, [])
        except Exception as exc:
            if self.upstream_raised(exc) is None:  # upstream's own failures are met in the comparisons
                self._api_difference(exc)

    def _decide_rule(self) -> None:
        votes = self.report.rule_votes
        if votes[RULE_POST_FIX] and not votes[RULE_PRE_FIX]:
            rule = RULE_POST_FIX
        elif votes[RULE_PRE_FIX] and not votes[RULE_POST_FIX]:
            rule = RULE_PRE_FIX
        elif not votes[RULE_PRE_FIX] and not votes[RULE_POST_FIX]:
            rule = "undetermined" if not votes["neither"] else "neither"
        else:
            rule = RULE_POST_FIX if votes[RULE_POST_FIX] >= votes[RULE_PRE_FIX] else RULE_PRE_FIX
        if votes["neither"] > max(votes[RULE_POST_FIX], votes[RULE_PRE_FIX]):
            rule = "neither"  # mostly neither rule: held to the post-fix one
        self.report.rule = rule
        shown: Mismatch | None = None
        tries = 0
        for config, registry, tl, got, fixed, legacy in self._pending_min:
            # The floor is the spec: every source's minimum is held to it (post-fix), whatever rule it
            # implements, unless the caller said it expects the pre-fix rule (``hold_to``).
            want = legacy if self.hold_to == RULE_PRE_FIX else fixed
            if got == want:
                continue
            self.report.mismatch_counts["min_slots"] += 1
            if shown is not None and (_clean(shown.detail) or tries >= 50):
                continue
            # Show the first, or the first undersized one whose lone request runs out on upstream's
            # minimum and not on the reference's (configs with full attention run out on both).
            detail = self._undersized(config, registry, tl, got, want) if tries < 50 else None
            tries += detail is not None
            if shown is None or (_clean(detail) and not _clean(shown.detail)):
                shown = Mismatch("min_slots", {**_config_input(config), "rule": rule, "held_to": self.hold_to}, got,
                                 {"post-fix": fixed, "pre-fix": legacy}, detail)
        if shown is not None and not any(m.check == "min_slots" and "constraint" not in m.input and not _is_raise(m)
                                         for m in self.report.mismatches):
            self.report.mismatches.append(shown)

    def _undersized(self, config: Config, registry: Any, tl: TrtllmLayout, got: list[int], want: list[int]) -> dict | None:
        """For upstream's minimum below the reference's: the lone request that runs out on pools of
        upstream's minimum (and how it fares on the reference's minimum)."""
        short = [g for g, (a, b) in enumerate(zip(got, want)) if a < b]
        if not short:
            return None
        steps = min(400, 3 * max((lc[1] or 0) + lc[2] * tl.tokens_per_block for lc in tl.life_cycles)
                    + 2 * tl.tokens_per_block)
        detail: dict = {"undersized_pool_groups": short, "decode_steps": steps}
        for label, slots in (("on upstream's minimum", got), ("on the reference's minimum", want)):
            try:
                run = self.lone_decode(config, registry, tl, list(slots), steps)
            except Exception as exc:  # noqa: BLE001 - shown, never hidden; the mismatch stands anyway
                detail[label] = f"could not run: {type(exc).__name__}: {exc}"[:300]
                continue
            detail[label] = {"slots": list(slots), "ran_out_at": run["ran_out"],
                             "upstream_ran_out_at": run["upstream_ran_out"]}
            outcome = run["reference_outcome"]
            if run["ran_out"] is not None and outcome is not None:
                groups = [s.pool_group for s in outcome.shortfalls]
                detail[label].update({
                    "history": run["history"],
                    "reference_outcome": outcome.describe(),
                    "life_cycles": [{"index": i, "kind": kind, "window": window, "sink_blocks": sinks,
                                     "pool_group": tl.pool_group_of[i]}
                                    for i, (kind, window, sinks) in enumerate(tl.life_cycles)
                                    if tl.pool_group_of[i] in groups],
                })
        return detail

    def _tick(self, phase: str, done: int, total: int) -> None:
        self.progress(phase, done, total)

    # grid ----------------------------------------------------------------
    def _grid(self) -> None:
        g = GRIDS[self.grid]
        guard = self.guard
        cases = list(itertools.product(g["t"], g["windows"], g["sinks"]))
        for i, (t, w, s) in enumerate(cases):
            for h in range(g["history"] + 1):
                guard("stale", lambda: {"tokens_per_block": t, "window": w, "sink_tokens": s, "history": h},
                      self.stale, t, w, s, h)
            self._tick("stale ranges (grid)", i + 1, len(cases))
        for t in g["t"]:
            for h in range(g["history"] + 1):  # full attention releases nothing
                guard("stale", lambda: {"tokens_per_block": t, "window": None, "history": h}, self.stale, t, None, 0, h)
        cases = list(itertools.product(g["t"][: g["scratch_t"]], g["windows"][: g["scratch_w"]], g["sinks"][:4]))
        for i, (t, w, s) in enumerate(cases):
            for h in range(g["scratch_h"] + 1):
                for n in range(g["scratch_n"] + 1):
                    for rewind in g["rewinds"]:
                        guard("scratch", lambda: {"tokens_per_block": t, "window": w, "sink_tokens": s, "history": h,
                                                  "capacity": h + n, "max_rewind_len": rewind},
                              self.scratch, t, w, s, h, h + n, rewind)
            self._tick("scratch ranges (grid)", i + 1, len(cases))
        configs = list(grid_configs(g))
        for i, config in enumerate(configs):
            self.guard("registry", lambda: _config_input(config), self._grid_config, g, i, config)
            self._tick("life cycles, minimum slots, batches, slot accounting (grid)", i + 1, len(configs))

    def _grid_config(self, g: dict, i: int, config: Config) -> bool:
        ok, registry, tl = self.registry(config)
        if not ok:
            return False
        given = lambda: _config_input(config)  # noqa: E731
        self.guard("min_slots", given, self.min_slots, config, registry, tl)
        t = tl.tokens_per_block
        for h, n in g["batches"]:
            for rewind in (None, 0, 2):
                self.guard("batch_slots", given, self.batch_slots, config, registry, tl, [(h + n, h)], 0, rewind)
            self.guard("min_slots", given, self.min_slots_with_batch, config, registry, tl, [(h + n, h)], 0, None)
        sys_len = 2 * t + 1
        self.guard("batch_slots", given, self.batch_slots, config, registry, tl,
                   [(sys_len + 3, sys_len), (sys_len + 5 * t, sys_len + 4 * t)], sys_len, None)
        if i % g["accounting_every"] == 0:
            for extra in (0, 1):
                self.guard("accounting", given, self.accounting, config, registry, tl, extra, g["decode_steps"])
        return True

    # hypothesis ------------------------------------------------------------
    def _hypothesis(self) -> None:
        if self.examples <= 0:
            return
        from .properties import run_properties

        run_properties(self, self.examples, self.seed, self._tick)


#: Upstream classes the stand-ins build with ``object.__new__`` (their constructors size real pools).
_BUILT_WITHOUT_CONSTRUCTOR = ("StorageManager", "CacheLevelManager")


def _whose_object(exc: BaseException) -> str:
    """A note for an exception upstream raised on an object or a function the check supplies (a
    stand-in, the layer list, a class built without its constructor), so that the reader sees a
    newer source's API next to what the check drives; empty otherwise. The failure stays upstream's."""
    from . import standins

    if isinstance(exc, AttributeError) and getattr(exc, "obj", None) is not None:
        obj, name = exc.obj, getattr(exc, "name", "?")
        cls = obj if isinstance(obj, type) else type(obj)
        if (getattr(cls, "__module__", "") or "").startswith("swafloor."):
            return f" (reads {cls.__name__}.{name} of an object the check supplies)"
        if cls.__name__ in _BUILT_WITHOUT_CONSTRUCTOR and obj is not cls and not hasattr(cls, name):
            return (f" (reads {cls.__name__}.{name}; the check builds {cls.__name__} without its constructor "
                    "and does not set it)")
    if isinstance(exc, TypeError):
        ours = [n for n in dir(standins) if isinstance(getattr(standins, n), type)
                and getattr(getattr(standins, n), "__module__", "") == standins.__name__] + ["_LayerList"]
        message = str(exc)
        if any(message.startswith(f"{n}.") or message.startswith(f"{n}(") for n in ours):
            return " (a call to one of the check's stand-ins)"
    return ""


#: swafloor's own packages: a frame here is ours (the loader, the stand-ins, the checker, the reference).
_OURS = tuple(os.path.dirname(os.path.realpath(m.__file__)) + os.sep
              for m in (sys.modules["swafloor"], sys.modules["swafloor.fuzz"], sys.modules["swafloor.reference"]))


def _clean(detail: dict | None) -> bool:
    """An undersized pool's lone request that runs out on upstream's minimum, not on the reference's."""
    if not detail or not isinstance(detail.get("on upstream's minimum"), dict):
        return False
    theirs, ours = detail["on upstream's minimum"], detail.get("on the reference's minimum")
    return theirs["ran_out_at"] is not None and isinstance(ours, dict) and ours["ran_out_at"] is None


def _is_raise(m: Mismatch) -> bool:
    return isinstance(m.upstream, dict) and "raised" in m.upstream


class _LayerList:
    """What ``LifeCycleRegistry`` reads of a manager config: ``tokens_per_block`` and ``layers``."""

    def __init__(self, tokens_per_block: int, layers: list[Any]):
        self.tokens_per_block = tokens_per_block
        self.layers = layers


def batch_need(tl: TrtllmLayout, requests: list[tuple[int, int]], sys_len: int, rewind: int | None) -> list[int]:
    """Slots per pool group that a batch holds, by the reference's proven formula
    (:func:`~swafloor.reference.sharing.shared_batch_slots`, theorems ``shared-batch-exact`` and
    ``sharing-never-raises``): per attention life cycle, the system prompt's whole blocks live for any
    request, once, plus each request's own live blocks past them; an SSM life cycle holds one page
    per request; with scratch reuse a request's scratch blocks take ``ceil(n * fraction)`` shared
    slots instead of ``n`` (requests have ``capacity >= blocks of the system prompt`` and, when it is
    non-empty, history past it)."""
    t = tl.tokens_per_block
    sys_blocks = sharing.prefix_blocks(sys_len, t)
    need = [0] * tl.num_pool_groups
    batch = [(history, capacity) for capacity, history in requests]
    for index, (kind, window, sinks) in enumerate(tl.life_cycles):
        g = tl.pool_group_of[index]
        if kind == "ssm":
            need[g] += len(requests)
            continue
        need[g] += sharing.shared_batch_slots(batch, t, window, sinks, sys_blocks)
        if rewind is not None and window is not None:
            for capacity, history in requests:
                lo, hi = scratch_range(history, capacity, t, window, sinks, rewind)
                n = max(0, hi - lo)
                need[g] += -n + math.ceil(n * tl.scratch_fraction[index])
    return need


#: Grid sizes: "small" for the command's default, "tiny" for tests.
GRIDS = {
    "small": {
        "t": (1, 2, 3, 4, 8, 16), "windows": (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33),
        "sinks": (0, 1, 2, 3, 5, 8, 17), "history": 80,
        "scratch_t": 4, "scratch_w": 8, "scratch_h": 20, "scratch_n": 20, "rewinds": (0, 1, 3, 8),
        "layer_t": (1, 2, 4, 8), "layer_windows": (1, 2, 4, 5, 9), "layer_sinks": (0, 1, 9), "max_layers": 2,
        "triples": ((None, 0), (2, 0), (5, 3), "ssm"),
        "batches": ((0, 1), (9, 1), (30, 33), (100, 40)),
        "accounting_every": 5, "decode_steps": 48,
    },
    "tiny": {
        "t": (1, 2, 4), "windows": (1, 2, 3, 5), "sinks": (0, 1, 3), "history": 12,
        "scratch_t": 2, "scratch_w": 3, "scratch_h": 6, "scratch_n": 6, "rewinds": (0, 2),
        "layer_t": (2, 4), "layer_windows": (1, 3, 5), "layer_sinks": (0, 1), "max_layers": 1,
        "triples": ((None, 0), (3, 1), "ssm"),
        "batches": ((0, 1), (9, 1), (13, 2)),
        "accounting_every": 3, "decode_steps": 20,
    },
}


def grid_configs(g: dict) -> Iterator[Config]:
    """Layer lists over a small alphabet (full, SWA with and without sinks, SSM) up to
    ``max_layers`` long, plus every triple over a smaller one, each with every assignment of its life
    cycles to pool groups."""
    for t in g["layer_t"]:
        alphabet: list[Any] = [AttentionLayer(), SsmLayer()]
        for w in g["layer_windows"]:
            for s in g["layer_sinks"]:
                alphabet.append(AttentionLayer(window=w, sink_tokens=s))
        small = [SsmLayer() if x == "ssm" else AttentionLayer(window=x[0], sink_tokens=x[1]) for x in g["triples"]]
        lists = [ls for n in range(1, g["max_layers"] + 1) for ls in itertools.product(alphabet, repeat=n)]
        lists += list(itertools.product(small, repeat=3))
        for layers in lists:
            if not any(isinstance(x, AttentionLayer) for x in layers):
                continue
            base = Config(tokens_per_block=t, layers=layers)
            count = len(build_layout(base).life_cycles)
            for groups in _set_partitions(list(range(count))):
                yield attrs.evolve(base, pool_groups=tuple(groups))
