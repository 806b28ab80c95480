"""The ``lmdeploy`` backend on LMDeploy's releases: ``swafloor matrix lmdeploy``: LMDeploy's release
data, :data:`LMDEPLOY`, for the one machinery of :mod:`swafloor.fuzz.matrix`.

How the supported releases were chosen (from LMDeploy's git history, 2026-12):
``lmdeploy/pytorch/paging/block_manager/window_block_manager.py`` appeared with "Support mistral and
sliding window attention" (#1075, 2024-02-23), first released in 0.2.5; every release on PyPI from 0.2.5
to the pinned 0.18.0 has it. Its logic changed three times: #3068 (0.7.0.post1: ``num_required_blocks``
by the window instead of the last block's free tokens), #3302 (0.8.0: ``num_required_blocks`` minus the
dropped history), #4695 (0.15.0: ``kv_token_limit``). The list is every release from 0.2.5 on (the
block managers' API is the same throughout; what a release lacks is found by trying, never by its number).

Each release is installed with ``pip install --no-deps --target`` into ``~/.cache/swafloor/lmdeploy/X``
beside the pinned venv's numpy (``scripts/lmdeploy-venv``); its compiled modules (TurboMind, which the
block managers never import) are deleted after installing.
"""

from __future__ import annotations

from ...matrix import Engine

__all__ = ["RELEASES", "BACKENDS", "LMDEPLOY"]

RELEASES = (
    "0.2.5", "0.2.6", "0.3.0", "0.4.0", "0.4.1", "0.4.2", "0.5.0", "0.5.1", "0.5.2", "0.5.2.post1", "0.5.3",
    "0.6.0", "0.6.1", "0.6.2", "0.6.2.post1", "0.6.3", "0.6.4", "0.6.5", "0.7.0", "0.7.0.post1", "0.7.0.post2",
    "0.7.0.post3", "0.7.1", "0.7.2", "0.7.2.post1", "0.7.3", "0.8.0", "0.9.0", "0.9.1", "0.9.2", "0.9.2.post1",
    "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.12.0", "0.12.1", "0.12.2", "0.12.3", "0.13.0", "0.14.0",
    "0.15.0", "0.16.0", "0.17.0", "0.18.0",
)
BACKENDS = ("lmdeploy",)

LMDEPLOY = Engine(
    name="lmdeploy", title="LMDeploy", releases=RELEASES, backends=BACKENDS, default_backends=BACKENDS,
    extra_modules={},
    first_why="the first release with the PyTorch engine's WindowBlockManager (#1075)",
    venv_script="scripts/lmdeploy-venv", venv_env="SWAFLOOR_LMDEPLOY_VENV", venv_dir=".venv-lmdeploy",
    load="swafloor.fuzz.engines.lmdeploy.backend:import_lmdeploy", release_examples="0.8.0 or 0.7.0.post1",
    strip_compiled=True,
)
