"""``Semantics.refused_keeps_stale`` (LMDeploy, issue 33): a refused resize keeps the blocks that left
the window; plain ``at-allocate`` frees them before its gate and that release stands. The layer
(reference/refusal.py) against hand-counted blocks, the option's checks, and the ``oracle-refusal``
campaign (the independent oracle under the same semantics) against the reference."""

from __future__ import annotations

import pytest

from swafloor.fuzz.backends import resolve
from swafloor.fuzz.runner import PROFILES, run_campaign
from swafloor.reference import AttentionLayer, Config, ConfigError, Manager, Semantics


def _two_requests(keeps: bool) -> Manager:
    """W = 1, t = 1, a pool of 2 slots. r0 holds block 0 (capacity 1) and commits its token: under
    at-allocate nothing is freed at commit. r1 takes the other slot. r0 then asks capacity 3 at history
    1: blocks 1 and 2 (block 0 left the window [1, 1]): 2 new against 0 free + 1 released: refused."""
    semantics = Semantics(free_stale="at-allocate", refused_keeps_stale=keeps)
    m = Manager(Config(tokens_per_block=1, layers=[AttentionLayer(window=1)], slots=[2], semantics=semantics))
    for rid in ("r0", "r1"):
        m.create(rid)
        assert m.resume(rid)
        assert m.resize(rid, 1, 0)
    m.commit("r0", 1)
    outcome = m.resize("r0", 3, 1)
    assert not outcome and outcome.shortfalls[0].needed == 2 and outcome.shortfalls[0].available == 1
    m.check()
    return m


def _held(m: Manager, rid: str) -> tuple:
    table = next(r for r in m.snapshot().requests if r.request_id == rid).tables[0]
    return table.dense()


def test_a_refused_resize_keeps_the_block_that_left_the_window():
    m = _two_requests(keeps=True)
    assert _held(m, "r0") == (0,) and m.snapshot().pools[0].free == 0


def test_plain_at_allocate_frees_it_before_the_gate_and_the_release_stands():
    m = _two_requests(keeps=False)
    assert _held(m, "r0") == (None,) and m.snapshot().pools[0].free == 1


def test_a_resize_that_fits_frees_the_stale_block_inside_the_call():
    for keeps in (True, False):
        m = _two_requests(keeps)
        assert m.resize("r0", 2, 1)  # block 1: 1 new against (0 or 1) free + (1 or 0) released
        assert _held(m, "r0") == (None, 1) and m.snapshot().pools[0].free == 0
        m.check()


def test_the_option_needs_at_allocate_and_is_written_only_when_set():
    with pytest.raises(ConfigError, match=r"semantics\.refused_keeps_stale=True: needs semantics\.free_stale at-allocate"):
        Semantics(refused_keeps_stale=True)
    on = Semantics(free_stale="at-allocate", refused_keeps_stale=True)
    assert on.to_dict()["refused_keeps_stale"] is True and "refused_keeps_stale" not in Semantics().to_dict()
    assert Semantics.from_dict(on.to_dict()) == on


def test_the_oracle_refusal_campaign_passes_on_the_ci_profile():
    assert resolve("oracle-refusal").capabilities.semantics.refused_keeps_stale
    assert not resolve("oracle").capabilities.semantics.refused_keeps_stale
    result = run_campaign("oracle-refusal", examples=150, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None, result.divergence
    assert result.served >= 140


# ---------------------------------------------------------------- stale_freed_on_growth (LMDeploy's decode schedule)
def _decoding(on_growth: bool) -> Manager:
    """W = 1, t = 2, one token in flight, a pool of 3 slots: r0 reserves 3 tokens (blocks 0 and 1) and
    commits them; the window at history 3 is token 2 (block 1), block 0 (tokens 0-1) left it."""
    semantics = Semantics(in_flight_tokens=1, free_stale="at-allocate", refused_keeps_stale=True,
                          stale_freed_on_growth=on_growth)
    m = Manager(Config(tokens_per_block=2, layers=[AttentionLayer(window=1)], slots=[3], semantics=semantics))
    m.create("r0")
    assert m.resume("r0") and m.resize("r0", 3, 0)
    m.commit("r0", 3)
    return m


def test_a_step_adding_no_block_keeps_the_stale_block_until_one_that_adds_a_block():
    m = _decoding(True)
    assert m.resize("r0", 4, 3)  # capacity 4: still blocks 0 and 1, no block added: nothing freed
    assert _held(m, "r0") == (0, 1) and m.snapshot().pools[0].free == 1
    m.check()
    m.commit("r0", 1)
    assert m.resize("r0", 5, 4)  # block 2 added: everything stale at history 4 goes (block 0; block 1 holds token 3)
    assert _held(m, "r0") == (None, 1, 2) and m.snapshot().pools[0].free == 1
    m.check()


def test_without_the_option_the_step_adding_no_block_frees_it():
    m = _decoding(False)
    assert m.resize("r0", 4, 3)
    assert _held(m, "r0") == (None, 1) and m.snapshot().pools[0].free == 2
    m.check()


def test_stale_freed_on_growth_needs_refused_keeps_stale():
    with pytest.raises(ConfigError, match=r"semantics\.stale_freed_on_growth=True: needs semantics\.refused_keeps_stale"):
        Semantics(free_stale="at-allocate", stale_freed_on_growth=True)


def test_the_oracle_growth_campaign_passes_on_the_ci_profile():
    assert resolve("oracle-growth").capabilities.semantics.stale_freed_on_growth
    result = run_campaign("oracle-growth", examples=150, seed=PROFILES["ci"].seed, profile="ci", out_dir=None)
    assert result.divergence is None, result.divergence
    assert result.served >= 140


def test_what_stale_freed_on_growth_keeps_is_bounded_and_the_bound_is_met_on_the_manager():
    """issue 33: the cost of stale_freed_on_growth, measured on the reference manager. A lone request in chunks of
    C then decoding, under LMDeploy's release with and without the option, the same calls (a pool too large to
    refuse anything): after every step the manager with the option holds at most growth_kept_blocks(t, C) slots
    more (ceil((C + t - 2)/t), hand values below), never fewer, the same at every step that adds a block; and the
    sweep meets the bound at a decode chunk (C = 1, t = 2: one block) and at a prefill chunk (C = 3, t = 2: two)."""
    import itertools

    from swafloor.reference import lifecycle, refusal

    assert [refusal.growth_kept_blocks(t, n) for t, n in ((2, 1), (4, 1), (2, 3), (3, 2), (4, 4), (2, 4))] == \
        [1, 1, 2, 1, 2, 2]
    most: dict = {}
    for t, W, S, C, P in itertools.product((2, 3), (1, 2, 3, 5), (0, 1), (1, 2, 3), (1, 4, 9)):
        held = []
        for growth in (True, False):
            semantics = Semantics(free_stale="at-allocate", refused_keeps_stale=True, stale_freed_on_growth=growth)
            m = Manager(Config(tokens_per_block=t, layers=[AttentionLayer(W, S * t)], slots=[64], semantics=semantics))
            m.create("r0")
            assert m.resume("r0")
            h, row = 0, []
            while h < P + 6:
                n = min(C, P - h) if h < P else 1
                assert m.resize("r0", h + n, h)
                grew = lifecycle.allocated_blocks(h + n, t) > lifecycle.allocated_blocks(h, t)
                row.append((64 - m.snapshot().pools[0].free, grew))
                m.commit("r0", n)
                h += n
            held.append(row)
        for (with_option, grew), (without, _) in zip(*held):
            kept = with_option - without
            assert 0 <= kept <= refusal.growth_kept_blocks(t, C), (t, W, S, C, P)
            assert not grew or kept == 0, (t, W, S, C, P)
            most[t, C] = max(most.get((t, C), 0), kept)
    assert most[2, 1] == 1 and most[2, 3] == 2, most


def test_the_cost_theorems_meet_their_expectations_on_both_solvers(capsys):
    """stale-freed-on-growth-cost proved and -one-less refuted (the bound is tight), on Z3 and cvc5 through the CLI
    (opt-in: run by name), each twin agreeing, the refutation replayed on two reference managers."""
    import json

    from swafloor.cli import main
    from swafloor.proofs import catalogue

    names = ("stale-freed-on-growth-cost", "stale-freed-on-growth-cost-one-less")
    assert all(catalogue.by_name(n) in catalogue.OPT_IN for n in names)
    code = main(["prove", *names, "--solver", "both", "--json"])
    data = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert code == 0, data
    assert {s: x["result"] for s, x in data[names[0]]["solvers"].items()} == {"z3": "proved", "cvc5": "proved"}
    assert {s: x["result"] for s, x in data[names[1]]["solvers"].items()} == {"z3": "refuted", "cvc5": "refuted"}
    assert data[names[0]]["token_level"]["holds"] and not data[names[1]]["token_level"]["holds"]
    assert data[names[1]]["replay"]["confirmed"], data[names[1]]
