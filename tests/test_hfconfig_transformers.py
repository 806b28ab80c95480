"""The built-in reader against transformers' config classes (the ``hf`` extra), on every model type
transformers registers whose default config has a sliding window, chunked attention or linear/SSM
layers: listed from transformers' registry (``CONFIG_MAPPING``), not by hand. Each raw config is the
family's default without ``layer_types``, as hub configs of older checkpoints are written; the built-in
reader must read what transformers reads or refuse with one line naming what is missing."""

from __future__ import annotations

import json
import warnings

import pytest

from swafloor.hfconfig import HfConfigError, parse

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402

HYBRID = {"linear_attention", "mamba", "mamba2", "chunked_attention", "sliding_attention"}


def _text_default(model_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config = CONFIG_MAPPING[model_type]()
            text = config.get_text_config()
        except Exception:  # a class without a default (it needs sub-configs): not a candidate
            return None
    return text


def _get(text, name):
    try:
        return getattr(text, name, None)
    except Exception:  # a per-layer attribute of a heterogeneous config: its serialised value
        return text.to_dict().get(name)


def _families():
    out = []
    for model_type in sorted(CONFIG_MAPPING.keys()):
        text = _text_default(model_type)
        if text is None or not isinstance(_get(text, "num_hidden_layers"), int):
            continue
        types = set(_get(text, "layer_types") or ())
        blocks = _get(text, "layers_block_type")
        if (_get(text, "sliding_window") or _get(text, "attention_chunk_size")
                or types & HYBRID or (isinstance(blocks, (list, tuple)) and set(blocks) - {"attention"})):
            out.append((model_type, text))
    return out


FAMILIES = _families()


def test_the_registry_lists_the_families_this_comparison_exists_for():
    names = {m for m, _ in FAMILIES}
    assert {"gemma2", "gemma3_text", "cohere2", "gpt_oss", "mistral", "llama4_text", "qwen3_next",
            "jamba"} <= names, sorted(names)


def _raw(text):
    raw = json.loads(json.dumps(text.to_dict(), default=str))
    raw.pop("layer_types", None)
    raw["model_type"] = text.model_type
    return raw


@pytest.mark.parametrize("model_type,text", FAMILIES, ids=[m for m, _ in FAMILIES])
def test_builtin_reader_reads_what_transformers_reads_or_refuses(model_type, text):
    raw = _raw(text)
    if text.model_type not in CONFIG_MAPPING:
        pytest.fail(f"{model_type}'s text config {text.model_type} is not registered")
    try:
        want = parse(raw, "transformers")
    except HfConfigError as exc:  # a layer type the reference has no life cycle for: both refuse
        want = exc
    try:
        got = parse(raw, "built-in")
    except HfConfigError as exc:
        assert "\n" not in str(exc) and exc.field, exc  # a refusal naming the field: agreement
        return
    assert not isinstance(want, HfConfigError), f"built-in read {got.rule!r}; transformers refused: {want}"
    assert (_cycles(got.kinds), got.window, got.chunk) == (_cycles(want.kinds), want.window, want.chunk), \
        (got.rule, want.rule)


def _cycles(kinds):
    """Each layer's reference life cycle: linear attention and Mamba both keep one state."""
    return tuple("state" if k in ("linear", "mamba") else k for k in kinds)


GEMMA3_27B = {"model_type": "gemma3", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 62, "sliding_window": 1024,
                              "head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 16,
                              "hidden_size": 5376}}


def test_a_hub_style_gemma3_27b_config_has_52_sliding_and_10_full_layers():
    model = parse(GEMMA3_27B, "transformers")
    assert model.reader.startswith("transformers ")
    assert model.kinds == (("sliding",) * 5 + ("full",)) * 10 + ("sliding",) * 2
