"""vLLM's own prefix-cache hit function against the model's longest valid hit (issue 23).

Independent of a full ``vllm-prefix`` backend: vLLM's ``KVCacheManager`` is built with prefix caching
on, one KV-cache group per life cycle (each with its own block size), ``use_eagle`` on or off, and
its coordinator's ``find_longest_cache_hit`` is called on a prompt whose cached blocks follow a
generated pattern. The pattern is the input: the pool's ``get_cached_block`` is answered from it
(block hashes carry their index; a group whose block size is k times the hash block size looks up
the hash at its block's last hash boundary, as vLLM does), so which blocks are cached is set here
and everything that turns them into a hit length (the window rule, EAGLE's pop, the alignment, the
fixed point over groups) is vLLM's. The length it returns is compared exactly with
:func:`swafloor.reference.cache_hit.longest_hit`:

- ``lost``: vLLM's hit is shorter than the longest valid one (a recompute, not a correctness bug);
- ``bug``: longer than the longest valid one (the hit is not valid: a null block in a window, a
  hit off the alignment, or the drafter's block reused);
- ``equal``.

``python -m swafloor.fuzz.engines.vllm.hit_diff [--cases N] [--seed S] [--json]`` runs it in the current
interpreter (the pinned vLLM venv, or the venv's python with a release folder first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from typing import Any, Sequence

from swafloor.reference import cache_hit

from . import compat
from ...protocol import Unsupported

__all__ = ["HitCase", "vllm_hit", "classify", "generate", "run", "main"]

HitCase = dict  # {"ts": [...], "windows": [...], "patterns": [[bool]...], "eagle": bool, "M": int}

_POOL_BLOCKS = 256
_PER_GROUP = 48  # distinct pool blocks handed out as "cached" per group


def _release() -> tuple[dict[str, Any], Any]:
    v = compat.import_vllm()
    return v, compat.release_of(v)


def _manager(v: dict[str, Any], release: Any, ts: Sequence[int], windows: Sequence[int | None], eagle: bool) -> Any:
    groups = []
    for i, (t, window) in enumerate(zip(ts, windows)):
        spec = release._spec(v["SlidingWindowSpec"] if window is not None else v["FullAttentionSpec"], t, window)
        groups.append(v["KVCacheGroupSpec"](**compat._arguments(
            v["KVCacheGroupSpec"], dict(layer_names=[f"layer.{i}"], kv_cache_spec=spec), "KVCacheGroupSpec")))
    config = v["KVCacheConfig"](**compat._arguments(v["KVCacheConfig"], dict(
        num_blocks=_POOL_BLOCKS, kv_cache_tensors=[], tensors={}, kv_cache_groups=groups), "KVCacheConfig"))
    cls = v["KVCacheManager"]
    params = compat.parameters(cls.__init__)
    if "use_eagle" not in params:
        raise Unsupported(f"vLLM {release.version}'s KVCacheManager has no use_eagle")
    known = dict(kv_cache_config=config, max_model_len=4096, enable_caching=True, use_eagle=eagle,
                 scheduler_block_size=math.lcm(*ts), hash_block_size=min(ts), max_in_flight_tokens=64,
                 max_num_batched_tokens=64, caching_hash_algo="builtin")
    try:
        return cls(**compat._arguments(cls.__init__, known, "KVCacheManager"))
    except (AssertionError, ValueError, NotImplementedError) as exc:
        raise Unsupported(f"vLLM {release.version}'s KVCacheManager refuses this config: "
                          f"{type(exc).__name__}: {str(exc)[:160]}") from None


def vllm_hit(case: HitCase) -> int:
    """The hit length vLLM's coordinator returns for ``case`` (raises :class:`Unsupported` where the
    release cannot be driven this way)."""
    v, release = _release()
    ts, windows, patterns, eagle, M = case["ts"], case["windows"], case["patterns"], case["eagle"], case["M"]
    hb = min(ts)
    if any(t % hb for t in ts):
        raise ValueError(f"block sizes {ts}: the smallest must divide the others")
    manager = _manager(v, release, ts, windows, eagle)
    coordinator = getattr(manager, "coordinator", None)
    if coordinator is None or not hasattr(coordinator, "find_longest_cache_hit"):
        raise Unsupported(f"vLLM {release.version} has no coordinator find_longest_cache_hit")
    pool = manager.block_pool
    blocks = pool.blocks

    def get_cached_block(block_hash: Any, kv_cache_group_ids: list[int]) -> Any:
        index = int.from_bytes(bytes(block_hash)[-8:], "big")  # the last hash-block index in it (older releases concatenate)
        found = []
        for g in kv_cache_group_ids:
            k = ts[g] // hb
            if (index + 1) % k:
                return None  # not a boundary of this group's blocks: never asked by a correct lookup
            j = (index + 1) // k - 1
            if j >= len(patterns[g]) or not patterns[g][j]:
                return None
            found.append(blocks[1 + g * _PER_GROUP + j])
        return found

    pool.get_cached_block = get_cached_block
    n_hash = (M + 1) // hb  # the prompt's whole hash blocks: a prompt of M + 1 tokens
    hashes = [i.to_bytes(8, "big") for i in range(n_hash)]
    result = coordinator.find_longest_cache_hit(hashes, M)
    if not isinstance(result, tuple) or len(result) < 2:
        raise Unsupported(f"vLLM {release.version}'s find_longest_cache_hit returns {type(result).__name__}")
    return int(result[1])


def model_hit(case: HitCase, reach: str = "reusable") -> int:
    """The model's longest valid hit. ``reach``: how far EAGLE's matched-then-dropped block may reach:
    ``reusable`` (within the ``M`` reusable tokens, the prompt less its last token) or ``prompt``
    (within the prompt's whole hash blocks, the last token included)."""
    M = case["M"]
    hb = min(case["ts"])
    eagle_reach = M if reach == "reusable" else (M + 1) // hb * hb
    return cache_hit.longest_hit(case["patterns"], case["ts"], case["windows"], case["eagle"], M, eagle_reach)


def classify(vllm: int, model: int) -> str:
    return "equal" if vllm == model else ("lost" if vllm < model else "bug")


REACHES = ("reusable", "prompt")


def divergence_class(vllm: int, wants: dict[str, int], reach: str = "reusable") -> str:
    """``equal`` (the model under ``reach``), ``other-reach`` (equal to the model under the other
    EAGLE reach only: a semantics choice, not a wrong hit), else ``lost`` (below both) or ``bug``
    (above the longest valid hit under either reach)."""
    if vllm == wants[reach]:
        return "equal"
    if vllm in wants.values():
        return "other-reach"
    if vllm < min(wants.values()):
        return "lost"
    return "bug"


_SHAPES = (
    ((2,), (5,)), ((4,), (9,)), ((2,), (None,)), ((4, 2), (None, 5)), ((8, 2), (None, 7)), ((4, 2), (None, 3)),
    ((2, 4), (5, None)), ((4, 4), (None, 6)), ((2, 2), (3, 8)), ((4, 2), (9, 5)), ((8, 4), (None, 13)),
)


def generate(rng: random.Random) -> HitCase:
    """A case: a hybrid shape (full attention first, as vLLM orders groups), a prompt of up to 48
    tokens, cached blocks drawn as runs (a common prefix, a hole, a tail) per group."""
    ts, windows = rng.choice(_SHAPES)
    tokens = rng.randrange(8, 49)
    patterns = []
    for t in ts:
        n = tokens // t
        kind = rng.random()
        if kind < 0.3:
            cached = [True] * n
        elif kind < 0.6:
            cut = rng.randrange(0, n + 1)
            cached = [b < cut for b in range(n)]
        else:
            cached = [rng.random() < 0.75 for _ in range(n)]
        patterns.append(cached)
    return {"ts": list(ts), "windows": list(windows), "patterns": patterns, "eagle": rng.random() < 0.5,
            "M": tokens - 1}


def run(cases: int = 300, seed: int = 0, reach: str = "reusable") -> dict[str, Any]:
    """``cases`` generated cases: counts per class, the first case of each (class, shape, eagle)."""
    rng = random.Random(seed)
    counts = {"equal": 0, "other-reach": 0, "lost": 0, "bug": 0, "unsupported": 0, "error": 0}
    examples: dict[str, dict[str, Any]] = {}
    reasons: dict[str, int] = {}
    for _ in range(cases):
        case = generate(rng)
        try:
            got = vllm_hit(case)
        except Unsupported as exc:
            counts["unsupported"] += 1
            reasons[str(exc)[:200]] = reasons.get(str(exc)[:200], 0) + 1
            continue
        except Exception as exc:  # noqa: BLE001 - an exception inside vLLM is a finding with its input
            counts["error"] += 1
            key = f"error:{type(exc).__name__}"
            examples.setdefault(key, {"case": case, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            continue
        wants = {r: model_hit(case, r) for r in REACHES}
        verdict = divergence_class(got, wants, reach)
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict != "equal":
            key = f"{verdict}:{case['ts']}:{case['windows']}:eagle={case['eagle']}"
            if key not in examples:
                examples[key] = {"case": case, "vllm": got, "model": wants[reach], "models": wants, "class": verdict}
    return {"version": compat.version(), "cases": cases, "seed": seed, "counts": counts, "examples": examples,
            "unsupported": reasons}


def trace(example: dict[str, Any], verdict: str, why: str) -> dict[str, Any]:
    """A divergence class as a self-checking JSON trace (``tests/regressions/hits/``)."""
    return {"kind": "vllm-hit", "release": compat.version(), "class": example.get("class"), "case": example["case"],
            "vllm": example["vllm"], "models": example["models"], "verdict": verdict, "why": why}


def replay(saved: dict[str, Any]) -> dict[str, Any]:
    """Run a saved trace again here: vLLM's hit (when this interpreter's vLLM is the trace's release)
    and the model's under each reach."""
    out: dict[str, Any] = {"models": {r: model_hit(saved["case"], r) for r in REACHES}}
    if compat.version() == saved["release"]:
        out["vllm"] = vllm_hit(saved["case"])
        out["class"] = divergence_class(out["vllm"], out["models"])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swafloor.fuzz.engines.vllm.hit_diff")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--replay", metavar="FILE", help="replay one saved trace and print what it gives now")
    parser.add_argument("--reach", choices=REACHES, default="reusable",
                        help="EAGLE's dropped block within the reusable tokens (default) or the whole prompt")
    args = parser.parse_args(argv)
    if args.cases < 1:
        print(f"--cases={args.cases}: must be >= 1", file=sys.stderr)
        return 2
    if args.replay:
        try:
            with open(args.replay, encoding="utf-8") as f:
                saved = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"--replay={args.replay}: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(replay(saved)))
        return 0
    out = run(args.cases, args.seed, args.reach)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"vLLM {out['version']}: {out['counts']}")
        for key, ex in out["examples"].items():
            print(f"  {key}: {json.dumps(ex)}")
        for reason, n in out["unsupported"].items():
            print(f"  unsupported x{n}: {reason}")
    c = out["counts"]
    return 1 if c["bug"] or c["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
