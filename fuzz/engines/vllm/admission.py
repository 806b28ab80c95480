"""``vllm-admission``: vLLM's own admission path against the reference's rule and swafloor's model of
vLLM's gate (issue 32).

What is asked: a lone waiting request (``P`` prompt tokens, prefilled in chunks of ``C``, ``k``
lookahead slots a step: a speculative drafter's) on a model of one to three KV-cache groups (sliding
windows ``W``, small ones down to a window of 1 included, at most one full-attention group), block
size ``t``, every group drawn from one ``BlockPool`` of ``N`` free blocks. vLLM's ``KVCacheManager``
is built (prefix caching off, ``max_in_flight_tokens = max_num_batched_tokens = C``: synchronous
scheduling with a token budget of one chunk) and asked the question exactly as its scheduler asks it
for a waiting request: ``allocate_slots(request, min(C, P), num_lookahead_tokens=k,
full_sequence_must_fit=True, has_scheduled_reqs=False)`` (the scheduler's call when nothing else runs:
no watermark). vLLM admits when it returns blocks. Inside, vLLM runs its full-sequence gate (the
coordinator's ``get_num_blocks_to_allocate`` with ``apply_admission_cap=True``, where the release has
the cap) and then the first step's own allocation check; both are vLLM's, nothing is emulated.

The observation is vLLM's admission threshold: the least ``N`` at which it admits, found by bisection
over ``0..bound`` (a fresh manager each pool asked; the bound is above every charge compared), its
monotonicity checked at the threshold's neighbours, pool 0, the bound and around each charge compared
(a contradiction is the class ``non-monotone``; between those pools it is assumed, a stated bound of
the check). Compared with:

- (b) the model of vLLM's admission, :func:`model_charge` from :mod:`swafloor.reference.peers`: the
  full-sequence gate per group (``vllm_full_sequence_blocks``: the prompt's ``cdiv(P, t)``, no drafts,
  at most ``vllm_blocks_per_request`` with ``T = C`` per SWA group where the release's coordinator takes
  ``apply_admission_cap``; no model-length cap) and the first step's own check per group
  (``vllm_first_step_blocks``: ``cdiv(min(C, P) + k, t)``, uncapped), each summed over the groups of the
  one pool, the larger sum (``vllm_admission_threshold``): EXACTLY. Any difference is a divergence
  (``model-above``: the model charges more than vLLM needs to admit; ``model-below``: less), each with
  its input and a replay.
- (a) the reference's rule (:mod:`swafloor.reference.admission`): ``swa_admission_blocks`` per SWA
  group plus ``full_admission_blocks`` per full group (what the rule admits at), and :func:`rule_run`
  (full attention at ``full_run_blocks``, the run of one output token). Where vLLM's threshold is above
  the run's charge, vLLM refuses the request at the pool ``threshold - 1``; the lone run (one output
  token) is then run on the reference manager at that pool (:func:`swafloor.reference.admission.lone_run`),
  and where it completes that is the class ``over-charges`` where the model's gate sum is what binds (the
  refutation of the theorem ``vllm-capped-gate-admits-at-chunk-floor``, found in vLLM itself), or
  ``over-charges-drafts`` where the first step's chunk and drafts bind (vLLM reserves draft slots in a
  prefill step, the rule from the first decode step); where it does not complete, the class
  ``over-charges-run-incomplete``, the rule's fault. Above the start's charge but not the run's:
  ``over-charges-start`` (full attention's growth, which the rule charges step by step). Where vLLM admits below the rule,
  the class is ``admits-below-rule`` (vLLM's gate charges the prompt, not the run: growth past it is
  met by preemption; the pool vLLM sizes at start-up is never below its cap).

A value of the comparison is either vLLM's (the threshold) or swafloor's (the formulas); the adapter
sets only the inputs. An exception raised inside vLLM's code is the class ``error`` with its input.
Releases before the gate moved into ``allocate_slots`` (0.20.2 and before) have it as
``KVCacheManager.can_fit_full_sequence(request, ...)``, which their scheduler asks first (with the
cap inside, where the release has it), then ``allocate_slots`` for the first step: asked in that
order. A release with neither (0.8.3-0.18.1) has no full-sequence gate: its scheduler admits a waiting
request when the first step's ``allocate_slots`` returns blocks, and that call alone is asked (the model:
the first step's check alone). The first step's lookahead is the scheduler's, read from its
``scheduler.py`` (:func:`first_step_lookahead`): 0.10.2-0.22.1 pass none to a request with no
computed token (vllm-project/vllm#43733 passes ``k`` again), 0.8.3's ``allocate_slots`` takes none. A
case whose groups vLLM's own constructor refuses (0.8.x: one KV-cache group; 0.9.2 without caching: one
full-attention type and one other) is the class ``build-refused``.

``python -m swafloor.fuzz.engines.vllm.admission [--examples N] [--seed S] [--json] [--plant extra-block|no-cap]``
runs it in the current interpreter (the vLLM venv); ``--replay FILE...`` replays saved traces. ``--plant``
patches vLLM's gate (one block more per gated manager, or the cap dropped), for the test that the
comparison catches it. ``swafloor matrix vllm --backends vllm-admission`` runs it on releases.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from pathlib import Path
from typing import Any, Sequence

from swafloor.reference import AttentionLayer, Config, admission, peers
from swafloor.reference.arith import cdiv

from . import compat
from ..common import brief, parameters
from ..gate import differential_main, drawn_cases, least_admitting, lone_run_completes
from ...protocol import Capabilities, Part, Unsupported, factory

__all__ = ["Case", "generate", "vllm_threshold", "model_parts", "model_charge", "rule_charge", "classify", "check", "run",
           "differential", "vllm_admission", "main", "CLASSES"]

Case = dict  # {"t": int, "windows": [int | None, ...], "P": int, "C": int, "k": int}

#: Each class the comparison sorts a case into, and its verdict (set here, once per class).
CLASSES = {
    "equal": "vLLM's threshold equals the model of its gate",
    "model-above": "ours: swafloor's model of vLLM's admission (peers.vllm_full_sequence_blocks and "
                   "peers.vllm_first_step_blocks, the larger sum) charges more than vLLM needs to admit",
    "model-below": "ours: swafloor's model of vLLM's admission (peers.vllm_full_sequence_blocks and "
                   "peers.vllm_first_step_blocks, the larger sum) charges less than vLLM needs to admit",
    "over-charges": "engine over-charge (a semantics difference, no upstream issue for it; the cap is "
                    "vllm-project/vllm#40946, which fixed the deadlock #39734): vLLM refuses a lone request at a pool "
                    "where the rule admits it and its whole run (one output token) completes on the reference manager; "
                    "the cap ceil((W - 1 + T)/t) + 1 holds one token more than the largest step's span W + n - 2 "
                    "(the theorem vllm-capped-gate-admits-at-chunk-floor, refuted, found in vLLM itself)",
    "over-charges-drafts": "semantics difference: vLLM refuses a lone request at a pool where the rule admits it and "
                           "its whole run completes on the reference manager, because vLLM's first step holds its chunk "
                           "and the k lookahead slots at once (its scheduler passes num_lookahead_tokens to a prefill "
                           "step too: cdiv(min(C, P) + k, t) per group), where the rule's prefill steps hold their chunk "
                           "alone and the drafts start with the first decode step (largest step max(min(C, P), 1 + k))",
    "over-charges-first-step": "candidate (no verdict yet): vLLM refuses a lone request at a pool where the rule "
                               "admits it and its whole run completes on the reference manager, its first step "
                               "alone (no gate, no drafts) binding",
    "over-charges-start": "semantics difference: vLLM refuses at a pool where the rule admits the start, but the run's "
                          "full-attention growth (charged by the rule step by step) needs more than that pool",
    "over-charges-run-incomplete": "ours: vLLM refuses a pool where the rule admits the whole run, but the reference's "
                                   "lone run does not complete there (the rule would be wrong)",
    "admits-below-rule": "semantics difference: vLLM's admission charges the prompt (its gate, where the release has "
                         "one) and the first step, not the run: a request shorter than its window is charged its "
                         "prompt's blocks, and a release with no gate (before 0.19.1) charges the first chunk alone; "
                         "growth past it is met by preemption, and vLLM's start-up sizer keeps the pool at or above "
                         "its cap",
    "non-monotone": "engine: vLLM refuses at a pool above one where it admits",
    "error": "engine: an exception inside vLLM's admission path (input saved)",
    "build-refused": "engine limitation: vLLM's own KVCacheManager constructor raises on the case's groups (input "
                     "and message saved; a saved trace names the limitation of verdicts.LIMITATIONS it is)",
}

MAX_MODEL_LEN = 1 << 30

_plant: list[str] = []


# ----------------------------------------------------------------------------- vLLM's side
def _release() -> tuple[dict[str, Any], Any]:
    v = compat.import_vllm()
    return v, compat.release_of(v)


def gate_parameters(v: dict[str, Any]) -> dict[str, Any]:
    """What this release's admission path has, by inspection: ``gate`` (a full-sequence gate: ``allocate_slots``
    takes ``full_sequence_must_fit``, or ``separate``: the manager has ``can_fit_full_sequence``, which the
    scheduler asks first), ``capped`` (the coordinator takes ``apply_admission_cap``), ``first_lookahead``
    (:func:`first_step_lookahead`). A release with no gate (before 0.19.1) admits a waiting request when its
    first step's ``allocate_slots`` returns blocks: that call alone is asked."""
    allocate = parameters(v["KVCacheManager"].allocate_slots)
    inline = "full_sequence_must_fit" in allocate
    separate = not inline and callable(getattr(v["KVCacheManager"], "can_fit_full_sequence", None))
    import importlib
    import importlib.util

    coordinator = importlib.import_module("vllm.v1.core.kv_cache_coordinator") \
        if importlib.util.find_spec("vllm.v1.core.kv_cache_coordinator") else None
    capped = coordinator is not None and any(
        "apply_admission_cap" in parameters(getattr(cls, "get_num_blocks_to_allocate", lambda: None))
        for cls in vars(coordinator).values() if isinstance(cls, type))
    return {"gate": inline or separate, "capped": capped, "has_scheduled_reqs": "has_scheduled_reqs" in allocate,
            "separate": separate, "first_lookahead": first_step_lookahead(allocate)}


#: The scheduler's lookahead for a waiting request's first step, read from its ``scheduler.py`` (whitespace
#: dropped): ``0 if request.num_computed_tokens == 0 else self.num_lookahead_tokens`` (0.10.2-0.22.1, a
#: fresh request gets none; vllm-project/vllm#43733 zeroes it only for an asynchronous KV load).
_FRESH_ZERO = "0ifrequest.num_computed_tokens==0elseself.num_lookahead_tokens"


def first_step_lookahead(allocate: dict[str, Any]) -> str:
    """How the release's scheduler passes ``k`` lookahead slots to a fresh waiting request's first step,
    by inspection (its ``vllm/v1/core/sched/scheduler.py`` read as text, whitespace dropped): ``"none"``
    (``allocate_slots`` takes no ``num_lookahead_tokens``: 0.8.3, no drafts), ``"zero-when-fresh"`` (its
    ``Scheduler.schedule`` passes 0 to a request with no computed token:
    :data:`_FRESH_ZERO`), else ``"passed"`` (``k``, as every scheduled request)."""
    if "num_lookahead_tokens" not in allocate:
        return "none"
    import importlib.util

    spec = importlib.util.find_spec("vllm.v1.core.sched.scheduler")  # read, not imported (it imports vLLM's top)
    if spec is None or not spec.origin:
        raise Unsupported(f"vLLM {compat.version()} has no vllm.v1.core.sched.scheduler to read its first step's "
                          "lookahead from")
    return _read_lookahead(spec.origin)


@functools.lru_cache(maxsize=None)
def _read_lookahead(origin: str) -> str:
    source = "".join(Path(origin).read_text(encoding="utf-8").split())
    return "zero-when-fresh" if _FRESH_ZERO in source else "passed"


def lookahead_of(case: Case, first_lookahead: str) -> int:
    """The lookahead slots vLLM's scheduler asks for the case's first step (:func:`first_step_lookahead`)."""
    return case["k"] if first_lookahead == "passed" else 0


def load() -> dict[str, Any]:
    """Import vLLM's parts (:func:`compat.import_vllm`) and check the release has the gate."""
    v = compat.import_vllm()
    gate_parameters(v)
    return v


class BuildRefused(Exception):
    """vLLM's own ``KVCacheManager`` constructor raised on the case's groups (0.8.x asserts one KV-cache
    group, 0.9.2's hybrid coordinator one full-attention type and one other): the class ``build-refused``,
    with vLLM's message, never an admission answer."""


def vllm_admits(case: Case, free: int) -> bool:
    """Whether vLLM's admission path admits the case's lone waiting request with ``free`` free blocks."""
    v, release = _release()
    has = gate_parameters(v)
    try:
        manager = release.manager(case["t"], list(case["windows"]), free + 1, max_model_len=MAX_MODEL_LEN,
                                  in_flight=case["C"])
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - vLLM's own constructor refuses the config: kept apart from the path
        raise BuildRefused(brief(exc)) from exc
    request = release.request("r0", case["P"], 1)
    kwargs: dict[str, Any] = {}
    if has["separate"]:  # the gate before it moved into allocate_slots: the scheduler asks it first
        if not manager.can_fit_full_sequence(request):
            return False
    elif has["gate"]:
        kwargs = {"full_sequence_must_fit": True, **({"has_scheduled_reqs": False} if has["has_scheduled_reqs"] else {})}
    # no gate (before 0.19.1): the first step's allocate_slots is the scheduler's whole admission
    k = lookahead_of(case, has["first_lookahead"])
    if k:
        kwargs["num_lookahead_tokens"] = k
    blocks = manager.allocate_slots(request, min(case["C"], case["P"]), **kwargs)
    return blocks is not None


def _bound(case: Case) -> int:
    """The largest pool asked about: above every charge compared (vLLM's without cap, the model's, the
    rule's) by two blocks."""
    t, P, C, k = case["t"], case["P"], case["C"], case["k"]
    total = 0
    for w in case["windows"]:
        whole = cdiv(P + k, t) + 1
        total += whole if w is None else max(whole, admission.swa_admission_blocks(t, w, 0, P, C, k),
                                             peers.vllm_blocks_per_request(t, w, C))
    return total + 2


def vllm_threshold(case: Case, probes: Sequence[int] = ()) -> dict[str, Any]:
    """vLLM's admission threshold for ``case``: the least pool in ``0..bound`` at which it admits (None if
    it refuses at ``bound``), each pool asked of a fresh manager (:func:`~..gate.least_admitting`: by
    bisection, monotonicity checked at the threshold's neighbours, pool 0, the bound and each of ``probes``,
    the charges compared)."""
    return least_admitting(lambda n: vllm_admits(case, n), 0, _bound(case), probes)


# ----------------------------------------------------------------------------- swafloor's side
def model_parts(case: Case, capped: bool, gated: bool = True, lookahead: int | None = None) -> tuple[int, int]:
    """The two questions of the model of vLLM's admission, each summed over the groups of the one pool:
    the full-sequence gate (``peers.vllm_full_sequence_blocks``: ``cdiv(P, t)``, capped per SWA group
    where the release caps, ``T = C``; no group where the release has no gate, ``gated`` False) and the
    first step's own check (``peers.vllm_first_step_blocks``: ``cdiv(min(C, P) + k, t)``, ``k`` the
    scheduler's ``lookahead`` for that step, default the case's)."""
    t, P, C = case["t"], case["P"], case["C"]
    k = case["k"] if lookahead is None else lookahead
    gates = [peers.vllm_full_sequence_blocks(t, w, P, C, None, capped) for w in case["windows"]] if gated else []
    firsts = [peers.vllm_first_step_blocks(t, P, C, k) for _ in case["windows"]]
    return peers.vllm_admission_threshold(gates, ()), peers.vllm_admission_threshold((), firsts)


def model_charge(case: Case, capped: bool, gated: bool = True, lookahead: int | None = None) -> int:
    """The model of vLLM's admission of a new request: the larger of :func:`model_parts`' two sums
    (``peers.vllm_admission_threshold``)."""
    t, P, C = case["t"], case["P"], case["C"]
    k = case["k"] if lookahead is None else lookahead
    return peers.vllm_admission_threshold([peers.vllm_full_sequence_blocks(t, w, P, C, None, capped)
                                           for w in case["windows"]] if gated else [],
                                          [peers.vllm_first_step_blocks(t, P, C, k) for _ in case["windows"]])


def rule_charge(case: Case) -> int:
    """The reference's rule: per SWA group the largest step's floor, per full group ``cdiv(P + k, t)``."""
    t, P, C, k = case["t"], case["P"], case["C"], case["k"]
    return sum(admission.full_admission_blocks(t, P, k) if w is None
               else admission.swa_admission_blocks(t, w, 0, P, C, k) for w in case["windows"])


def rule_run(case: Case) -> int:
    """What the rule says the lone run of one output token holds at most: per SWA group its charge, per
    full group ``cdiv(P + 1 + k, t)`` (``full_run_blocks``: full attention grows past its start)."""
    t, P, C, k = case["t"], case["P"], case["C"], case["k"]
    return sum(admission.full_run_blocks(t, P, 1, k) if w is None
               else admission.swa_admission_blocks(t, w, 0, P, C, k) for w in case["windows"])


def reference_completes(case: Case, pool: int) -> bool:
    """The lone run (one output token) completes on the reference manager at ``pool`` slots, every group in
    one pool, as vLLM serves them."""
    layers = [AttentionLayer(window=w) for w in case["windows"]]
    return lone_run_completes(lambda: Config(tokens_per_block=case["t"], layers=layers, pool_groups=(0,) * len(layers),
                                             slots=(pool,)), case["P"], 1, case["C"], case["k"])


def classify(case: Case, capped: bool, gated: bool = True, first_lookahead: str = "passed") -> dict[str, Any]:
    """Ask vLLM and compare; the record of one case (its ``classes``: every class it falls in). ``gated``:
    the release has a full-sequence gate; ``first_lookahead``: how its scheduler passes the drafts to the
    first step (:func:`first_step_lookahead`); both by inspection (:func:`gate_parameters`)."""
    k_first = lookahead_of(case, first_lookahead)
    model, rule = model_charge(case, capped, gated, k_first), rule_charge(case)
    record: dict[str, Any] = {"case": case, "capped": capped, "model": model, "rule": rule}
    if not gated:
        record["gated"] = False
    if first_lookahead != "passed":
        record["first_lookahead"] = first_lookahead
    try:
        seen = vllm_threshold(case, probes=(model, rule))
    except Unsupported:
        raise
    except BuildRefused as exc:
        return {**record, "vllm": None, "classes": ["build-refused"], "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - inside vLLM's admission path: a failure, with its input
        return {**record, "vllm": None, "classes": ["error"], "error": brief(exc)}
    v = seen["threshold"]
    record.update(vllm=v, bound=seen["bound"])
    classes = []
    if seen["non_monotone"] is not None:
        classes.append("non-monotone")
        record["refused_at"] = seen["non_monotone"]
    if v is None or v != model:
        classes.append("model-above" if v is not None and model > v else "model-below")
    if v is not None and v > rule_run(case):
        completes = reference_completes(case, v - 1)
        record["reference_completes_at"] = v - 1 if completes else None
        gate_sum, _ = model_parts(case, capped, gated, k_first)
        cause = ("over-charges" if v != model or (gated and gate_sum >= v)
                 else "over-charges-drafts" if k_first else "over-charges-first-step")
        classes.append(cause if completes else "over-charges-run-incomplete")
    elif v is not None and v > rule:
        classes.append("over-charges-start")
    elif v is not None and v < rule:
        classes.append("admits-below-rule")
    record["classes"] = classes or ["equal"]
    return record


# ----------------------------------------------------------------------------- generation (Hypothesis)
def _cases():
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        t = draw(st.sampled_from((1, 2, 4, 8, 16)))
        swa = draw(st.lists(st.one_of(st.integers(1, 4), st.integers(1, 80)), min_size=1, max_size=2, unique=True))
        full = draw(st.booleans())
        windows = swa + ([None] if full else [])
        P = draw(st.integers(1, 160))
        C = draw(st.one_of(st.integers(1, 8), st.integers(1, 96)))
        k = draw(st.sampled_from((0, 0, 1, 2, 3)))
        return {"t": t, "windows": windows, "P": P, "C": C, "k": k}

    return case()


def generate(examples: int, seed: int) -> list[Case]:
    """``examples`` cases drawn by Hypothesis with a fixed seed (:func:`~..gate.drawn_cases`)."""
    return drawn_cases(_cases, examples, seed)


# ----------------------------------------------------------------------------- the plant
PLANTS = ("extra-block", "no-cap")


@contextlib.contextmanager
def planted(kind: str | None):
    """While inside, vLLM's gate is patched (never its step allocation): ``extra-block`` charges one block
    more whenever the coordinator asks a manager with ``apply_admission_cap=True``; ``no-cap`` drops the cap
    (the manager asked with ``apply_admission_cap=False``). None: nothing patched. Restored on leaving."""
    if kind is None:
        yield
        return
    if kind not in PLANTS:
        raise ValueError(f"plant={kind!r}: one of {', '.join(PLANTS)}")
    import importlib

    module = importlib.import_module("vllm.v1.core.single_type_kv_cache_manager")
    classes = [c for c in (module.SingleTypeKVCacheManager, *_subclasses(module.SingleTypeKVCacheManager))
               if "get_num_blocks_to_allocate" in vars(c)]
    saved = {c: vars(c)["get_num_blocks_to_allocate"] for c in classes}
    for cls, original in saved.items():
        cls.get_num_blocks_to_allocate = _patched(kind, original)
    _plant.append(kind)
    try:
        yield
    finally:
        for cls, original in saved.items():
            cls.get_num_blocks_to_allocate = original
        _plant.remove(kind)


def _patched(kind: str, original: Any) -> Any:
    def patched(self, *args, apply_admission_cap=False, **kwargs):
        if kind == "no-cap":
            return original(self, *args, apply_admission_cap=False, **kwargs)
        got = original(self, *args, apply_admission_cap=apply_admission_cap, **kwargs)
        return got + 1 if apply_admission_cap else got

    return patched


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


# ----------------------------------------------------------------------------- the campaign
def run(examples: int, seed: int = 0) -> dict[str, Any]:
    """The differential over ``examples`` generated cases: counts per class and the first example of each."""
    v, _ = _release()
    has = gate_parameters(v)
    capped = has["capped"]
    started = time.perf_counter()
    cases = generate(examples, seed)
    counts = dict.fromkeys(CLASSES, 0)
    first: dict[str, dict[str, Any]] = {}
    for case in cases:
        record = classify(case, capped, has["gate"], has["first_lookahead"])
        for name in record["classes"]:
            counts[name] += 1
            first.setdefault(name, record)
    return {"version": compat.version(), "capped": capped, "gated": has["gate"],
            "first_lookahead": has["first_lookahead"], "examples": len(cases), "seed": seed, "counts": counts,
            "examples_by_class": first, "plant": list(_plant), "seconds": round(time.perf_counter() - started, 1)}


#: Classes that are differences with a verdict saved (tests/regressions/vllm-admission/*.json): counted,
#: not a failure of the campaign; every other class but ``equal`` is.
def _unexplained(report: dict[str, Any], traced: set[str]) -> list[str]:
    return [name for name, n in report["counts"].items() if n and name != "equal" and name not in traced]


def traced_classes(release: str) -> set[str]:
    """The classes with a saved trace for ``release`` (tests/regressions/vllm-admission/*.json)."""
    folder = Path(__file__).resolve().parents[3] / "tests" / "regressions" / "vllm-admission"
    found = set()
    for path in folder.glob("vllm-admission-*.json"):
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("release") == release:
            found.add(saved["class"])
    return found


def differential(examples: int, seed: int, out_dir: Path | None = None) -> dict[str, Any]:
    """What ``swafloor matrix`` runs in a cell: :func:`run`, then ``pass`` when every class found is
    ``equal`` or has a saved trace with a verdict for this release, else ``divergence`` (the first
    class without one, the record saved under ``out_dir``)."""
    report = run(examples, seed)
    unexplained = _unexplained(report, traced_classes(report["version"]))
    classes = {k: n for k, n in report["counts"].items() if n}
    result = {"result": "pass" if not unexplained else "divergence", "examples": report["examples"],
              "classes": classes, "capped": report["capped"], "gated": report["gated"],
              "first_lookahead": report["first_lookahead"]}
    if unexplained:
        result["part"] = f"admission:{unexplained[0]}"
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"vllm-admission-{report['version']}-{unexplained[0]}.json"
            path.write_text(json.dumps(trace_of(report["examples_by_class"][unexplained[0]], unexplained[0],
                                                report["version"]), indent=1) + "\n", encoding="utf-8")
            result["trace_file"] = str(path)
    return result


def trace_of(record: dict[str, Any], name: str, release: str) -> dict[str, Any]:
    """A saved trace of ``record`` in class ``name`` (the verdict and why are filled in by hand)."""
    return {"kind": "vllm-admission", "release": release, "class": name, "verdict": CLASSES[name], "why": "",
            **{k: record[k] for k in ("case", "capped", "gated", "first_lookahead", "model", "rule", "vllm")
               if k in record},
            **({"error": record["error"]} if "error" in record else {})}


def replay(path: Path) -> dict[str, Any]:
    """Re-ask vLLM a saved trace's case (with the trace's plant in, if it names one): its threshold and
    classes now; a planted trace also gives ``clean``, the same case asked without the plant."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    v, _ = _release()
    has = gate_parameters(v)
    capped, gated, first = has["capped"], has["gate"], has["first_lookahead"]
    with planted(saved.get("plant")):
        record = classify(saved["case"], capped, gated, first)
    out = {"trace": Path(path).name, "version": compat.version(), "vllm": record.get("vllm"),
           "classes": record["classes"], "model": record["model"], "rule": record["rule"]}
    if saved.get("plant"):
        clean = classify(saved["case"], capped, gated, first)
        out["clean"] = {"vllm": clean.get("vllm"), "classes": clean["classes"]}
    return out


# ----------------------------------------------------------------------------- the registry's entry
def _unbuildable(config: Config) -> Any:
    compat.import_vllm()  # without vLLM here: Unsupported naming scripts/vllm-venv, as every vLLM backend
    raise Unsupported("vllm-admission compares one admission decision, not a manager's steps: run it with "
                      "`swafloor matrix vllm --backends vllm-admission` or `python -m "
                      "swafloor.fuzz.engines.vllm.admission`")


#: The domain of its cases, as a protocol declaration: SWA and full attention in one pool, no sinks.
CAPABILITIES = Capabilities(observations={Part.OUTCOME: "exact"}, layer_kinds=("swa", "full"), sinks=False,
                            one_pool_group=True, reused_history=False, legacy_floor=False,
                            notes=("a differential of one admission decision per case, not a protocol campaign",))


@factory(CAPABILITIES, name="vllm-admission", prepare=load)
def vllm_admission(config: Config) -> Any:
    """vLLM's admission gate (allocate_slots with full_sequence_must_fit) against the rule and the model
    of vLLM's gate: a differential of one decision per case, not a protocol campaign."""
    return _unbuildable(config)


#: What ``swafloor matrix`` runs for this name instead of a protocol campaign (:func:`differential`), and
#: what the backend table says it compares.
vllm_admission.differential = differential  # type: ignore[attr-defined]
vllm_admission.compares = ("vLLM's admission threshold (allocate_slots with full_sequence_must_fit, every pool; "
                           "a release with no gate: the first step's allocate_slots alone) against the model of its "
                           "gate, exact, and the rule's charge, classes with verdicts")


def main(argv: Sequence[str] | None = None) -> int:
    return differential_main(argv, module="swafloor.fuzz.engines.vllm.admission", engine="vLLM", key="vllm",
                             load=compat.import_vllm, version=compat.version, run=run, replay=replay,
                             planted=planted, plants=PLANTS, classes=CLASSES,
                             example=lambda ex: f"vLLM {ex.get('vllm')}, model {ex['model']}, rule {ex['rule']}")


if __name__ == "__main__":
    raise SystemExit(main())
