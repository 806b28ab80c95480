"""The engines' rooms: one package per engine the harness checks, each holding that engine's
adapters (backends the registry names), its compat module (what differs between its releases), its
release data for the matrix and its one-off ``python -m`` checks.

- :mod:`.vllm`: vLLM's v1 KV-cache manager (``vllm``, ``vllm-async``, ``vllm-prefix``...).
- :mod:`.sglang`: SGLang's SWA allocator and radix cache (``sglang``, ``sglang-lazy``, ``sglang-radix``,
  ``sglang-eagle``, ``sglang-eagle-v1``).
- :mod:`.trtllm`: TensorRT-LLM's KVCacheManagerV2, from its sources (``trtllm``, ``swafloor check trtllm``).
- :mod:`.dataplane`: paged attention through a backend's block tables (``dataplane:NAME``).
- :mod:`.common`: what the rooms share to import an engine and call it by signature.

A room imports the harness core (:mod:`swafloor.fuzz.protocol` and the rest of ``swafloor.fuzz``)
and the reference; the core never imports a room: the registry (:mod:`swafloor.fuzz.backends`) and
the matrix (:data:`swafloor.fuzz.matrix.ENGINES`) name their modules as strings, imported only when
a name is resolved. Nothing is imported here.
"""
