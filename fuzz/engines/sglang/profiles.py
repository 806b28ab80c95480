"""What an SGLang release serves of the generated domain, found by inspecting the release (issue 33):
``swafloor matrix sglang`` draws a cell's configs inside it, so a release is not measured mostly on
configs its allocator refuses.

- Block sizes: a release whose ``SWATokenToKVPoolAllocator`` has no ``page_size`` parameter (0.5.7:
  token slots only) serves a block of 1 token only (the backends refuse a paged config there,
  :meth:`~.backend.SglangBackend._take`); its cells draw ``tokens_per_block = 1`` only (else eight of
  the generator's nine block sizes are discarded: 84% of 0.5.7's examples were).

The semantics are the pinned release's on every release (the release differences found so far are
either re-enacted by the adapter or named as divergence classes with their traces).
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
        allocator = import_sglang()["Allocator"]
    except Unsupported:  # not importable here: the cell says so when it builds its backend
        return capabilities
    if "page_size" not in parameters(allocator):
        return attrs.evolve(capabilities, tokens_per_block=(1,))
    return capabilities
