"""The ``sglang`` backends on SGLang's releases: ``swafloor matrix sglang``: SGLang's release data,
:data:`SGLANG`, for the one machinery of :mod:`swafloor.fuzz.matrix`.

How the supported releases were chosen (read from the wheels on PyPI of 0.4.10.post2, 0.5.1.post3,
0.5.3.post3, 0.5.5.post3, 0.5.7, 0.5.8.post1, 0.5.9 and every patch line from 0.5.10.post1, 2026-12):
``SWATokenToKVPoolAllocator`` and ``SWAKVPool`` exist already in 0.4.10.post2, the oldest read (in
``mem_cache.allocator`` / ``mem_cache.memory_pool``; from 0.5.8 in ``mem_cache.swa_memory_pool``, the
allocator from 0.5.13 in ``mem_cache.allocator.swa``). Before 0.5.8 the only SWA eviction is the chunk
cache's ``ChunkCache.evict_swa``, no decode-time one; from 0.5.8 to 0.5.13 the decode-time
eviction is inline in the scheduler's ``ScheduleBatch._evict_swa``, not a function of ``mem_cache``;
``free_swa_out_of_window_slots`` (``mem_cache.common``), the piece the backends drive, appears in
0.5.14. The supported list is every patch line from 0.5.14 to the pinned 0.5.23, each at its latest
post-release, and before it one release of each older eviction path (issue 33): 0.5.7, the first whose
chunk cache evicts a sliding window (``SWAChunkCache.evict_swa``), and 0.5.13.post1, the last with the
scheduler batch's ``ScheduleBatch._evict_swa`` (0.5.8-0.5.13), each driven as SGLang's own method
(:func:`.compat._older_eviction`). ``SWATokenToKVPoolAllocator`` first appears in 0.4.9 (read from the
wheels of 0.4.7.post1, 0.4.8.post1 and 0.4.9-0.4.9.post6; ``SWARadixCache`` from 0.4.9.post3), but up to
0.5.6 (read: 0.4.9, 0.4.10.post2, 0.5.1.post3, 0.5.3.post3, 0.5.5.post3, 0.5.6.post2) its chunk cache
evicts only for chunked local attention (``attention_chunk_size``, Llama 4's), never a sliding window:
not the model's, so those releases are refused (exit 2, saying why). Within the list a piece a backend needs
and a release lacks (found by trying, never by the release's number) makes that cell ``unsupported``,
naming it. ``sglang-lazy`` passes the function's ``eviction_interval`` (0.5.21 on); before, the interval is
the scheduler's, re-enacted where its rule is the reference's token gate (0.5.18-0.5.20) and unsupported
naming the rule elsewhere (:mod:`.cadence`). A release whose allocator has no ``page_size`` (0.5.7) has
its cells drawn at one token per block (:mod:`.profiles`). ``sglang-radix`` on 0.5.8-0.5.13 slides its
``SWARadixCache``'s windows with ``ScheduleBatch._evict_swa`` (:class:`.radix_legacy.BatchEviction`); 0.5.7's
radix path has no sliding-window free of a running request (:class:`.radix_legacy.NoWindowFree`: driven as
it is, a divergence class with its upstream verdict, sgl-project/sglang PR #17220).

``sglang-radix`` (issue 33) drives the SWA radix cache each release has, chosen by inspection: a
``UnifiedRadixCache`` with the tree API (``lock``, ``checkpoint``, ``evict_sliding_windows``, ...: 0.5.22
on, :mod:`.radix`), else the older prefix-cache API (``match_prefix``, ``inc_lock_ref``,
``cache_unfinished_req``, ``cache_finished_req``) of the class the release's registry builds for a hybrid
SWA model: ``SWARadixCache`` (read in 0.4.10.post2-0.5.15.post1's registries) or ``UnifiedRadixCache``
(0.5.16-0.5.21; :mod:`.radix_legacy`), where 0.5.21's tree has no ``cache_finished_req`` and its release
is the scheduler's ``release_kv_cache`` steps (``insert_req``, ``free_kv_row``, ``unpin``, ``on_release``:
:class:`.radix_legacy.SplitReleaseApi`). A tree lacking a method of every API is ``unsupported`` naming them.
Read from the wheels: ``SWARadixCache`` exists in 0.4.10.post2-0.5.20, ``UnifiedRadixCache`` from 0.5.11.

Each release is installed with ``pip install --no-deps --target`` into ``~/.cache/swafloor/sglang/X``
beside the pinned SGLang venv's dependencies (``scripts/sglang-venv``); compiled modules are kept (the
allocator path imports none of the CUDA ones). With it, in one pip run, go the small packages of
:data:`EXTRA_MODULES` (modules the import paths of some releases need and the pinned venv lacks, found
by trying the releases; the large ``xgrammar`` only when the import asks for it) and the release's own ``transformers==`` pin (what it was released against). When the
import then fails for want of another module :data:`EXTRA_MODULES` gives, that is added; when
transformers' own check names a range for a package (``tokenizers>=a,<=b is required``), that
requirement is added.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...matrix import Engine

__all__ = ["RELEASES", "BACKENDS", "DEFAULT_BACKENDS", "EXTRA_MODULES", "SGLANG"]

RELEASES = ("0.5.7", "0.5.13.post1", "0.5.14", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
BACKENDS = ("sglang", "sglang-lazy", "sglang-radix", "sglang-eagle", "sglang-eagle-v1", "sglang-admission",
            "dataplane:sglang", "dataplane:sglang-lazy")
#: What ``swafloor matrix sglang`` runs unless told otherwise. The others are asked by name: ``sglang-eagle``
#: (SGLang's EAGLE spec-v2 decode allocation, issue 33), ``sglang-eagle-v1`` (its EAGLE worker v1, 0.5.7's
#: default: drafts given back at the commit), ``sglang-admission`` (a differential of one admission decision per
#: case: on every release, each release's own gate, its form found by inspection: :data:`.admission.GATES`) and
#: the data plane's rows.
DEFAULT_BACKENDS = ("sglang", "sglang-lazy", "sglang-radix")
#: Modules some releases import that the pinned SGLang venv lacks, each with the pinned packages that give it.
EXTRA_MODULES = {
    "openai": "openai==2.8.0", "partial_json_parser": "partial-json-parser==0.2.1.1.post7",
    "distro": "distro==1.9.0", "jiter": "jiter==0.12.0", "httpx": "httpx==0.28.1", "httpcore": "httpcore==1.0.9",
    "sniffio": "sniffio==1.3.1", "einops": "einops==0.8.1",
    "xgrammar": "xgrammar==0.2.1",  # 0.5.16-0.5.19 import it at load (their function-call parser); their own pin
    "fastapi": "fastapi==0.118.0",  # 0.5.7 imports it at load (srt.utils.common); of its time, no new dependency
}


def _transformers_pin(folder: Path) -> str | None:
    """The release's own ``transformers==`` pin (from its METADATA)."""
    for meta in folder.glob("sglang-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            found = re.match(r"Requires-Dist: transformers==([0-9][0-9A-Za-z.]*)", line)
            if found:
                return f"transformers=={found.group(1)}"
    return None


#: Modules of :data:`EXTRA_MODULES` added only when a release's import asks for them (large: xgrammar
#: is 114 MB installed); the others go with every release.
ON_DEMAND = frozenset({"xgrammar", "fastapi"})


def _with_release(folder: Path) -> list[str]:
    """Installed with every release, in one pip run: the small packages of :data:`EXTRA_MODULES` (none
    is in the pinned venv) and the release's own transformers pin."""
    pin = _transformers_pin(folder)
    small = " ".join(v for k, v in EXTRA_MODULES.items() if k not in ON_DEMAND)
    return list(dict.fromkeys(small.split())) + ([pin] if pin else [])


def _fallback(folder: Path, extras: list[str], error: str) -> list[str] | None:
    """A version check of transformers' that names a range (``tokenizers>=a,<=b is required``): that
    requirement (pip takes the newest release in it), once."""
    found = re.search(r"([A-Za-z][A-Za-z0-9_.-]*(?:[<>=!]=?[0-9][0-9A-Za-z.]*,?)+) is required", error)
    if not found:
        return None
    pin = found.group(1).rstrip(",")
    return None if any(pin in x.split() for x in extras) else [pin]


SGLANG = Engine(
    name="sglang", title="SGLang", releases=RELEASES, backends=BACKENDS, default_backends=DEFAULT_BACKENDS,
    extra_modules=EXTRA_MODULES,
    first_why="the first release with a sliding-window SWA eviction (SWAChunkCache.evict_swa with "
              "sliding_window_size); from 0.4.9, the first with SWATokenToKVPoolAllocator, to 0.5.6 the chunk cache "
              "evicts only for chunked local attention",
    venv_script="scripts/sglang-venv", venv_env="SWAFLOOR_SGLANG_VENV", venv_dir=".venv-sglang",
    load="swafloor.fuzz.engines.sglang.backend:import_sglang", release_examples="0.5.14 or 0.5.15.post1",
    fallback=_fallback, with_release=_with_release,
    profile="swafloor.fuzz.engines.sglang.profiles:profile_capabilities",
    classify="swafloor.fuzz.engines.sglang.verdicts:classify",
)
