"""Progress properties of TensorRT-LLM KVCacheManagerV2's whole manager (issue 31), driven through the
``trtllm-v2`` adapter (:class:`~.v2.TrtllmV2Backend`) on a package namespace: upstream's, loaded from a
source folder, or the tests' fake.

Each property runs on the small fixed configs of :data:`CONFIGS` (every one a lone request with a
one-token prompt that then decodes: commit 1 token, ``resize(h + 1, h)``) and gives, per config,
pass, fail (with the step, the history, the life cycles of the pool group short of slots, and the
operations as a replayable trace) or not supported by the source. What each checks, and the theorem
of the reference that states it (the reference's side of each property is proved, not compared here):

- ``lone-completes``: on pools of the rule's minimum (the quota the reference's layout asks), every
  resize of the run returns True, and upstream's pools are the minimum. Theorems ``decode-sufficient``,
  ``pool-group-sufficient`` and ``lone-request-completes``. A run with full attention stops at the
  capacity full attention's minimum holds (``full_attention_max_capacity``): that is its length.
- ``suspended-resumes`` (``-host``: with a host tier of the GPU quota's size, where the source has
  ``HostCacheTierConfig``): the same run, suspended after every step and resumed at once, the resume
  gate off (``max_util_for_resume = 1.0``, as the campaigns set it): every resume returns True and the
  run completes. Theorem ``kept-lone-request-resumes``.
- ``resume-gate``: the same with upstream's default gate (``max_util_for_resume = 0.97``): every
  resume's outcome equals the modelled gate (``peers.trtllm_resume_admits``) on upstream's own pool
  statistics at that moment; the run ends at the first refusal. That the gate refuses such a request
  is the refuted theorem ``trtllm-resume-gate-admits-kept-lone-request``: a refusal agreeing with
  the model passes; a disagreement (either way) fails.
- ``quota-below-minimum``: asked 1 slot per pool group (a quota below the minimum, which upstream
  raises silently), every pool group holds at least the rule's minimum. A pool below it is then run
  as ``lone-completes`` to show where the lone request runs out (the seed's deadlock on a pre-fix
  source).
- ``initial-pool-ratio``: the minimum's quota split by skewed ``initial_pool_ratio`` (each pool group
  in turn asked for almost all of it): every pool group holds at least the rule's minimum.

No theorem states the last two: the reference's raise to the minimum is ``max(asked, minimum)`` by
construction (``BelowMinimum.BUMP``), which a solver would not be deciding. Values the adapter sets
(the quota, ratios, gate, token ids) are inputs, never compared; upstream's pool totals, resize and
resume outcomes and pool statistics are what is observed.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import attrs

from swafloor.reference import AttentionLayer, Config, build_layout, peers
from swafloor.reference.config import BelowMinimum
from swafloor.reference.floors import full_attention_max_capacity, worst_case_history
from swafloor.reference.lifecycle import LifeCycleKind

from ...protocol import Part, Unsupported
from .v2 import SEMANTICS, TrtllmV2Backend

__all__ = ["CONFIGS", "PROPERTIES", "PropertyResult", "run_progress", "run_length"]

PROPERTIES = ("lone-completes", "suspended-resumes", "suspended-resumes-host", "resume-gate",
              "quota-below-minimum", "initial-pool-ratio")
THEOREMS = {
    "lone-completes": ("decode-sufficient", "pool-group-sufficient", "lone-request-completes"),
    "suspended-resumes": ("kept-lone-request-resumes",),
    "suspended-resumes-host": ("kept-lone-request-resumes",),
    "resume-gate": ("trtllm-resume-gate-admits-kept-lone-request",),
    "quota-below-minimum": (),
    "initial-pool-ratio": (),
}


def _config(t: int, layers: list, pool_groups: tuple[int, ...] | None = None) -> Config:
    return Config(t, layers, pool_groups=pool_groups, semantics=SEMANTICS)


#: Small configs, each with a window its floor is not trivially 1 for: the seed (W = t = 4); a sink and
#: ``(W - 1) % t == 0`` beside full attention in pool groups of their own; two windows and full
#: attention in one pool group; two layers of one life cycle; ``W < t``.
CONFIGS: tuple[Config, ...] = (
    _config(4, [AttentionLayer(4)]),
    _config(4, [AttentionLayer(5, sink_tokens=2), AttentionLayer()]),
    _config(2, [AttentionLayer(3), AttentionLayer(6, sink_tokens=1), AttentionLayer()], pool_groups=(0, 0, 0)),
    _config(8, [AttentionLayer(20), AttentionLayer(20)]),
    _config(8, [AttentionLayer(3)]),
)


@attrs.frozen
class PropertyResult:
    """One property on one config: ``ok`` True (held), False (failed: ``detail`` says where,
    ``operations`` are the steps that replay it, in the trace format's step dicts, on ``trtllm-v2``
    expecting ``expect``) or None (not supported by the source: ``detail['reason']``)."""

    name: str
    config: Config
    ok: bool | None
    steps: int = 0
    detail: dict = attrs.field(factory=dict)
    operations: tuple[dict, ...] | None = None
    expect: str = "divergence"

    def to_dict(self) -> dict[str, Any]:
        return {"property": self.name, "config": self.config.to_dict(), "ok": self.ok, "steps": self.steps,
                "theorems": list(THEOREMS[self.name]), "detail": self.detail,
                "operations": None if self.operations is None else list(self.operations), "expect": self.expect}


#: Each operation's arguments, in the trace format's order.
_ARGS = {"create": ("reused_history",), "resume": (), "resize": ("capacity", "history"), "commit": ("tokens",),
         "suspend": (), "close": ()}


def op(name: str, **args: int) -> dict:
    """One operation of the lone request ``r0`` as a trace step dict."""
    return {"op": name, "request": "r0", **{k: args.get(k, 0) for k in _ARGS[name]}}


def describe(step: dict) -> str:
    """``resize('r0', capacity=5, history=4)``: an operation as the fuzz reports write it."""
    args = "".join(f", {k}={step[k]}" for k in _ARGS[step["op"]])
    return f"{step['op']}({step['request']!r}{args})"


def run_length(config: Config) -> int:
    """The last capacity of the lone request's run on ``config``: past every SWA life cycle's
    worst-case history by two blocks, and no further than full attention's minimum holds."""
    layout = build_layout(config)
    t = config.tokens_per_block
    swa = [lc for lc in layout.life_cycles if lc.kind is LifeCycleKind.SWA]
    length = max([worst_case_history(t, lc.window, lc.sink_blocks) + 2 * t for lc in swa] + [t])
    for lc_index, lc in enumerate(layout.life_cycles):
        if lc.kind is LifeCycleKind.FULL:
            group = layout.pool_group_of[lc_index]
            others = sum(_swa_floor_share(layout, i, t) for i in layout.life_cycles_of(group) if i != lc_index)
            length = min(length, full_attention_max_capacity(t, layout.min_slots[group] - others))
    return length


def _swa_floor_share(layout: Any, lc_index: int, t: int) -> int:
    from swafloor.reference.floors import swa_floor

    lc = layout.life_cycles[lc_index]
    if lc.kind is LifeCycleKind.SWA:
        return swa_floor(t, lc.window, lc.sink_blocks)
    return 0


def _life_cycles_of_group(config: Config, group: int) -> list[dict]:
    layout = build_layout(config)
    return [{"index": i, "kind": layout.life_cycles[i].kind.value, "window": layout.life_cycles[i].window,
             "sink_blocks": layout.life_cycles[i].sink_blocks} for i in layout.life_cycles_of(group)]


class _Run:
    """One lone request ``r0`` on one adapter, every operation recorded as a trace step."""

    def __init__(self, backend: TrtllmV2Backend):
        self.b = backend
        self.steps: list[dict] = []

    def do(self, step: dict) -> Any:
        self.steps.append(step)
        name, b, r = step["op"], self.b, step["request"]
        if name == "resize":
            return b.resize(r, step["capacity"], step["history"])
        if name == "commit":
            return b.commit(r, step["tokens"])
        return getattr(b, name)(r)  # create, resume, suspend, close

    def pools(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        seen = self.b.observe()
        return seen[Part.POOL_TOTALS], seen[Part.POOL_USED]


def _short_groups(config: Config, totals: tuple[int, ...], used: tuple[int, ...]) -> list[dict]:
    """The pool groups with no slot free or evictable (where a failing resize ran out)."""
    return [{"pool_group": g, "slots": totals[g], "in_use": used[g], "life_cycles": _life_cycles_of_group(config, g)}
            for g in range(len(totals)) if used[g] >= totals[g]]


def _decode(config: Config, backend: TrtllmV2Backend, *, suspend_each: bool = False,
            gate: tuple[int, int] | None = None, tick: Callable[[], None] = lambda: None) -> PropertyResult | dict:
    """The lone request's run; a dict of figures when it completes, else the failure's detail with
    its operations (a dict with ``failed``, ``operations`` and ``expect``)."""
    run = _Run(backend)
    last = run_length(config)
    run.do(op("create"))
    if not run.do(op("resume")):
        return _failed(config, run, "resume", 0, "the first resume of a fresh request returned False")
    h, refusals = 0, 0
    while h + 1 <= last:
        if not run.do(op("resize", capacity=h + 1, history=h)):
            totals, used = run.pools()
            return _failed(config, run, "resize", h, "resize returned False", short=_short_groups(config, totals, used))
        tick()
        if suspend_each:
            run.do(op("suspend"))
            totals, used = run.pools()
            admitted = run.do(op("resume"))
            if gate is not None:
                num, den = gate
                expected = all(peers.trtllm_resume_admits(u, n, num, den) for u, n in zip(used, totals))
                if bool(admitted) != expected:
                    return _failed(config, run, "resume", h + 1,
                                   f"upstream's resume returned {bool(admitted)}, the modelled gate "
                                   f"(use <= {num}/{den}) says {expected}", gated=True, totals=totals, used=used)
                if not admitted:
                    refusals += 1
                    return {"completed": False, "refused_at_history": h + 1, "totals": totals, "used": used,
                            "capacity": h + 1, "steps": len(run.steps)}
            elif not admitted:
                return _failed(config, run, "resume", h + 1, "resume returned False (gate off)",
                               totals=totals, used=used)
        run.do(op("commit", tokens=1))
        h += 1
    return {"completed": True, "last_capacity": last, "steps": len(run.steps)}


def _failed(config: Config, run: _Run, op: str, history: int, why: str, *, gated: bool = False, **more: Any) -> dict:
    """The failure's detail and its operations. They replay on ``trtllm-v2`` (gate off): a divergence
    is expected, except for a gate disagreement (``gated``), which the gate-off backend does not show."""
    return {"failed": {"at": describe(run.steps[-1]), "step_index": len(run.steps) - 1, "operation": op,
                       "history": history, "why": why, **more},
            "operations": tuple(run.steps), "expect": "match" if gated else "divergence", "steps": len(run.steps)}


def _result(name: str, config: Config, out: dict, extra: dict | None = None) -> PropertyResult:
    extra = dict(extra or {})
    if "failed" in out:
        return PropertyResult(name, config, False, out["steps"], {**extra, **out["failed"]}, out["operations"],
                              out["expect"])
    figures = {k: v for k, v in out.items() if k != "steps"}
    return PropertyResult(name, config, True, out["steps"], {**extra, **figures})


def _guarded(name: str, config: Config, body: Callable[[], PropertyResult]) -> PropertyResult:
    try:
        return body()
    except Unsupported as exc:
        return PropertyResult(name, config, None, detail={"reason": str(exc)})


def _dispose(backend: TrtllmV2Backend | None) -> None:
    if backend is not None:
        backend.dispose()


#: The hook :func:`run_progress` takes as ``wrap``: given each adapter built, the property's name and
#: its config, it returns what the property drives instead (an object with the adapter's operations,
#: ``observe()`` and ``dispose()``: e.g. a recorder of every call, as ``gpu_check`` uses).
Wrap = Callable[[TrtllmV2Backend, str, Config], Any]


def _with(config: Config, v2: Any, stream: Any, name: str, body: Callable[[TrtllmV2Backend], PropertyResult],
          wrap: Wrap | None = None, **options: Any) -> PropertyResult:
    def run() -> PropertyResult:
        backend = TrtllmV2Backend(config, v2, stream, **options)
        driven = backend if wrap is None else wrap(backend, name, config)
        try:
            return body(driven)
        finally:
            _dispose(driven)
    return _guarded(name, config, run)


def _minimum(config: Config) -> tuple[int, ...]:
    return build_layout(attrs.evolve(config, slots=None)).min_slots


def _pool_check(name: str, config: Config, backend: TrtllmV2Backend, asked: dict) -> PropertyResult:
    """Every pool group at least the rule's minimum; a pool below it run as the lone request, to show
    where it runs out."""
    totals, _used = _Run(backend).pools()
    minimum = _minimum(config)
    short = [g for g in range(len(minimum)) if totals[g] < minimum[g]]
    detail = {**asked, "upstream_totals": list(totals), "rule_minimum": list(minimum)}
    if not short:
        return PropertyResult(name, config, True, 0, detail)
    out = _decode(config, backend)
    detail["below_the_floor"] = [{"pool_group": g, "slots": totals[g], "floor": minimum[g],
                                  "life_cycles": _life_cycles_of_group(config, g)} for g in short]
    if "failed" in out:
        detail["lone_request_runs_out"] = out["failed"]
        return PropertyResult(name, config, False, out["steps"], detail, out["operations"])
    detail["lone_request_runs_out"] = None  # below the floor, yet this run completed (reported as it is)
    return PropertyResult(name, config, False, out["steps"], detail, (op("create"),))


def run_progress(v2: Any, stream: Any = 0, *, configs: tuple[Config, ...] = CONFIGS,
                 progress: Callable[[str, int, int], None] | None = None,
                 wrap: Wrap | None = None) -> list[PropertyResult]:
    """Every property of :data:`PROPERTIES` on every config of ``configs``; ``wrap``: see :data:`Wrap`."""
    results: list[PropertyResult] = []
    total = len(PROPERTIES) * len(configs)
    done = [0]

    def tick(name: str) -> None:
        done[0] += 1
        if progress is not None:
            progress(f"progress properties ({name})", done[0], total)

    has_host = hasattr(v2, "HostCacheTierConfig")
    for config in configs:
        results.append(_with(config, v2, stream, "lone-completes",
                             lambda b, c=config: _pool_totals_then(c, b, "lone-completes", lambda: _decode(c, b)),
                             wrap))
        tick("lone-completes")
        results.append(_with(config, v2, stream, "suspended-resumes",
                             lambda b, c=config: _result("suspended-resumes", c, _decode(c, b, suspend_each=True)),
                             wrap))
        tick("suspended-resumes")
        if has_host:
            results.append(_with(config, v2, stream, "suspended-resumes-host",
                                 lambda b, c=config: _result("suspended-resumes-host", c,
                                                             _decode(c, b, suspend_each=True)),
                                 wrap, host_tier=True))
        else:
            results.append(PropertyResult("suspended-resumes-host", config, None,
                                          detail={"reason": "the source has no HostCacheTierConfig"}))
        tick("suspended-resumes-host")
        gate = peers.TRTLLM_MAX_UTIL_FOR_RESUME
        results.append(_with(config, v2, stream, "resume-gate",
                             lambda b, c=config: _result("resume-gate", c, _decode(c, b, suspend_each=True, gate=gate),
                                                         {"max_util_for_resume": gate[0] / gate[1]}),
                             wrap, max_util_for_resume=gate[0] / gate[1]))
        tick("resume-gate")
        below = attrs.evolve(config, slots=(1,) * build_layout(config).num_pool_groups, below_minimum=BelowMinimum.BUMP)
        results.append(_with(below, v2, stream, "quota-below-minimum",
                             lambda b, c=below: _pool_check("quota-below-minimum", c, b, {"asked_slots": list(c.slots)}),
                             wrap))
        tick("quota-below-minimum")
        results.append(_ratio(config, v2, stream, wrap))
        tick("initial-pool-ratio")
    return results


def _pool_totals_then(config: Config, backend: TrtllmV2Backend, name: str, body: Callable[[], dict]) -> PropertyResult:
    """``lone-completes``: upstream's pools are the rule's minimum (asked exactly that), then the run."""
    totals, _ = _Run(backend).pools()
    minimum = _minimum(config)
    if tuple(totals) != tuple(minimum):
        return PropertyResult(name, config, False, 0,
                              {"why": "upstream's pools are not the minimum asked", "upstream_totals": list(totals),
                               "rule_minimum": list(minimum)},
                              (op("create"),))
    return _result(name, config, body(), {"pools": list(totals)})


def _ratio(config: Config, v2: Any, stream: Any, wrap: Wrap | None = None) -> PropertyResult:
    """``initial-pool-ratio``: the minimum's quota, each pool group in turn asked for all but one
    byte per other pool group of it (a config of one pool group: its one ratio, 1.0)."""
    from .mapping import to_trtllm
    from .v2 import UNIT_BYTES

    layout = build_layout(config)
    tl = to_trtllm(config, unit_bytes=UNIT_BYTES)
    quota = sum(n * size for n, size in zip(layout.min_slots, tl.slot_sizes))
    groups = layout.num_pool_groups
    last: PropertyResult | None = None
    for favoured in range(groups):
        sizes = tuple(quota - (groups - 1) if g == favoured else 1 for g in range(groups))
        result = _with(config, v2, stream, "initial-pool-ratio",
                       lambda b, s=sizes: _pool_check("initial-pool-ratio", config, b,
                                                      {"initial_pool_ratio": [x / quota for x in s],
                                                       "quota_bytes": quota}),
                       wrap, pool_bytes=sizes)
        if result.ok is not True:
            return result
        last = result
    assert last is not None
    return last


def summary(results: list[PropertyResult]) -> dict[str, dict[str, int]]:
    """Per property: configs held, failed, not supported."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        row = out.setdefault(r.name, {"held": 0, "failed": 0, "not_supported": 0})
        row["held" if r.ok else "failed" if r.ok is False else "not_supported"] += 1
    return out


def timed(v2: Any, stream: Any = 0, **kwargs: Any) -> tuple[list[PropertyResult], float]:
    started = time.perf_counter()
    results = run_progress(v2, stream, **kwargs)
    return results, round(time.perf_counter() - started, 2)
