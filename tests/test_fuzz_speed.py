"""The campaign's fast paths agree with a straightforward recomputation on every step.

- The oracle shows an unchanged request by its previous snapshot; every observation of a campaign
  must equal :meth:`OracleManager.fresh_snapshot`, which recomputes every request.
- The reference (range-based, O(changed blocks) per step) and the token-level oracle agree on every
  step of a campaign that includes long continuous-batching decode runs (``decode_batch``).
- ``compare_results`` decides "both ok" without the mode checks; the result must be the one the full
  comparison gives.
"""

from __future__ import annotations

from swafloor.fuzz.adapter import ManagerBackend
from swafloor.fuzz.backends import ResolvedBackend
from swafloor.fuzz.backends.oracle import OracleManager
from swafloor.fuzz.compare import OK, Result, compare_results
from swafloor.fuzz.protocol import EXACT_EVERYTHING
from swafloor.fuzz.runner import run_campaign
from swafloor.fuzz.trace import Step


class _CheckedOracle(ManagerBackend):
    """The oracle, observed through its cache, checked against a full recomputation each time."""

    observed = 0

    def observe(self):
        shown = self.manager.snapshot()
        fresh = self.manager.fresh_snapshot()
        assert shown == fresh, f"cached snapshot {shown!r} != recomputed {fresh!r}"
        _CheckedOracle.observed += 1
        return shown


def _checked(config):
    return _CheckedOracle(OracleManager(config))


def test_oracle_snapshot_cache_equals_a_fresh_recomputation_on_every_step():
    _CheckedOracle.observed = 0
    backend = ResolvedBackend("oracle-checked", _checked, EXACT_EVERYTHING)
    result = run_campaign(backend, "reference", examples=150, seed=3, shrink=False, out_dir=None)
    assert result.divergence is None, result.divergence.describe()
    assert _CheckedOracle.observed > result.steps  # once per step plus once per build


def test_oracle_snapshot_cache_sees_a_change_to_any_request():
    from swafloor.reference import AttentionLayer, Config

    manager = OracleManager(Config(tokens_per_block=2, layers=[AttentionLayer(window=3)], slots=(9,)))
    for rid in ("a", "b"):
        manager.create(rid)
        assert manager.resume(rid)
    before = manager.snapshot()
    assert manager.resize("a", 5, 0)
    after = manager.snapshot()
    assert after != before and after == manager.fresh_snapshot()
    assert after.requests[1] is before.requests[1]  # "b" untouched: shown by the same snapshot
    manager.commit("a", 4)
    assert manager.snapshot() == manager.fresh_snapshot() != after


def test_reference_and_oracle_agree_through_long_batched_decode_runs():
    result = run_campaign("oracle", "reference", examples=120, steps=20, seed=11, shrink=False, out_dir=None)
    assert result.divergence is None, result.divergence.describe()
    assert result.steps > 20 * result.examples  # the batched rules ran long decode runs


def test_both_ok_fast_path_matches_the_full_comparison():
    step = Step.resize("r0", 2, 1)
    assert compare_results(0, step, OK, OK, EXACT_EVERYTHING) == (None, False)
    out = Result("out-of-slots", shortfalls=((0, 1, 0),))
    divergence, slack = compare_results(0, step, OK, out, EXACT_EVERYTHING)
    assert divergence is not None and divergence.field == "outcome" and not slack
    assert compare_results(0, step, out, OK, EXACT_EVERYTHING)[0] is not None
