"""The ``vllm`` backends on vLLM's releases: ``swafloor matrix vllm``: vLLM's release data,
:data:`VLLM`, for the one machinery of :mod:`swafloor.fuzz.matrix`.

Each release goes to ``~/.cache/swafloor/vllm/X`` beside the pinned vLLM venv's dependencies
(``scripts/vllm-venv``): with vLLM's compiled kernels deleted (the block manager never loads them) a
release takes 16-175 MB there (a 0.3-0.4 GB download). The modules of :data:`EXTRA_MODULES` are added
when a release's import asks for one.
"""

from __future__ import annotations

from ...matrix import Engine

__all__ = ["RELEASES", "BACKENDS", "DEFAULT_BACKENDS", "EXTRA_MODULES", "VLLM"]

#: The supported releases: every minor line from the first whose v1 manager has a sliding-window
#: manager (0.8.3) to the pinned one, at its latest patch, plus 0.8.3 itself.
RELEASES = (
    "0.8.3", "0.8.5.post1", "0.9.2", "0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0",
    "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0",
    "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
)
BACKENDS = ("vllm", "vllm-async", "vllm-no-reuse", "vllm-prefix", "vllm-prefix-eagle", "vllm-prefix-mixed",
            "vllm-prefix-eagle-mixed", "vllm-admission", "dataplane:vllm-prefix", "dataplane:vllm-prefix-eagle")
#: What ``swafloor matrix vllm`` runs unless told otherwise (``vllm-prefix``: every release, its block hashes read
#: from the request or, before 0.10.2, from the manager; before 0.9 the hit's tokens are read from its blocks).
DEFAULT_BACKENDS = ("vllm", "vllm-async", "vllm-prefix")
#: Modules some releases import that the pinned venv lacks, each with the pinned packages that give it.
EXTRA_MODULES = {
    "blake3": "blake3==1.0.11", "gguf": "gguf==0.19.0", "diskcache": "diskcache==5.6.3",
    "mistral_common": "mistral-common==1.13.1 pycountry==26.2.16",  # it asks for pycountry by a RuntimeError
    "jsonschema": "jsonschema==4.26.0", "referencing": "referencing==0.37.0",
    "rpds": "rpds-py==2026.9.1", "jsonschema_specifications": "jsonschema-specifications==2025.9.1",
    "pycountry": "pycountry==26.2.16", "tiktoken": "tiktoken==0.14.0", "setproctitle": "setproctitle==1.3.8",
    "pydantic_extra_types": "pydantic-extra-types==2.11.1",
}

VLLM = Engine(
    name="vllm", title="vLLM", releases=RELEASES, backends=BACKENDS, default_backends=DEFAULT_BACKENDS,
    extra_modules=EXTRA_MODULES,
    first_why="the first release whose v1 manager has a sliding-window manager (SlidingWindowSpec)",
    venv_script="scripts/vllm-venv", venv_env="SWAFLOOR_VLLM_VENV", venv_dir=".venv-vllm",
    load="swafloor.fuzz.engines.vllm.backend:load", release_examples="0.9.2 or 0.8.5.post1", strip_compiled=True,
    profile="swafloor.fuzz.engines.vllm.profiles:profile_capabilities",
    unmodelled="swafloor.fuzz.engines.vllm.profiles:unmodelled",
    classify="swafloor.fuzz.engines.vllm.verdicts:classify",
)
