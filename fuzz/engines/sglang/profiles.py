"""What an SGLang release serves of the generated domain, found by inspecting the release (issue 33):
``swafloor matrix sglang`` draws a cell's configs inside it, so a release is not measured mostly on
configs its allocator refuses.

- Block sizes: a release whose ``SWATokenToKVPoolAllocator`` has no ``page_size`` parameter (0.5.7:
  token slots only) serves a block of 1 token only (the backends refuse a paged config there,
  :meth:`~.backend.SglangBackend._take`); its cells draw ``tokens_per_block = 1`` only (else eight of
  the generator's nine block sizes are discarded: 84% of 0.5.7's examples were).

- When eviction runs (issue 33): a backend claiming an eviction interval above 1 (``sglang-lazy``,
  ``dataplane:sglang-lazy``) on a release whose ``free_swa_out_of_window_slots`` takes no interval has
  the release's scheduler rule (:func:`.cadence.scheduler_rule`, read from ``ScheduleBatch.maybe_evict_swa``):
  the forward cadence (0.5.14-0.5.17) is ``eviction_clock = forwards``; the decode counter (0.5.13.post1)
  is ``eviction_clock = decodes`` with ``window_interval`` (its interval made from the window); the token
  gate (0.5.18-0.5.20) is the pinned semantics' own.

Every other semantics is the pinned release's on every release (the release differences found so far
are either re-enacted by the adapter or named as divergence classes with their traces).
"""

from __future__ import annotations

from typing import Any

import attrs

from ..common import parameters

__all__ = ["profile_capabilities"]


def profile_capabilities(release: str, capabilities: Any) -> Any:
    """``capabilities`` restricted to what the imported release serves (``release`` is not read: the
    release imported in this process is inspected)."""
    from ...protocol import Unsupported
    from .backend import import_sglang

    try:
        parts = import_sglang()
    except Unsupported:  # not importable here: the cell says so when it builds its backend
        return capabilities
    if "page_size" not in parameters(parts["Allocator"]):
        capabilities = attrs.evolve(capabilities, tokens_per_block=(1,))
    semantics = capabilities.semantics
    if semantics.eviction_interval > 1 and "eviction_interval" not in parameters(parts["free_swa_out_of_window_slots"]):
        from .cadence import scheduler_rule

        clock = {"forward-cadence": dict(eviction_clock="forwards"),
                 "decode-counter": dict(eviction_clock="decodes", window_interval=True)}.get(scheduler_rule())
        if clock is not None:
            capabilities = attrs.evolve(capabilities, semantics=attrs.evolve(semantics, **clock))
    return capabilities
