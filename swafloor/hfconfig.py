"""Read a Hugging Face ``config.json`` into the reference's layers: which layers attend over a sliding
window, which attend fully, which keep a recurrent state (SSM, linear attention), which keep no cache.

Only the fields below are read, in this order of precedence (the first that applies decides every
layer's kind); a multimodal config's text model is its ``text_config``:

1. ``layer_types``: one string per layer: ``sliding_attention`` (window ``sliding_window``),
   ``full_attention``, ``chunked_attention`` (Llama 4), ``linear_attention`` (Qwen3-Next's Gated
   DeltaNet), ``mamba`` / ``mamba2``.
2. ``hybrid_override_pattern`` (Nemotron-H): one character per layer: ``M`` Mamba-2, ``*`` attention,
   ``-`` MLP and ``E`` mixture of experts (no cache).
3. ``attn_layer_period`` and ``attn_layer_offset`` (Jamba): layer ``i`` attends iff
   ``i % period == offset``; the others are Mamba.
4. ``full_attention_interval`` (Qwen3-Next without ``layer_types``): layer ``i`` attends fully iff
   ``(i + 1) % interval == 0``; the others are linear attention.
5. ``no_rope_layers`` (Llama 4; or ``no_rope_layer_interval``, 4 by default, when a ``llama4``
   config has ``attention_chunk_size`` but no list or an empty one): a layer with RoPE (``1``) uses chunked attention,
   a NoPE layer (``0``) full attention.
6. ``sliding_window_pattern`` ``P`` (Gemma 3, Cohere 2): layer ``i`` attends fully iff
   ``(i + 1) % P == 0``, else over the sliding window.
7. ``model_type`` ``gemma2`` or ``gpt_oss`` without ``layer_types``: even layers slide, odd layers
   attend fully (transformers' default for both).
8. ``max_window_layers`` with ``use_sliding_window`` true (Qwen2): layers from that index on slide.
9. Otherwise every layer slides when ``sliding_window`` is set, else every layer attends fully.

``use_sliding_window: false`` switches the window off (Qwen2's configs carry a ``sliding_window``
they do not use). The window ``W`` is ``sliding_window`` as written: the tokens a query at position
``h`` sees, itself included, ``[h + 1 - W, h]``, as vLLM reads it (SGLang stores ``W - 1``, an
exclusive bound on the same range). Hugging Face configs name no sink tokens: ``S = 0`` (gpt-oss's
"sinks" are a learned logit per head, not cached tokens).

Chunked attention (Llama 4's ``attention_chunk_size`` ``C``) is not a sliding window: a query at ``h``
sees the tokens of its own chunk, ``[C * (h // C), h]``, so what it holds drops to one block at each
chunk boundary and grows to ``ceil(C / t)`` blocks; the reference has no such life cycle, so its
layers are counted as full attention (never released): an upper bound on what they hold, not their
floor. Linear-attention and Mamba layers keep one state per request: the reference's SSM life cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from swafloor.reference import AttentionLayer, ConfigError, SsmLayer
from swafloor.reference.config import MAX_COUNT

__all__ = ["HfConfigError", "HfModel", "KINDS", "READERS", "UNIFORM_WINDOW_TYPES", "parse", "load",
           "transformers_version"]

#: ``--reader``: ``auto`` is transformers where it is installed (``pip install swafloor[hf]``), else built-in.
READERS = ("auto", "transformers", "built-in")

#: Model types whose attention layers all slide when the config has ``sliding_window`` and no layer
#: pattern (their modeling code applies the one window to every layer). The built-in reader
#: refuses any other model type with a window and no pattern, never guessing "every layer";
#: tests/test_hfconfig_transformers.py checks this list against transformers' registry.
UNIFORM_WINDOW_TYPES = frozenset({"mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
                                  "starcoder2", "mistral3", "ministral", "phimoe"})

#: Model types whose layer kinds (hybrids, linear attention, per-layer windows) transformers derives
#: from fields or defaults the built-in reader does not model: without ``layer_types`` it refuses them
#: (tests/test_hfconfig_transformers.py finds any other model type it would misread).
NEEDS_LAYER_TYPES = frozenset({
    "bailing_hybrid", "bamba", "colmodernvbert", "falcon_h1", "falcon_mamba", "granitemoehybrid",
    "inkling_mm_model", "inkling_text", "kimi_linear", "mamba", "mamba2", "minicpm_ocr", "minicpmv4_6",
    "minicpmv4_7", "minimax", "modernbert", "modernvbert", "olmo_hybrid", "pe_audio", "pe_audio_video",
    "pe_video", "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_next", "qwen4_exp",
    "qwen4_exp_text", "recurrent_gemma", "zamba", "zamba2"})

#: Layer patterns that transformers supplies when a config names none: ``sliding_window_pattern`` by
#: model type (checked against transformers by the same test).
DEFAULT_SLIDING_WINDOW_PATTERN = {"gemma3": 6, "gemma3_text": 6, "cohere2": 4}

#: What one layer is, as read: the kinds below, in the order they are listed.
KINDS = ("sliding", "full", "chunked", "linear", "mamba", "none")

_LAYER_TYPES = {
    "sliding_attention": "sliding",
    "full_attention": "full",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "mamba",
    "mamba2": "mamba",
    "none": "none",
}
_PATTERN = {"M": "mamba", "*": "full", "-": "none", "E": "none"}
#: Bytes per element of each KV dtype a config or ``--kv-dtype`` may name.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
               "fp8_e4m3": 1, "fp8_e5m2": 1}


def kv_bytes_per_token(kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """The bytes one token keeps in one attention layer: its key and its value, each ``kv_heads``
    heads of ``head_dim`` elements."""
    return 2 * kv_heads * head_dim * dtype_bytes


#: The engines' default tokens per block for ``--max-model-len``: vLLM's ``block_size`` 16,
#: SGLang's ``page_size`` 1 (its server default), TensorRT-LLM's ``tokens_per_block`` 32.
ENGINE_BLOCK_SIZES = {"vllm": 16, "sglang": 1, "trtllm": 32}


#: The largest config.json read (real ones are a few kilobytes).
MAX_CONFIG_BYTES = 16 * 1024 * 1024


class HfConfigError(ConfigError):
    """A Hugging Face config that cannot be read: ``field`` names the config field, ``value`` holds it."""


@attrs.frozen
class HfModel:
    """A config as the reference sees it: one kind per layer (:data:`KINDS`), the window, the chunk
    size, the rule that decided the kinds, and notes on how it was read."""

    model_type: str
    kinds: tuple[str, ...]
    window: int | None
    chunk: int | None
    rule: str
    notes: tuple[str, ...]
    #: Which reader read it: ``"transformers <version>"`` or ``"built-in"``.
    reader: str = "built-in"
    #: Key/value heads, head size and bytes per element (``None`` where the config does not say).
    kv_heads: int | None = None
    head_dim: int | None = None
    dtype: str | None = None

    @property
    def num_layers(self) -> int:
        return len(self.kinds)

    def reference_layers(self, sink_tokens: int = 0) -> tuple[tuple[int, Any], ...]:
        """``(layer index, reference layer)`` for every layer that keeps a cache: sliding layers as
        :class:`AttentionLayer` with the window (and ``sink_tokens`` sink tokens: configs name none,
        ``--sink-tokens`` adds them), full and chunked as full attention, linear attention and Mamba
        as :class:`SsmLayer`; layers without a cache are left out."""
        out = []
        for i, kind in enumerate(self.kinds):
            if kind == "sliding":
                out.append((i, AttentionLayer(window=self.window, sink_tokens=sink_tokens)))
            elif kind in ("full", "chunked"):
                out.append((i, AttentionLayer()))
            elif kind in ("linear", "mamba"):
                out.append((i, SsmLayer()))
        return tuple(out)


def _int(cfg: dict, field: str, prefix: str, minimum: int = 1, required: bool = False) -> int | None:
    value = cfg.get(field)
    if value is None:
        if required:
            raise HfConfigError(prefix + field, value, "missing")
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise HfConfigError(prefix + field, value, "must be an integer")
    if not minimum <= value <= MAX_COUNT:
        raise HfConfigError(prefix + field, value, f"must be between {minimum} and {MAX_COUNT}")
    return value


def _bool(cfg: dict, field: str, prefix: str) -> bool | None:
    value = cfg.get(field)
    if value is not None and not isinstance(value, bool):
        raise HfConfigError(prefix + field, value, "must be true or false")
    return value


def parse(data: Any, reader: str = "auto") -> HfModel:
    """Read a config's fields (a dict, as ``json.load`` gives it) with ``reader`` (:data:`READERS`);
    bad fields raise :class:`HfConfigError`."""
    if reader not in READERS:
        raise HfConfigError("--reader", reader, f"must be one of {list(READERS)}")
    if not isinstance(data, dict):
        raise HfConfigError("config", data, "must be a JSON object")
    if reader == "auto" and transformers_version() is not None:
        from transformers import CONFIG_MAPPING

        if isinstance(data.get("model_type"), str) and data["model_type"] in CONFIG_MAPPING:
            return _parse_transformers(data)
    if reader == "transformers":
        return _parse_transformers(data)
    return _parse(data)


def transformers_version() -> str | None:
    """transformers' version where it can be imported, else ``None``."""
    try:
        import transformers
    except ImportError:
        return None
    return str(transformers.__version__)


#: transformers' names of the layers that keep no KV cache, and those of hybrid block lists.
_NO_CACHE = {"mlp", "moe", "none"}
_BLOCK_TYPES = {"attention": "full", "mamba": "mamba", "mamba2": "mamba", "mlp": "none", "moe": "none",
                "linear_attention": "linear"}


def _attr(config: Any, name: str) -> Any:
    """``config.name``; a heterogeneous config's per-layer attribute raises on global access: then
    its serialised value."""
    try:
        return getattr(config, name, None)
    except Exception:
        return config.to_dict().get(name)


def _parse_transformers(data: dict) -> HfModel:
    """Build the config with transformers' own class for its ``model_type`` (as vLLM and SGLang do),
    then read its text model's ``layer_types`` (or a hybrid's ``layers_block_type``), window and
    chunk size; transformers fills in each family's defaults."""
    version = transformers_version()
    if version is None:
        raise HfConfigError("--reader", "transformers", "transformers is not installed (pip install swafloor[hf])")
    import warnings

    from transformers import CONFIG_MAPPING

    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise HfConfigError("model_type", model_type, f"not a model type transformers {version} registers")
    if data.get("text_config") is not None and not isinstance(data["text_config"], dict):
        raise HfConfigError("text_config", data["text_config"], "must be an object")
    raw = {k: v for k, v in data.items() if k != "model_type"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = CONFIG_MAPPING[model_type](**raw)
            text = config.get_text_config()
    except Exception as exc:  # a config transformers' class rejects: its own message, one line
        raise HfConfigError("config", model_type, f"transformers {version} cannot build it: {exc}") from None
    cfg = text.to_dict()
    cfg["model_type"] = getattr(text, "model_type", model_type) or model_type
    for field in ("layer_types", "sliding_window", "attention_chunk_size", "num_hidden_layers", "head_dim",
                  "num_key_value_heads", "num_attention_heads", "hidden_size"):
        value = _attr(text, field)
        if value is not None and not callable(value):
            cfg[field] = list(value) if isinstance(value, tuple) else value
    for source in (data.get("text_config") if isinstance(data.get("text_config"), dict) else {}, data):
        for field in ("dtype", "torch_dtype"):  # as written (transformers turns it into a torch dtype)
            if source.get(field) is not None:
                cfg["dtype"] = source[field]
                break
        else:
            continue
        break
    else:
        cfg.pop("dtype", None), cfg.pop("torch_dtype", None)
    if cfg.get("layer_types") is None and isinstance(_attr(text, "layers_block_type"), (list, tuple)):
        blocks = list(_attr(text, "layers_block_type"))
        for i, name in enumerate(blocks):
            if name not in _BLOCK_TYPES:
                raise HfConfigError(f"layers_block_type[{i}]", name, f"must be one of {sorted(_BLOCK_TYPES)}")
        cfg["hybrid_kinds"] = [_BLOCK_TYPES[b] for b in blocks]
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = ["none" if t in _NO_CACHE else t for t in cfg["layer_types"]]
    model = _parse(cfg, uniform=True)
    return attrs.evolve(model, reader=f"transformers {version}",
                        rule=f"transformers' {type(text).__name__}: {model.rule}")


def _parse(data: Any, uniform: bool = False) -> HfModel:
    if not isinstance(data, dict):
        raise HfConfigError("config", data, "must be a JSON object")
    model_type = data.get("model_type", "")
    cfg, prefix = data, ""
    if "text_config" in data and data["text_config"] is not None:
        if not isinstance(data["text_config"], dict):
            raise HfConfigError("text_config", data["text_config"], "must be an object")
        cfg, prefix = data["text_config"], "text_config."
        model_type = cfg.get("model_type", model_type)
    if not isinstance(model_type, str):
        raise HfConfigError(prefix + "model_type", model_type, "must be a string")
    n = _int(cfg, "num_hidden_layers", prefix, required=True)
    if n > 100_000:
        raise HfConfigError(prefix + "num_hidden_layers", n, "must be at most 100000")
    window = _int(cfg, "sliding_window", prefix)
    chunk = _int(cfg, "attention_chunk_size", prefix)
    notes: list[str] = []
    if _bool(cfg, "use_sliding_window", prefix) is False and window is not None:
        notes.append(f"use_sliding_window=false: sliding_window={window} is not used")
        window = None

    kinds, rule = _kinds(cfg, prefix, model_type, n, window, chunk, uniform)
    if "sliding" in kinds and window is None:
        i = kinds.index("sliding")
        raise HfConfigError(prefix + "sliding_window", cfg.get("sliding_window"),
                            f"layer {i} slides ({rule}) but there is no window")
    if "chunked" in kinds:
        if chunk is None:
            raise HfConfigError(prefix + "attention_chunk_size", None,
                                f"layer {kinds.index('chunked')} uses chunked attention ({rule}) but there is no chunk size")
        notes.append(f"chunked attention (attention_chunk_size={chunk}) is not a sliding window: a query sees its "
                     "own chunk [C*(h//C), h]; its layers count as full attention here (an upper bound, not a floor)")
    if "linear" in kinds or "mamba" in kinds:
        notes.append("linear-attention and Mamba layers keep one state per request: an SSM life cycle")
    if "none" in kinds:
        notes.append(f"{kinds.count('none')} layers keep no KV cache (MLP or mixture of experts)")
    if model_type == "gpt_oss":
        notes.append("gpt-oss's attention sinks are a learned logit per head, not cached tokens: S = 0")
    if not any(k != "none" for k in kinds):
        raise HfConfigError(prefix + "num_hidden_layers", n, "no layer keeps a cache")
    heads = _int(cfg, "num_attention_heads", prefix)
    kv_heads = _int(cfg, "num_key_value_heads", prefix) or heads
    head_dim = _int(cfg, "head_dim", prefix)
    hidden = _int(cfg, "hidden_size", prefix)
    if head_dim is None and hidden is not None and heads:
        head_dim = hidden // heads
    dtype = None
    for where, source in ((prefix, cfg), ("", data)):
        for field in ("dtype", "torch_dtype"):
            value = source.get(field)
            if value is not None:
                dtype = str(value).removeprefix("torch.")
                if dtype not in DTYPE_BYTES:
                    raise HfConfigError(where + field, value, f"must be one of {sorted(DTYPE_BYTES)}")
                break
        if dtype is not None:
            break
    return HfModel(model_type, tuple(kinds), window if "sliding" in kinds else None,
                   chunk if "chunked" in kinds else None, rule, tuple(notes), kv_heads=kv_heads,
                   head_dim=head_dim, dtype=dtype)


def _periodic(n: int, every: int, on: str, off: str) -> list[str]:
    """Layer ``i`` is ``on`` iff ``(i + 1) % every == 0``, else ``off``."""
    return [on if (i + 1) % every == 0 else off for i in range(n)]


def _kinds(cfg: dict, prefix: str, model_type: str, n: int, window: int | None,
           chunk: int | None, uniform: bool = False) -> tuple[list[str], str]:
    if cfg.get("layer_types") is None and not uniform and model_type in NEEDS_LAYER_TYPES \
            and cfg.get("full_attention_interval") is None:
        raise HfConfigError(prefix + "layer_types", None,
                            f"missing: {model_type}'s layer kinds are transformers' default, which the built-in "
                            "reader does not model; add layer_types or install swafloor[hf] (transformers)")
    if cfg.get("hybrid_kinds") is not None:  # transformers' layers_block_type, read above
        return [("sliding" if window else "full") if k == "full" else k for k in cfg["hybrid_kinds"]], \
            "layers_block_type"
    if cfg.get("layer_types") is not None:
        types = cfg["layer_types"]
        if not isinstance(types, list) or len(types) != n:
            raise HfConfigError(prefix + "layer_types", types, f"must be a list of num_hidden_layers={n} strings")
        kinds = []
        for i, name in enumerate(types):
            if name not in _LAYER_TYPES:
                raise HfConfigError(f"{prefix}layer_types[{i}]", name, f"must be one of {sorted(_LAYER_TYPES)}")
            kinds.append(_LAYER_TYPES[name])
        return kinds, "layer_types"
    if cfg.get("hybrid_override_pattern") is not None:
        pattern = cfg["hybrid_override_pattern"]
        if not isinstance(pattern, str) or len(pattern) != n:
            raise HfConfigError(prefix + "hybrid_override_pattern", pattern,
                                f"must be a string of num_hidden_layers={n} characters")
        for i, ch in enumerate(pattern):
            if ch not in _PATTERN:
                raise HfConfigError(f"{prefix}hybrid_override_pattern[{i}]", ch, f"must be one of {sorted(_PATTERN)}")
        return [("sliding" if window else "full") if ch == "*" else _PATTERN[ch] for ch in pattern], \
            "hybrid_override_pattern"
    if cfg.get("attn_layer_period") is not None:
        period = _int(cfg, "attn_layer_period", prefix)
        offset = _int(cfg, "attn_layer_offset", prefix, minimum=0, required=True)
        if offset >= period:
            raise HfConfigError(prefix + "attn_layer_offset", offset, f"must be below attn_layer_period={period}")
        attn = "sliding" if window else "full"
        return [attn if i % period == offset else "mamba" for i in range(n)], "attn_layer_period/offset"
    if cfg.get("full_attention_interval") is not None:
        every = _int(cfg, "full_attention_interval", prefix)
        return _periodic(n, every, "full", "linear"), "full_attention_interval"
    if cfg.get("no_rope_layers"):  # an empty list means transformers' default, as below
        flags = cfg["no_rope_layers"]
        if not isinstance(flags, list) or len(flags) != n:
            raise HfConfigError(prefix + "no_rope_layers", flags, f"must be a list of num_hidden_layers={n} flags")
        for i, f in enumerate(flags):
            if f not in (0, 1) or isinstance(f, float):
                raise HfConfigError(f"{prefix}no_rope_layers[{i}]", f, "must be 0 or 1")
        return ["chunked" if f else "full" for f in flags], "no_rope_layers"
    if model_type.startswith("llama4") and chunk is not None:
        every = _int(cfg, "no_rope_layer_interval", prefix) or 4
        return _periodic(n, every, "full", "chunked"), "no_rope_layer_interval"
    if cfg.get("sliding_window_pattern") is not None:
        every = _int(cfg, "sliding_window_pattern", prefix)
        return _periodic(n, every, "full", "sliding"), "sliding_window_pattern"
    if model_type in ("gemma2", "gpt_oss") and window is not None:
        return _periodic(n, 2, "full", "sliding"), f"{model_type}: even layers slide"
    if window is not None and cfg.get("max_window_layers") is not None and cfg.get("use_sliding_window") is True:
        first = _int(cfg, "max_window_layers", prefix, minimum=0)
        return ["sliding" if i >= first else "full" for i in range(n)], "max_window_layers"
    if window is not None and model_type in DEFAULT_SLIDING_WINDOW_PATTERN:
        every = DEFAULT_SLIDING_WINDOW_PATTERN[model_type]
        return _periodic(n, every, "full", "sliding"), f"{model_type}'s default sliding_window_pattern={every}"
    if window is not None and (uniform or model_type in UNIFORM_WINDOW_TYPES):
        return ["sliding"] * n, "sliding_window: every layer" + (
            "" if uniform else f" ({model_type} applies its window to every layer)")
    if window is not None:
        raise HfConfigError(prefix + "layer_types", None,
                            f"missing: {model_type or 'a config without model_type'} has sliding_window={window} "
                            "but no layer pattern, and the built-in reader does not know its default; "
                            "add layer_types or install swafloor[hf] (transformers) to read it")
    return ["full"] * n, "no window: every layer"


def load(path: str | Path, reader: str = "auto") -> HfModel:
    """Read and parse the ``config.json`` at ``path``. An unreadable file or bad JSON raises
    :class:`HfConfigError` naming the file."""
    try:
        file = Path(path)
        if not file.is_file():  # a folder, a device or a pipe: never read (/dev/zero would never end)
            why = "no such file" if not file.exists() else "not a regular file"
            raise HfConfigError("--hf-config", str(path), why)
        if file.stat().st_size > MAX_CONFIG_BYTES:
            raise HfConfigError("--hf-config", str(path), f"larger than {MAX_CONFIG_BYTES:,} bytes: not a config.json")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HfConfigError("--hf-config", str(path), f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HfConfigError("--hf-config", str(path), f"not JSON: {exc}") from None
    return parse(data, reader)


def token_bytes(model: HfModel, kv_dtype: str | None = None) -> tuple[int | None, str | None, str | None]:
    """``(bytes one token keeps in one attention layer, the dtype, why not)``: :func:`kv_bytes_per_token`
    of the model's key/value heads and head size at ``kv_dtype`` (``--kv-dtype``; else the config's
    dtype); ``None`` and the missing field where the config does not say."""
    dtype = kv_dtype or model.dtype
    if kv_dtype is not None and kv_dtype not in DTYPE_BYTES:
        raise HfConfigError("--kv-dtype", kv_dtype, f"must be one of {sorted(DTYPE_BYTES)}")
    missing = [name for name, value in (("num_key_value_heads", model.kv_heads), ("head_dim", model.head_dim),
                                        ("dtype", dtype)) if value is None]
    if missing:
        return None, dtype, "the config names no " + " / ".join(missing) + (
            " (nor hidden_size / num_attention_heads)" if "head_dim" in missing else "")
    return kv_bytes_per_token(model.kv_heads, model.head_dim, DTYPE_BYTES[dtype]), dtype, None


def floors(model: HfModel, t: int, in_flight: int = 0, *, step_tokens: int | None = None, sink_tokens: int = 0,
           kv_dtype: str | None = None, max_model_len: int | None = None, requests: int = 1) -> dict:
    """The model's life cycles at ``t`` tokens per block and ``in_flight`` tokens in flight, each with
    its floor and what TensorRT-LLM V2 (after and before PR #15588), vLLM and SGLang reserve for it,
    and the pool-group minimum with one pool group per life cycle and with all in one. Every figure
    is a reference function (:mod:`swafloor.reference.floors`, :mod:`swafloor.reference.peers`) or
    the reference's layout (:func:`swafloor.reference.build_layout`); ``None`` where an engine has no
    per-life-cycle figure.

    ``step_tokens`` ``n``: steps of ``n`` tokens (chunked prefill; speculative decoding's drafts are
    ``n - 1``): the layout is sized with ``n - 1`` lookahead slots (:func:`~swafloor.reference.floors.
    lookahead_floor`, the ``n``-token step floor) and each SWA row also carries
    :func:`~swafloor.reference.floors.step_floor`. ``sink_tokens``: sink tokens of every sliding layer.

    Bytes (``kv_dtype`` overrides the config's dtype): a block of an attention life cycle keeps ``t``
    tokens of each of its layers, :func:`token_bytes` each; a pool group's bytes the sum of its life
    cycles'. SSM states' bytes are not read from the config (``None``). With ``max_model_len`` ``L``:
    per request and for ``requests`` requests of ``L`` tokens, full attention holds ``ceil(L/t)``
    blocks and an SWA life cycle ``min(ceil(L/t), floor)`` (a request never asks capacity past ``L``;
    it first holds its floor at capacity ``(floor - 1) * t + 1``, theorem first-floor-history), beside
    each engine at its own block size (:data:`ENGINE_BLOCK_SIZES`)."""
    from swafloor.reference import Config, LifeCycleKind, Semantics, build_layout, peers
    from swafloor.reference.arith import cdiv, imin
    from swafloor.reference.floors import full_attention_floor, legacy_floor, step_floor

    indexed = model.reference_layers(sink_tokens)
    lookahead = step_tokens - 1 if step_tokens else 0
    semantics = Semantics(in_flight_tokens=in_flight, lookahead_tokens=lookahead)
    config = Config(tokens_per_block=t, layers=[layer for _, layer in indexed], semantics=semantics)
    layout = build_layout(config)
    one = build_layout(Config(tokens_per_block=t, layers=config.layers, semantics=semantics,
                              pool_groups=[0] * len(layout.life_cycles)))
    v2 = {lc: peers.upstream_swa_floor(t, lc.window, lc.sink_blocks)
          for lc in layout.life_cycles if lc.kind is LifeCycleKind.SWA}
    per_token, dtype, why = token_bytes(model, kv_dtype)
    # vLLM's T: the most tokens one step batches (a step of n tokens), or the tokens in flight
    vllm_step = max(1, in_flight, step_tokens or 1)
    rows = []
    for i, lc in enumerate(layout.life_cycles):
        layers = [indexed[j][0] for j, c in enumerate(layout.layer_life_cycle) if c == i]
        kinds = sorted({model.kinds[j] for j in layers}, key=KINDS.index)
        row = {"kind": lc.kind.value, "window": lc.window, "sink_blocks": lc.sink_blocks,
               "layers": layers, "layer_kinds": kinds, "floor": layout.min_slots[layout.pool_group_of[i]],
               "trtllm_v2": None, "trtllm_v2_pre_fix": legacy_floor(), "vllm": None, "sglang": None}
        if lc.kind is LifeCycleKind.SWA:
            row["trtllm_v2"] = v2[lc]
            row["vllm"] = peers.vllm_blocks_per_request(t, lc.window, vllm_step)
            row["sglang"] = peers.sglang_request_pages(t, lc.window, lc.window)
            if step_tokens is not None:
                row["step_floor"] = step_floor(t, lc.window, lc.sink_blocks, step_tokens)
        elif lc.kind is LifeCycleKind.FULL:
            row["trtllm_v2"] = full_attention_floor(max(v2.values(), default=0))
        else:
            row["trtllm_v2"] = 1
        attention = lc.kind is not LifeCycleKind.SSM and per_token is not None
        # bytes of one token of this life cycle (all its layers); None for a state or unknown sizes
        row["token_bytes"] = len(layers) * per_token if attention else None
        row["bytes"] = row["floor"] * t * row["token_bytes"] if attention else None
        if max_model_len is not None:
            length = max_model_len
            blocks = {"reference": cdiv(length, t)}
            blocks["vllm"] = cdiv(length, ENGINE_BLOCK_SIZES["vllm"])
            blocks["sglang"] = cdiv(length, ENGINE_BLOCK_SIZES["sglang"])
            blocks["trtllm"] = cdiv(length, ENGINE_BLOCK_SIZES["trtllm"])
            if lc.kind is LifeCycleKind.SWA:
                blocks["reference"] = imin(blocks["reference"], row["floor"])
                blocks["vllm"] = peers.vllm_blocks_per_request(ENGINE_BLOCK_SIZES["vllm"], lc.window, vllm_step, length)
                blocks["sglang"] = peers.sglang_request_pages(ENGINE_BLOCK_SIZES["sglang"], lc.window, length)
                blocks["trtllm"] = imin(blocks["trtllm"], peers.trtllm_cpp_blocks(ENGINE_BLOCK_SIZES["trtllm"], lc.window))
            elif lc.kind is LifeCycleKind.SSM:
                blocks = {who: 1 for who in blocks}
            sizes = {"reference": t, **ENGINE_BLOCK_SIZES}
            row["request_blocks"] = blocks
            row["request_bytes"] = {who: n * sizes[who] * row["token_bytes"] if attention else None
                                    for who, n in blocks.items()}
        rows.append(row)
    known = [r["bytes"] for r in rows if r["bytes"] is not None]
    out = {
        "model_type": model.model_type,
        "layers": model.num_layers,
        "layer_counts": {k: model.kinds.count(k) for k in KINDS if k in model.kinds},
        "rule": model.rule,
        "window": model.window,
        "attention_chunk_size": model.chunk,
        "tokens_per_block": t,
        "in_flight": in_flight,
        "step_tokens": step_tokens,
        "sink_tokens": sink_tokens,
        "life_cycles": rows,
        "pool_groups_separate": list(layout.min_slots),
        "pool_group_one": one.min_slots[0],
        "trtllm_v2_one": sum(r["trtllm_v2"] for r in rows),
        "trtllm_v2_pre_fix_one": len(rows) * legacy_floor(),
        "bytes": {
            "kv_dtype": dtype,
            "dtype_bytes": DTYPE_BYTES.get(dtype) if dtype else None,
            "kv_heads": model.kv_heads,
            "head_dim": model.head_dim,
            "per_token_per_layer": per_token,
            "unknown": why,
            "pool_groups_separate": [r["bytes"] for r in rows] if per_token is not None else None,
            "pool_group_one": sum(known) if per_token is not None else None,
        },
        "notes": list(model.notes),
    }
    if per_token is not None and any(r["kind"] == "ssm" for r in rows):
        out["notes"].append("bytes count the attention life cycles only: an SSM state's size is not read")
    if max_model_len is not None:
        workload = {"max_model_len": max_model_len, "requests": requests,
                    "block_sizes": {"reference": t, **ENGINE_BLOCK_SIZES}}
        for who in workload["block_sizes"]:
            per = [r["request_bytes"][who] for r in rows if r["request_bytes"][who] is not None]
            per_request = sum(per) if per_token is not None else None
            workload[who] = {"request_bytes": per_request,
                             "total_bytes": per_request * requests if per_request is not None else None}
        out["workload"] = workload
    return out
