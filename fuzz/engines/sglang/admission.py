"""``sglang-admission``: SGLang's own admission path against the reference's rule and swafloor's model of
SGLang's gate (issue 32).

What is asked: a lone waiting request (``P`` prompt tokens, at most ``O`` output tokens, prefilled in
chunks of ``C``, or whole with chunked prefill off: ``C`` None) on SGLang's hybrid SWA layout (one
sliding window ``W >= 2``, SGLang's exclusive ``sliding_window_size = W - 1``, beside a full-attention
pool), page size ``t``, the SWA pool ``N`` pages, nothing running, nothing cached. SGLang's own objects
are built on the CPU, every one of them SGLang's: its ``SWAKVPool`` and ``SWATokenToKVPoolAllocator``
(``size_swa = N * t`` tokens; the full pool ``FULL_TOKENS``, which never binds), its ``ReqToTokenPool``,
its ``UnifiedRadixCache`` with FULL and SWA components (the tree a hybrid SWA model gets, its cache on),
its ``Req`` with ``SamplingParams(max_new_tokens=O)`` (its own ``init_next_round_input(tree)``, the
scheduler's call before admission: fill ids and the prefix match on the empty tree), and its ``PrefillAdder`` (``rem_chunk_tokens = C``, ``rem_input_tokens`` the default
``max_prefill_tokens``, no running batch: ``running_batch=None``, which PrefillAdder takes for an idle
scheduler). Its process-wide configuration is SGLang's default ``ServerArgs(model_path="dummy",
device="cpu")`` published with SGLang's ``runtime_context.publish`` (what SGLang's own CPU tests do). Then
``add_one_req(req, has_chunked_req=False, truncation_align_size=None)``, the scheduler's call; SGLang
admits when the request is in the adder's ``can_run_list``. Nothing of the gate is emulated: the
reservation (``SWAPrefillBudget.check_prefill``) and the chunk it grants are SGLang's. The adapter sets
only inputs (sizes, the request, the chunk); no stand-in object is on this path.

The observation is SGLang's admission threshold: the least ``N`` at which it admits, found by bisection
over ``1..bound`` (an SWA pool of 0 pages is not a configuration; a fresh set of objects each pool asked;
the bound is above every charge compared), its monotonicity checked at the threshold's neighbours, pool
1, the bound and around each charge compared (a contradiction is the class ``non-monotone``; between
those pools it is assumed, a stated bound of the check). Compared with:

- (b) the model of SGLang's gate, ``peers.sglang_prefill_budget_blocks`` (0.5.21-0.5.23: the lesser of
  the whole route, ``cdiv(needed + 1, t)`` with ``needed`` = ``peers.sglang_swa_kv_tokens`` of the
  page-rounded prompt, and, chunked, the shrunk-chunk route ``cdiv(min(O, W - 1) + t, t) + 1``):
  EXACTLY. A difference is ``model-above`` or ``model-below``, with its input and a replay.
- (a) the reference's rule: ``admission.swa_admission_blocks(t, W, 0, P, C, 0)`` (the chunk ``P``
  unchunked; no drafts). Above it, SGLang refuses at ``threshold - 1``; the lone run of ``O`` output
  tokens is run there on the reference manager (``admission.lone_run``): where it completes, the class
  ``over-charges`` (the refutation of ``sglang-prefill-budget-admits-at-chunk-floor``, found in SGLang
  itself), else ``over-charges-run-incomplete`` (the rule's fault). Below it: ``admits-shrunk-chunk``
  where SGLang admits only by cutting the chunk (the threshold is the shrunk route's), else
  ``admits-below-rule`` (SGLang charges the run's own window ``min(P + O, W - 1)``, the rule a window
  whatever ``O`` is); each records whether the reference's lone run completes at SGLang's threshold (with
  the chunk SGLang granted there).

An exception raised inside SGLang's code is the class ``error`` with its input. A release without the
pieces is :class:`~swafloor.fuzz.protocol.Unsupported` here, naming what it lacks: a ``UnifiedRadixCache``
with the tree API of :mod:`.radix` (0.5.22 on; 0.5.21 has the prefill budget but the older tree API), an
allocator's ``create_prefill_budget`` (0.5.20 and before keep the gate inside
``PrefillAdder._swa_budget_for_req``: ``peers.sglang_admission_blocks`` for 0.5.13.post1-0.5.15.post1, not
driven) or ``runtime_context.publish``.

``python -m swafloor.fuzz.engines.sglang.admission [--examples N] [--seed S] [--json] [--plant extra-page]``
runs it in the current interpreter (the SGLang venv); ``--replay FILE...`` replays saved traces.
``--plant extra-page`` patches SGLang's reservation (``SWAPrefillBudget.swa_tokens``) to ask one page
more, for the test that the comparison catches it.
"""

from __future__ import annotations

import contextlib
import json
import time
from array import array
from pathlib import Path
from typing import Any, Sequence

from swafloor.reference import AttentionLayer, Config, admission, peers

from ..common import brief
from ..gate import differential_main, drawn_cases, least_admitting, lone_run_completes
from ...protocol import Capabilities, Part, Unsupported, factory

__all__ = ["Case", "generate", "sglang_threshold", "model_charge", "rule_charge", "classify", "run", "replay",
           "differential", "sglang_admission", "main", "CLASSES", "PLANTS"]

Case = dict  # {"t": int, "W": int, "P": int, "C": int | None, "O": int}

#: Each class the comparison sorts a case into, and its verdict (set here, once per class).
CLASSES = {
    "equal": "SGLang's threshold equals the model of its gate and the rule's charge",
    "model-above": "ours: swafloor's model of SGLang's gate (peers.sglang_prefill_budget_blocks) charges more than "
                   "SGLang needs to admit",
    "model-below": "ours: swafloor's model of SGLang's gate (peers.sglang_prefill_budget_blocks) charges less than "
                   "SGLang needs to admit",
    "over-charges": "engine over-charge (a semantics difference, no upstream issue for it): SGLang refuses a lone "
                    "request at a pool where the rule admits it and its whole run completes on the reference "
                    "manager; its reservation max(min(P', C) - w, 0) + min(P' + O, w) + t (w = W - 1, P' the "
                    "page-rounded prompt) must be strictly below the free SWA tokens, one page more than the chunk "
                    "floor where the span fills its pages (the theorem sglang-prefill-budget-admits-at-chunk-floor, "
                    "refuted, found in SGLang itself)",
    "minimum-above-rule": "semantics difference: SGLang's start-up refuses an SWA pool of N pages unless its window "
                          "and a page are strictly below it (validate_swa_pool_size: W - 1 + t < N * t), one page "
                          "above the rule's chunk floor where t divides W - 1; its gate admits at that least pool",
    "over-charges-run-incomplete": "ours: SGLang refuses a pool where the rule admits the run, but the reference's "
                                   "lone run does not complete there (the rule would be wrong)",
    "admits-below-rule": "semantics difference: SGLang charges the pass it admits (the chunk past its window, the "
                         "run's own window min(P' + O, W - 1) and a page), where the rule charges the largest step's "
                         "floor at a full window, whatever O is and wherever the step falls: a run shorter than its "
                         "window, or a prompt computed with no window behind it, is admitted below the rule; SGLang "
                         "re-sizes later chunks to the SWA tokens left (add_chunked_req), and its least pool holds the "
                         "decode step's floor",
    "admits-shrunk-chunk": "semantics difference: where SGLang's reservation never fits its SWA pool, it cuts the "
                           "chunk to the page-floored SWA tokens above an empty pass's headroom (min(O, W - 1) + t) "
                           "and admits the request with that smaller chunk, below the rule's floor for the chunk C "
                           "asked (the rule's floor is per chunk; SGLang chooses the chunk)",
    "non-monotone": "engine: SGLang refuses at a pool above one where it admits",
    "error": "engine: an exception inside SGLang's admission path (input saved)",
}

#: The full-attention pool's tokens: never the binding side (P + O + t is far below it).
FULL_TOKENS = 1 << 14
MAX_CONTEXT = 1 << 12

_s: dict[str, Any] = {}
_plant: list[str] = []


# ----------------------------------------------------------------------------- SGLang's side
def load() -> dict[str, Any]:
    """SGLang's parts (the allocator and tree of :mod:`.radix`), its ``PrefillAdder``, and its default configuration published (once). Unsupported where the release
    has no separate prefill budget or no runtime context to publish."""
    if _s:
        return _s
    from .radix import import_radix

    parts = import_radix()
    import importlib

    version = parts.get("version", "?")
    if parts.get("radix_api") != "tree":
        raise Unsupported(f"SGLang {version}: no UnifiedRadixCache with the tree API (sglang-admission drives 0.5.22 on)")
    if not callable(getattr(parts["Allocator"], "create_prefill_budget", None)):
        raise Unsupported(f"SGLang {version}'s SWATokenToKVPoolAllocator has no create_prefill_budget (its gate is "
                          "PrefillAdder._swa_budget_for_req, not driven)")
    try:
        context = importlib.import_module("sglang.srt.runtime_context")
        policy = importlib.import_module("sglang.srt.managers.schedule_policy")
        server_args = importlib.import_module("sglang.srt.server_args")
    except ImportError as exc:
        raise Unsupported(f"SGLang {version}'s admission path is not importable here ({brief(exc)})") from exc
    for owner, name in ((context, "publish"), (context, "reset_context"), (policy, "PrefillAdder")):
        if not callable(getattr(owner, name, None)):
            raise Unsupported(f"SGLang {version} has no {owner.__name__}.{name}")
    args = server_args.ServerArgs(model_path="dummy", device="cpu")
    context.reset_context()
    ranks = getattr(context, "SpawnRanks", None)
    context.publish(args, role="scheduler", **({"ranks": ranks(world_rank=0, dp_rank=None)} if ranks else {}))
    budget = importlib.import_module("sglang.srt.mem_cache.prefill_budget")
    _s.update(parts, PrefillAdder=policy.PrefillAdder, args=args,
              budget=budget, version=version)
    return _s


def version() -> str:
    from .compat import version as v

    return v()


def _build(case: Case, pages: int) -> tuple[Any, Any]:
    """SGLang's allocator (SWA pool ``pages`` pages), row pool and tree for ``case``."""
    s = _s
    from .compat import build

    t, torch = case["t"], s["torch"]
    common = dict(size=FULL_TOKENS, size_swa=pages * t, page_size=t, dtype=torch.float32, device="cpu")
    pool = build(s["SWAKVPool"], dict(common, head_num=1, head_dim=1, swa_attention_layer_ids=[0],
                                      full_attention_layer_ids=[1], enable_kvcache_transpose=False), "SWAKVPool")
    allocator = build(s["Allocator"], dict(common, kvcache=pool, need_sort=False), "SWATokenToKVPoolAllocator")
    rows = build(s["ReqToTokenPool"], dict(size=2, max_context_len=MAX_CONTEXT, device="cpu",
                                           enable_memory_saver=False), "ReqToTokenPool")
    params = s["CacheInitParams"](disable=False, req_to_token_pool=rows, token_to_kv_pool_allocator=allocator,
                                  page_size=t, sliding_window_size=case["W"] - 1,
                                  tree_components=(s["ComponentType"].FULL, s["ComponentType"].SWA))
    return allocator, s["UnifiedRadixCache"](params)


def sglang_admits(case: Case, pages: int) -> tuple[bool, int | None]:
    """Whether SGLang's ``PrefillAdder`` admits the case's lone request with an SWA pool of ``pages``
    pages, and the chunk it grants (the tokens this pass extends), None when it refuses."""
    s = load()
    allocator, tree = _build(case, pages)
    req = s["Req"]("r0", "", array("q", range(1, case["P"] + 1)), s["SamplingParams"](max_new_tokens=case["O"]))
    req.init_next_round_input(tree)  # the scheduler's call before add_one_req: fill ids, prefix match
    adder = s["PrefillAdder"](case["t"], tree, allocator, None, 1.0, rem_input_tokens=s["args"].max_prefill_tokens,
                              rem_chunk_tokens=case["C"], waiting_queue_len=1)
    adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
    if req not in adder.can_run_list:
        return False, None
    return True, req.extend_end - req.prefix_len


def sglang_threshold(case: Case, probes: Sequence[int] = ()) -> dict[str, Any]:
    """The least SWA pool (pages, ``1..bound``) at which SGLang admits (:func:`~..gate.least_admitting`: by
    bisection, monotonicity checked at the pools that matter), and the chunk it granted at each pool asked."""
    chunks: dict[int, int | None] = {}

    def admits(n: int) -> bool:
        ok, chunks[n] = sglang_admits(case, n)
        return ok

    seen = least_admitting(admits, 1, max(2, *probes) + 2, probes)
    threshold = seen["threshold"]
    return {**seen, "chunk": chunks.get(threshold) if threshold else None, "chunks": chunks}


# ----------------------------------------------------------------------------- swafloor's side
def _chunk(case: Case) -> int:
    return case["P"] if case["C"] is None else case["C"]


def model_parts(case: Case) -> tuple[int, int]:
    """The two routes of the model of SGLang's gate (``peers.sglang_prefill_budget_parts``)."""
    return peers.sglang_prefill_budget_parts(case["t"], case["W"], case["P"], _chunk(case), case["O"])


def model_charge(case: Case) -> int:
    """The model of SGLang's gate (``peers.sglang_prefill_budget_blocks``)."""
    return peers.sglang_prefill_budget_blocks(case["t"], case["W"], case["P"], _chunk(case), case["O"],
                                              case["C"] is not None)


def rule_charge(case: Case, chunk: int | None = None) -> int:
    """The reference's rule for the case's SWA life cycle: the largest step's floor (no sinks, no drafts)."""
    return admission.swa_admission_blocks(case["t"], case["W"], 0, case["P"], chunk or _chunk(case), 0)


def reference_completes(case: Case, pool: int, chunk: int | None = None) -> bool:
    """The lone run (``O`` output tokens, chunk ``chunk`` or the case's) completes on the reference
    manager with one SWA life cycle at ``pool`` slots."""
    return lone_run_completes(lambda: Config(tokens_per_block=case["t"], layers=[AttentionLayer(window=case["W"])],
                                             slots=(pool,)), case["P"], case["O"], chunk or _chunk(case), 0)


def classify(case: Case) -> dict[str, Any]:
    """Ask SGLang and compare; the record of one case (its ``classes``: every class it falls in). The model
    is compared at every pool; the rule at the pools SGLang's start-up accepts (at least
    ``peers.sglang_min_swa_pages``), the only ones a served SGLang asks its gate at."""
    model, rule = model_charge(case), rule_charge(case)
    least = peers.sglang_min_swa_pages(case["t"], case["W"])
    record: dict[str, Any] = {"case": case, "model": model, "rule": rule, "sglang_minimum": least}
    try:
        seen = sglang_threshold(case, probes=(model, rule, least))
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - inside SGLang's admission path: a failure, with its input
        return {**record, "sglang": None, "classes": ["error"], "error": brief(exc)}
    v = seen["threshold"]
    record.update(sglang=v, bound=seen["bound"], chunk=seen["chunk"])
    classes = []
    if seen["non_monotone"] is not None:
        classes.append("non-monotone")
        record["refused_at"] = seen["non_monotone"]
    if v is None or v != model:
        classes.append("model-above" if v is not None and model > v else "model-below")
    if v is not None and v > max(rule, least):
        completes = reference_completes(case, v - 1)
        record["reference_completes_at"] = v - 1 if completes else None
        classes.append("over-charges" if completes else "over-charges-run-incomplete")
    elif v is not None and least > rule:
        classes.append("minimum-above-rule")
    elif v is not None and max(v, least) < rule:
        served = max(v, least)
        chunk = seen["chunks"].get(served)
        record.update(served=served, served_chunk=chunk)
        record["reference_completes_at"] = served if reference_completes(case, served, chunk) else None
        whole, _ = model_parts(case)
        shrunk = case["C"] is not None and chunk is not None and chunk < min(case["C"], -(-case["P"] // case["t"]) * case["t"])
        classes.append("admits-shrunk-chunk" if shrunk and served < whole else "admits-below-rule")
    record["classes"] = classes or ["equal"]
    return record


# ----------------------------------------------------------------------------- generation (Hypothesis)
def _cases():
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        t = draw(st.sampled_from((1, 2, 4, 8, 16)))
        W = draw(st.one_of(st.integers(2, 6), st.integers(2, 80)))
        P = draw(st.integers(1, 160))
        # SGLang's start-up requires a chunk divisible by the page size (chunked_prefill_size % page_size)
        C = draw(st.one_of(st.none(), st.integers(1, 4).map(lambda m: m * t), st.integers(1, 96 // t).map(lambda m: m * t)))
        O = draw(st.sampled_from((1, 2, 3, 8, 64)))
        return {"t": t, "W": W, "P": P, "C": C, "O": O}

    return case()


def generate(examples: int, seed: int) -> list[Case]:
    """``examples`` cases drawn by Hypothesis with a fixed seed (:func:`~..gate.drawn_cases`)."""
    return drawn_cases(_cases, examples, seed)


# ----------------------------------------------------------------------------- the plant
PLANTS = ("extra-page",)


@contextlib.contextmanager
def planted(kind: str | None):
    """While inside, SGLang's SWA reservation (``SWAPrefillBudget.swa_tokens``) asks one page more
    (``extra-page``). None: nothing patched. Restored on leaving."""
    if kind is None:
        yield
        return
    if kind not in PLANTS:
        raise ValueError(f"plant={kind!r}: one of {', '.join(PLANTS)}")
    cls = load()["budget"].SWAPrefillBudget
    original = vars(cls)["swa_tokens"]

    def patched(self, *args, **kwargs):
        return original(self, *args, **kwargs) + self.page_size

    cls.swa_tokens = patched
    _plant.append(kind)
    try:
        yield
    finally:
        cls.swa_tokens = original
        _plant.remove(kind)


# ----------------------------------------------------------------------------- the campaign
def run(examples: int, seed: int = 0) -> dict[str, Any]:
    """The differential over ``examples`` generated cases: counts per class and the first example of each."""
    load()
    started = time.perf_counter()
    cases = generate(examples, seed)
    counts = dict.fromkeys(CLASSES, 0)
    first: dict[str, dict[str, Any]] = {}
    for case in cases:
        record = classify(case)
        for name in record["classes"]:
            counts[name] += 1
            first.setdefault(name, record)
    return {"version": version(), "examples": len(cases), "seed": seed, "counts": counts,
            "examples_by_class": first, "plant": list(_plant), "seconds": round(time.perf_counter() - started, 1)}


def trace_of(record: dict[str, Any], name: str, release: str) -> dict[str, Any]:
    """A saved trace of ``record`` in class ``name`` (the ``why`` is written by hand)."""
    return {"kind": "sglang-admission", "release": release, "class": name, "verdict": CLASSES[name], "why": "",
            **{k: record[k] for k in ("case", "model", "rule", "sglang_minimum", "sglang", "chunk", "served",
                                       "served_chunk", "reference_completes_at")
               if k in record}, **({"error": record["error"]} if "error" in record else {})}


def replay(path: Path) -> dict[str, Any]:
    """Re-ask SGLang a saved trace's case (with the trace's plant in, if it names one): its threshold and
    classes now; a planted trace also gives ``clean``, the same case asked without the plant."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    with planted(saved.get("plant")):
        record = classify(saved["case"])
    out = {"trace": Path(path).name, "version": version(), "sglang": record.get("sglang"), "chunk": record.get("chunk"),
           "classes": record["classes"], "model": record["model"], "rule": record["rule"]}
    if saved.get("plant"):
        clean = classify(saved["case"])
        out["clean"] = {"sglang": clean.get("sglang"), "classes": clean["classes"]}
    return out


def traced_classes(release: str) -> set[str]:
    """The classes with a saved trace for ``release`` (tests/regressions/sglang-admission/*.json, plants aside)."""
    folder = Path(__file__).resolve().parents[3] / "tests" / "regressions" / "sglang-admission"
    found = set()
    for path in folder.glob("sglang-admission-*.json"):
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("release") == release and "plant" not in saved:
            found.add(saved["class"])
    return found


def differential(examples: int, seed: int, out_dir: Path | None = None) -> dict[str, Any]:
    """What ``swafloor matrix`` runs in a cell: :func:`run`, then ``pass`` when every class found is
    ``equal`` or has a saved trace with a verdict for this release, else ``divergence`` (the first class
    without one, its record saved under ``out_dir``)."""
    report = run(examples, seed)
    traced = traced_classes(report["version"])
    unexplained = [name for name, n in report["counts"].items() if n and name != "equal" and name not in traced]
    result = {"result": "pass" if not unexplained else "divergence", "examples": report["examples"],
              "classes": {k: n for k, n in report["counts"].items() if n}}
    if unexplained:
        result["part"] = f"admission:{unexplained[0]}"
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"sglang-admission-{report['version']}-{unexplained[0]}.json"
            path.write_text(json.dumps(trace_of(report["examples_by_class"][unexplained[0]], unexplained[0],
                                                report["version"]), indent=1) + "\n", encoding="utf-8")
            result["trace_file"] = str(path)
    return result


# ----------------------------------------------------------------------------- the registry's entry
#: The domain of its cases, as a protocol declaration: one SWA life cycle beside SGLang's full pool, no sinks.
CAPABILITIES = Capabilities(observations={Part.OUTCOME: "exact"}, layer_kinds=("swa",), sinks=False,
                            one_pool_group=True, reused_history=False, legacy_floor=False,
                            notes=("a differential of one admission decision per case, not a protocol campaign",))


@factory(CAPABILITIES, name="sglang-admission", prepare=load)
def sglang_admission(config: Config) -> Any:
    """SGLang's admission gate (PrefillAdder.add_one_req) against the rule and the model of SGLang's gate: a
    differential of one decision per case, not a protocol campaign."""
    load()
    raise Unsupported("sglang-admission compares one admission decision, not a manager's steps: run it with "
                      "`python -m swafloor.fuzz.engines.sglang.admission`")


sglang_admission.differential = differential  # type: ignore[attr-defined]
sglang_admission.compares = ("SGLang's admission threshold (PrefillAdder.add_one_req, every SWA pool) against the "
                             "model of its gate, exact, and the rule's charge, classes with verdicts")


def main(argv: Sequence[str] | None = None) -> int:
    return differential_main(argv, module="swafloor.fuzz.engines.sglang.admission", engine="SGLang", key="sglang",
                             load=load, version=version, run=run, replay=replay, planted=planted, plants=PLANTS,
                             classes=CLASSES,
                             example=lambda ex: (f"SGLang {ex.get('sglang')} (chunk {ex.get('chunk')}), model "
                                                 f"{ex['model']}, rule {ex['rule']}"))


if __name__ == "__main__":
    raise SystemExit(main())
