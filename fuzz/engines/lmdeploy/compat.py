"""Loading LMDeploy's block managers without the rest of LMDeploy, on every release that has
``WindowBlockManager`` (``lmdeploy/pytorch/paging/block_manager/``, 0.2.5 on).

The block managers are pure Python and numpy: their modules import ``LogicalTokenBlocks``
(``lmdeploy/pytorch/block.py``, numpy) and, for type annotations only, ``SchedulerSequence``
(``pytorch.messages``) and ``CacheConfig`` (``pytorch.config``); releases before 0.7 also import
``SchedulerAdapter`` and ``ADAPTER_MANAGER``/``AdapterManager`` (``pytorch.adapter.adapter``, LoRA).
Those modules import torch and much of the engine, so they are not imported: each is a *stand-in*
module whose every name is a class of its own that raises :class:`StandInUsed` (an ``Unsupported``)
when called or instantiated; ``isinstance`` against one is False, which is what an annotation or a
check for an adapter object needs. ``SchedulerSequence`` is :class:`Sequence` itself (releases before
0.9 dispatch ``allocate`` on ``isinstance(data, SchedulerSequence)``). So the package ``lmdeploy`` and its sub-packages on the way are
bare packages (their ``__init__`` never runs: ``lmdeploy/__init__.py`` imports the pipeline, torch and
transformers) and every module the block managers' path really runs is LMDeploy's own file.

:class:`Sequence` is the stand-in for ``SchedulerSequence``: the few fields the block managers read
across releases (``block_size``, ``logical_blocks``, ``num_ignored_history``, the history length as
``num_history_ids`` and older ``history_len``, the tokens of the step as ``num_token_ids`` /
``token_ids``, their sum as ``num_all_ids`` / older ``num_all_tokens()``, no cross-attention tokens,
no KV token limit, no LoRA adapter). ``num_ignored_history`` and ``logical_blocks`` are LMDeploy's
state: the block manager writes them, the adapter only reads them.

Nothing here decides anything by a version string; the version is quoted in messages and checked by
the matrix.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from ...protocol import Unsupported
from ..common import missing_module

__all__ = ["StandInUsed", "Sequence", "load", "build", "STAND_INS"]

#: The modules given stand-ins: each imported by the block managers for type annotations (or, before
#: 0.7, LoRA adapters this adapter never creates).
STAND_INS = ("lmdeploy.pytorch.messages", "lmdeploy.pytorch.config", "lmdeploy.pytorch.adapter.adapter")
#: Packages on the way, made bare (their ``__init__`` is not run).
BARE = ("lmdeploy", "lmdeploy.pytorch", "lmdeploy.pytorch.paging", "lmdeploy.pytorch.adapter")

_loaded: dict[str, Any] = {}


class StandInUsed(Unsupported):
    """LMDeploy's code called a name of a module given a stand-in: this release's block manager needs
    more of the engine than its annotations (the backend cannot serve it)."""


class _StandIn:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise StandInUsed(f"LMDeploy called {type(self).__qualname__}, a stand-in (its module is not imported here)")


def _stand_in_module(name: str, given: dict[str, type] | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    classes: dict[str, type] = dict(given or {})

    def attribute(attr: str) -> type:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr not in classes:
            classes[attr] = type(attr, (_StandIn,), {"__qualname__": f"{name}.{attr}", "__module__": name})
        return classes[attr]

    module.__getattr__ = attribute  # type: ignore[attr-defined]
    return module


class _NoLoRA:
    """Given as ``adapter_manager`` to the block managers of releases (0.4 to 0.6) that otherwise build
    LMDeploy's own (LoRA, torch): it is read only for a sequence with a LoRA adapter, which the adapter
    never creates; any use raises :class:`StandInUsed`."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise StandInUsed(f"LMDeploy read adapter_manager.{attr}, a stand-in (no LoRA adapters here)")


def build(cls: type, num_gpu_blocks: int, **kwargs: Any) -> Any:
    """A block manager of class ``cls`` with ``num_gpu_blocks`` GPU blocks, no CPU blocks, and
    ``kwargs`` (``window_size``); ``adapter_manager`` where its signature has one (see :class:`_NoLoRA`)."""
    from ..common import parameters

    if "adapter_manager" in parameters(cls.__init__):
        kwargs["adapter_manager"] = _NoLoRA()
    return cls(num_gpu_blocks, 0, **kwargs)


def version() -> str:
    try:
        return importlib.metadata.version("lmdeploy")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def load() -> dict[str, Any]:
    """LMDeploy's block managers (once): ``{"WindowBlockManager", "DefaultBlockManager",
    "LogicalTokenBlocks", "version", "path"}``. Raises :class:`Unsupported` where LMDeploy is not
    importable or the release lacks the window block manager."""
    if _loaded:
        return _loaded
    try:
        spec = importlib.util.find_spec("lmdeploy")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise Unsupported("LMDeploy is not importable here (no package 'lmdeploy'); run the lmdeploy backend in the venv "
                          "made by scripts/lmdeploy-venv")
    root = list(spec.submodule_search_locations)[0]
    for name in BARE:
        if name in sys.modules and getattr(sys.modules[name], "__swafloor_bare__", False) is False:
            raise Unsupported(f"{name} is already imported for real here; the backend loads LMDeploy's block managers alone")
        module = types.ModuleType(name)
        module.__path__ = [root + name[len("lmdeploy"):].replace(".", "/")]
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        module.__spec__.submodule_search_locations = module.__path__
        module.__swafloor_bare__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module
    for name in STAND_INS:  # SchedulerSequence is the adapter's Sequence (older allocate() dispatches on it)
        sys.modules[name] = _stand_in_module(name, {"SchedulerSequence": Sequence} if name.endswith(".messages") else None)
    release = version()
    try:
        block = importlib.import_module("lmdeploy.pytorch.block")
        window = importlib.import_module("lmdeploy.pytorch.paging.block_manager.window_block_manager")
        default = importlib.import_module("lmdeploy.pytorch.paging.block_manager.default_block_manager")
    except ModuleNotFoundError as exc:
        missing = missing_module(exc, "lmdeploy", f"LMDeploy {release}")
        if missing is not None:
            raise missing from None
        raise Unsupported(f"LMDeploy {release} has no {exc.name} (no window block manager)") from None
    import inspect

    # Releases whose window manager keeps no num_ignored_history (0.2.x): the dropped blocks are not
    # counted anywhere, the sequence's blocks are the last ones of its capacity (see the backend).
    counts_dropped = "num_ignored_history" in inspect.getsource(window)
    _loaded.update(WindowBlockManager=window.WindowBlockManager, DefaultBlockManager=default.DefaultBlockManager,
                   LogicalTokenBlocks=block.LogicalTokenBlocks, version=release, path=root,
                   counts_dropped=counts_dropped, allocates_every_step=allocates_every_step(root))
    return _loaded


def _method(source: str, name: str) -> str:
    """The text of the method ``name`` of a class in ``source`` (up to the next method), or ''."""
    found = re.search(rf"\n    def {name}\(.*?(?=\n    def |\n    @|\Z)", source, re.S)
    return found.group(0) if found else ""


def allocates_every_step(root: str) -> bool:
    """Whether the release's decode schedule calls ``block_manager.allocate`` for a running sequence at
    every step, also when no block is required, read from its ``pytorch/paging/scheduler.py`` (the
    text, never imported: it imports torch). Its window manager drops the blocks that left the window
    only inside ``allocate``, so this decides whether a step needing no new block drops them.

    It does not where the decode path skips a sequence whose ``num_required_blocks`` is 0:
    ``_schedule_decoding``'s ``_try_append_slot`` (0.2.5 to 0.4.1) or ``schedule_running`` (0.12.0 on,
    #4265, the decode path of ``create_model_inputs_delta``). It does in between (0.4.2 to 0.11.1:
    ``_schedule_decoding`` allocates for every running sequence since #1429). A release without the
    file is taken as skipping (the adapter then calls nothing on a step that does not grow)."""
    path = Path(root) / "pytorch" / "paging" / "scheduler.py"
    if not path.is_file():
        return False
    source = path.read_text(encoding="utf-8", errors="replace")
    if re.search(r"num_required_blocks\(seq[^)]*\)\s*==\s*0", _method(source, "_schedule_decoding")):
        return False
    running = _method(source, "schedule_running")
    if running and re.search(r"if num_required_blocks == 0:\s*\n\s*continue", running):
        return False
    return True


class Sequence:
    """The stand-in for LMDeploy's ``SchedulerSequence`` (see the module docstring): a step of
    capacity ``c`` at history ``h`` is ``h`` history tokens and ``c - h`` tokens to compute."""

    adapter_name = None
    kv_token_limit = None

    def __init__(self, block_size: int, logical_blocks: Any):
        self.block_size = block_size
        self.logical_blocks = logical_blocks
        self.num_ignored_history = 0
        self.history = 0
        self.capacity = 0

    @property
    def num_history_ids(self) -> int:
        return self.history

    history_len = num_history_ids

    @property
    def num_token_ids(self) -> int:
        return self.capacity - self.history

    @property
    def token_ids(self) -> np.ndarray:
        return np.zeros(self.num_token_ids, dtype=np.int64)

    @property
    def num_all_ids(self) -> int:
        return self.capacity

    def num_all_tokens(self) -> int:
        return self.capacity

    def num_all_cross_tokens(self) -> int:
        return 0
