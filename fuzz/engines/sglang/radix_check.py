"""Run in SGLang's venv: the ``sglang-radix`` ci campaign, then the same campaign with a bug planted in
SGLang's radix path, each in this one process (SGLang is imported once), printing one JSON object:
``{"clean": report, "plants": {name: report}, "sglang_hits": counts, "replays": [...]}``.

    .venv-sglang/bin/python -m swafloor.fuzz.engines.sglang.radix_check --examples 120 --out DIR [--plant NAME ...] \
        [--replay TRACE ...]

``--replay``: saved traces replayed first, each with what SGLang's tree did on it (``STATS`` counts).

The plants (each replaces one SGLang function in this process only, restored afterwards):

- ``radix-cut-one-page-late``: ``free_swa_out_of_window_slots`` on the radix path (prefix sharing on)
  cuts one page past SGLang's margin and without it (``pre_len - (w - P)``): a page the window still
  reads is freed. Expected: a divergence on ``tables`` at a resize.
- ``match-hands-next-page``: the tree's ``prefix_device_indices`` (the matched prefix's KV indices a
  new request's row takes) hands out each index one page on. Expected: a divergence on ``data`` at a
  resume (the row reads another page's token ids).
- ``lock-takes-nothing``: the tree's ``lock`` (a request's hold on its matched or published prefix)
  locks nothing, so tree eviction may free a prefix a running request still reads. Expected: a
  divergence on ``pool_used`` at the resume whose lock (and the checkpoint moving it) leaves the tree's
  counts off its pages (seed 0), or on ``tables`` or ``data`` once a freed page is handed to another
  request and written.
- ``swa-free-noop``: SGLang's ``free_swa_out_of_window_slots`` does nothing. Expected: ``tables`` at a
  resize (no own SWA page may stay held below the radix cut's bound).
- ``lock-never-released``: the tree's ``dec_lock_ref`` does nothing. Expected: ``locks`` at a close or
  suspend (``full_protected_size`` against the prefixes the open requests hold).
- ``close-leaks-a-page``: a finished request's row is given back one page short. Expected: ``pool_used``
  at the close (or at the resize or resume whose slack retires the request and closes it).

- ``eviction-frees-nothing``: the SWA allocator's ``evict_to_free_tokens`` (the tree eviction the
  scheduler runs before it allocates, ``evict_from_tree_cache``'s path) evicts nothing. Expected:
  ``pool_used`` at the resume or resize whose allocation needed the tree's evictable pages (the
  eviction bound, ``SglangRadixBackend._evict_tree``).
- ``dedup-keeps-own-copy``: the tree's ``checkpoint_into_tree`` on a chunk whose pages the tree already
  holds (a prompt ending on a page boundary computes its last page again; a retracted request
  recomputes its published prompt) keeps the request's own copy: its row is not rebound onto the
  tree's pages, its copy not freed, its lock not moved. Counts stay equal (the copy is the request's own
  page, the tree keeps its own), so only slot identity sees it. Expected: ``slots`` at the resume where
  another open request holds the tree's page (the reference keeps the two blocks in one slot, SGLang in
  two); where no open request holds it the change is a renaming (invisible by design). The step is
  checked: the saved trace is replayed with the plant in place, recording where it fired (``firing``).
- ``mapping-left-stale`` (issue 33; also run on the ``sglang`` backend by tests/test_sglang.py): SGLang's
  SWA allocator frees SWA slots but leaves ``full_to_swa_index_mapping`` pointing at them (its
  ``clear_full_to_swa_mapping`` does nothing; a release without it: ``free_swa`` restores the entries it
  cleared). Expected: ``mapping`` (:mod:`.mapping`) at the step where it fired (recorded, ``firing``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

PLANTS = ("radix-cut-one-page-late", "match-hands-next-page", "lock-takes-nothing", "swa-free-noop",
          "lock-never-released", "close-leaks-a-page", "eviction-frees-nothing", "dedup-keeps-own-copy",
          "mapping-left-stale")
#: How often each plant's change took effect in the last campaign run under it (a plant that records it).
FIRED: dict[str, int] = {}


def plant(name: str) -> Callable[[], None]:
    """Plant ``name`` (one of :data:`PLANTS`) in this process; returns what undoes it."""
    return _plant(name)


def _plant_mapping_left_stale(name: str) -> Callable[[], None]:
    """SGLang's SWA frees leave the full-to-SWA mapping pointing at the freed SWA slots; counts in
    :data:`FIRED` each call that left a live entry stale."""
    import torch

    from .backend import import_sglang

    allocator = import_sglang()["Allocator"]
    FIRED[name] = 0
    if hasattr(allocator, "clear_full_to_swa_mapping"):
        original = allocator.clear_full_to_swa_mapping

        def planted(self: Any, full_indices: Any) -> None:
            if full_indices.numel() and bool((self.full_to_swa_index_mapping[full_indices.to(torch.int64)] > 0).any()):
                FIRED[name] += 1  # the entries stay: the mapping keeps pointing at SWA slots now freed

        allocator.clear_full_to_swa_mapping = planted
        return lambda: setattr(allocator, "clear_full_to_swa_mapping", original)
    original = allocator.free_swa

    def planted_free(self: Any, free_index: Any) -> None:
        before = self.full_to_swa_index_mapping.clone()
        original(self, free_index)
        cleared = (before > 0) & (self.full_to_swa_index_mapping == 0)
        if bool(cleared.any()):
            FIRED[name] += 1
            self.full_to_swa_index_mapping[cleared] = before[cleared]

    allocator.free_swa = planted_free
    return lambda: setattr(allocator, "free_swa", original)


def _plant(name: str) -> Callable[[], None]:
    """Plant ``name``; returns what undoes it."""
    if name == "mapping-left-stale":
        return _plant_mapping_left_stale(name)
    import sglang.srt.mem_cache.common as common
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    if name == "radix-cut-one-page-late":
        original = common.free_swa_out_of_window_slots

        def planted(req: Any, pre_len: int, **kw: Any) -> None:
            if kw.get("supports_prefix_sharing", True):
                kw["sliding_window_size"] = max(kw["sliding_window_size"] - kw["page_size"], 0)
                kw["supports_prefix_sharing"] = False
            original(req, pre_len, **kw)

        common.free_swa_out_of_window_slots = planted
        return lambda: setattr(common, "free_swa_out_of_window_slots", original)
    if name == "match-hands-next-page":
        original = UnifiedRadixCache.prefix_device_indices

        def planted(self: Any, req: Any) -> Any:
            return original(self, req) + self.page_size

        UnifiedRadixCache.prefix_device_indices = planted
        return lambda: setattr(UnifiedRadixCache, "prefix_device_indices", original)
    if name == "lock-takes-nothing":
        original = UnifiedRadixCache.lock
        UnifiedRadixCache.lock = lambda self, node_id, skip_lock_components=(): None
        return lambda: setattr(UnifiedRadixCache, "lock", original)
    if name == "swa-free-noop":  # issue 28: SGLang's sliding-window free replaced by a no-op
        original = common.free_swa_out_of_window_slots
        common.free_swa_out_of_window_slots = lambda *args, **kwargs: None
        return lambda: setattr(common, "free_swa_out_of_window_slots", original)
    if name == "lock-never-released":  # the tree's dec_lock_ref does nothing: an unlocked prefix stays locked
        original = UnifiedRadixCache.dec_lock_ref
        UnifiedRadixCache.dec_lock_ref = lambda self, node_id, params, skip_swa=False: _loaded_dec_result()
        return lambda: setattr(UnifiedRadixCache, "dec_lock_ref", original)
    if name == "close-leaks-a-page":  # a finished request's row is given back one page short
        from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache

        originals = BasePrefixCache.free_kv_row, UnifiedRadixCache.checkpoint, UnifiedRadixCache.on_release
        closing = [False]  # between a finished request's checkpoint (release_kv_cache's) and its on_release

        def planted_checkpoint(self: Any, req: Any, **kwargs: Any) -> None:
            closing[0] = req.finished_reason is not None
            originals[1](self, req, **kwargs)

        def planted_release(self: Any, req: Any, **kwargs: Any) -> None:
            closing[0] = False
            originals[2](self, req, **kwargs)

        def planted_free(self: Any, kv: Any, ranges: list) -> None:
            if closing[0] and ranges:
                start, end = ranges[-1]
                end = max(start, end - self.page_size)  # the last page stays allocated: no pool has it back
                ranges = [*ranges[:-1], (start, end)] if end > start else ranges[:-1]
                closing[0] = False  # one page per close
            originals[0](self, kv, ranges)

        BasePrefixCache.free_kv_row = planted_free
        UnifiedRadixCache.checkpoint = planted_checkpoint
        UnifiedRadixCache.on_release = planted_release

        def undo() -> None:
            BasePrefixCache.free_kv_row = originals[0]
            UnifiedRadixCache.checkpoint, UnifiedRadixCache.on_release = originals[1], originals[2]

        return undo
    if name == "eviction-frees-nothing":  # issue 28: tree eviction before an allocation frees nothing
        from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator

        original = SWATokenToKVPoolAllocator.evict_to_free_tokens
        SWATokenToKVPoolAllocator.evict_to_free_tokens = lambda self, tree_cache, num_tokens: None
        return lambda: setattr(SWATokenToKVPoolAllocator, "evict_to_free_tokens", original)
    if name == "dedup-keeps-own-copy":  # slot identity only: which pages a request holds, not how many
        from sglang.srt.mem_cache.radix_cache import RadixKey

        original = UnifiedRadixCache.checkpoint_into_tree
        FIRED[name] = 0

        def planted(self: Any, req: Any, *, up_to: int, **kwargs: Any) -> None:
            start, end = req.kv.cache_protected_len, up_to // self.page_size * self.page_size
            if not req.finished() and start < end:
                key = RadixKey(req.full_untruncated_fill_ids[:end], req.extra_key, cache_salt=req.cache_salt)
                if self.tree_core.match_full_device_prefix(key)[0] >= end:
                    # Every page past the request's tree-owned prefix is in the tree already: the insert
                    # would only dedup (free the request's pages, rebind its row onto the tree's, move its
                    # lock). Planted: the request keeps its own copy, as its own pages (not tree-owned).
                    FIRED[name] += 1
                    return
            original(self, req, up_to=up_to, **kwargs)

        UnifiedRadixCache.checkpoint_into_tree = planted
        return lambda: setattr(UnifiedRadixCache, "checkpoint_into_tree", original)
    raise SystemExit(f"--plant {name!r}: one of {', '.join(PLANTS)}")


def _loaded_dec_result() -> Any:
    from sglang.srt.mem_cache.base_prefix_cache import DecLockRefResult

    return DecLockRefResult()


def _campaign(examples: int, out: str) -> tuple[int, dict]:
    """The ci campaign (seed 0), as ``swafloor fuzz --json`` reports it: (exit code, report)."""
    from ...runner import run_campaign

    result = run_campaign("sglang-radix", profile="ci", examples=examples, seed=0, out_dir=out)
    report = json.loads(json.dumps(result.to_dict(), default=str))
    return (0 if result.result == "pass" else 1), report  # swafloor fuzz's exit code (too-many-retired: 1)


def _replay(path: str) -> dict:
    from . import radix as sglang_radix
    from ...replay import replay
    from ...trace import load

    trace = load(path)
    before = dict(sglang_radix.STATS)
    found = replay(trace)
    d = found.divergence
    return {"file": path, "backend": trace.backend, "expect": trace.expect, "steps": len(trace.steps),
            "steps_run": found.steps_run, "divergence": None if d is None else d.to_dict(), "found": trace.found,
            "sglang": {k: sglang_radix.STATS[k] - before[k] for k in before}}


def fired_at(name: str, path: str, cls: Any = None) -> dict:
    """:func:`_fired_at` on the backend class ``cls`` (default: ``sglang-radix``'s)."""
    return _fired_at(name, path, cls)


def _fired_at(name: str, path: str, cls: Any = None) -> dict:
    """Replay the trace a campaign under plant ``name`` saved, the plant still in place, noting at which
    steps its change took effect (:data:`FIRED` grew during the backend's call): the step indices, and
    the divergence the replay sees (its step must be one of them for the plant to count as caught)."""
    from . import radix as sglang_radix
    from ...replay import replay
    from ...trace import load

    trace = load(path)
    calls: list[tuple[str, str, int]] = []
    cls = cls or sglang_radix.SglangRadixBackend
    originals = {op: getattr(cls, op) for op in ("create", "resume", "resize", "commit", "suspend", "close")}

    def watched(op: str) -> Callable[..., Any]:
        def call(self: Any, request_id: Any, *args: Any, **kwargs: Any) -> Any:
            before = FIRED[name]
            try:
                return originals[op](self, request_id, *args, **kwargs)
            finally:
                calls.append((op, str(request_id), FIRED[name] - before))
        return call

    for op in originals:
        setattr(cls, op, watched(op))
    try:
        found = replay(trace)
    finally:
        for op, fn in originals.items():
            setattr(cls, op, fn)
    steps = [(s.op.value, str(s.request)) for s in trace.steps]
    aligned = [(op, rid) for op, rid, _ in calls] == steps[: len(calls)]  # one backend call per step, in order
    d = found.divergence
    return {"aligned": aligned, "fired_at": [i for i, (_, _, n) in enumerate(calls) if n > 0],
            "divergence": None if d is None else d.to_dict()}


def run(examples: int, out: str, plants: list[str], replays: list[str] = ()) -> dict:
    from . import radix as sglang_radix

    sglang_radix.import_radix()
    replayed = [_replay(path) for path in replays]
    before = dict(sglang_radix.STATS)
    code, clean = _campaign(examples, out)
    counts = {k: sglang_radix.STATS[k] - before[k] for k in before}
    result: dict[str, Any] = {"clean": {"exit": code, **clean}, "sglang_hits": counts, "plants": {},
                              "replays": replayed}
    for name in plants:
        undo = _plant(name)
        try:
            code, report = _campaign(examples, out)
        finally:
            undo()
        result["plants"][name] = {"exit": code, **report}
        if name in FIRED and report.get("trace_file"):
            result["plants"][name]["fired"] = FIRED[name]
            undo = _plant(name)
            try:
                result["plants"][name]["firing"] = _fired_at(name, report["trace_file"])
            finally:
                undo()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.engines.sglang.radix_check")
    parser.add_argument("--examples", type=int, default=120)
    parser.add_argument("--out", required=True)
    parser.add_argument("--plant", action="append", choices=PLANTS, default=None)
    parser.add_argument("--replay", nargs="*", default=[])
    args = parser.parse_args(argv)
    result = run(args.examples, args.out, list(PLANTS) if args.plant is None else args.plant, args.replay)
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
