"""Issue 32: ``swafloor serve-sim`` and the scheduler layer (reference/scheduler.py)."""

from __future__ import annotations

import json

import pytest

from swafloor.cli import main
from swafloor.reference import AttentionLayer, Config
from swafloor.reference.scheduler import Arrival, Victim, pick_victim, serve

MISTRAL = ["serve-sim", "--window", "4096", "--tokens-per-block", "16", "--generate", "1", "--prompt", "100000",
           "--output", "10", "--chunk", "2048"]


def _json(capsys, argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_an_over_charging_gate_deadlocks_a_lone_request_the_rule_completes(capsys):
    # the pool defaults to the rule's charge: ceil((4096 + 2048 - 2)/16) + 1 = 385 slots
    code, out = _json(capsys, [*MISTRAL, "--engine", "vllm-uncapped"])
    assert code == 4 and not out["completed"]
    # vLLM before its cap charges the whole prompt to the SWA group: cdiv(100000, 16) = 6250 blocks
    assert out["deadlock"] == {"step": 0, "request": "r0", "charged": [6250], "needed": [385], "free": [385]}
    code, out = _json(capsys, [*MISTRAL, "--engine", "reference"])
    assert code == 0 and out["completed"] and out["finished"] == 1 and out["pool"] == [385]
    # admitted at the end of step 0; ceil(100000 / 2048) = 49 prefill chunks, then 10 decode steps (the run
    # ends at P + O) at steps 1..59: 60 steps
    assert out["steps"] == 60
    code, out = _json(capsys, [*MISTRAL, "--engine", "vllm"])  # the cap: here exactly the rule's 385
    assert code == 0 and out["completed"]


def test_the_text_output_names_the_step_and_the_blocks(capsys):
    assert main([*MISTRAL, "--engine", "vllm-uncapped"]) == 4
    text = capsys.readouterr().out
    assert "DEADLOCK at step 0" in text and "[6250]" in text and "[385]" in text


def _two_growing(victim):
    # two requests whose full-attention blocks cannot both grow to the end: each needs cdiv(30, 4) = 8 of 12
    config = Config(tokens_per_block=4, layers=[AttentionLayer(window=8), AttentionLayer()], slots=(12, 12))
    arrivals = [Arrival(f"r{i}", 0, 20, 10) for i in range(3)]
    return serve(config, arrivals, chunk=4, victim=victim)


def test_preempting_the_newest_other_request_livelocks_and_fcfs_preemption_finishes():
    fcfs = _two_growing(Victim.NEWEST)
    assert fcfs.completed and len(fcfs.finished) == 3 and fcfs.preemptions > 0
    bugged = _two_growing(Victim.NEWEST_OTHER)
    assert bugged.livelock_at is not None and len(bugged.finished) < 3 and bugged.deadlock is None


def test_victims():
    assert pick_victim(["a", "b", "c"], "b", Victim.NEWEST) == "c"
    assert pick_victim(["a", "b", "c"], "c", Victim.NEWEST) == "c"  # itself, the lowest priority
    assert pick_victim(["a", "b", "c"], "c", Victim.NEWEST_OTHER) == "b"
    assert pick_victim(["a"], "a", Victim.NEWEST_OTHER) == "a"
    assert pick_victim(["a", "b"], "b", Victim.OLDEST) == "a"


@pytest.mark.parametrize("argv, needle", [
    (["--window", "8", "--tokens-per-block", "4", "--requests", "/nonexistent/r.json"], "--requests=/nonexistent/r.json"),
    (["--window", "8", "--tokens-per-block", "4", "--generate", "2", "--requests", "x.json"], "cannot be combined"),
    (["--tokens-per-block", "4"], "--window"),
    (["--window", "8", "--tokens-per-block", "4", "--chunk", "0"], "--chunk"),
    (["--window", "8", "--tokens-per-block", "4", "--engine", "tgi"], "--engine"),
    (["--window", "8", "--tokens-per-block", "4", "--engine", "vllm", "--kept-resume"], "--kept-resume"),
    (["--window", "8", "--tokens-per-block", "4", "--generate", "2", "--kept-resume"], "--kept-resume"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    assert main(["serve-sim", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("swafloor serve-sim: ") and needle in err[0], err


def test_a_request_file_with_a_bad_field_names_it(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps([{"id": "a", "at": 0, "prompt": 0, "output": 3}]), encoding="utf-8")
    assert main(["serve-sim", "--window", "8", "--tokens-per-block", "4", "--requests", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "prompt" in err and "0" in err and "\n" not in err
    good = tmp_path / "g.json"
    good.write_text(json.dumps([{"id": "a", "at": 0, "prompt": 9, "output": 3},
                                {"id": "b", "at": 2, "prompt": 5, "output": 2}]), encoding="utf-8")
    code, out = _json(capsys, ["serve-sim", "--window", "8", "--tokens-per-block", "4", "--requests", str(good)])
    assert code == 0 and out["finished"] == 2


def test_sglang_and_trtllm_engines(capsys):
    # SGLang 0.5.23's reservation for the Mistral run: max(2048 - 4095, 0) + min(100000 + 10, 4095) + 16 = 4111
    # tokens, strictly below the free ones: cdiv(4112, 16) = 257 pages of the 385; 0.5.15's budget
    # max(min(100000, 2048), 4095) + 16 tokens, admitted with 4112 + 1 free: cdiv(4113, 16) = 258;
    # TensorRT-LLM reserves nothing (use 0 of 385)
    for engine in ("sglang", "sglang-0.5.15", "trtllm"):
        code, out = _json(capsys, [*MISTRAL, "--engine", engine])
        assert code == 0 and out["completed"] and out["steps"] == 60, engine
    # a one-token prompt, W = 5, t = 1: the rule charges ceil((5 + 1 - 2)/1) + 1 = 5; 0.5.15's budget is
    # max(1, 4) + 1 = 5 tokens and it needs one more free; 0.5.23 reserves max(1 - 4, 0) + min(1 + 4, 4) + 1 = 5
    # and needs one more free too (its chunk cut needs min(4, 4) + 1 + 1 = 6): 6 > 5, each waits forever
    argv = ["serve-sim", "--window", "5", "--tokens-per-block", "1", "--prompt", "1", "--output", "4", "--chunk", "1"]
    for engine in ("sglang", "sglang-0.5.15"):
        code, out = _json(capsys, [*argv, "--engine", engine])
        assert code == 4 and out["deadlock"] == {"step": 0, "request": "r0", "charged": [6], "needed": [5], "free": [5]}
    code, out = _json(capsys, [*argv, "--engine", "reference"])
    assert code == 0 and out["completed"]
    # t = 2, W = 2, P = 1, C = 2, O = 1 (the trace sglang-admission-0.5.23-over-charges, found in SGLang): the
    # prompt paged to 2 tokens, reserved max(2 - 1, 0) + min(2 + 1, 1) + 2 = 4 tokens, needing 6 free: 3 pages;
    # at the 2 the rule charges (and SGLang's start-up accepts: 1 + 2 < 4) the reservation equals the pool, so
    # the chunk is cut to 4 - (1 + 2) = 1 token, floored to a page: 0, nothing admitted
    argv = ["serve-sim", "--window", "2", "--tokens-per-block", "2", "--prompt", "1", "--output", "1", "--chunk", "2"]
    code, out = _json(capsys, [*argv, "--engine", "sglang"])
    assert code == 4 and out["deadlock"] == {"step": 0, "request": "r0", "charged": [3], "needed": [2], "free": [2]}
    code, out = _json(capsys, [*argv, "--engine", "reference"])
    assert code == 0 and out["completed"]
    # a reservation that never fits: t = 1, W = 3, P = 140, C = 3, O = 8 at 4 pages: whole it needs 5, so SGLang
    # cuts the chunk (4 - (2 + 1) = 1 token) and admits it at the cut's 4 pages, no deadlock; the loop runs every
    # request with --chunk (it cuts nothing), whose 3-token step needs the rule's 5: it preempts itself, a livelock
    # (a limit of serve-sim, not SGLang's behaviour: SGLang re-sizes each chunk to the SWA tokens left)
    argv = ["serve-sim", "--window", "3", "--tokens-per-block", "1", "--prompt", "140", "--output", "8", "--chunk", "3",
            "--pool", "4"]
    code, out = _json(capsys, [*argv, "--engine", "sglang"])
    assert code == 4 and out["deadlock"] is None and out["livelock_at"] and out["finished"] == 0, out
    code, out = _json(capsys, [*argv, "--engine", "sglang-0.5.15"])  # max(3, 2) + 1 = 4 tokens, one more free: 5
    assert code == 4 and out["deadlock"] == {"step": 0, "request": "r0", "charged": [5], "needed": [5], "free": [4]}
    # SGLang takes only a chunk of whole pages: bad input, exit 2 naming the field
    assert main(["serve-sim", "--window", "8", "--tokens-per-block", "4", "--prompt", "10", "--output", "1",
                 "--chunk", "3", "--engine", "sglang"]) == 2
    err = capsys.readouterr().err
    assert "chunk" in err and "3" in err and "\n" not in err.strip()


def test_kept_resume_trtllm_refuses_its_own_slots(capsys):
    # kept after every step at the rule's 385 slots: after the first 2,048-token chunk past the window (h = 4096)
    # the request holds 384 slots, 99.7% > 97%: TensorRT-LLM's gate refuses it; the rule's resumes it to the end
    code, out = _json(capsys, [*MISTRAL, "--engine", "trtllm", "--kept-resume"])
    assert code == 4 and not out["completed"] and out["refused_at"] == 4096 and out["used"] == [384]
    assert out["total"] == [385]
    code, out = _json(capsys, [*MISTRAL, "--engine", "reference", "--kept-resume"])
    assert code == 0 and out["completed"] and out["steps"] == 59
    assert main([*MISTRAL, "--engine", "trtllm", "--kept-resume"]) == 4
    assert "DEADLOCK after the step at history 4096" in capsys.readouterr().out
