"""Load TensorRT-LLM KVCacheManagerV2's whole Python package from a source folder, on a CPU (our own code).

The approach of :mod:`.loader` (synthetic parent packages, ``tensorrt_llm.envs`` with ``get_env``,
``rawref`` built into a cache), extended to the whole package: its own ``__init__.py`` is run (a
Python-era one: a newer one re-exports a C++ backend), and modules the package imports from outside
itself (``tensorrt_llm.logger`` and the like, ../shared/facts/upstream.md §10) that are absent
become synthetic modules whose names are :func:`.loader._placeholder` classes, so a call to one of
them fails naming it. Where no CUDA device is present (or ``$SWAFLOOR_CUDA_DRIVER=standin``) the
CUDA driver calls are the CPU stand-in's (:mod:`.cuda_standin`), installed over
``cuda.bindings.driver``/``runtime`` (which must be importable: ``pip install cuda-bindings``).

Returns the package and a stream handle for ``resume``. Anything missing raises
:class:`~.loader.LoadError` naming it. NOT YET RUN on an assembled source: the first run will say
what else the package needs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import Any

from . import cuda_standin, loader
from .loader import PACKAGE, LoadError

__all__ = ["load_whole", "WHOLE_NAMES", "standin_in_use"]

#: What the adapter builds a manager from.
WHOLE_NAMES = ("KVCacheManager", "KVCacheManagerConfig", "GpuCacheTierConfig", "AttentionLayerConfig",
               "BufferConfig")

_STATE: dict[str, Any] = {}


def standin_in_use() -> cuda_standin.CudaStandIn | None:
    """The CUDA stand-in the last :func:`load_whole` installed, None when it took the real driver."""
    return _STATE.get("standin")


class _Logger:
    """``tensorrt_llm.logger.logger``'s calls, sent to Python's logging."""

    def __init__(self) -> None:
        self._log = logging.getLogger("swafloor.trtllm.upstream")

    def __getattr__(self, name: str) -> Any:
        level = {"verbose": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                 "error": logging.ERROR, "critical": logging.CRITICAL}.get(name)
        if level is None:
            raise AttributeError(name)
        return lambda msg, *args, **kwargs: self._log.log(level, str(msg))


class _AbsentModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``tensorrt_llm.*`` modules outside the package that do not exist on this machine and
    makes each a synthetic module whose every name is a placeholder (recorded in ``made``)."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if not fullname.startswith("tensorrt_llm.") or fullname.startswith(PACKAGE + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        setattr(module, "__swafloor_synthetic__", True)
        module.__getattr__ = lambda name: _placeholder_attr(spec.name, name)  # type: ignore[attr-defined]
        if spec.name == "tensorrt_llm.logger":
            module.logger = _Logger()  # type: ignore[attr-defined]
        self.made.append(spec.name)
        return module

    def exec_module(self, module) -> None:
        return None


def _placeholder_attr(module: str, name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return loader._placeholder(f"{module}.{name}")


def load_whole(path: str | Path, *, prefer: str | None = None, **standin_options: Any) -> tuple[Any, Any]:
    """The package loaded from ``path`` and a stream for ``resume``; see the module's docstring."""
    folder = loader.resolve_source(path)
    if not (folder / "__init__.py").is_file():
        raise LoadError("__init__.py", f"in {folder} (the package's own, Python-era)")
    found = cuda_standin.bindings()
    if found is None:
        raise LoadError("Python package cuda-bindings", "pip install cuda-bindings (no GPU needed to import it)")
    driver, runtime = found
    name, chosen = cuda_standin.select_driver(prefer, **standin_options)
    if "restore" in _STATE:
        _STATE.pop("restore")()
    _STATE.pop("standin", None)
    if name == "standin":
        _STATE["restore"] = cuda_standin.install(chosen, driver, runtime)
        _STATE["standin"] = chosen
    loader._purge()
    top = loader._synthetic("tensorrt_llm", path=[])
    runtime_pkg = loader._synthetic("tensorrt_llm.runtime", path=[])
    top.runtime = runtime_pkg  # type: ignore[attr-defined]
    top.envs = loader._envs_stand_in()  # type: ignore[attr-defined]
    finder = _STATE.get("finder")
    if finder is None:
        finder = _STATE["finder"] = _AbsentModules()
        sys.meta_path.append(finder)  # last: a real module, where one exists, is found first
    ext, _origin = loader._build_rawref(folder / "rawref")
    if ext is not None:
        loader._synthetic(PACKAGE, path=[str(folder)])  # rawref's parent, replaced below by the real package
        loader._load_extension(f"{PACKAGE}.rawref._rawref", ext)
        del sys.modules[PACKAGE]
    spec = importlib.util.spec_from_file_location(PACKAGE, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    try:
        spec.loader.exec_module(package)
    except ModuleNotFoundError as exc:
        raise LoadError(f"module {exc.name or exc!s}", str(exc)[:200]) from None
    except ImportError as exc:
        raise LoadError(f"a name the package imports ({str(exc)[:160]})") from None
    missing = [n for n in WHOLE_NAMES if not hasattr(package, n)]
    if missing:
        raise LoadError(", ".join(missing), "this source's package does not export them (a C++-era __init__?)")
    err, stream = driver.cuStreamCreate(0)
    if int(err) != 0:
        raise LoadError("a CUDA stream", f"cuStreamCreate returned {int(err)}")
    return package, stream
