"""Load TensorRT-LLM KVCacheManagerV2's whole Python package from a source folder, on a CPU (our own code).

The approach of :mod:`.loader` (synthetic parent packages, ``tensorrt_llm.envs`` with ``get_env``,
``rawref`` built into a cache), extended to the whole package: its own ``__init__.py`` is run (a
Python-era one: a newer one re-exports a C++ backend), and modules the package imports from outside
itself (``tensorrt_llm.logger`` and the like, ../shared/facts/upstream.md §10) that are absent
become synthetic modules whose names are :func:`.loader._placeholder` classes, so a call to one of
them fails naming it. Where no CUDA device is present (or ``$SWAFLOOR_CUDA_DRIVER=standin``) the
CUDA driver calls are the CPU stand-in's (:mod:`.cuda_standin`), installed over
``cuda.bindings.driver``/``runtime`` (which must be importable: ``pip install cuda-bindings``).

Inside the package, a module the source folder lacks and the manager never drives
(:data:`ABSENT_IN_PACKAGE`: ``_sequence_arena``, whose arena classes ``_storage/_core.py`` imports)
is a synthetic module of placeholders too; where TensorRT-LLM's compiled copy kernels
(``kv_cache_manager_v2_utils``) are absent, they are host copies done by the CPU stand-in, or with the
real driver one ``cuMemcpyAsync`` per task (:func:`driver_copy_kernels`; not yet run on a GPU). Returns the package and a stream
handle for ``resume``. Anything missing raises :class:`~.loader.LoadError` naming it. Run on upstream's
sources assembled file by file (docs/trtllm.md, "Run on upstream's sources").
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

__all__ = ["load_whole", "WHOLE_NAMES", "standin_in_use", "driver_copy_kernels"]

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


#: Modules inside the package that the manager imports but never drives in the configurations the
#: adapter builds (the contiguous-arena classes ``_storage/_core.py`` imports from
#: ``_sequence_arena``): where the source folder lacks the file, a synthetic module of placeholders
#: stands in, so a call to one of them fails naming it. A file present in the folder is always used.
ABSENT_IN_PACKAGE = ("_sequence_arena",)
#: The compiled copy kernels ``_copy_engine`` imports (TensorRT-LLM's nanobind module).
COPY_KERNELS = "tensorrt_llm.bindings.internal.batch_manager.kv_cache_manager_v2_utils"


class _AbsentModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``tensorrt_llm.*`` modules outside the package that do not exist on this machine (and
    the package's own :data:`ABSENT_IN_PACKAGE` modules where the source lacks their file) and makes
    each a synthetic module whose every name is a placeholder (recorded in ``made``). The copy
    kernels' module gets the stand-in kernels of :func:`_copy_kernels` where the CUDA stand-in is in
    use."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if not fullname.startswith("tensorrt_llm."):
            return None
        if fullname.startswith(PACKAGE + "."):
            if fullname[len(PACKAGE) + 1:] not in ABSENT_IN_PACKAGE:
                return None
            return importlib.machinery.ModuleSpec(fullname, self, is_package=False)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        if spec.submodule_search_locations is not None:
            module.__path__ = []
        setattr(module, "__swafloor_synthetic__", True)
        module.__getattr__ = lambda name: _placeholder_attr(spec.name, name)  # type: ignore[attr-defined]
        if spec.name == "tensorrt_llm.logger":
            module.logger = _Logger()  # type: ignore[attr-defined]
        if spec.name == COPY_KERNELS and _STATE.get("standin") is not None:
            for name, value in _copy_kernels(_STATE["standin"]).items():
                setattr(module, name, value)
        elif spec.name == COPY_KERNELS and _STATE.get("driver") is not None:
            for name, value in driver_copy_kernels(_STATE["driver"]).items():
                setattr(module, name, value)
        self.made.append(spec.name)
        return module

    def exec_module(self, module) -> None:
        return None


def _copy_kernels(standin: cuda_standin.CudaStandIn) -> dict[str, Any]:
    """Stand-ins for the batched copy kernels of TensorRT-LLM's ``kv_cache_manager_v2_utils``, done at
    once by the CUDA stand-in (device addresses are its mappings, host addresses real memory): each
    returns a CUresult as an int, as the compiled kernels do. Disk copies are not stood in."""
    from collections import namedtuple

    mem_to_mem = namedtuple("MemToMemTask", "dst src")

    def batched(tasks: Any, num_bytes: int, stream: Any = 0) -> int:
        for task in tasks:
            (err,) = standin.copy(int(task.dst), int(task.src), int(num_bytes), stream)
            if int(err) != 0:
                return int(err)
        return 0

    kernels: dict[str, Any] = {"MemToMemTask": mem_to_mem}
    for name in ("copy_device_to_device", "copy_device_to_host", "copy_host_to_device", "copy_host_to_host"):
        kernels[name] = batched
    return kernels


def driver_copy_kernels(driver: Any) -> dict[str, Any]:
    """The batched copy kernels of ``kv_cache_manager_v2_utils`` on the real CUDA driver, where
    TensorRT-LLM's compiled module is absent (a GPU machine without a TensorRT-LLM build): each task
    one ``cuMemcpyAsync(dst, src, num_bytes, stream)`` (unified addressing: device and host addresses
    alike), in order on the stream; the first error's CUresult is returned as an int, as the compiled
    kernels return theirs. Written from the driver API's documentation. Disk copies are not provided."""
    from collections import namedtuple

    mem_to_mem = namedtuple("MemToMemTask", "dst src")

    def batched(tasks: Any, num_bytes: int, stream: Any = 0) -> int:
        for task in tasks:
            (err,) = driver.cuMemcpyAsync(int(task.dst), int(task.src), int(num_bytes), stream)
            if int(err) != 0:
                return int(err)
        return 0

    kernels: dict[str, Any] = {"MemToMemTask": mem_to_mem}
    for name in ("copy_device_to_device", "copy_device_to_host", "copy_host_to_device", "copy_host_to_host"):
        kernels[name] = batched
    return kernels


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
    _STATE.pop("driver", None)
    if name == "real":
        _STATE["driver"] = chosen
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
