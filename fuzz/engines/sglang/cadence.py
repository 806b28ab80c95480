"""When SGLang's scheduler runs the sliding-window eviction, on releases whose eviction function has no
``eviction_interval`` of its own (``sglang-lazy``, ``dataplane:sglang-lazy``, issue 33).

From 0.5.21 ``free_swa_out_of_window_slots`` takes the interval itself and the backends pass it. Before,
the interval is applied by the scheduler batch's ``ScheduleBatch.maybe_evict_swa``, which decides per
request whether to call the eviction at all. Which rule a release has is read from that method's source
(the text of ``managers/schedule_batch.py``, found with ``importlib.util.find_spec``, not imported and
not keyed on the release's number):

- the token gate (read in 0.5.18-0.5.20: ``req.seqlen - 1 - sliding_window_size >=
  req.kv.swa_evicted_seqlen + eviction_interval``): a request's window is slid only once at least
  ``e`` tokens have left it since its eviction cursor. Re-enacted here as :class:`TokenGate`: with
  ``pre_len = seqlen - 1`` (the KV already computed, what the adapter passes), the eviction function,
  SGLang's own, is called only when ``pre_len - sliding_window_size >= cursor + e``, the cursor being
  the request's ``swa_evicted_seqlen`` that SGLang's function writes. That is the rule the reference's
  ``eviction_interval`` states (``h + 1 - W >= cursor + e`` with ``sliding_window_size = W - 1``).
  Not re-enacted, as on 0.5.21 on (where the function's own interval is passed on every step): the
  scheduler gates decode steps only (a chunk cache's extend evicts every time) and skips a request's
  first decode (``decode_batch_idx >= 1``, the overlap scheduler's).
- the forward-iteration cadence (read in 0.5.14-0.5.17: ``swa_maintenance_step =
  (self.forward_iter or 0) % eviction_interval == 0``, ``eviction_interval = max(1,
  SGLANG_SWA_EVICTION_INTERVAL)``): on a decode batch every request with ``decode_batch_idx >= 1`` is
  slid when the batch's ``forward_iter`` is a multiple of ``e``; an extend batch with the chunk cache
  evicts every request every time. ``maybe_evict_swa`` runs in the batch's preparation
  (``alloc_for_decode`` / ``alloc_for_extend``), before ``Scheduler.run_batch`` sets ``forward_ct += 1;
  batch.forward_iter = forward_ct``: a decode reads the number its batch got at its last run, and the
  prefill forwards run between two decode forwards advance the counter, so a multiple of ``e`` can be
  skipped: the reference's ``eviction_clock = forwards``.
- the per-request decode counter (read in 0.5.13.post1: ``req.decode_batch_idx % eviction_interval ==
  1``, the interval ``max(P, int(sliding_window_size * SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER))``
  floored to a page): slid on a request's decodes 1, e + 1, 2e + 1, ... (``decode_batch_idx`` counts its
  decodes before this one, raised after the allocation), with an interval made from the window: the
  reference's ``eviction_clock = decodes`` with ``window_interval`` (the multiplier at its default, 1).
- no ``maybe_evict_swa`` (read in 0.5.7): the chunk cache's ``evict_swa`` runs before every extend and
  decode allocation (``alloc_for_extend``, ``alloc_for_decode``), no interval at all: that behaviour is
  the ``sglang`` cell's; :class:`Unsupported`, saying so.

On the last two the adapter drives the release's own ``ScheduleBatch.maybe_evict_swa``
(:class:`SchedulerCadence`): its ``self`` a stand-in batch of the one request stepping (the cache's
window and page size, the row pool, the allocator, the forward mode, ``forward_iter``, ``prefix_lens``,
no overlap), its ``_evict_swa`` SGLang's own. The counters are the adapter's inputs, fed from the
protocol's steps as the reference counts them (:mod:`swafloor.reference.cadence`): a step asking one
token past a computed history (``c = h + 1``, ``h >= 1``) is a decode (``ForwardMode.DECODE``,
``seqlen = h + 1``), any other an extend (``ForwardMode.EXTEND``, ``prefix_lens = [h]``); a request's
``decode_batch_idx`` is its decodes since it was last resumed; each resize that succeeds and raises the
capacity is one forward of the backend (its ``forward_ct``; one asking nothing new runs no batch, so
nothing is called), and a step's ``forward_iter`` is the number its request's previous step got (None,
read as 0, before any). What is observed is what SGLang's method freed. The interval
is set as the release reads it, for the call: ``SGLANG_SWA_EVICTION_INTERVAL`` (the backend's ``e``),
``SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER`` at 1.0 (its default); the module's server-args accessor
(``get_global_server_args``, ``get_server_args`` from 0.5.16: the method reads it, and uses it only under
overlap, not driven) answers a stand-in for the call (no server args are set in this process).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
from typing import Any, Callable, Iterator, NamedTuple

from ...protocol import Unsupported
from .facts import ChunkCacheFacts

__all__ = ["scheduler_rule", "rule_of", "TokenGate", "SchedulerCadence", "Clock", "gate"]


def _method_source(module: str, method: str) -> str | None:
    """The text of ``def method`` in ``module``'s file, up to the next ``def`` at its indentation, or
    None when the file or the method is not there."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    with open(spec.origin, encoding="utf-8") as handle:
        text = handle.read()
    found = re.search(rf"^( *)def {method}\(", text, flags=re.M)
    if found is None:
        return None
    indent = found.group(1)
    end = re.search(rf"^{indent}(?:def |@|class )", text[found.end():], flags=re.M)
    return text[found.start(): found.end() + end.start() if end else len(text)]


_TOKEN_GATE = re.compile(r"seqlen\s*-\s*1\s*-\s*sliding_window_size\s*>=\s*req\.kv\.swa_evicted_seqlen\s*\+\s*eviction_interval")
_FORWARD_CADENCE = re.compile(r"forward_iter[^\n]*%\s*eviction_interval\s*==\s*0")
_DECODE_COUNTER = re.compile(r"decode_batch_idx\s*%\s*eviction_interval\s*==\s*1")


def scheduler_rule() -> str:
    """Which rule the imported release's ``ScheduleBatch.maybe_evict_swa`` has (:func:`rule_of`)."""
    return rule_of(_method_source("sglang.srt.managers.schedule_batch", "maybe_evict_swa"))


def rule_of(source: str | None) -> str:
    """Which rule a ``maybe_evict_swa`` source has: ``"token-gate"``, ``"forward-cadence"``,
    ``"decode-counter"``, ``"none"`` (no such method: None) or ``"unknown"``."""
    if source is None:
        return "none"
    if _TOKEN_GATE.search(source):
        return "token-gate"
    if _FORWARD_CADENCE.search(source):
        return "forward-cadence"
    if _DECODE_COUNTER.search(source):
        return "decode-counter"
    return "unknown"


_WHY = {
    "none": "it has no eviction interval at all: the chunk cache's evict_swa runs before every extend and decode "
            "allocation (alloc_for_extend, alloc_for_decode), which is the sglang cell's behaviour",
    "unknown": "its ScheduleBatch.maybe_evict_swa has none of the interval rules read (token gate, forward cadence, "
               "decode counter)",
}


class Clock(NamedTuple):
    """A step's counters, as the adapter feeds them: whether it is a decode, the request's decodes since
    it was last resumed, the forward number of its previous step (0 before any)."""

    decode: bool
    decodes: int
    seen: int


class TokenGate:
    """The token gate of SGLang's scheduler (0.5.18-0.5.20, see the module docstring): ``fn`` (SGLang's
    eviction, called as the scheduler calls it) runs only when ``pre_len - sliding_window_size >=
    cursor + interval``; otherwise nothing is called."""

    def __init__(self, fn: Callable[..., Any], interval: int):
        self.fn, self.interval = fn, interval
        self.path = getattr(fn, "path", getattr(fn, "__name__", "free_swa_out_of_window_slots"))

    def __call__(self, req: Any, pre_len: int, *, sliding_window_size: int, **kwargs: Any) -> None:
        if pre_len - sliding_window_size >= req.swa_evicted_seqlen + self.interval:
            self.fn(req, pre_len, sliding_window_size=sliding_window_size, **kwargs)


class _ServerArgs:
    """The stand-in server args ``maybe_evict_swa`` reads where none are set (only under overlap,
    which the adapter does not drive: no chunked prefill size)."""

    chunked_prefill_size = -1


class _BatchFacts(ChunkCacheFacts):
    """The stand-in ``self`` of ``ScheduleBatch.maybe_evict_swa``: a batch of the one request stepping,
    with what the method and SGLang's ``_evict_swa`` read (the cache's window and page size, the row
    pool, the allocator, as :class:`~.facts.ChunkCacheFacts`; the forward mode and number, the prefix
    length, no overlap)."""

    enable_overlap = False

    def __init__(self, req: Any, pre_len: int, forward_mode: Any, forward_iter: int, sliding_window_size: int,
                 page_size: int, req_to_token_pool: Any, token_to_kv_pool_allocator: Any):
        super().__init__(sliding_window_size, page_size, req_to_token_pool, token_to_kv_pool_allocator)
        self.reqs = [req]
        self.prefix_lens = [pre_len]
        self.forward_mode, self.forward_iter = forward_mode, forward_iter


class SchedulerCadence:
    """The release's own ``ScheduleBatch.maybe_evict_swa`` (``rule``: ``forward-cadence`` or
    ``decode-counter``) on a :class:`_BatchFacts` of the stepping request, its counters a :class:`Clock`
    (see the module docstring); ``interval`` is ``SGLANG_SWA_EVICTION_INTERVAL`` for the call."""

    def __init__(self, interval: int, rule: str):
        module = importlib.import_module("sglang.srt.managers.schedule_batch")
        self.module, self.interval, self.rule = module, interval, rule
        batch = module.ScheduleBatch
        self.facts = type("_ScheduleBatchFacts", (_BatchFacts,), {
            "maybe_evict_swa": batch.maybe_evict_swa, "_evict_swa": batch._evict_swa})
        self.modes = (module.ForwardMode.DECODE, module.ForwardMode.EXTEND)
        self.path = "ScheduleBatch.maybe_evict_swa"

    @contextlib.contextmanager
    def _release_settings(self) -> Iterator[None]:
        saved = {k: os.environ.get(k) for k in ("SGLANG_SWA_EVICTION_INTERVAL", "SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER")}
        os.environ["SGLANG_SWA_EVICTION_INTERVAL"] = str(self.interval)
        os.environ["SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER"] = "1.0"
        # the server args' accessor the release's module has (get_global_server_args; get_server_args from
        # 0.5.16): none is set in this process, so a stand-in answers for the call
        real = {name: getattr(self.module, name) for name in ("get_global_server_args", "get_server_args")
                if hasattr(self.module, name)}
        for name in real:
            setattr(self.module, name, _ServerArgs)
        try:
            yield
        finally:
            for name, function in real.items():
                setattr(self.module, name, function)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def __call__(self, req: Any, pre_len: int, *, clock: Clock, sliding_window_size: int, page_size: int,
                 req_to_token_pool: Any, token_to_kv_pool_allocator: Any, **flags: Any) -> None:
        req.decode_batch_idx = clock.decodes
        req.seqlen = pre_len + 1  # a decode's position: the KV computed and the token it computes
        req.extend_batch_idx = 1  # read only under overlap
        batch = self.facts(req, pre_len, self.modes[0] if clock.decode else self.modes[1], clock.seen,
                           sliding_window_size, page_size, req_to_token_pool, token_to_kv_pool_allocator)
        with self._release_settings():
            batch.maybe_evict_swa()


def gate(fn: Callable[..., Any], interval: int, version: str) -> TokenGate | SchedulerCadence:
    """``fn`` under the release's scheduler rule for ``interval`` (above 1), where ``fn`` has no interval
    parameter: a :class:`TokenGate`, the release's own scheduler method (:class:`SchedulerCadence`), or
    :class:`Unsupported` saying which rule the release has instead."""
    rule = scheduler_rule()
    if rule == "token-gate":
        return TokenGate(fn, interval)
    if rule in ("forward-cadence", "decode-counter"):
        return SchedulerCadence(interval, rule)
    name = getattr(fn, "path", "free_swa_out_of_window_slots")
    raise Unsupported(f"SGLang {version}'s {name} has no eviction_interval, and {_WHY[rule]}")
