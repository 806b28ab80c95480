"""``sglang-admission``: SGLang's own admission path against the reference's rule and swafloor's model of
SGLang's gate (issue 32), on every release with an SWA admission gate (issue 33: 0.5.7 on).

What is asked: a lone waiting request (``P`` prompt tokens, at most ``O`` output tokens, prefilled in
chunks of ``C``, or whole with chunked prefill off: ``C`` None) on SGLang's hybrid SWA layout (one
sliding window ``W >= 2``, SGLang's exclusive ``sliding_window_size = W - 1``, beside a full-attention
pool), page size ``t``, the SWA pool ``N`` pages, nothing running, nothing cached. SGLang's own objects
are built on the CPU, every one of them SGLang's: its ``SWAKVPool`` and ``SWATokenToKVPoolAllocator``
(``size_swa = N * t`` tokens; the full pool ``FULL_TOKENS``, which never binds), its ``ReqToTokenPool``,
the tree the release builds for a hybrid SWA model with its radix cache on (found by inspection,
:func:`_tree_class`: ``UnifiedRadixCache`` with FULL and SWA components where its registry builds that,
0.5.16 on; ``SWARadixCache`` where its registry or, before there was one, its scheduler builds that,
0.5.7-0.5.15.post1), made with the release's own ``CacheInitParams``, its ``Req`` with
``SamplingParams(max_new_tokens=O)`` (its own ``init_next_round_input(tree)``, the scheduler's call
before admission: fill ids and the prefix match on the empty tree), and its ``PrefillAdder``
(``rem_chunk_tokens = C``, ``rem_input_tokens`` the default ``max_prefill_tokens``, no running batch:
``running_batch=None``, which PrefillAdder takes for an idle scheduler; every argument by the names its
signature has). Its process-wide configuration is SGLang's default ``ServerArgs(model_path="dummy",
device="cpu")`` published with SGLang's ``runtime_context.publish`` (what SGLang's own CPU tests do),
or, where the release has none, with its scheduler's own publish of the global server args
(:func:`.radix_legacy._server_args_defaults`). Then ``add_one_req(req, has_chunked_req=False,
truncation_align_size=None)``, the scheduler's call; SGLang admits when the request is in the adder's
``can_run_list``. Nothing of the gate is emulated: the reservation and the chunk it grants are SGLang's.
The adapter sets only inputs (sizes, the request, the chunk); no stand-in object is on this path (0.5.7
imports CUDA kernels by name at load: the names come from :mod:`.compat`'s stand-in ``sgl_kernel``, each
raising if called; none is). Where the allocator has no ``page_size`` (0.5.7: token slots) the cases
are drawn at ``t = 1`` only.

The gate's form is read from the release (:data:`GATES`, :func:`_gate`; never its number): the
allocator's ``create_prefill_budget`` (0.5.21 on); ``PrefillAdder._swa_budget_for_req`` with a
``max_new_tokens`` parameter (0.5.17-0.5.20), without it but with ``_swa_chunk_cap`` (0.5.16), or with
neither (0.5.13.post1-0.5.15.post1); no SWA budget but a ``rem_total_tokens`` reading the SWA pool's
free tokens (0.5.7). A release whose ``PrefillAdder`` reads nothing of the SWA pool would be
:class:`~swafloor.fuzz.protocol.Unsupported`, saying so (none in the matrix). Whether its start-up has a
least SWA pool (``sliding_window_size + page_size >= swa_tokens`` refused, 0.5.16 on) is read from its
``pool_configurator`` source; without it the least pool is 1 page.

The observation is SGLang's admission threshold: the least ``N`` at which it admits, found by bisection
over ``1..bound`` (an SWA pool of 0 pages is not a configuration; a fresh set of objects each pool asked;
the bound is above every charge compared), its monotonicity checked at the threshold's neighbours, pool
1, the bound and around each charge compared (a contradiction is the class ``non-monotone``; between
those pools it is assumed, a stated bound of the check). Compared with:

- (b) the model of the release's gate (:func:`model_charge`), EXACTLY: ``peers.sglang_prefill_budget_blocks``
  (0.5.17 on: the lesser of the whole route, ``cdiv(needed + 1, t)`` with ``needed`` =
  ``peers.sglang_swa_kv_tokens`` of the page-rounded prompt, and, chunked, the shrunk-chunk route
  ``cdiv(min(O, W - 1) + t, t) + 1``; for a lone request on an idle pool 0.5.18-0.5.20's "never fits"
  is its refusal), ``peers.sglang_window_headroom_blocks`` (0.5.16: a whole window of headroom),
  ``peers.sglang_admission_blocks`` (0.5.13.post1-0.5.15.post1: ``max(min(P, C), W - 1) + t``, the prompt
  unrounded, no chunk cut) or ``peers.sglang_whole_run_blocks`` (0.5.7: ``P + O`` against the SWA pool's
  free tokens). A difference is ``model-above`` or ``model-below``, with its input and a replay.
- (a) the reference's rule: ``admission.swa_admission_blocks(t, W, 0, P, C, 0)`` (the chunk ``P``
  unchunked; no drafts). Above it, SGLang refuses at ``threshold - 1``; the lone run of ``O`` output
  tokens is run there on the reference manager (``admission.lone_run``): where it completes, the class
  ``over-charges`` (the refutation of ``sglang-prefill-budget-admits-at-chunk-floor``, found in SGLang
  itself), else ``over-charges-run-incomplete`` (the rule's fault). Below it: ``admits-shrunk-chunk``
  where SGLang admits only by cutting the chunk (the threshold is the shrunk route's), else
  ``admits-below-rule`` (SGLang charges the run's own window ``min(P + O, W - 1)``, the rule a window
  whatever ``O`` is); each records whether the reference's lone run completes at SGLang's threshold (with
  the chunk SGLang granted there). On the older gates these classes carry the gate's form in their
  name (:func:`named`: ``over-charges-window-floor``, ...), each verdict its formula and the upstream
  change that replaced it.

An exception raised inside SGLang's code is the class ``error`` with its input. A class is explained on
a release by a saved trace of it (tests/regressions/sglang-admission/) on that release or on one whose
gate has the same model (:func:`traced_classes`; the model's and the engine's own faults only on their
release).

``python -m swafloor.fuzz.engines.sglang.admission [--examples N] [--seed S] [--json] [--plant extra-page]``
runs it in the current interpreter (the SGLang venv); ``--replay FILE...`` replays saved traces.
``--plant extra-page`` patches SGLang's reservation (``SWAPrefillBudget.swa_tokens``, or
``PrefillAdder._swa_budget_for_req`` where that is the gate) to ask one page more, for the test that the
comparison catches it.
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
    # comparison (a) on the older gates (GATES), each named by its form: the verdict is the form's formula
    "over-charges-whole-run": "semantics difference (an older gate, replaced upstream): SGLang's PrefillAdder has "
                              "no SWA budget (0.5.7); it asks the lesser of the full and the SWA pool's free tokens "
                              "for the whole run, extend + max_new_tokens (rem_total_tokens), so it refuses a lone "
                              "request at a pool where the rule admits it and its whole run completes on the "
                              "reference manager (the window's pages recycle); the windowed SWA budget that "
                              "replaced it (PrefillAdder._swa_budget_for_req, read in 0.5.13.post1) is likely "
                              "sgl-project/sglang#22597 ('Fix swa input length limitation': an SWA pool smaller "
                              "than the run rejected requests its eviction could serve; not confirmed by "
                              "bisection, 0.5.8-0.5.12 not read)",
    "admits-below-rule-whole-run": "semantics difference: SGLang 0.5.7 charges the run's own tokens P + O (and one "
                                   "more: its refusal is at least-as-many), no window and no page, where the rule "
                                   "charges the largest step's floor at a full window (W - 2 + the chunk, and a "
                                   "page): a run shorter than that floor is admitted below the rule, and its whole "
                                   "run fits the pool it is admitted at",
    "over-charges-window-floor": "engine over-charge (a semantics difference, no upstream issue for it, as the "
                                 "pinned gate's): SGLang's SWA budget (PrefillAdder._swa_budget_for_req, "
                                 "0.5.13.post1-0.5.15.post1) is max(min(P, C), W - 1) + t and must be strictly "
                                 "below the free SWA tokens, so it refuses a lone request at a pool where the rule "
                                 "admits it and its whole run completes on the reference manager: one page above "
                                 "the rule's chunk floor at most (max(C', w) + t + 1 <= C' + w - 1 + 2t for C', w "
                                 ">= 1), where the span fills its pages. Its constant window of decode headroom, "
                                 "which sgl-project/sglang#32379 changed as a bug (0.5.17: it double-counts a "
                                 "cached-prefix resume), costs a lone fresh request nothing against the rule, whose "
                                 "floor holds a full window too",
    "admits-below-rule-window-floor": "semantics difference: SGLang's SWA budget (0.5.13.post1-0.5.15.post1) is the "
                                      "larger of the pass's allocation and the window, max(min(P, C), W - 1) + t, "
                                      "where the rule charges the step's chunk and a full window behind it "
                                      "(W - 2 + the chunk, a page); a prompt computed with no window behind it is "
                                      "admitted below the rule, and its whole run completes there on the reference "
                                      "manager where the record says so",
    "over-charges-window-headroom": "engine over-charge (a semantics difference, no upstream issue for it, as the "
                                    "pinned gate's): SGLang 0.5.16's SWA budget is max(min(P', C) - w, 0) + w + t "
                                    "(w = W - 1, P' the page-rounded prompt) and must be strictly below the free "
                                    "SWA tokens, so it refuses a lone request at a pool where the rule admits it "
                                    "and its whole run completes on the reference manager: one page more than the "
                                    "chunk floor where the span fills its pages. Its constant window of decode "
                                    "headroom, which sgl-project/sglang#32379 changed as a bug (0.5.17: it "
                                    "double-counts a cached-prefix resume), costs a lone fresh request nothing "
                                    "against the rule, whose floor holds a full window too",
    "admits-below-rule-window-headroom": "semantics difference: SGLang 0.5.16 charges the pass it admits (the chunk "
                                         "past its window, a whole window and a page: max(min(P', C) - w, 0) + w + "
                                         "t), where the rule charges the largest step's floor at a full window "
                                         "wherever the step falls: a prompt computed with no window behind it is "
                                         "admitted below the rule",
    "admits-shrunk-chunk-window-headroom": "semantics difference: where SGLang 0.5.16's budget never fits its SWA "
                                           "pool, it cuts the chunk to the page-floored SWA tokens above a window "
                                           "and a page (_swa_chunk_cap, introduced by sgl-project/sglang#31681 "
                                           "against a head-of-line livelock) and admits the request with that "
                                           "smaller chunk, below the rule's floor for the chunk C asked (the rule's "
                                           "floor is per chunk; SGLang chooses the chunk)",
    "non-monotone": "engine: SGLang refuses at a pool above one where it admits",
    "error": "engine: an exception inside SGLang's admission path (input saved)",
}

#: The full-attention pool's tokens: never the binding side (P + O + t is far below it).
FULL_TOKENS = 1 << 14
MAX_CONTEXT = 1 << 12

_s: dict[str, Any] = {}
_plant: list[str] = []


# ----------------------------------------------------------------------------- SGLang's side
#: The forms of SGLang's SWA admission gate, each found by inspecting the release's ``PrefillAdder`` and
#: allocator (never its number), and the model of each (``peers``; the release ranges they were read from).
GATES = {
    "prefill-budget": "the allocator's create_prefill_budget (SWAPrefillBudget.check_prefill, asked by "
                      "PrefillAdder.add_one_req; 0.5.21 on): peers.sglang_prefill_budget_blocks",
    "run-window": "PrefillAdder._swa_budget_for_req(extend, max_new_tokens) with _swa_chunk_cap (0.5.17-0.5.20): "
                  "peers.sglang_prefill_budget_blocks (the same sum; a lone request's never-fits is its refusal)",
    "window-headroom": "PrefillAdder._swa_budget_for_req(extend) with _swa_chunk_cap (0.5.16): "
                       "peers.sglang_window_headroom_blocks",
    "window-floor": "PrefillAdder._swa_budget_for_req(extend), no chunk cap (0.5.13.post1-0.5.15.post1): "
                    "peers.sglang_admission_blocks",
    "whole-run": "no SWA budget in PrefillAdder: rem_total_tokens, the lesser of the full and SWA pools' free tokens, "
                 "against extend + max_new_tokens (0.5.7): peers.sglang_whole_run_blocks",
}


def _gate(allocator: Any, adder: Any) -> str:
    """The form of the release's SWA admission gate (:data:`GATES`), by inspection; Unsupported where
    ``PrefillAdder`` charges nothing to the SWA pool, saying so."""
    import inspect

    from ..common import parameters

    if callable(getattr(allocator, "create_prefill_budget", None)):
        return "prefill-budget"
    budget = getattr(adder, "_swa_budget_for_req", None)
    if callable(budget):
        if "max_new_tokens" in parameters(budget):
            return "run-window"
        return "window-headroom" if callable(getattr(adder, "_swa_chunk_cap", None)) else "window-floor"
    total = getattr(adder, "rem_total_tokens", None)
    try:
        source = inspect.getsource(total.fget) if isinstance(total, property) else ""
    except (OSError, TypeError):
        source = ""
    if "swa_available_size" in source:
        return "whole-run"
    raise Unsupported(f"SGLang {version()}: its PrefillAdder has no _swa_budget_for_req, its allocator no "
                      "create_prefill_budget, and its rem_total_tokens does not read swa_available_size: no SWA "
                      "admission gate")


def _source(module: str) -> str:
    """The release's source of ``module``, read without importing it ("" where it has none)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return ""
    return Path(spec.origin).read_text(encoding="utf-8")


def _startup_minimum() -> bool:
    """Whether the release's start-up refuses an SWA pool of at most its window and a page (the check
    ``sliding_window_size + page_size >= swa_tokens`` in ``model_executor/pool_configurator.py``, 0.5.16
    on), read from its source (the module is not imported: it needs a GPU's start-up)."""
    import re

    text = _source("sglang.srt.model_executor.pool_configurator")
    return re.search(r"sliding_window_size\s*\+\s*(self\._)?page_size\s*>=\s*swa_tokens", text) is not None


def _tree_class(version: str) -> tuple[Any, str]:
    """The SWA tree the release builds for a hybrid SWA model with its radix cache on: its registry's
    ``SWARadixCache`` where it builds one, else ``UnifiedRadixCache``; with no registry (0.5.7) the
    scheduler's own ``SWARadixCache(params=..., sliding_window_size=...)``; read from the source."""
    import importlib

    from .radix_legacy import _registry_builds_swa_radix_cache

    try:
        importlib.import_module("sglang.srt.mem_cache.registry")
        registry = True
    except ImportError:
        registry = False
    if registry and not _registry_builds_swa_radix_cache():
        module, name = "sglang.srt.mem_cache.unified_radix_cache", "UnifiedRadixCache"
    else:
        module, name = "sglang.srt.mem_cache.swa_radix_cache", "SWARadixCache"
        if not registry:  # the scheduler's source (not imported: its module needs the server's packages)
            if "SWARadixCache(" not in _source("sglang.srt.managers.scheduler"):
                raise Unsupported(f"SGLang {version}: neither a cache registry nor a scheduler that builds "
                                  "SWARadixCache")
    try:
        return getattr(importlib.import_module(module), name), name
    except (ImportError, AttributeError):
        raise Unsupported(f"SGLang {version}: no {name} in {module}") from None


def load() -> dict[str, Any]:
    """SGLang's parts (allocator, tree, request, ``PrefillAdder``) and its default configuration published
    (once). The tree API of 0.5.22 on (:mod:`.radix`) where the release has it; else the tree its
    registry or scheduler builds (:func:`_tree_class`), made with its own ``CacheInitParams``. The gate's
    form (:func:`_gate`) and whether the start-up has its least SWA pool (:func:`_startup_minimum`)
    are read from the release."""
    if _s:
        return _s
    import importlib

    from .backend import import_sglang
    from .radix import import_radix

    parts = import_sglang()
    version = parts.get("version", "?")
    try:
        parts = import_radix()
        tree_api = parts.get("radix_api") == "tree"
    except Unsupported:  # no sliding-window free on its radix path (0.5.7): the admission needs none
        tree_api = False
    import sys

    stand_in = sys.modules.get("sgl_kernel")
    if getattr(stand_in, "__swafloor_stand_in__", False):
        # No sgl_kernel here (0.5.7): .compat's stand-in package; the scheduler's modules import kernels from
        # it by name at load (none runs on the admission path: a call raises). Set in this process only.
        from .compat import _kernel_absent

        stand_in.__getattr__ = _kernel_absent  # type: ignore[attr-defined]
    try:
        context = importlib.import_module("sglang.srt.runtime_context")
    except ImportError:
        context = None
    try:
        policy = importlib.import_module("sglang.srt.managers.schedule_policy")
        server_args = importlib.import_module("sglang.srt.server_args")
        batch = importlib.import_module("sglang.srt.managers.schedule_batch")
        sampling = importlib.import_module("sglang.srt.sampling.sampling_params")
        init_params = importlib.import_module("sglang.srt.mem_cache.cache_init_params")
    except ImportError as exc:
        raise Unsupported(f"SGLang {version}'s admission path is not importable here ({brief(exc)})") from exc
    if not callable(getattr(policy, "PrefillAdder", None)):
        raise Unsupported(f"SGLang {version} has no schedule_policy.PrefillAdder")
    gate = _gate(parts["Allocator"], policy.PrefillAdder)
    extra: dict[str, Any] = {}
    if tree_api:
        tree, tree_name = parts["UnifiedRadixCache"], "UnifiedRadixCache"
    else:
        tree, tree_name = _tree_class(version)
        for component_module in ("sglang.srt.mem_cache.unified_cache.components",
                                 "sglang.srt.mem_cache.unified_cache_components"):
            try:
                extra["ComponentType"] = importlib.import_module(component_module).ComponentType
                break
            except (ImportError, AttributeError):
                continue
    if context is not None and callable(getattr(context, "publish", None)) and callable(
            getattr(context, "reset_context", None)):
        args = server_args.ServerArgs(model_path="dummy", device="cpu")
        context.reset_context()
        ranks = getattr(context, "SpawnRanks", None)
        context.publish(args, role="scheduler", **({"ranks": ranks(world_rank=0, dp_rank=None)} if ranks else {}))
    else:  # the release's own scheduler publish of its global server args (radix_legacy)
        from .radix_legacy import _server_args_defaults

        _server_args_defaults()
        getter = getattr(context, "get_server_args", None) or getattr(server_args, "get_global_server_args", None)
        args = getter() if callable(getter) else None
    prefill = getattr(args, "max_prefill_tokens", None)
    if not isinstance(prefill, int):
        prefill = getattr(server_args.ServerArgs, "max_prefill_tokens", None)
    if not isinstance(prefill, int):
        raise Unsupported(f"SGLang {version}: no default max_prefill_tokens in its ServerArgs")
    _s.update(parts, **extra, PrefillAdder=policy.PrefillAdder, args=args, max_prefill_tokens=prefill,
              Tree=tree, tree_name=tree_name, tree_api=tree_api, gate=gate, startup_minimum=_startup_minimum(),
              Req=batch.Req, SamplingParams=sampling.SamplingParams, CacheInitParams=init_params.CacheInitParams,
              version=version)
    if gate == "prefill-budget":
        _s["budget"] = importlib.import_module("sglang.srt.mem_cache.prefill_budget")
    return _s


def version() -> str:
    from .compat import version as v

    return v()


def _build(case: Case, pages: int) -> tuple[Any, Any]:
    """SGLang's allocator (SWA pool ``pages`` pages), row pool and tree for ``case``: every argument by the
    parameter names the release's constructors have (:func:`.compat.build`)."""
    s = _s
    from ..common import parameters
    from .compat import build

    t, torch = case["t"], s["torch"]
    common = dict(size=FULL_TOKENS, size_swa=pages * t, page_size=t, dtype=torch.float32, device="cpu")
    pool = build(s["SWAKVPool"], dict(common, head_num=1, head_dim=1, swa_attention_layer_ids=[0],
                                      full_attention_layer_ids=[1], enable_kvcache_transpose=False), "SWAKVPool")
    allocator = build(s["Allocator"], dict(common, kvcache=pool, need_sort=False), "SWATokenToKVPoolAllocator")
    rows = build(s["ReqToTokenPool"], dict(size=2, max_context_len=MAX_CONTEXT, device="cpu",
                                           enable_memory_saver=False), "ReqToTokenPool")
    known: dict[str, Any] = dict(disable=False, req_to_token_pool=rows, token_to_kv_pool_allocator=allocator,
                                 page_size=t, sliding_window_size=case["W"] - 1)
    if "ComponentType" in s:
        known["tree_components"] = (s["ComponentType"].FULL, s["ComponentType"].SWA)
    params = build(s["CacheInitParams"], known, "CacheInitParams")
    tree = s["Tree"]
    if "sliding_window_size" in parameters(tree):  # 0.5.7's SWARadixCache takes the window beside its params
        return allocator, tree(params=params, sliding_window_size=case["W"] - 1)
    return allocator, tree(params)


def sglang_admits(case: Case, pages: int) -> tuple[bool, int | None]:
    """Whether SGLang's ``PrefillAdder`` admits the case's lone request with an SWA pool of ``pages``
    pages, and the chunk it grants (the tokens this pass extends), None when it refuses."""
    s = load()
    from ..common import parameters

    allocator, tree = _build(case, pages)
    ids = array("q", range(1, case["P"] + 1))
    req = s["Req"]("r0", "", ids, s["SamplingParams"](max_new_tokens=case["O"]))
    if not isinstance(req.output_ids, array):  # a release whose request keeps its ids in lists (before 0.5.22)
        req = s["Req"]("r0", "", list(ids), s["SamplingParams"](max_new_tokens=case["O"]))
    req.init_next_round_input(tree)  # the scheduler's call before add_one_req: fill ids, prefix match
    optional = dict(rem_input_tokens=s["max_prefill_tokens"], rem_chunk_tokens=case["C"], waiting_queue_len=1)
    names = parameters(s["PrefillAdder"])
    adder = s["PrefillAdder"](case["t"], tree, allocator, None, 1.0,
                              **{k: v for k, v in optional.items() if k in names})
    adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
    if req not in adder.can_run_list:
        return False, None
    if hasattr(req, "extend_end") and hasattr(req, "prefix_len"):  # 0.5.22 on
        return True, req.extend_end - req.prefix_len
    extend = getattr(req, "extend_range", None)
    if extend is not None:  # 0.5.15.post1-0.5.21: the pass's Range(start, end)
        return True, extend.end - extend.start
    return True, req.extend_input_len  # before: its extend length


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


def _gate_of(gate: str | None) -> str:
    """``gate``, or the loaded release's (:data:`GATES`), or the pinned release's without one loaded."""
    return gate or _s.get("gate") or "prefill-budget"


def model_parts(case: Case, gate: str | None = None) -> tuple[int, int | None]:
    """The routes of the model of SGLang's gate ``gate`` (:data:`GATES`): the whole request's, and the
    shrunk chunk's (None where the gate has no such route)."""
    t, W, P, C, O = case["t"], case["W"], case["P"], _chunk(case), case["O"]
    form = _gate_of(gate)
    if form in ("prefill-budget", "run-window"):
        return peers.sglang_prefill_budget_parts(t, W, P, C, O)
    if form == "window-headroom":
        return peers.sglang_window_headroom_parts(t, W, P, C)
    return model_charge(case, form), None


def model_charge(case: Case, gate: str | None = None) -> int:
    """The model of SGLang's gate ``gate`` (:data:`GATES`; default: the loaded release's)."""
    t, W, P, C, O, chunked = case["t"], case["W"], case["P"], _chunk(case), case["O"], case["C"] is not None
    form = _gate_of(gate)
    if form in ("prefill-budget", "run-window"):
        return peers.sglang_prefill_budget_blocks(t, W, P, C, O, chunked)
    if form == "window-headroom":
        return peers.sglang_window_headroom_blocks(t, W, P, C, chunked)
    if form == "window-floor":
        return peers.sglang_admission_blocks(t, W, P, C)
    if form == "whole-run":
        return peers.sglang_whole_run_blocks(t, P, O)
    raise ValueError(f"gate={form!r}: one of {', '.join(GATES)}")


def startup_minimum(case: Case, gate: str | None = None, checked: bool | None = None) -> int:
    """The least SWA pool SGLang's start-up accepts (``peers.sglang_min_swa_pages``) where the release has
    that check (``checked``; default: the loaded release's, else the pinned's), else 1 page."""
    if checked is None:
        checked = _s.get("startup_minimum", True)
    return peers.sglang_min_swa_pages(case["t"], case["W"]) if checked else 1


def rule_charge(case: Case, chunk: int | None = None) -> int:
    """The reference's rule for the case's SWA life cycle: the largest step's floor (no sinks, no drafts)."""
    return admission.swa_admission_blocks(case["t"], case["W"], 0, case["P"], chunk or _chunk(case), 0)


def reference_completes(case: Case, pool: int, chunk: int | None = None) -> bool:
    """The lone run (``O`` output tokens, chunk ``chunk`` or the case's) completes on the reference
    manager with one SWA life cycle at ``pool`` slots."""
    return lone_run_completes(lambda: Config(tokens_per_block=case["t"], layers=[AttentionLayer(window=case["W"])],
                                             slots=(pool,)), case["P"], case["O"], chunk or _chunk(case), 0)


def named(base: str, gate: str | None = None) -> str:
    """The class of comparison (a) ``base`` on the gate ``gate`` (:data:`GATES`; default: the loaded
    release's): the base name on the gates of :func:`peers.sglang_prefill_budget_blocks` (0.5.17 on), the
    base and the gate's form on the older ones (their verdicts are their formulas)."""
    form = _gate_of(gate)
    return base if form in ("prefill-budget", "run-window") else f"{base}-{form}"


def classify(case: Case) -> dict[str, Any]:
    """Ask SGLang and compare; the record of one case (its ``classes``: every class it falls in). The model
    is compared at every pool; the rule at the pools SGLang's start-up accepts (at least
    ``peers.sglang_min_swa_pages``), the only ones a served SGLang asks its gate at."""
    model, rule = model_charge(case), rule_charge(case)
    least = startup_minimum(case)
    record: dict[str, Any] = {"case": case, "gate": _gate_of(None), "model": model, "rule": rule,
                              "sglang_minimum": least}
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
        classes.append(named("over-charges") if completes else "over-charges-run-incomplete")
    elif v is not None and least > rule:
        classes.append("minimum-above-rule")
    elif v is not None and max(v, least) < rule:
        served = max(v, least)
        chunk = seen["chunks"].get(served)
        record.update(served=served, served_chunk=chunk)
        record["reference_completes_at"] = served if reference_completes(case, served, chunk) else None
        whole, _ = model_parts(case)
        shrunk = case["C"] is not None and chunk is not None and chunk < min(case["C"], -(-case["P"] // case["t"]) * case["t"])
        classes.append(named("admits-shrunk-chunk") if shrunk and served < whole else named("admits-below-rule"))
    record["classes"] = classes or ["equal"]
    return record


# ----------------------------------------------------------------------------- generation (Hypothesis)
def block_sizes() -> tuple[int, ...]:
    """The page sizes drawn: 1, 2, 4, 8, 16 tokens; 1 alone where the loaded release's allocator has no
    ``page_size`` (0.5.7: token slots only; :mod:`.profiles`)."""
    from ..common import parameters

    allocator = _s.get("Allocator")
    if allocator is not None and "page_size" not in parameters(allocator):
        return (1,)
    return (1, 2, 4, 8, 16)


def _cases():
    from hypothesis import strategies as st

    sizes = block_sizes()

    @st.composite
    def case(draw):
        t = draw(st.sampled_from(sizes))
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
    """While inside, SGLang's SWA reservation (``SWAPrefillBudget.swa_tokens``, or
    ``PrefillAdder._swa_budget_for_req`` on the releases whose gate that is) asks one page more
    (``extra-page``). None: nothing patched. Restored on leaving."""
    if kind is None:
        yield
        return
    if kind not in PLANTS:
        raise ValueError(f"plant={kind!r}: one of {', '.join(PLANTS)}")
    loaded = load()
    if "budget" in loaded:  # the allocator's prefill budget (0.5.21 on)
        cls, name = loaded["budget"].SWAPrefillBudget, "swa_tokens"
    elif callable(getattr(loaded["PrefillAdder"], "_swa_budget_for_req", None)):  # PrefillAdder's (0.5.13.post1-0.5.20)
        cls, name = loaded["PrefillAdder"], "_swa_budget_for_req"
    else:
        raise Unsupported(f"SGLang {version()}: no SWA budget to plant in (its gate: {loaded['gate']})")
    original = vars(cls)[name]

    def patched(self, *args, **kwargs):
        return original(self, *args, **kwargs) + self.page_size

    setattr(cls, name, patched)
    _plant.append(kind)
    try:
        yield
    finally:
        setattr(cls, name, original)
        _plant.remove(kind)


# ----------------------------------------------------------------------------- the campaign
def run(examples: int, seed: int = 0) -> dict[str, Any]:
    """The differential over ``examples`` generated cases: counts per class, the first example of each, and
    what each over-charging class costs (``over_charge``: the pages SGLang asks above the larger of the
    rule's charge and its start-up's least pool, a one-sided bound named by the rule: their sum and most)."""
    load()
    started = time.perf_counter()
    cases = generate(examples, seed)
    counts = dict.fromkeys(CLASSES, 0)
    first: dict[str, dict[str, Any]] = {}
    cost: dict[str, dict[str, int]] = {}
    for case in cases:
        record = classify(case)
        for name in record["classes"]:
            counts[name] += 1
            first.setdefault(name, record)
            if name.startswith("over-charges") and record.get("sglang") is not None:
                extra = record["sglang"] - max(record["rule"], record["sglang_minimum"])
                seen = cost.setdefault(name, {"pages": 0, "most": 0})
                seen.update(pages=seen["pages"] + extra, most=max(seen["most"], extra))
    return {"version": version(), "gate": _s.get("gate"), "examples": len(cases), "seed": seed, "counts": counts,
            "examples_by_class": first, "over_charge": cost, "plant": list(_plant),
            "seconds": round(time.perf_counter() - started, 1)}


def trace_of(record: dict[str, Any], name: str, release: str) -> dict[str, Any]:
    """A saved trace of ``record`` in class ``name`` (the ``why`` is written by hand)."""
    return {"kind": "sglang-admission", "release": release, "class": name, "verdict": CLASSES[name], "why": "",
            **{k: record[k] for k in ("case", "gate", "model", "rule", "sglang_minimum", "sglang", "chunk", "served",
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


#: The peer function that models each gate's form: forms with the same model share their traces.
MODELS = {"prefill-budget": "sglang_prefill_budget_blocks", "run-window": "sglang_prefill_budget_blocks",
          "window-headroom": "sglang_window_headroom_blocks", "window-floor": "sglang_admission_blocks",
          "whole-run": "sglang_whole_run_blocks"}


#: Classes a trace explains on its own release only (a fault of the model, the rule or the engine).
OURS_OR_ENGINE = ("model-above", "model-below", "over-charges-run-incomplete", "non-monotone", "error")


def traced_classes(release: str, gate: str | None = None) -> set[str]:
    """The classes with a saved trace (tests/regressions/sglang-admission/*.json, plants aside) for
    ``release``, or for a release whose gate has the same model as ``gate`` (:data:`MODELS`; a trace
    without a ``gate`` is the pinned form's, ``prefill-budget``): a class's verdict is its gate's formula,
    so one trace of a class explains it on every release of that formula (the classes of
    :data:`OURS_OR_ENGINE` only on their own release)."""
    folder = Path(__file__).resolve().parents[3] / "tests" / "regressions" / "sglang-admission"
    found = set()
    for path in folder.glob("sglang-admission-*.json"):
        saved = json.loads(path.read_text(encoding="utf-8"))
        if "plant" in saved:
            continue
        same_model = (gate is not None and saved["class"] not in OURS_OR_ENGINE
                      and MODELS[saved.get("gate", "prefill-budget")] == MODELS[gate])
        if saved.get("release") == release or same_model:
            found.add(saved["class"])
    return found


def differential(examples: int, seed: int, out_dir: Path | None = None) -> dict[str, Any]:
    """What ``swafloor matrix`` runs in a cell: :func:`run`, then ``pass`` when every class found is
    ``equal`` or has a saved trace with a verdict for this release, else ``divergence`` (the first class
    without one, its record saved under ``out_dir``)."""
    report = run(examples, seed)
    traced = traced_classes(report["version"], _s.get("gate"))
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
