"""``swafloor floor --hf-config``: Hugging Face configs (small ones written here, from public config
facts: field names and the layer rules of each family) read into life cycles and floors."""

from __future__ import annotations

import json

import pytest

from swafloor.cli import main
from swafloor.hfconfig import HfConfigError, parse

from . import brute


def write(tmp_path, data, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def decode_need(t, w, k=0):
    """The most blocks one decode step holds (brute force, tokens), with k tokens in flight: the
    window keeps W + k tokens."""
    return brute.worst_step_need(t, w + k, 0, 1, 3 * (w + k) + 4 * t)[0]


# Layer kinds as each family's rule defines them, spelled out by hand for small layer counts.
GEMMA2 = {"model_type": "gemma2", "num_hidden_layers": 4, "sliding_window": 4096}
GEMMA3 = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 7,
                                                  "sliding_window": 1024, "sliding_window_pattern": 6}}
MISTRAL = {"model_type": "mistral", "num_hidden_layers": 3, "sliding_window": 4096}
GPT_OSS = {"model_type": "gpt_oss", "num_hidden_layers": 4, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}
QWEN3_NEXT = {"model_type": "qwen3_next", "num_hidden_layers": 8, "full_attention_interval": 4}
JAMBA = {"model_type": "jamba", "num_hidden_layers": 8, "attn_layer_period": 8, "attn_layer_offset": 4,
         "sliding_window": None}
NEMOTRON_H = {"model_type": "nemotron_h", "num_hidden_layers": 6, "hybrid_override_pattern": "M-M*-E"}
LLAMA4 = {"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4,
                                                  "attention_chunk_size": 8192, "no_rope_layers": [1, 1, 1, 0]}}
LLAMA4_DEFAULT = {"model_type": "llama4_text", "num_hidden_layers": 8, "attention_chunk_size": 8192}
LLAMA4_EMPTY = {**LLAMA4_DEFAULT, "no_rope_layers": []}
QWEN2 = {"model_type": "qwen2", "num_hidden_layers": 3, "sliding_window": 32768, "use_sliding_window": False,
         "max_window_layers": 1}
QWEN2_ON = {**QWEN2, "use_sliding_window": True}
LLAMA = {"model_type": "llama", "num_hidden_layers": 2}


@pytest.mark.parametrize("data,kinds", [
    (GEMMA2, ("sliding", "full", "sliding", "full")),
    (GEMMA3, ("sliding",) * 5 + ("full", "sliding")),
    (MISTRAL, ("sliding",) * 3),
    (GPT_OSS, ("sliding", "full", "sliding", "full")),
    ({"model_type": "gpt_oss", "num_hidden_layers": 3, "sliding_window": 128}, ("sliding", "full", "sliding")),
    (QWEN3_NEXT, ("linear", "linear", "linear", "full") * 2),
    (JAMBA, ("mamba",) * 4 + ("full",) + ("mamba",) * 3),
    (NEMOTRON_H, ("mamba", "none", "mamba", "full", "none", "none")),
    (LLAMA4, ("chunked", "chunked", "chunked", "full")),
    (LLAMA4_DEFAULT, ("chunked", "chunked", "chunked", "full") * 2),
    (LLAMA4_EMPTY, ("chunked", "chunked", "chunked", "full") * 2),
    (QWEN2, ("full",) * 3),
    (QWEN2_ON, ("full", "sliding", "sliding")),
    (LLAMA, ("full", "full")),
])
def test_layer_kinds_follow_each_family_rule(data, kinds):
    assert parse(data, "built-in").kinds == kinds


@pytest.mark.parametrize("t,k", [(32, 0), (16, 0), (16, 1), (64, 3)])
def test_floor_of_a_gemma3_config_matches_the_brute_force(tmp_path, capsys, t, k):
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3), "--tokens-per-block", str(t),
                       "--in-flight", str(k), "--json")
    assert code == 0
    data = json.loads(out)
    swa, full = data["life_cycles"]
    need = decode_need(t, 1024, k)
    assert (swa["kind"], swa["window"], swa["layers"]) == ("swa", 1024, [0, 1, 2, 3, 4, 6])
    assert swa["floor"] == need and full["kind"] == "full" and full["layers"] == [5] and full["floor"] == need
    assert data["pool_groups_separate"] == [need, need] and data["pool_group_one"] == 2 * need
    # TensorRT-LLM V2 post-fix: S + (W + t - 2) // t + 1 (upstream's spelling), written out here.
    assert swa["trtllm_v2"] == (1024 + t - 2) // t + 1 and swa["trtllm_v2_pre_fix"] == 1
    # vLLM: ceil((W - 1 + max(1, k)) / t) + 1; SGLang: ceil(W / t) + 1 for a request past the window.
    assert swa["vllm"] == -(-(1024 - 1 + max(1, k)) // t) + 1 and swa["sglang"] == -(-1024 // t) + 1
    assert full["vllm"] is None and full["sglang"] is None
    assert data["trtllm_v2_pre_fix_one"] == 2


def test_hybrid_models_count_a_state_per_request(tmp_path, capsys):
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, QWEN3_NEXT), "--json")
    data = json.loads(out)
    assert code == 0 and [r["kind"] for r in data["life_cycles"]] == ["ssm", "full"]
    assert [r["floor"] for r in data["life_cycles"]] == [1, 1] and data["pool_group_one"] == 2
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, NEMOTRON_H))
    assert code == 0 and "3 layers keep no KV cache" in out


def test_chunked_attention_is_counted_as_full_attention_and_said_so(tmp_path, capsys):
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, LLAMA4))
    assert code == 0 and "chunked attention (attention_chunk_size=8192) is not a sliding window" in out
    data = json.loads(run(capsys, "floor", "--hf-config", write(tmp_path, LLAMA4), "--json")[1])
    assert [(r["kind"], r["layers"]) for r in data["life_cycles"]] == [("full", [0, 1, 2, 3])]


def test_text_output_lines_up_engines_side_by_side(tmp_path, capsys):
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, GPT_OSS))
    assert code == 0
    swa_row = next(line.split() for line in out.splitlines() if line.strip().startswith("swa W=128"))
    # floor, KV bytes (unknown: no head sizes), V2, V2 pre-fix, vLLM, SGLang at t = 32, W = 128
    assert swa_row[-6:] == [str(decode_need(32, 128)), "-", "5", "1", "5", "5"]
    assert "S = 0" in out  # gpt-oss's sinks are not cached tokens


@pytest.mark.parametrize("data,needle", [
    ({"num_hidden_layers": 2, "layer_types": ["sliding_attention", "bogus"], "sliding_window": 4},
     "layer_types[1]='bogus'"),
    ({"num_hidden_layers": 2, "layer_types": ["full_attention"]}, "layer_types="),
    ({"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}, "sliding_window=None"),
    ({"num_hidden_layers": 0}, "num_hidden_layers=0"),
    ({"sliding_window": 4}, "num_hidden_layers=None: missing"),
    ({"num_hidden_layers": 2, "sliding_window": "4096"}, "sliding_window='4096'"),
    ({"num_hidden_layers": 2, "sliding_window": 0}, "sliding_window=0"),
    ({"num_hidden_layers": 3, "hybrid_override_pattern": "M*X"}, "hybrid_override_pattern[2]='X'"),
    ({"num_hidden_layers": 3, "attn_layer_period": 2, "attn_layer_offset": 2}, "attn_layer_offset=2"),
    ({"model_type": "gemma3", "text_config": [1]}, "text_config=[1]"),
    ({"text_config": {"num_hidden_layers": True}}, "text_config.num_hidden_layers=True"),
    ({"num_hidden_layers": 2, "no_rope_layers": [1, 1]}, "attention_chunk_size=None"),
    ({"num_hidden_layers": 2, "hybrid_override_pattern": "--"}, "no layer keeps a cache"),
    ([1, 2], "config=[1, 2]"),
])
def test_bad_configs_exit_2_with_one_line_naming_the_field(tmp_path, capsys, data, needle):
    code, out, err = run(capsys, "floor", "--hf-config", write(tmp_path, data))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err
    with pytest.raises(HfConfigError):
        parse(data)


def test_unreadable_files_and_conflicting_options_exit_2(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    for argv, needle in [
        (["floor", "--hf-config", str(tmp_path / "missing.json")], "no such file"),
        (["floor", "--hf-config", str(tmp_path)], "not a regular file"),
        (["floor", "--hf-config", "/dev/zero"], "not a regular file"),
        (["floor", "--hf-config", str(tmp_path / "bad.json")], "not JSON"),
        (["floor", "--hf-config", write(tmp_path, MISTRAL), "--window", "4"], "--window cannot be combined"),
        (["floor", "--tokens-per-block", "4"], "--window (or --hf-config PATH)"),
    ]:
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err


def test_models_table_configs_read_and_floor_as_the_brute_force():
    """Every model of docs/models.json reads, and its SWA floor is the brute-force decode need."""
    from swafloor import hfconfig
    from swafloor.docs.sections import model_configs

    t, models = model_configs()
    assert len(models) >= 8
    for model in models:
        f = hfconfig.floors(hfconfig.parse(model["config"]), t)
        text = model["config"].get("text_config") or model["config"]
        assert f["layers"] == text["num_hidden_layers"]
        for row in f["life_cycles"]:
            if row["kind"] == "swa":
                assert row["floor"] == decode_need(t, row["window"]), model["name"]


def test_the_models_page_example_is_the_models_json_entry():
    from pathlib import Path

    from swafloor.docs.sections import model_configs

    example = json.loads((Path(__file__).parents[1] / "docs/models/gemma-3-1b.json").read_text())
    assert example == next(m["config"] for m in model_configs()[1] if m["name"] == "Gemma 3 1B")


# Gemma 3 27B as the hub writes it (a gemma3 config with its text model in text_config), the fields
# bytes need: 16 key/value heads of head_dim 128, bfloat16; 62 layers, every 6th full, W = 1024.
GEMMA3_27B = {"model_type": "gemma3", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 62, "sliding_window": 1024,
                              "sliding_window_pattern": 6, "num_attention_heads": 32, "num_key_value_heads": 16,
                              "head_dim": 128, "hidden_size": 5376}}
# by hand: K and V, 16 heads x 128 elements, 2 bytes each, per token per layer
GEMMA3_27B_TOKEN = 2 * 16 * 128 * 2
GEMMA3_27B_SWA_LAYERS, GEMMA3_27B_FULL_LAYERS = 52, 10  # layers 5, 11, ..., 59 attend fully


def ceil_div(a, b):
    return -(-a // b)


@pytest.mark.parametrize("reader", ["built-in", "auto"])
def test_gemma3_27b_floor_is_66_at_t32_in_one_pool_group_with_its_bytes(tmp_path, capsys, reader):
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3_27B), "--reader", reader, "--json")
    assert code == 0
    data = json.loads(out)
    floor = ceil_div(1024 - 1, 32) + 1  # 33
    assert data["pool_group_one"] == 66 == 2 * floor
    swa, full = data["life_cycles"]
    assert data["bytes"]["per_token_per_layer"] == GEMMA3_27B_TOKEN and data["bytes"]["kv_dtype"] == "bfloat16"
    assert swa["bytes"] == floor * 32 * GEMMA3_27B_SWA_LAYERS * GEMMA3_27B_TOKEN
    assert full["bytes"] == floor * 32 * GEMMA3_27B_FULL_LAYERS * GEMMA3_27B_TOKEN
    assert data["bytes"]["pool_groups_separate"] == [swa["bytes"], full["bytes"]]
    assert data["bytes"]["pool_group_one"] == 33 * 32 * 62 * 8192 == 536_346_624
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3_27B), "--reader", reader)
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("one pool group"))
    assert code == 0 and row[4:7] == ["66", f"{536_346_624 / 2**20:.2f}", "MiB"]  # 511.50 MiB
    assert "8192 bytes per token per layer" in out


def test_kv_dtype_overrides_the_config_and_fp8_halves_bfloat16(tmp_path, capsys):
    path = write(tmp_path, GEMMA3_27B)
    for dtype, size in [("fp8", 1), ("float8_e4m3fn", 1), ("float32", 4), ("float16", 2)]:
        data = json.loads(run(capsys, "floor", "--hf-config", path, "--kv-dtype", dtype, "--json")[1])
        assert data["bytes"]["kv_dtype"] == dtype and data["bytes"]["per_token_per_layer"] == 2 * 16 * 128 * size
        assert data["bytes"]["pool_group_one"] == 33 * 32 * 62 * 2 * 16 * 128 * size


def test_head_dim_from_hidden_size_and_a_config_without_sizes(tmp_path, capsys):
    # Mistral 7B: hidden 4096 over 32 heads = head_dim 128, 8 key/value heads, bfloat16
    mistral = {**MISTRAL, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
               "torch_dtype": "bfloat16"}
    data = json.loads(run(capsys, "floor", "--hf-config", write(tmp_path, mistral), "--json")[1])
    assert data["bytes"]["per_token_per_layer"] == 2 * 8 * 128 * 2
    assert data["life_cycles"][0]["bytes"] == (ceil_div(4095, 32) + 1) * 32 * 3 * 2 * 8 * 128 * 2
    # the built-in reader fills in no family defaults (transformers' MistralConfig would)
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, MISTRAL), "--reader", "built-in")
    assert code == 0 and "KV bytes: unknown: the config names no num_key_value_heads / head_dim / dtype" in out
    data = json.loads(run(capsys, "floor", "--hf-config", write(tmp_path, MISTRAL), "--reader", "built-in",
                          "--json")[1])
    assert data["bytes"]["pool_group_one"] is None and data["life_cycles"][0]["bytes"] is None


def test_requests_of_max_model_len_beside_each_engine_at_its_block_size(tmp_path, capsys):
    L, N = 32768, 8
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3_27B), "--max-model-len", str(L),
                       "--requests", str(N), "--json")
    assert code == 0
    w = json.loads(out)["workload"]
    swa_l, full_l = GEMMA3_27B_SWA_LAYERS, GEMMA3_27B_FULL_LAYERS
    # per engine: (tokens per block, SWA blocks, full-attention blocks), written out by hand
    expected = {
        "reference": (32, min(ceil_div(L, 32), 33), ceil_div(L, 32)),          # floor 33, 1024
        "vllm": (16, ceil_div(min(1024 - 1 + 1, L), 16) + 1, ceil_div(L, 16)),  # 65, 2048
        "sglang": (1, ceil_div(min(L, 1024), 1) + 1, L),                         # 1025, 32768
        "trtllm": (32, min(ceil_div(L, 32), ceil_div(1024, 32) + 1), ceil_div(L, 32)),  # 33, 1024
    }
    for who, (t, swa, full) in expected.items():
        per = (swa * swa_l + full * full_l) * t * GEMMA3_27B_TOKEN
        assert w[who] == {"request_bytes": per, "total_bytes": N * per}, who
    assert w["vllm"]["request_bytes"] == (65 * 52 + 2048 * 10) * 16 * 8192
    # a request shorter than the window never holds the floor: 100 tokens are 4 blocks of 32
    data = json.loads(run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3_27B), "--max-model-len", "100",
                          "--json")[1])
    assert [r["request_blocks"]["reference"] for r in data["life_cycles"]] == [4, 4]
    assert data["workload"]["requests"] == 1
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3_27B), "--max-model-len", str(L),
                       "--requests", str(N))
    assert code == 0 and f"8 requests of L = {L} tokens" in out
    floor_row = next(line.split() for line in out.splitlines() if line.strip().startswith("floor "))
    assert floor_row[-2:] == [f"{N * (33 * 52 + 1024 * 10) * 32 * 8192 / 2**30:.2f}", "GiB"]


SMALL_SWA = {"model_type": "gemma3_text", "num_hidden_layers": 6, "sliding_window": 10, "sliding_window_pattern": 6}


@pytest.mark.parametrize("t,n,sinks", [(4, 1, 0), (4, 3, 0), (4, 3, 2), (3, 5, 4), (8, 2, 1)])
def test_step_and_sink_tokens_work_with_hf_config_as_the_brute_force(tmp_path, capsys, t, n, sinks):
    code, out, _ = run(capsys, "floor", "--hf-config", write(tmp_path, SMALL_SWA), "--tokens-per-block", str(t),
                       "--step-tokens", str(n), "--sink-tokens", str(sinks), "--json")
    assert code == 0
    data = json.loads(out)
    swa, full = data["life_cycles"]
    need = brute.worst_step_need(t, 10, sinks, n, 6 * (10 + n) + 8 * t + sinks)[0]
    assert swa["floor"] == need and swa["step_floor"] == need and swa["sink_blocks"] == ceil_div(sinks, t)
    assert full["floor"] == need and data["pool_group_one"] == 2 * need


@pytest.mark.parametrize("argv,needle", [
    (["--kv-dtype", "int3"], "--kv-dtype: invalid choice: 'int3'"),
    (["--max-model-len", "0"], "--max-model-len: must be between 1"),
    (["--max-model-len", "-5"], "argument --max-model-len: must be between 1"),
    (["--max-model-len", "8", "--requests", "0"], "--requests: must be between 1"),
    (["--requests", "3"], "--requests=3 needs --max-model-len"),
])
def test_bad_byte_options_exit_2_with_one_line_naming_the_flag(tmp_path, capsys, argv, needle):
    code, out, err = run(capsys, "floor", "--hf-config", write(tmp_path, GEMMA3_27B), *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err
