"""``alloc_decode``'s non-atomicity, shown on SGLang's own allocator (run in the SGLang venv):
``python -m swafloor.fuzz.engines.sglang.finding`` prints one JSON object.

One SWA layer (W = 8) and full attention, page size 4, an SWA pool of 2 pages (below the window's 3)
and a full pool of 10: a lone request decodes until its third SWA page is due while nothing has left
the window. The reference says "out of slots" and changes nothing. Driven by a caller that checks
capacity first (the ``sglang`` backend, as SGLang's scheduler does), SGLang agrees. Driven by one that
does not (``sglang_unchecked``), ``alloc_decode`` takes a full-pool page, finds the SWA pool short and
returns None: the page is gone (neither held by any request nor in the free list), each retry loses
one more, and closing the request does not return them. Physical identity sees it at the failing call.
"""

from __future__ import annotations

import json
import sys

from swafloor.reference import AttentionLayer, Config, Manager, build_layout

from .backend import SglangBackend, semantics
from ...identity import integrity
from ...protocol import Part

__all__ = ["run"]

CONFIG = Config(
    tokens_per_block=4,
    layers=[AttentionLayer(window=8), AttentionLayer(window=None)],
    slots=(2, 10),
    floor_rule="legacy",
    semantics=semantics(1),
)
RETRIES = 3


def _side(precheck: bool) -> dict:
    layout = build_layout(CONFIG)
    backend = SglangBackend(CONFIG, eviction_interval=1, precheck=precheck)
    ref = Manager(CONFIG)
    backend.create("r0")
    ref.create("r0")
    assert backend.resume("r0").ok and ref.resume("r0").ok
    h = 0
    while True:  # decode until the reference runs out
        want = ref.resize("r0", h + 1, h)
        got = backend.resize("r0", h + 1, h)
        if not want.ok:
            break
        assert got.ok, f"SGLang failed where the reference did not, at h={h}"
        ref.commit("r0", 1)
        backend.commit("r0", 1)
        h += 1
    full_group = layout.pool_group_of[1]
    rows = []
    for attempt in range(RETRIES):
        if attempt:
            got = backend.resize("r0", h + 1, h)
            want = ref.resize("r0", h + 1, h)
        seen = backend.observe()
        rows.append({
            "outcome": {"reference": want.ok, "sglang": got.ok},
            "full_pages_used": {"reference": ref.snapshot().pools[full_group].total - ref.snapshot().pools[full_group].free,
                                "sglang": seen[Part.POOL_USED][full_group]},
            "integrity": integrity(seen[Part.SLOTS], layout.slots, layout.pool_group_of),
        })
    backend.close("r0")
    ref.close("r0")
    after = backend.observe()
    return {
        "failed_at_history": h,
        "attempts": rows,
        "after_close_full_pages_used": after[Part.POOL_USED][full_group],
        "after_close_integrity": integrity(after[Part.SLOTS], layout.slots, layout.pool_group_of),
    }


def run() -> dict:
    return {"config": CONFIG.to_dict(), "checked_caller": _side(True), "unchecked_caller": _side(False)}


if __name__ == "__main__":
    json.dump(run(), sys.stdout, indent=1, default=str)
    print()
