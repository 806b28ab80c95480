"""TensorRT-LLM KVCacheManagerV2 under test from its own sources.

:mod:`.mapping` turns a swafloor :class:`~swafloor.reference.Config` into TensorRT-LLM's description
(layers, buffers, life cycles, pool groups) as plain data; it imports nothing of TensorRT-LLM.
:mod:`.loader` loads the upstream package's CPU-safe modules from a source folder under synthetic
parent packages, with stand-ins for what needs a GPU; :mod:`.compare` runs the source-level check
behind ``swafloor check trtllm``; :mod:`.backend` is the ``trtllm`` backend (the installed
package, on a GPU); :mod:`.gpu_check` runs the whole manager on the CUDA stand-in and on the real
driver and compares them (``scripts/gpu-trtllm-check``). No upstream code lives in this repository.
"""
