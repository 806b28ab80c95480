"""Issue 33, without SGLang (this environment): how ``sglang-lazy`` reads an older scheduler's eviction rule
(``fuzz/engines/sglang/cadence.py``) and re-enacts its token gate, and how a release profile restricts the
block sizes a cell draws (``fuzz/engines/sglang/profiles.py``, ``Capabilities.tokens_per_block``).

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


@pytest.mark.parametrize("rule, named", [("forward-cadence", "forward_iter % eviction_interval == 0"),
                                         ("decode-counter", "decode_batch_idx % eviction_interval == 1"),
                                         ("none", "no eviction interval at all")])
def test_a_rule_other_than_the_token_gate_is_unsupported_naming_it(monkeypatch, rule, named):
    monkeypatch.setattr(cadence, "scheduler_rule", lambda: rule)
    with pytest.raises(Unsupported, match="has no eviction_interval") as raised:
        cadence.gate(lambda req, pre_len: None, 128, "X")
    assert named in str(raised.value)


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
