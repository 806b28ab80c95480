"""vLLM's room: :mod:`.backend` (the ``vllm``, ``vllm-async`` and ``vllm-no-reuse`` backends),
:mod:`.prefix` (``vllm-prefix`` and its EAGLE and mixed-block-size variants), :mod:`.compat` (what
differs between vLLM releases), :mod:`.matrix` (its release data), and the one-off checks
:mod:`.hit_diff` (vLLM's hit function against the model's hits) and :mod:`.decode` (the decode-step
workload of ``swafloor bench reference --against vllm``). vLLM itself is imported only by a factory
or a check, in its own venv (``scripts/vllm-venv``)."""
