"""``Semantics.load_holds_prefix`` (issue 33): vLLM before 0.14.1 loaded a reused prefix as new tokens of
a request with nothing computed, so a first resume holds a block for every loaded token, out-of-window
ones too, until the next release frees what is stale.

- A hand-made run on the reference and the oracle (expected tables worked out by hand: window 1, one
  token a block, a reused history of 2 tokens).
- At the floor such a load runs out of slots where the default resume fits (theorem
  ``load-holds-prefix-floor``: a load of ``c`` tokens fits the floor exactly when ``c <= floor * t``).
- The option is defined with prefix sharing off: on with it on is a ``ConfigError`` naming the option.
- The ``oracle-load`` campaign (the option drawn two times in three) against the reference, bounded.
"""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends.oracle import OracleManager
from swafloor.fuzz.runner import PROFILES, run_campaign
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics

VLLM = dict(free_stale="at-allocate", suspend="recompute", first_resume_copy=False)


def _held(m) -> list[list[int]]:
    """Per life cycle of request r0, the block indices it holds."""
    (req,) = m.snapshot().requests
    return [[b for lo, hi in table.held for b in range(lo, hi)] for table in req.tables]


@pytest.mark.parametrize("make", [Manager, OracleManager], ids=["reference", "oracle"])
@pytest.mark.parametrize("free_stale", ["at-allocate", "at-commit"])
def test_a_load_holds_every_loaded_block_until_the_next_release(make, free_stale):
    load = Semantics(**{**VLLM, "free_stale": free_stale}, load_holds_prefix=True)
    m = make(Config(1, [AttentionLayer(1)], slots=[3], semantics=load))
    m.create("r0", reused_history=2)
    assert m.resume("r0").ok
    assert _held(m) == [[0, 1]]  # tokens 0 and 1 loaded as new ones: a block each, though out of the window
    assert m.snapshot().pools[0].free == 1
    assert m.resize("r0", 3, 2).ok
    assert _held(m) == [[2]]  # the next step frees both and holds the block of token 2 alone
    plain = make(Config(1, [AttentionLayer(1)], slots=[3], semantics=Semantics(**VLLM)))
    plain.create("r0", reused_history=2)
    assert plain.resume("r0").ok and _held(plain) == [[]]  # the default: nothing live at capacity 2, history 2


@pytest.mark.parametrize("make", [Manager, OracleManager], ids=["reference", "oracle"])
def test_at_the_floor_a_load_longer_than_floor_times_t_runs_out(make):
    # W = 4, t = 2: floor 3 (S + ceil(3/2) + 1); a load of 6 tokens is 3 blocks, of 7 tokens 4
    for reused, fits in ((6, True), (7, False)):
        m = make(Config(2, [AttentionLayer(4)], semantics=Semantics(**VLLM, load_holds_prefix=True)))
        m.create("r0", reused_history=reused)
        assert m.resume("r0").ok is fits, reused
        plain = make(Config(2, [AttentionLayer(4)], semantics=Semantics(**VLLM)))
        plain.create("r0", reused_history=reused)
        assert plain.resume("r0").ok, reused


def test_the_option_is_defined_with_prefix_sharing_off():
    with pytest.raises(ConfigError, match="load_holds_prefix"):
        Semantics(prefix_sharing=True, load_holds_prefix=True)
    assert Semantics(load_holds_prefix=True).to_dict()["load_holds_prefix"] is True
    assert "load_holds_prefix" not in Semantics().to_dict()  # written only when set: older traces unchanged


def test_the_oracle_load_campaign_passes_on_the_ci_profile():
    result = run_campaign("oracle-load", examples=300, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None, result.divergence
    assert result.examples == 300
