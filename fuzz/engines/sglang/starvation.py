"""The forward clock's starvation, shown on SGLang's own objects (run in the SGLang venv with a release whose
scheduler has the forward cadence, 0.5.14-0.5.17 on ``PYTHONPATH``):
``python -m swafloor.fuzz.engines.sglang.starvation [e]`` prints one JSON object.

SGLang's allocator (``SWATokenToKVPoolAllocator``, a row per request) and its own
``ScheduleBatch.maybe_evict_swa`` deciding each step (:class:`.cadence.SchedulerCadence`), as
``sglang-lazy`` drives them: t = 1, one SWA layer of W = 2 (``sliding_window_size`` 1), ample pools,
``SGLANG_SWA_EVICTION_INTERVAL = e`` (default 128). Two requests, "a" then "b", each prefill 3 tokens
(forwards 1 and 2), then rounds of one decode each, "a" first: "a"'s forwards are 3, 5, 7, ..., so every
decode of "a" reads an odd ``forward_iter`` (its last forward) and, for an even ``e``, is never a
maintenance step; "b" reads even ones and is slid every time its number is a multiple of ``e``. In the
engine this is a decode batch whose forwards alternate with other batches' (one prefill between two
decode forwards): the batch's ``forward_iter`` keeps the parity it had. The report gives the SWA pages
each request holds after each round (read from SGLang's row and ``full_to_swa_index_mapping``), the
window's own need (``in_flight_floor``, 2 pages), and whether the reference under ``eviction_clock =
forwards`` holds the same at every step.
"""

from __future__ import annotations

import json
import sys

from swafloor.reference import AttentionLayer, Config, Manager, in_flight_floor

from .backend import SglangBackend, import_sglang, semantics
from .cadence import scheduler_rule
from ...protocol import Part

__all__ = ["run"]


def run(e: int = 128, rounds: int = 300) -> dict:
    import attrs

    parts = import_sglang()
    rule = scheduler_rule()
    sem = attrs.evolve(semantics(e), eviction_clock="forwards")
    config = Config(1, [AttentionLayer(window=2)], slots=[2 * rounds + 16], semantics=sem)
    engine, ref = SglangBackend(config, eviction_interval=e), Manager(config)
    agree = True
    for side in (engine, ref):
        for rid in ("a", "b"):
            side.create(rid)
            side.resume(rid)
            assert side.resize(rid, 3, 0)
            side.commit(rid, 3)
    held = {"a": [], "b": []}
    for h in range(3, 3 + rounds):
        for rid in ("a", "b"):
            for side in (engine, ref):
                assert side.resize(rid, h + 1, h), (rid, h)
                side.commit(rid, 1)
            pages = sum(1 for b in engine.observe()[Part.TABLES][rid][0] if b is not None)
            agree &= pages == next(r for r in ref.snapshot().requests if r.request_id == rid).tables[0].held_count
            held[rid].append(pages)
    return {"sglang": parts["version"], "rule": rule, "e": e, "rounds": rounds, "window_pages": in_flight_floor(1, 2, 0, 0),
            "a_most": max(held["a"]), "a_last": held["a"][-1], "b_most": max(held["b"]), "b_last": held["b"][-1],
            "reference_forwards_agrees": agree}


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 128)))
