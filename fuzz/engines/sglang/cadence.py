"""When SGLang's scheduler runs the sliding-window eviction, on releases whose eviction function has no
``eviction_interval`` of its own (``sglang-lazy``, issue 33).

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
  (self.forward_iter or 0) % eviction_interval == 0``): every request of the batch is slid on the
  forwards whose batch-wide counter (the scheduler's ``forward_ct``) is a multiple of ``e``. A counter of
  the whole scheduler's forwards, not of a request's tokens: the protocol's per-request steps have no
  such counter and the reference's interval is the token gate, so :class:`Unsupported`, saying so.
- the per-request decode counter (read in 0.5.13.post1: ``req.decode_batch_idx % eviction_interval ==
  1``, the interval ``max(P, int(sliding_window_size * SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER))``
  floored to a page): slid on a request's decodes 1, e + 1, 2e + 1, ..., with an interval made from
  the window. Not the reference's gate either: :class:`Unsupported`, saying so.
- no ``maybe_evict_swa`` (read in 0.5.7): the chunk cache's ``evict_swa`` runs before every extend and
  decode allocation (``alloc_for_extend``, ``alloc_for_decode``), no interval at all: that behaviour is
  the ``sglang`` cell's; :class:`Unsupported`, saying so.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any, Callable

from ...protocol import Unsupported

__all__ = ["scheduler_rule", "rule_of", "TokenGate", "gate"]


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
    "forward-cadence": "its scheduler slides every request's window on the forwards whose batch-wide counter is a "
                       "multiple of the interval (ScheduleBatch.maybe_evict_swa: forward_iter % eviction_interval == 0), "
                       "a counter of the scheduler's forwards that per-request steps do not have and the reference's "
                       "interval (a token gate) does not state",
    "decode-counter": "its scheduler slides a request's window on its decodes 1, e + 1, 2e + 1, ... with e made from the "
                      "window (ScheduleBatch.maybe_evict_swa: decode_batch_idx % eviction_interval == 1, eviction_interval "
                      "= page-floored max(page, window x SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER)): a decode counter, "
                      "not the reference's token gate",
    "none": "it has no eviction interval at all: the chunk cache's evict_swa runs before every extend and decode "
            "allocation (alloc_for_extend, alloc_for_decode), which is the sglang cell's behaviour",
    "unknown": "its ScheduleBatch.maybe_evict_swa has none of the interval rules read (token gate, forward cadence, "
               "decode counter)",
}


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


def gate(fn: Callable[..., Any], interval: int, version: str) -> TokenGate:
    """``fn`` under the release's scheduler rule for ``interval`` (above 1), where ``fn`` has no interval
    parameter: a :class:`TokenGate`, or :class:`Unsupported` saying which rule the release has instead."""
    rule = scheduler_rule()
    if rule == "token-gate":
        return TokenGate(fn, interval)
    name = getattr(fn, "path", "free_swa_out_of_window_slots")
    raise Unsupported(f"SGLang {version}'s {name} has no eviction_interval, and {_WHY[rule]}")
