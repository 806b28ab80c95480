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
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction
from typing import Any, Callable, Iterator

import attrs

from swafloor.reference import (
    AttentionLayer,
    Config,
    FloorRule,
    Manager,
    SsmLayer,
    build_layout,
    live_block_indices,
    scratch_range,
    sink_blocks_for,
    stale_range,
)

from .mapping import TrtllmLayout, layer_configs, to_trtllm
from .standins import storage_manager

__all__ = ["Mismatch", "Report", "Checker", "CHECKS", "RULE_POST_FIX", "RULE_PRE_FIX"]

CHECKS = ("stale", "scratch", "registry", "min_slots", "batch_slots", "accounting")
RULE_POST_FIX = "post-fix"
RULE_PRE_FIX = "pre-fix"
RULE_TEXT = {
    RULE_POST_FIX: "post-fix: SWA floor S + ceil((W-1)/t) + 1, full attention at the largest floor, SSM 1",
    RULE_PRE_FIX: "pre-fix: 1 slot per life cycle",
    "undetermined": "undetermined: no checked config tells the two rules apart",
    "neither": "neither rule: upstream's minimum matches neither",
}


@attrs.frozen
class Mismatch:
    """One disagreement, with the whole input."""

    check: str
    input: dict
    upstream: Any
    reference: Any

    def to_dict(self) -> dict:
        return {"check": self.check, "input": self.input, "upstream": self.upstream, "reference": self.reference}


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
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.mismatch_counts.values())

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "ok": self.ok,
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
                 progress: Callable[[str, int, int], None] | None = None):
        self.up = upstream
        self.lcr = upstream["_life_cycle_registry"]
        self.cfg = upstream["_config"]
        self.sm = upstream["_storage_manager"]
        self.oop = upstream["_exceptions"].OutOfPagesError
        self.examples = examples
        self.seed = seed
        self.grid = grid
        self.progress = progress or (lambda phase, done, total: None)
        self.report = Report(str(upstream.source), upstream.stand_ins, upstream.rawref_origin)

    # ------------------------------------------------------------------ bookkeeping
    def _record(self, check: str, agree: bool, make_input: Callable[[], dict], upstream: Any, reference: Any) -> bool:
        self.report.counts[check] += 1
        if agree:
            return True
        self.report.mismatch_counts[check] += 1
        if not any(m.check == check for m in self.report.mismatches):
            self.report.mismatches.append(Mismatch(check, make_input(), upstream, reference))
        return False

    # ------------------------------------------------------------------ single comparisons
    def stale(self, t: int, window: int | None, sink_tokens: int, h: int) -> bool:
        lc = self.lcr.AttnLifeCycle.make(window, sink_tokens or None, t)
        got = lc.get_stale_range(h, t)
        want = stale_range(h, t, window, sink_blocks_for(sink_tokens, t))
        return self._record(
            "stale", _blocks(got) == _blocks(want),
            lambda: {"tokens_per_block": t, "window": window, "sink_tokens": sink_tokens, "history": h},
            [int(got[0]), int(got[1])], list(want),
        )

    def scratch(self, t: int, window: int | None, sink_tokens: int, h: int, c: int, rewind: int) -> bool:
        lc = self.lcr.AttnLifeCycle.make(window, sink_tokens or None, t)
        got = self.lcr.compute_scratch_range(lc, h, c, t, rewind)
        if window is None:
            want = (0, 0)
        else:
            want = scratch_range(h, c, t, window, sink_blocks_for(sink_tokens, t), rewind)
        return self._record(
            "scratch", _blocks(got) == _blocks(want),
            lambda: {"tokens_per_block": t, "window": window, "sink_tokens": sink_tokens, "history": h,
                     "capacity": c, "max_rewind_len": rewind},
            [int(got[0]), int(got[1])], list(want),
        )

    def _registry(self, tl: TrtllmLayout) -> Any:
        layers = layer_configs(tl, self.cfg)
        holder = _LayerList(tl.tokens_per_block, layers)
        return self.lcr.LifeCycleRegistry(holder), layers

    def registry(self, config: Config) -> tuple[bool, Any, TrtllmLayout]:
        tl = to_trtllm(config)
        registry, layers = self._registry(tl)
        got_ids = [int(registry.get_id(self.lcr.make_life_cycle(layer, tl.tokens_per_block))) for layer in layers]
        got_lcs = []
        for lc in registry.get():
            if isinstance(lc, self.lcr.AttnLifeCycle):
                got_lcs.append(("full" if lc.window_size is None else "swa", lc.window_size, int(lc.num_sink_blocks)))
            else:
                got_lcs.append(("ssm", None, 0))
        got = {"life_cycle_of_layer": got_ids, "life_cycles": [list(x) for x in got_lcs]}
        want = {"life_cycle_of_layer": list(tl.life_cycle_of_layer), "life_cycles": [list(x) for x in tl.life_cycles]}
        ok = self._record("registry", got == want, lambda: _config_input(config), got, want)
        return ok, registry, tl

    def min_slots(self, config: Config, registry: Any, tl: TrtllmLayout) -> bool:
        sm = storage_manager(self.up, tl, registry)
        got = [int(x) for x in self.sm.StorageManager._compute_min_slots_from_constraints(sm, [], tl.tokens_per_block, None)]
        fixed = list(build_layout(attrs.evolve(config, floor_rule=FloorRule.FIXED)).min_slots)
        legacy = list(build_layout(attrs.evolve(config, floor_rule=FloorRule.LEGACY)).min_slots)
        votes = self.report.rule_votes
        if got == fixed and got == legacy:
            votes["both"] += 1
        elif got == fixed:
            votes[RULE_POST_FIX] += 1
        elif got == legacy:
            votes[RULE_PRE_FIX] += 1
        else:
            votes["neither"] += 1
        self._pending_min.append((config, got, fixed, legacy))
        self.report.counts["min_slots"] += 1
        return got in (fixed, legacy)

    def min_slots_with_batch(self, config: Config, registry: Any, tl: TrtllmLayout, requests: list[tuple[int, int]],
                             sys_len: int, rewind: int | None) -> bool:
        sm = storage_manager(self.up, tl, registry)
        batch = self._batch(requests, sys_len)
        reuse = None if rewind is None else self.cfg.SwaScratchReuseConfig(max_rewind_len=rewind)
        got = [int(x) for x in self.sm.StorageManager._compute_min_slots_from_constraints(sm, [batch], tl.tokens_per_block, reuse)]
        floor_no_batch = [int(x) for x in self.sm.StorageManager._compute_min_slots_from_constraints(sm, [], tl.tokens_per_block, None)]
        need = batch_need(tl, requests, sys_len, rewind)
        want = [max(a, b) for a, b in zip(floor_no_batch, need)]
        return self._record(
            "min_slots", got == want,
            lambda: {**_config_input(config), "constraint": {"requests": [list(r) for r in requests],
                     "system_prompt_length": sys_len, "max_rewind_len": rewind}},
            got, want,
        )

    def _batch(self, requests: list[tuple[int, int]], sys_len: int) -> Any:
        descs = [self.cfg.KVCacheDesc(capacity=c, history_length=h) for c, h in requests]
        return self.cfg.BatchDesc(descs, sys_len)

    def batch_slots(self, config: Config, registry: Any, tl: TrtllmLayout, requests: list[tuple[int, int]],
                    sys_len: int, rewind: int | None) -> bool:
        sm = storage_manager(self.up, tl, registry)
        reuse = None if rewind is None else self.cfg.SwaScratchReuseConfig(max_rewind_len=rewind)
        got = [int(x) for x in self.sm.StorageManager._compute_slots_for_batch(
            sm, self._batch(requests, sys_len), tl.tokens_per_block, reuse)]
        want = batch_need(tl, requests, sys_len, rewind)
        return self._record(
            "batch_slots", got == want,
            lambda: {**_config_input(config), "requests": [list(r) for r in requests],
                     "system_prompt_length": sys_len, "max_rewind_len": rewind},
            got, want,
        )

    def accounting(self, config: Config, registry: Any, tl: TrtllmLayout, extra: int, steps: int) -> bool:
        """A lone request decodes ``steps`` tokens on pools of upstream's minimum plus ``extra`` slots."""
        sm0 = storage_manager(self.up, tl, registry)
        floor = [int(x) for x in self.sm.StorageManager._compute_min_slots_from_constraints(sm0, [], tl.tokens_per_block, None)]
        slots = [n + extra for n in floor]
        ref_config = attrs.evolve(config, slots=tuple(slots), floor_rule=FloorRule.LEGACY)
        mgr = Manager(ref_config)
        sm = storage_manager(self.up, tl, registry, slots)
        held: list[dict[int, Any]] = [dict() for _ in tl.life_cycles]
        n_lc = len(tl.life_cycles)
        log: list[str] = []

        def the_input() -> dict:
            return {**_config_input(config), "slots": slots, "extra_slots": extra, "steps": log[-12:]}

        def move(h: int, c: int, ref_ok: bool, what: str) -> bool:
            targets = [set(mgr.required_blocks(lc, h, c)) for lc in range(n_lc)]
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
            log.append(f"{what} -> upstream {'ok' if up_ok else 'out of slots'}, reference {'ok' if ref_ok else 'out of slots'}")
            return self._record("accounting", up_ok == ref_ok, the_input, up_ok, ref_ok) and self._stats(sm, mgr, the_input)

        mgr.create("r")
        if not move(0, 0, bool(mgr.resume("r")), "resume at 0"):
            return False
        windowed = all(lc[0] != "full" for lc in tl.life_cycles)
        self.report.decode_runs += 1
        self.report.windowed_runs += windowed
        for h in range(steps):
            ref_ok = bool(mgr.resize("r", h + 1, h))
            if not move(h, h + 1, ref_ok, f"resize(capacity={h + 1}, history={h})"):
                return False
            if not ref_ok:
                self.report.decode_out_of_slots += 1
                self.report.windowed_out_of_slots += windowed
                if windowed and self.report.first_out_of_slots is None:
                    self.report.first_out_of_slots = {**_config_input(config), "slots": slots, "history": h}
                return True
            mgr.commit("r", 1)
            if not move(h + 1, h + 1, True, f"commit(1) at history {h}"):
                return False
        return True

    def _stats(self, sm: Any, mgr: Manager, the_input: Callable[[], dict]) -> bool:
        stats = sm.get_statistics()
        got = [[int(s.total), int(s.free), int(s.evictable)] for s in stats]
        want = [[p.total, p.free, 0] for p in mgr.snapshot().pools]
        return self._record("accounting", got == want, the_input, got, want)

    # ------------------------------------------------------------------ the runs
    def run(self) -> Report:
        start = time.monotonic()
        self._pending_min: list[tuple[Config, list[int], list[int], list[int]]] = []
        self._grid()
        self._hypothesis()
        self._decide_rule()
        self.report.seconds = time.monotonic() - start
        return self.report

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
        self.report.rule = rule
        for config, got, fixed, legacy in self._pending_min:
            want = fixed if rule in (RULE_POST_FIX, "undetermined", "neither") else legacy
            if got != want:
                self.report.mismatch_counts["min_slots"] += 1
                if not any(m.check == "min_slots" and "constraint" not in m.input for m in self.report.mismatches):
                    self.report.mismatches.append(Mismatch(
                        "min_slots", {**_config_input(config), "rule": rule}, got,
                        {"post-fix": fixed, "pre-fix": legacy}))

    def _tick(self, phase: str, done: int, total: int) -> None:
        self.progress(phase, done, total)

    # grid ----------------------------------------------------------------
    def _grid(self) -> None:
        g = GRIDS[self.grid]
        cases = list(itertools.product(g["t"], g["windows"], g["sinks"]))
        for i, (t, w, s) in enumerate(cases):
            for h in range(g["history"] + 1):
                self.stale(t, w, s, h)
            self._tick("stale ranges (grid)", i + 1, len(cases))
        for t in g["t"]:
            for h in range(g["history"] + 1):
                self.stale(t, None, 0, h)  # full attention releases nothing
        cases = list(itertools.product(g["t"][: g["scratch_t"]], g["windows"][: g["scratch_w"]], g["sinks"][:4]))
        for i, (t, w, s) in enumerate(cases):
            for h in range(g["scratch_h"] + 1):
                for n in range(g["scratch_n"] + 1):
                    for rewind in g["rewinds"]:
                        self.scratch(t, w, s, h, h + n, rewind)
            self._tick("scratch ranges (grid)", i + 1, len(cases))
        configs = list(grid_configs(g))
        for i, config in enumerate(configs):
            ok, registry, tl = self.registry(config)
            if ok:
                self.min_slots(config, registry, tl)
                t = tl.tokens_per_block
                for h, n in g["batches"]:
                    for rewind in (None, 0, 2):
                        self.batch_slots(config, registry, tl, [(h + n, h)], 0, rewind)
                    self.min_slots_with_batch(config, registry, tl, [(h + n, h)], 0, None)
                sys_len = 2 * t + 1
                self.batch_slots(config, registry, tl, [(sys_len + 3, sys_len), (sys_len + 5 * t, sys_len + 4 * t)], sys_len, None)
                if i % g["accounting_every"] == 0:
                    for extra in (0, 1):
                        self.accounting(config, registry, tl, extra, g["decode_steps"])
            self._tick("life cycles, minimum slots, batches, slot accounting (grid)", i + 1, len(configs))

    # hypothesis ------------------------------------------------------------
    def _hypothesis(self) -> None:
        if self.examples <= 0:
            return
        from .properties import run_properties

        run_properties(self, self.examples, self.seed, self._tick)


class _LayerList:
    """What ``LifeCycleRegistry`` reads of a manager config: ``tokens_per_block`` and ``layers``."""

    def __init__(self, tokens_per_block: int, layers: list[Any]):
        self.tokens_per_block = tokens_per_block
        self.layers = layers


def batch_need(tl: TrtllmLayout, requests: list[tuple[int, int]], sys_len: int, rewind: int | None) -> list[int]:
    """Slots per pool group that a batch holds, from the reference's live blocks: each request's
    live blocks past the shared system prompt, plus the system-prompt blocks live for any request
    (counted once); an SSM life cycle holds one page per request; with scratch reuse a request's
    scratch blocks take ``ceil(n * fraction)`` shared slots instead of ``n`` (requests have
    ``capacity >= blocks of the system prompt`` and, when it is non-empty, history past it)."""
    t = tl.tokens_per_block
    sys_blocks = sys_len // t
    need = [0] * tl.num_pool_groups
    for index, (kind, window, sinks) in enumerate(tl.life_cycles):
        g = tl.pool_group_of[index]
        if kind == "ssm":
            need[g] += len(requests)
            continue
        shared: set[int] = set()
        for capacity, history in requests:
            live = live_block_indices(history, capacity, t, window, sinks)
            shared.update(b for b in live if b < sys_blocks)
            own = sum(1 for b in live if b >= sys_blocks)
            if rewind is not None and window is not None:
                lo, hi = scratch_range(history, capacity, t, window, sinks, rewind)
                n = max(0, hi - lo)
                own += -n + math.ceil(n * tl.scratch_fraction[index])
            need[g] += own
        need[g] += len(shared)
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
