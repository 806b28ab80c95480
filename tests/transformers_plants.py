"""Bugs planted in transformers' continuous-batching paged cache (in the transformers venv), for
tests/test_transformers_cb.py. Each changes the engine's behaviour through a named hook of the
adapter (:class:`~swafloor.fuzz.engines.transformers.backend.TransformersCbBackend`), and records the
first call where it changed something, so the test can hold the divergence to that step:

- ``read_one_token_off``: a sliding window's read indices are the ones its allocator gives for the
  window one token earlier (``past - 1``, one more sentinel dropped): a read index one token off, what
  transformers 4.57 to 5.19 shipped once the window had filled.
- ``window_block_never_freed``: a finished or offloaded request's sliding-window blocks are never
  given back (only the full attention allocator frees): a block the request no longer owns stays in
  its table.
- ``engine_raises``: transformers' own ``get_write_indices`` of the sliding-window allocator raises
  ``ValueError`` once a request's history reaches 3 tokens: an exception inside the engine's code.

``python -m tests.transformers_plants EXAMPLES OUT NAME...`` runs the ci profile of ``transformers-cb``
with each plant in turn, replays the shrunk trace on a fresh planted backend step by step, and prints one JSON
line per plant: the campaign's exit code and report, and the index of the step at which the plant first fired.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

from swafloor.fuzz.engines.transformers import backend as tb
from swafloor.fuzz.protocol import factory

#: The index of the step being applied (set by the replay below) and the first step a plant fired at.
STEP = {"index": None, "fired": None}


def _fired() -> None:
    if STEP["fired"] is None:
        STEP["fired"] = STEP["index"]


class ReadOneTokenOff(tb.TransformersCbBackend):
    def reads_of(self, g: int, request_id: str, past: int, n: int) -> list[int]:
        real = super().reads_of(g, request_id, past, n)
        if self.windows[g] is None or past == 0:
            return real
        planted = list(self.allocators[g].get_read_indices(request_id, past - 1, n + 1))[:-1]
        if planted != real:
            _fired()
        return planted


class WindowBlockNeverFreed(tb.TransformersCbBackend):
    def release(self, request_id: str) -> None:
        kept = {g: self.table(g, request_id) for g, w in enumerate(self.windows) if w is not None}
        if any(kept.values()):
            _fired()
        if self.shape == "sectors":
            for a, w in zip(self.allocators, self.windows):
                if w is None:
                    a.free_blocks(request_id)
            return
        free = self.cache._block_manager if self.shape == "ring-ledger" else self.cache._free_blocks
        for a, w in zip(self.allocators, self.windows):
            if w is None:
                a.free_blocks(request_id, free)


class EngineRaises(tb.TransformersCbBackend):
    def __init__(self, config: Any):
        super().__init__(config)
        for a, w in zip(self.allocators, self.windows):
            if w is not None and not getattr(type(a), "_planted", False):
                original = type(a).get_write_indices

                def raising(allocator, request_id, past_length, query_length, _original=original):
                    if past_length >= 3:
                        _fired()
                        raise ValueError(f"planted: write indices refused at past_length={past_length}")
                    return _original(allocator, request_id, past_length, query_length)

                type(a).get_write_indices = raising
                type(a)._planted = True


class SectorsReclaimed(tb.TransformersCbBackend):
    """Not a bug: the fix docs/findings.md 12 suggests (wholly free sectors handed back to the pool
    before each allocation), to show that the sector class is exactly that."""

    def allocate(self, req: Any, n: int) -> bool:
        if self.shape == "sectors":
            self.pool.try_to_free_sectors()
        return super().allocate(req, n)


_CAPS = tb.capabilities()
read_one_token_off = factory(_CAPS, name="transformers-cb+read-one-token-off")(lambda config: ReadOneTokenOff(config))
window_block_never_freed = factory(_CAPS, name="transformers-cb+window-block-never-freed")(
    lambda config: WindowBlockNeverFreed(config))
engine_raises = factory(_CAPS, name="transformers-cb+engine-raises")(lambda config: EngineRaises(config))
sectors_reclaimed = factory(_CAPS, name="transformers-cb+sectors-reclaimed")(lambda config: SectorsReclaimed(config))
PLANTS = {"read_one_token_off": ReadOneTokenOff, "window_block_never_freed": WindowBlockNeverFreed,
          "engine_raises": EngineRaises}


def _replay_fired(cls: type, trace_file: str) -> int | None:
    """Apply the trace's steps to a fresh planted backend alone: the index of the step it first fired at."""
    from swafloor.fuzz.trace import load

    trace = load(trace_file)
    STEP["fired"] = None
    backend = cls(trace.config)
    for index, step in enumerate(trace.steps):
        STEP["index"] = index
        try:
            getattr(backend, step.op.value)(step.request, *step.arguments().values())
        except Exception:  # noqa: BLE001 - the step the check (or the engine) failed at: firing is recorded
            break
        if STEP["fired"] is not None:
            break
    return STEP["fired"]


def main(argv: list[str]) -> int:
    examples, out, names = argv[0], argv[1], argv[2:]
    from swafloor.cli import main as cli

    # The campaign imports this module by its name (MODULE:FACTORY); run as __main__ it is a second
    # copy: the plants' records live in the named one.
    from tests import transformers_plants as named

    for name in names:
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = cli(["fuzz", "--backend", f"tests.transformers_plants:{name}", "--profile", "ci", "--examples",
                        examples, "--json", "--out", f"{out}/{name}"])
        report = json.loads(stdout.getvalue())
        trace_file = report.get("trace_file")
        fired = named._replay_fired(named.PLANTS[name], trace_file) if trace_file else None
        print(json.dumps({"plant": name, "code": code, "report": report, "fired": fired}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
