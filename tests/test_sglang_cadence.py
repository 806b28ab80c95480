"""Issue 33, without SGLang (this environment): how ``sglang-lazy`` reads an older scheduler's eviction rule
(``fuzz/engines/sglang/cadence.py``), re-enacts its token gate or drives its own ``maybe_evict_swa`` with the
step's counters (a stand-in module here), and how a release profile gives a cell the release's eviction
clock and restricts the block sizes it draws (``fuzz/engines/sglang/profiles.py``).

The sources given to :func:`rule_of` are one-line paraphrases of the conditions read in the releases
(0.5.18's token gate, 0.5.14's forward counter, 0.5.13.post1's decode counter), not SGLang's code. The real
gate on a real release is tests/test_sglang_releases.py's (0.5.18, in the SGLang venv).
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swafloor.fuzz import matrix, strategies
from swafloor.fuzz.backends import resolve
from swafloor.fuzz.engines.sglang import backend, cadence, profiles
from swafloor.fuzz.protocol import Capabilities, Unsupported
from swafloor.fuzz.runner import domain_of

TOKEN_GATE = "if req.decode_batch_idx >= 1 and req.seqlen - 1 - sliding_window_size >= req.kv.swa_evicted_seqlen + eviction_interval:"
FORWARD = "swa_maintenance_step = (self.forward_iter or 0) % eviction_interval == 0"
DECODE = "if req.decode_batch_idx % eviction_interval == 1:"


@pytest.mark.parametrize("source, rule", [
    (TOKEN_GATE, "token-gate"), (FORWARD, "forward-cadence"), (DECODE, "decode-counter"), (None, "none"),
    ("for req in self.reqs: self._evict_swa(req, req.seqlen - 1)", "unknown"),
])
def test_the_scheduler_rule_is_read_from_its_source(source, rule):
    assert cadence.rule_of(source) == rule


def test_the_token_gate_calls_sglangs_function_only_once_the_interval_has_left_the_window():
    calls = []

    class Req:
        swa_evicted_seqlen = 8  # the cursor SGLang's function last wrote

    gate = cadence.TokenGate(lambda req, pre_len, **kw: calls.append((pre_len, kw)), interval=4)
    for pre_len in (10, 13):  # 10 - 2 = 8 < 8 + 4; 13 - 2 = 11 < 12
        gate(Req(), pre_len, sliding_window_size=2, page_size=2, is_chunk_cache=True)
    assert calls == []
    gate(Req(), 14, sliding_window_size=2, page_size=2, is_chunk_cache=True)  # 14 - 2 = 12 >= 12
    assert calls == [(14, {"sliding_window_size": 2, "page_size": 2, "is_chunk_cache": True})]


@pytest.mark.parametrize("rule, named", [("none", "no eviction interval at all"),
                                         ("unknown", "none of the interval rules read")])
def test_a_release_without_a_rule_of_steps_or_tokens_is_unsupported_naming_it(monkeypatch, rule, named):
    monkeypatch.setattr(cadence, "scheduler_rule", lambda: rule)
    with pytest.raises(Unsupported, match="has no eviction_interval") as raised:
        cadence.gate(lambda req, pre_len: None, 128, "X")
    assert named in str(raised.value)


def _fake_scheduler(monkeypatch, seen: list) -> None:
    """A stand-in ``sglang.srt.managers.schedule_batch`` whose ``maybe_evict_swa`` records what it is
    given (this environment has no SGLang; the real method runs in tests/test_sglang_releases.py)."""
    import enum
    import os
    import sys
    import types

    class ForwardMode(enum.Enum):
        DECODE = 1
        EXTEND = 2

    class ScheduleBatch:
        def maybe_evict_swa(self):
            (req,) = self.reqs
            seen.append(dict(mode=self.forward_mode, forward_iter=self.forward_iter, prefix=self.prefix_lens,
                             decodes=req.decode_batch_idx, seqlen=req.seqlen, window=self.tree_cache.sliding_window_size,
                             interval=os.environ.get("SGLANG_SWA_EVICTION_INTERVAL"),
                             server=module.get_global_server_args().chunked_prefill_size))
            self._evict_swa(req, req.seqlen - 1)

        def _evict_swa(self, req, pre_len):
            seen.append(("evict", pre_len))

    def unset():
        raise ValueError("Global server args is not set yet!")

    module = types.ModuleType("sglang.srt.managers.schedule_batch")
    module.ScheduleBatch, module.ForwardMode, module.get_global_server_args = ScheduleBatch, ForwardMode, unset
    for name in ("sglang", "sglang.srt", "sglang.srt.managers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.delenv("SGLANG_SWA_EVICTION_INTERVAL", raising=False)


@pytest.mark.parametrize("rule", ["forward-cadence", "decode-counter"])
def test_a_clock_of_steps_drives_the_schedulers_own_method_with_the_steps_counters(monkeypatch, rule):
    import os

    seen: list = []
    _fake_scheduler(monkeypatch, seen)
    monkeypatch.setattr(cadence, "scheduler_rule", lambda: rule)
    driven = cadence.gate(lambda req, pre_len: None, 128, "X")
    assert isinstance(driven, cadence.SchedulerCadence) and driven.rule == rule

    class Req:
        pass

    args = dict(sliding_window_size=6, page_size=2, req_to_token_pool=None, token_to_kv_pool_allocator=None)
    driven(Req(), 9, clock=cadence.Clock(decode=True, decodes=3, seen=256), **args)
    driven(Req(), 4, clock=cadence.Clock(decode=False, decodes=0, seen=0), **args)
    modes = __import__("sys").modules["sglang.srt.managers.schedule_batch"].ForwardMode
    assert seen == [
        dict(mode=modes.DECODE, forward_iter=256, prefix=[9], decodes=3, seqlen=10, window=6, interval="128", server=-1),
        ("evict", 9),  # SGLang's own _evict_swa of the stand-in batch (here the fake's)
        dict(mode=modes.EXTEND, forward_iter=0, prefix=[4], decodes=0, seqlen=5, window=6, interval="128", server=-1),
        ("evict", 4),
    ]
    assert "SGLANG_SWA_EVICTION_INTERVAL" not in os.environ  # set for the call only
    with pytest.raises(ValueError):  # the module's own function is back
        __import__("sys").modules["sglang.srt.managers.schedule_batch"].get_global_server_args()


@pytest.mark.parametrize("rule, clock", [("forward-cadence", {"eviction_clock": "forwards"}),
                                         ("decode-counter", {"eviction_clock": "decodes", "window_interval": True}),
                                         ("token-gate", {}), ("none", {})])
def test_an_older_schedulers_clock_is_the_lazy_cells_release_profile(monkeypatch, rule, clock):
    class Paged:
        def __init__(self, size, size_swa, page_size, dtype, device, kvcache): ...

    def evict(req, pre_len, *, sliding_window_size, page_size): ...

    def evict_with_interval(req, pre_len, *, sliding_window_size, page_size, eviction_interval): ...

    monkeypatch.setattr(cadence, "scheduler_rule", lambda: rule)
    lazy, every_token = resolve("sglang-lazy"), resolve("sglang")
    monkeypatch.setattr(backend, "import_sglang", lambda: {"Allocator": Paged, "free_swa_out_of_window_slots": evict})
    caps = profiles.profile_capabilities("X", lazy.capabilities)
    assert caps.semantics == attrs.evolve(lazy.capabilities.semantics, **clock)
    assert profiles.profile_capabilities("X", every_token.capabilities) is every_token.capabilities  # e = 1: none
    monkeypatch.setattr(backend, "import_sglang",
                        lambda: {"Allocator": Paged, "free_swa_out_of_window_slots": evict_with_interval})
    assert profiles.profile_capabilities("X", lazy.capabilities) is lazy.capabilities  # the function's interval


def test_a_release_whose_allocator_has_no_pages_draws_one_token_per_block(monkeypatch):
    """The profile inspects the imported allocator's parameters; a cell's record then carries the
    restriction, its report says it, and the generator draws nothing else."""

    class TokenSlots:  # an allocator constructor without page_size (0.5.7's shape)
        def __init__(self, size, size_swa, dtype, device, kvcache): ...

    class Paged:
        def __init__(self, size, size_swa, page_size, dtype, device, kvcache): ...

    record = resolve("sglang")
    monkeypatch.setattr(backend, "import_sglang", lambda: {"Allocator": Paged})
    assert profiles.profile_capabilities("X", record.capabilities) is record.capabilities
    monkeypatch.setattr(backend, "import_sglang", lambda: {"Allocator": TokenSlots})
    caps = profiles.profile_capabilities("X", record.capabilities)
    assert caps.tokens_per_block == (1,) and caps.semantics == record.capabilities.semantics
    got, profile, _ = matrix._profiled(matrix.engine_named("sglang"), "X", record)
    assert profile == {"tokens_per_block": [1]} and got.capabilities.tokens_per_block == (1,)
    assert "block sizes 1 only" in domain_of(got.capabilities)

    seen = set()

    @settings(max_examples=30, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        seen.add(data.draw(strategies.configs(got.capabilities)).tokens_per_block)

    draw()
    assert seen == {1}
    assert attrs.evolve(got.capabilities, tokens_per_block=()) == record.capabilities
