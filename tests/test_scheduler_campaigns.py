"""Issue 32's seeded bugs of admission and preemption: each flips its theorem (tests/test_proofs_mutations.py
runs every flip) and the scheduler campaigns (fuzz/scheduler_campaigns.py) catch it, with the formula's
patch applied; on the reference itself they find nothing."""

from __future__ import annotations

import pytest

from swafloor.fuzz import scheduler_campaigns as campaigns
from swafloor.proofs import mutations
from swafloor.reference.scheduler import Victim
from swafloor.reference.seeded_bugs import SCHEDULER, SEEDED_BUGS

CAUGHT_BY = {  # which campaign catches each, and a phrase of its failure line
    "admission-charges-prompt": (campaigns.lone_requests, "the reference gate charges"),
    "resume-gate-at-full-utilisation": (campaigns.kept_resumes, "the resume gate refused it"),
    "preempt-newest-other": (campaigns.preemptions, "livelock"),
}


def test_the_campaigns_find_nothing_on_the_reference():
    assert campaigns.run() == []


def test_every_scheduler_bug_is_seeded_in_the_formulas_and_listed_here():
    scheduler_bugs = [bug.name for bug in SEEDED_BUGS if SCHEDULER in bug.campaigns]
    assert sorted(scheduler_bugs) == sorted(CAUGHT_BY)
    assert set(scheduler_bugs) <= {m.name for m in mutations.MUTATIONS}


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_the_scheduler_campaigns_catch_the_bug(name):
    (mutation,) = [m for m in mutations.MUTATIONS if m.name == name]
    campaign, phrase = CAUGHT_BY[name]
    with mutations.applied(mutation):
        found = campaign()
        assert found and all(phrase in line for line in found), found[:3]
        assert campaigns.run()  # the whole run catches it too
    assert campaign() == []  # the patch is undone


def test_the_over_charging_gate_is_caught_where_the_run_fits():
    """The lone-request campaign's second check has its own oracle, the peak the manager measures: an
    over-charging gate (charging the prompt) deadlocks a long prompt that fits in that peak."""
    (mutation,) = [m for m in mutations.MUTATIONS if m.name == "admission-charges-prompt"]
    with mutations.applied(mutation):
        found = campaigns.lone_requests()
    assert any("(measured) but the reference gate charges" in line and "deadlock" in line for line in found)


def test_the_other_policies_livelock_by_their_own_names_too():
    """Only FCFS preemption (newest) spares the oldest; newest-other and oldest both undo it (the campaign
    catches each without a patch)."""
    assert campaigns.preemptions(Victim.NEWEST_OTHER)
    assert campaigns.preemptions(Victim.OLDEST)


def test_the_fcfs_bound_holds_for_three_requests_and_oldest_first_breaks_it():
    assert campaigns.fcfs_bound(3) == []
    # preempting the oldest undoes the most work: two requests of (1, 3) and (3, 3) tokens in 6 slots are done
    # at step 12, past the bound 10 (newest-other keeps the bound here: its livelock needs growing SWA + full
    # attention steps, as in preemptions())
    assert any("bound 10" in line for line in campaigns.fcfs_bound(2, Victim.OLDEST))


def test_the_bounded_model_check_proves_the_fcfs_bound():
    """fcfs-pair-finishes (opt-in: seconds of Z3) is proved; its transition system is serve's step (the
    twin runs serve itself; test_pair_step_is_serves_step compares them step by step)."""
    from swafloor.proofs import catalogue, discharge

    theorem = catalogue.by_name("fcfs-pair-finishes")
    assert theorem not in catalogue.CATALOGUE and theorem in catalogue.OPT_IN
    assert discharge.discharge(theorem, attempts=False).result == "proved"


@pytest.mark.parametrize("victim", list(Victim))
def test_pair_step_is_serves_step(victim):
    """The transition system the model check unrolls finishes each request at the step serve() does, for every
    policy, on every pair of prompts and outputs up to 3 tokens and pools up to 2 slots above the need."""
    import itertools

    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import DONE, Arrival, pair_start, pair_step, serve

    for P0, O0, P1, O1 in itertools.product(range(1, 4), repeat=4):
        for X in range(3):
            pool = max(P0 + O0, P1 + O1) + X
            config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
            result = serve(config, [Arrival("r0", 0, P0, O0), Arrival("r1", 0, P1, O1)], chunk=1, victim=victim,
                           max_steps=40)
            state, done_at = pair_start(), {}
            for step in range(40):
                state = pair_step(state, pool, (P0, P1), (O0, O1), victim)
                for i in (0, 1):
                    if state[2 + i] == DONE:
                        done_at.setdefault(f"r{i}", step)
            assert done_at == result.finished_at, (victim, P0, O0, P1, O1, X)


@pytest.mark.parametrize("victim", list(Victim))
def test_loop_step_is_serves_step(victim):
    """The N-request transition system (scheduler.loop_step, move by move: loop_moves) finishes each of three
    requests at the step serve() does, for every policy, on every triple of prompts and outputs up to 2 tokens
    and pools up to 1 slot above the largest need (livelocks included: victim oldest never finishes some)."""
    import itertools

    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import Arrival, loop_start, loop_step, serve

    for lens in itertools.product(range(1, 3), repeat=6):
        prompts, outputs = lens[:3], lens[3:]
        lengths = [p + o for p, o in zip(prompts, outputs)]
        for X in range(2):
            pool = max(lengths) + X
            config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
            arrivals = [Arrival(f"r{i}", 0, prompts[i], outputs[i]) for i in range(3)]
            result = serve(config, arrivals, chunk=1, victim=victim, max_steps=30)
            state, done_at = loop_start(3), {}
            for step in range(30):
                state = loop_step(state, pool, prompts, outputs, victim)
                for i in range(3):
                    if state[0][i] >= lengths[i]:
                        done_at.setdefault(f"r{i}", step)
            assert done_at == result.finished_at, (victim, prompts, outputs, X)


@pytest.mark.parametrize("victim", [Victim.NEWEST, Victim.OLDEST])
def test_loop_step_through_a_window_is_serves_step(victim):
    """The transition system with a sliding-window life cycle (loop_step's window and sink_blocks: a request holds
    lifecycle.live_blocks(h, h), its step the rest of live_blocks(h, h + 1), the gate charges the chunk floor) is
    serve()'s loop on the reference manager with that SWA layer at one token per block: the state serve reads back
    after every step (on_step) is loop_step's, for three requests of prompts and outputs up to 2 tokens, five
    (window, sinks, pool above the chunk floor) among windows 1 to 3, 0 or 1 sink blocks, 0 or 1 slot, 12 steps."""
    import itertools

    from swafloor.reference import AttentionLayer, Config, admission
    from swafloor.reference.scheduler import Arrival, loop_start, loop_step, serve

    for W, S, X in ((1, 0, 0), (2, 0, 0), (2, 1, 1), (3, 0, 1), (3, 1, 0)):
        pool = admission.swa_admission_blocks(1, W, S, 1, 1, 0) + X
        config = Config(tokens_per_block=1, layers=[AttentionLayer(W, S)], slots=(pool,))
        for lens in itertools.product(range(1, 3), repeat=6):
            prompts, outputs = lens[:3], lens[3:]
            arrivals = [Arrival(f"r{i}", 0, prompts[i], outputs[i]) for i in range(3)]
            seen: list = []
            serve(config, arrivals, chunk=1, victim=victim, max_steps=12, on_step=lambda _, st: seen.append(st))
            state = loop_start(3)
            for step, got in enumerate(seen):
                state = loop_step(state, pool, prompts, outputs, victim, W, S)
                assert got == tuple(map(tuple, state)), (W, S, X, prompts, outputs, step)


@pytest.mark.parametrize("victim", [Victim.NEWEST, Victim.OLDEST])
def test_loop_step_with_blocks_chunks_and_two_groups_is_serves_step(victim):
    """The transition system with blocks of t tokens, prefill chunks of C tokens and a full-attention group beside
    the sliding-window one (loop_step's tokens_per_block, chunk, full_pool: a request holds allocated_blocks(h, t)
    and live_blocks(h, h, t, W, S), its step the rest up to capacity h + step_tokens in each group, both must fit)
    is serve()'s loop on the reference manager with a full-attention layer and a sliding-window layer: the state
    serve reads back after every step is loop_step's, for three requests of prompts 1 or 3 and outputs 1 or 2
    tokens, four (t, C, W, S, X, full) settings (one without the full group), 12 steps; pools as the proof's
    (progress.pools_of)."""
    import itertools

    from swafloor.proofs import progress
    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import Arrival, loop_start, loop_step, serve

    for t, C, W, S, X, full in ((2, 2, 3, 0, 0, True), (3, 2, 4, 1, 0, True), (2, 1, 1, 1, 0, False),
                                (4, 3, 5, 1, 1, True)):
        layers = [AttentionLayer(), AttentionLayer(W, S * t)] if full else [AttentionLayer(W, S * t)]
        for lens in itertools.product((1, 3), (1, 2), repeat=3):
            prompts, outputs = lens[0::2], lens[1::2]
            _, pool, full_pool = progress.pools_of(prompts, outputs, X, W, S, t, C, full)
            config = Config(tokens_per_block=t, layers=layers, slots=(full_pool, pool) if full else (pool,))
            arrivals = [Arrival(f"r{i}", 0, prompts[i], outputs[i]) for i in range(3)]
            seen: list = []
            serve(config, arrivals, chunk=C, victim=victim, max_steps=12, on_step=lambda _, st: seen.append(st))
            assert len(seen) >= 3
            state = loop_start(3)
            for step, got in enumerate(seen):
                state = loop_step(state, pool, prompts, outputs, victim, W, S, t, C, full_pool)
                assert got == tuple(map(tuple, state)), (t, C, W, S, X, full, prompts, outputs, step)


def test_a_full_attention_pool_beside_no_window_is_a_typed_error():
    from swafloor.reference.errors import ConfigError
    from swafloor.reference.scheduler import loop_start, loop_step

    with pytest.raises(ConfigError, match="full_pool"):
        loop_step(loop_start(2), 4, (1, 1), (1, 1), Victim.NEWEST, full_pool=4)


def test_the_oldest_victim_livelocks_three_requests():
    """A livelocking policy, found by the oracle at three requests (the two-request model check cannot see it):
    victim oldest with prompts (2, 1, 2), outputs (2, 1, 2) in 4 slots never finishes; victim newest finishes
    all three by step 10 = L0 + L1 + L2, in serve() and in the transition system alike."""
    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import Arrival, loop_start, loop_step, serve

    config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(4,))
    arrivals = [Arrival("r0", 0, 2, 2), Arrival("r1", 0, 1, 1), Arrival("r2", 0, 2, 2)]
    stuck = serve(config, arrivals, chunk=1, victim=Victim.OLDEST, max_steps=200)
    assert stuck.livelock_at == 200 and len(stuck.finished) < 3, stuck
    fine = serve(config, arrivals, chunk=1, victim=Victim.NEWEST, max_steps=200)
    assert fine.completed and max(fine.finished_at.values()) <= 10, fine
    state = loop_start(3)
    for _ in range(200):
        state = loop_step(state, 4, (2, 1, 2), (2, 1, 2), Victim.OLDEST)
    assert not all(h >= L for h, L in zip(state[0], (4, 2, 4))), state


def test_the_ranked_proofs_prove_the_fcfs_bound_with_no_budget_flag(capsys):
    """The ranking proofs of the FCFS bound (proofs/progress.py: invariant and rank on loop_step, base + step),
    opt-in (seconds each), through the CLI with no budget flag, on both solvers: proved, never unknown.
    cvc5 decides fcfs-three-ranked's step part told its logic (QF_LIA, the theorem's ``linear``) in 0.7 to 1
    million resource units, above its default 100,000 per check: the theorem carries its own allowance (2 million,
    catalogue data), which the runner applies and --json shows; fcfs-pair-ranked runs under the default. The same
    through a sliding-window life cycle: fcfs-pair-ranked-swa on both solvers (cvc5 needs 174,291 units: its own
    allowance), fcfs-three-ranked-swa on Z3 here (its own allowance; cvc5 takes 8 s CPU, run by hand)."""
    import json

    from swafloor.cli import main
    from swafloor.proofs import DEFAULT_RLIMIT, catalogue

    names = ("fcfs-pair-ranked", "fcfs-three-ranked", "fcfs-pair-ranked-swa")
    assert all(catalogue.by_name(n) in catalogue.OPT_IN and catalogue.by_name(n) not in catalogue.CATALOGUE
               for n in names)
    code = main(["prove", *names, "--solver", "both", "--json"])
    data = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert code == 0, data
    for name in names:
        d = data[name]
        assert d["status"] == "ok" and d["token_level"]["holds"], d
        assert {s: x["result"] for s, x in d["solvers"].items()} == {"z3": "proved", "cvc5": "proved"}, d
        assert d["solvers"]["z3"]["rlimit"] == catalogue.by_name(name).rlimit("z3", DEFAULT_RLIMIT["z3"])
    assert data["fcfs-pair-ranked"]["solvers"]["cvc5"]["rlimit"] == DEFAULT_RLIMIT["cvc5"]
    for name in names[1:]:  # each with its own cvc5 allowance, above the default
        own = catalogue.by_name(name).rlimits["cvc5"]
        assert data[name]["solvers"]["cvc5"]["rlimit"] == data[name]["solvers"]["cvc5"]["rlimit_own"] == own
        assert own > DEFAULT_RLIMIT["cvc5"]
    assert data["fcfs-three-ranked"]["solvers"]["cvc5"]["rlimit"] == 2_000_000
    code = main(["prove", "fcfs-three-ranked-swa", "--json"])
    (d,) = json.loads(capsys.readouterr().out)
    assert code == 0 and d["status"] == "ok" and d["result"] == "proved" and d["token_level"]["holds"], d
    assert d["solvers"]["z3"]["rlimit"] == d["solvers"]["z3"]["rlimit_own"] == 40_000_000


def test_the_default_cvc5_budget_does_not_decide_fcfs_three_ranked():
    """The allowance is needed: under the default budget alone (100,000 units per check, the theorem's own
    allowance bypassed by calling the discharge directly) cvc5 answers unknown on fcfs-three-ranked, never a
    proof; and a theorem's allowance never lowers a larger budget, nor bounds a run bounded by seconds alone."""
    from swafloor.proofs import DEFAULT_RLIMIT, catalogue, discharge

    theorem = catalogue.by_name("fcfs-three-ranked")
    d = discharge.discharge(theorem, attempts=False, solver="cvc5", rlimit=DEFAULT_RLIMIT["cvc5"])
    assert d.result == "unknown" and d.rlimit == DEFAULT_RLIMIT["cvc5"], d
    assert theorem.rlimit("cvc5", DEFAULT_RLIMIT["cvc5"]) == 2_000_000
    assert theorem.rlimit("cvc5", 5_000_000) == 5_000_000
    assert theorem.rlimit("z3", DEFAULT_RLIMIT["z3"]) == DEFAULT_RLIMIT["z3"]
    assert theorem.rlimit("cvc5", None) is None


def test_a_resource_allowance_must_name_a_solver_and_positive_units():
    import attrs

    from swafloor.proofs import catalogue

    theorem = catalogue.by_name("fcfs-pair-ranked")
    for bad in ({"yices": 10}, {"cvc5": 0}, {"cvc5": 2.5}):
        with pytest.raises(ValueError, match="rlimits"):
            attrs.evolve(theorem, rlimits=bad)


#: the oracle's livelock of victim oldest (docs/admission.md), the smallest in the theorem's variable order
OLDEST_LASSO = {"P0": 2, "O0": 2, "P1": 1, "O1": 1, "P2": 2, "O2": 2, "X": 0}


def test_the_solver_finds_the_oldest_victims_livelock_as_a_lasso(capsys):
    """oldest-three-livelock through the CLI (Z3, no flags): the claim that no state of loop_step repeats with a
    request not done is refuted, its smallest counterexample is the oracle's livelock (prompts 2, 1, 2, outputs
    2, 1, 2, pool 4), replayed on serve itself (after 7 steps it is where it was after 3, r0 and r2 not done;
    serve's states are the transition system's), and the token-level twin fails at the same point."""
    import json

    from swafloor.cli import main
    from swafloor.proofs import catalogue

    assert catalogue.by_name("oldest-three-livelock") in catalogue.OPT_IN
    code = main(["prove", "oldest-three-livelock", "--json"])
    (d,) = json.loads(capsys.readouterr().out)
    assert code == 0 and d["status"] == "ok", d
    assert d["expected"] == d["result"] == "refuted" and d["minimal"], d
    assert d["counterexample"] == OLDEST_LASSO, d
    assert d["replay"]["confirmed"], d["replay"]
    assert "is after 7 steps where it was after 3, with r0, r2 not done" in d["replay"]["summary"], d["replay"]
    assert d["token_level"]["holds"] is False and d["token_level"]["counterexample"] == OLDEST_LASSO, d
    assert d["concrete"]["holds"] is False and d["concrete"]["counterexample"] == OLDEST_LASSO, d


def test_the_lasso_claim_holds_for_fcfs_and_its_replay_can_fail():
    """The same claim (no_lasso over the same unroll) on ints holds under victim newest at every bounded point,
    and under victim oldest fails at exactly the two livelocking points of the box (so the goal can hold and can
    fail); the replay confirms nothing where serve finishes (victim newest at the livelock's inputs, victim
    oldest at all-ones)."""
    import itertools

    from swafloor.proofs import catalogue, progress, replay
    from swafloor.proofs.symbolic import all_of

    failing = {Victim.NEWEST: [], Victim.OLDEST: []}
    for lens in itertools.product(range(1, catalogue.LASSO_TOKENS + 1), repeat=6):
        prompts, outputs = lens[0::2], lens[1::2]
        for X in range(catalogue.LASSO_EXTRA + 1):
            lengths, pool = progress.lengths_and_pool(prompts, outputs, X)
            for victim, found in failing.items():
                states, links = progress.unroll(prompts, outputs, pool, victim, catalogue.LASSO_STEPS)
                assert links == []
                if not all_of(*progress.no_lasso(states, lengths)):
                    found.append((*lens, X))
    assert failing == {Victim.NEWEST: [], Victim.OLDEST: [(2, 2, 1, 1, 2, 2, 0), (2, 2, 2, 2, 1, 1, 0)]}
    fine = replay.serving_livelocks(Victim.NEWEST, catalogue.LASSO_STEPS)(OLDEST_LASSO)
    assert not fine.confirmed and fine.summary.startswith("NOT REPRODUCED"), fine
    ones = dict.fromkeys(OLDEST_LASSO, 1) | {"X": 0}
    assert not catalogue.by_name("oldest-three-livelock").replay(ones).confirmed


def test_the_ranking_fails_for_the_oldest_victim():
    """The same three parts under victim oldest (the policy that livelocks three requests): the step part is not
    proved (the oldest running request, the rank's, is the one preempted), so the proof can fail."""
    import inspect

    from swafloor.proofs import catalogue, discharge, progress
    from swafloor.proofs.theorem import Theorem

    def oldest_pair(P0, O0, P1, O1, X):
        return progress.ranked_finish((P0, P1), (O0, O1), X, Victim.OLDEST, catalogue.RANKED_STEPS[2])

    pair = catalogue.by_name("fcfs-pair-ranked")
    assert list(inspect.signature(oldest_pair).parameters) == list(pair.variable_names)
    theorem = Theorem("oldest-pair-ranked", "the ranking under victim oldest", "proved", pair.variables, oldest_pair)
    assert discharge.discharge(theorem, attempts=False, minimise=False).result == "refuted"

    def oldest_pair_swa(P0, O0, P1, O1, W, S, X):  # through a sliding window too
        return progress.ranked_finish((P0, P1), (O0, O1), X, Victim.OLDEST, catalogue.RANKED_STEPS[2], W, S)

    swa = catalogue.by_name("fcfs-pair-ranked-swa")
    theorem = Theorem("oldest-pair-ranked-swa", "the ranking under victim oldest", "proved", swa.variables,
                      oldest_pair_swa, linear=True)
    assert discharge.discharge(theorem, attempts=False, minimise=False, encoding="direct").result == "refuted"


def test_the_ranked_proof_with_blocks_chunks_and_two_groups_on_z3(capsys):
    """fcfs-pair-ranked-blocks (opt-in) through the CLI, no flags, Z3: proved (each t = 1, 2 case and each step case
    a check of its own), the twin (serve itself over its box) holds. cvc5 is run by hand (docs/admission.md)."""
    import json

    from swafloor.cli import main
    from swafloor.proofs import catalogue

    theorem = catalogue.by_name("fcfs-pair-ranked-blocks")
    assert theorem in catalogue.OPT_IN and theorem not in catalogue.CATALOGUE
    code = main(["prove", "fcfs-pair-ranked-blocks", "--json"])
    (d,) = json.loads(capsys.readouterr().out)
    assert code == 0 and d["status"] == "ok" and d["result"] == "proved" and d["token_level"]["holds"], d


def test_the_ranking_with_blocks_fails_for_the_oldest_victim_and_the_oracle_sees_it_livelock():
    """In the larger setting (blocks of t tokens, chunks, a full-attention group beside the SWA one) the ranking's
    parts under victim oldest are refuted (Z3, seconds), and the oracle finds the livelock there: t = 2, C = 3,
    W = 2, prompts 2, 2, 3, outputs 3, 3, 1, pools 3 and 3 (progress.pools_of at X = 0): serve under victim oldest
    finishes one request in 200 steps, and so does loop_step; victim newest finishes all by step 10 <= sum(L) = 14."""
    from swafloor.proofs import catalogue, discharge, progress
    from swafloor.proofs.theorem import Theorem
    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import Arrival, loop_start, loop_step, serve

    def oldest_pair_blocks(P0, O0, P1, O1, C, t, W, S, X):
        return progress.ranked_finish_blocks((P0, P1), (O0, O1), X, Victim.OLDEST, catalogue.BLOCK_RANKED_STEPS, W, S,
                                             t, C, True, catalogue.T_BLOCKS)

    blocks = catalogue.by_name("fcfs-pair-ranked-blocks")
    theorem = Theorem("oldest-pair-ranked-blocks", "the ranking under victim oldest", "proved", blocks.variables,
                      oldest_pair_blocks, linear=True)
    assert discharge.discharge(theorem, attempts=False, minimise=False, encoding="direct").result == "refuted"

    prompts, outputs = (2, 2, 3), (3, 3, 1)
    _, pool, full_pool = progress.pools_of(prompts, outputs, 0, 2, 0, 2, 3, True)
    assert (full_pool, pool) == (3, 3)
    config = Config(tokens_per_block=2, layers=[AttentionLayer(), AttentionLayer(2, 0)], slots=(full_pool, pool))
    arrivals = [Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(zip(prompts, outputs))]
    stuck = serve(config, arrivals, chunk=3, victim=Victim.OLDEST, max_steps=200)
    assert stuck.livelock_at == 200 and len(stuck.finished) == 1, stuck
    fine = serve(config, arrivals, chunk=3, victim=Victim.NEWEST, max_steps=200)
    assert fine.completed and max(fine.finished_at.values()) <= sum(prompts) + sum(outputs), fine
    state = loop_start(3)
    for _ in range(200):
        state = loop_step(state, pool, prompts, outputs, Victim.OLDEST, 2, 0, 2, 3, full_pool)
    assert sum(h >= p + o for h, p, o in zip(state[0], prompts, outputs)) == 1, state


@pytest.mark.parametrize("requests", [4, 5, 6, 7, 8])
def test_the_oracle_checks_the_fcfs_bound_at_larger_n(requests):
    """Past the proofs (two and three requests): N = 4..8 requests through serve() on the reference manager, 40
    workloads each (lengths from a fixed-seed random.Random, no Hypothesis), pools 0..2 slots above the largest
    need: under FCFS preemption (victim newest) all are done by step sum(P + O); under victim oldest some
    workload breaks that bound (so the check can fail)."""
    import random

    from swafloor.reference import AttentionLayer, Config
    from swafloor.reference.scheduler import Arrival, serve

    rng = random.Random(requests)
    late = 0
    for case in range(40):
        lens = [(rng.randint(1, 3), rng.randint(1, 3)) for _ in range(requests)]
        total = sum(p + o for p, o in lens)
        pool = max(p + o for p, o in lens) + case % 3
        config = Config(tokens_per_block=1, layers=[AttentionLayer()], slots=(pool,))
        arrivals = [Arrival(f"r{i}", 0, p, o) for i, (p, o) in enumerate(lens)]
        result = serve(config, arrivals, chunk=1, victim=Victim.NEWEST, max_steps=4 * total)
        assert result.completed and max(result.finished_at.values()) <= total, (lens, pool, result)
        other = serve(config, arrivals, chunk=1, victim=Victim.OLDEST, max_steps=4 * total)
        late += not other.completed or max(other.finished_at.values()) > total
    assert late > 0
