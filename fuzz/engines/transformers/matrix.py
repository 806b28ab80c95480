"""``transformers-cb`` on transformers' releases: ``swafloor matrix transformers``: the release data,
:data:`TRANSFORMERS`, for the one machinery of :mod:`swafloor.fuzz.matrix`.

How the supported releases were chosen (read from the wheels on PyPI, 2026-12): continuous batching's
paged cache has no sliding-window allocator in 4.56.0 (``continuous_batching/cache.py`` alone); 4.57
adds ``continuous_batching/cache_manager.py`` with ``SlidingAttentionCacheAllocator``; 5.0 to 5.19
keep that file with a ``BlockManager``; 5.20 moves the allocators to ``continuous_batching/
cache_allocators/`` with a sector pool (:mod:`.compat` names the three shapes). The list is every
minor line from 4.57 to the pinned 5.25.0, each at its latest patch.

Each release is installed with ``pip install --no-deps --target`` into ``~/.cache/swafloor/transformers/X``
beside the pinned venv's dependencies (``scripts/transformers-venv``), with, in one pip run, the
release's own ``huggingface-hub`` and ``tokenizers`` (the newest release of each its requirement
allows, :data:`HUB_AND_TOKENIZERS`: transformers checks them at import); a module the import then
misses is added from :data:`EXTRA_MODULES`.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...matrix import Engine

__all__ = ["RELEASES", "BACKENDS", "EXTRA_MODULES", "HUB_AND_TOKENIZERS", "TRANSFORMERS"]

RELEASES = ("4.57.6", "5.0.0", "5.1.0", "5.2.0", "5.3.0", "5.4.0", "5.5.4", "5.6.2", "5.7.0", "5.8.1", "5.9.0",
            "5.10.4", "5.11.0", "5.12.1", "5.13.1", "5.14.1", "5.15.1", "5.16.1", "5.17.0", "5.18.0", "5.19.0",
            "5.20.2", "5.21.1", "5.22.2", "5.23.0", "5.24.0", "5.25.0")
BACKENDS = ("transformers-cb",)
#: Modules some releases' imports need that the pinned venv lacks, each with the pinned packages giving it.
EXTRA_MODULES = {
    "httpx": "httpx==0.28.1 httpcore==1.0.9 anyio==4.16.0 h11==0.16.0 sniffio==1.3.1 certifi==2026.10.19.post1 "
             "idna==3.20",
    "certifi": "certifi==2026.10.19.post1",
    "requests": "requests==2.34.2 charset-normalizer==3.5.3 idna==3.20 urllib3==2.8.0 certifi==2026.10.19.post1",
    "typer_slim": "typer-slim==0.20.0",
    "filelock": "filelock==4.3.1",
    "fsspec": "fsspec==2026.9.0",
}
#: The newest huggingface-hub and tokenizers each release line's requirement allows (read from the
#: wheels' METADATA): the first release whose requirement the entry satisfies takes it.
HUB_AND_TOKENIZERS = (
    (r"huggingface-hub<1\.0", "huggingface_hub==0.36.0"),
    (r"huggingface-hub<2\.0", "huggingface_hub==1.33.0"),
    (r"tokenizers<=0\.23\.0", "tokenizers==0.22.2"),
)


def _requirements(folder: Path) -> str:
    for meta in folder.glob("transformers-*.dist-info/METADATA"):
        return "\n".join(line for line in meta.read_text(encoding="utf-8", errors="replace").splitlines()
                         if line.startswith("Requires-Dist:") and "extra ==" not in line)
    return ""


def _with_release(folder: Path) -> list[str]:
    """The release's own huggingface-hub and tokenizers where they differ from the pinned venv's."""
    text = _requirements(folder)
    return [pin for pattern, pin in HUB_AND_TOKENIZERS if re.search(pattern, text)]


def _fallback(folder: Path, extras: list[str], error: str) -> list[str] | None:
    """A version check of transformers' that names a range (``tokenizers>=a,<=b is required``): that
    requirement, once."""
    found = re.search(r"([A-Za-z][A-Za-z0-9_.-]*(?:[<>=!]=?[0-9][0-9A-Za-z.]*,?)+) is required", error)
    if not found:
        return None
    pin = found.group(1).rstrip(",")
    return None if any(pin in x.split() for x in extras) else [pin]


TRANSFORMERS = Engine(
    name="transformers", title="transformers", releases=RELEASES, backends=BACKENDS, default_backends=BACKENDS,
    extra_modules=EXTRA_MODULES,
    first_why="the first release whose continuous batching has a sliding-window cache allocator",
    venv_script="scripts/transformers-venv", venv_env="SWAFLOOR_TRANSFORMERS_VENV", venv_dir=".venv-transformers",
    load="swafloor.fuzz.engines.transformers.backend:import_transformers", release_examples="5.15.1 or 4.57.6",
    fallback=_fallback, with_release=_with_release,
)
