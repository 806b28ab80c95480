"""Load TensorRT-LLM KVCacheManagerV2's CPU-safe modules from a source folder, without a build.

The real ``tensorrt_llm/__init__.py`` needs a full TensorRT-LLM build, so the parent packages
``tensorrt_llm`` and ``tensorrt_llm.runtime`` are synthetic modules here, and
``tensorrt_llm.runtime.kv_cache_manager_v2`` is a package whose ``__path__`` is the source folder
(its ``__init__.py`` is never run). ``tensorrt_llm.envs`` is a stand-in with ``get_env`` (0 unless
the variable is set). The pure modules load as they are: ``_common``, ``_config``, ``_exceptions``,
``_utils``, ``_life_cycle_registry``, ``rawref``. ``_storage_manager`` loads with stand-in modules for
what it imports beyond those (copy engine, pages, storage, eviction controller, events): their names
exist, they do nothing, and only the storage manager's slot accounting and arithmetic are driven.

``rawref``'s C extension is used where the checkout already built it; otherwise it is compiled from
the checkout's ``rawrefmodule.c`` into a cache folder (``$SWAFLOOR_CACHE_DIR``, else
``$XDG_CACHE_HOME/swafloor``, else ``~/.cache/swafloor``), keyed by the source's hash and the Python
version, never into the checkout. ``_exceptions`` and ``_utils`` import ``cuda.bindings`` at load
time (``pip install cuda-bindings``; no GPU needed to import it).

Anything missing raises :class:`LoadError` naming it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import types
from pathlib import Path
from typing import Any

import attrs

from swafloor.reference import SwafloorError

__all__ = ["LoadError", "Upstream", "PACKAGE", "PURE_MODULES", "ENV_VAR", "resolve_source", "load"]

PACKAGE = "tensorrt_llm.runtime.kv_cache_manager_v2"
ENV_VAR = "SWAFLOOR_TRTLLM_SOURCE"
#: Loaded from the source as they are, in this order.
PURE_MODULES = ("_common", "_config", "_exceptions", "_utils", "_life_cycle_registry")
STORAGE_MANAGER = "_storage_manager"
_SUBDIR = Path("tensorrt_llm", "runtime", "kv_cache_manager_v2")
_MARK = "__swafloor_synthetic__"


class LoadError(SwafloorError):
    """The upstream modules cannot be loaded; ``missing`` names what is missing."""

    def __init__(self, missing: str, detail: str = ""):
        self.missing = missing
        self.detail = detail
        super().__init__(f"cannot load TensorRT-LLM kv_cache_manager_v2: missing {missing}" + (f" ({detail})" if detail else ""))


@attrs.frozen
class Upstream:
    """The loaded upstream modules and how they were loaded."""

    source: Path
    modules: dict = attrs.field(hash=False)  # short name -> module
    stand_ins: tuple[str, ...]  # modules replaced by stand-ins
    rawref_origin: str  # where the C extension came from

    def __getitem__(self, name: str) -> types.ModuleType:
        return self.modules[name]


def resolve_source(path: str | os.PathLike | None) -> Path:
    """The ``kv_cache_manager_v2`` folder for ``path`` (a checkout or that folder), or ``$SWAFLOOR_TRTLLM_SOURCE``."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
    if path is None:
        raise LoadError("a source", f"give --source PATH or set {ENV_VAR}")
    root = Path(path).expanduser()
    if not root.exists():
        raise LoadError(f"source path {str(root)!r}", "no such file or directory")
    for candidate in (root / _SUBDIR, root):
        if candidate.is_dir() and (candidate / "_life_cycle_registry.py").is_file():
            return candidate.resolve()
    if (root / _SUBDIR).is_dir():
        return (root / _SUBDIR).resolve()  # the files inside are checked by load()
    raise LoadError(
        f"a kv_cache_manager_v2 folder under {str(root)!r}",
        f"expected {_SUBDIR}/ in a checkout, or the folder itself",
    )


def _check_files(folder: Path) -> None:
    wanted = [f"{m}.py" for m in PURE_MODULES + (STORAGE_MANAGER,)] + ["rawref/__init__.py"]
    missing = [name for name in wanted if not (folder / name).is_file()]
    if missing:
        raise LoadError(", ".join(missing), f"in {folder}")


def _purge() -> None:
    """Forget a previous load (synthetic parents and everything under them)."""
    top = sys.modules.get("tensorrt_llm")
    if top is not None and not getattr(top, _MARK, False):
        raise LoadError(
            "a clean interpreter", "a real tensorrt_llm is imported already; run the check in its own process"
        )
    for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
        del sys.modules[name]


def _synthetic(name: str, path: list[str] | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    setattr(module, _MARK, True)
    if path is not None:
        module.__path__ = path
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        module.__spec__.submodule_search_locations = path
    sys.modules[name] = module
    return module


def _envs_stand_in() -> types.ModuleType:
    envs = _synthetic("tensorrt_llm.envs")

    def get_env(name: str, default: Any = 0) -> Any:
        value = os.environ.get(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            return value

    envs.get_env = get_env  # type: ignore[attr-defined]
    return envs


def cache_dir() -> Path:
    base = os.environ.get("SWAFLOOR_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "swafloor"


def _extension_in(folder: Path) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = folder / f"_rawref{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _needs_extension(rawref_dir: Path) -> bool:
    """Whether ``rawref/__init__.py`` imports the compiled ``_rawref`` module."""
    tree = ast.parse((rawref_dir / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "_rawref":
            return True
        if isinstance(node, ast.Import) and any(a.name.endswith("_rawref") for a in node.names):
            return True
    return False


def _build_rawref(rawref_dir: Path) -> tuple[Path | None, str]:
    """The compiled ``_rawref`` extension: the checkout's own build, else one built into the cache."""
    if not _needs_extension(rawref_dir):
        return None, "pure Python in the source (no extension to build)"
    built = _extension_in(rawref_dir)
    if built is not None:
        return built, f"prebuilt in the checkout ({built.name})"
    source = rawref_dir / "rawrefmodule.c"
    if not source.is_file():
        raise LoadError("rawref/rawrefmodule.c", f"and no built _rawref extension in {rawref_dir}")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    tag = sysconfig.get_config_var("SOABI") or f"py{sys.version_info[0]}{sys.version_info[1]}"
    target = cache_dir() / "rawref" / f"{digest}-{tag}"
    built = _extension_in(target)
    if built is not None:
        return built, f"cached build {built}"
    if importlib.util.find_spec("setuptools") is None:
        raise LoadError("setuptools", "needed to build rawref's C extension; pip install setuptools")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swafloor-rawref-") as tmp:
        shutil.copy2(source, Path(tmp) / "rawrefmodule.c")
        setup = Path(tmp) / "setup.py"
        setup.write_text(
            "from setuptools import Extension, setup\n"
            "setup(name='rawref-swafloor-build', ext_modules=[Extension('_rawref', sources=['rawrefmodule.c'])])\n"
        )
        proc = subprocess.run(
            [sys.executable, str(setup), "build_ext", "--build-lib", str(target), "--build-temp", str(Path(tmp) / "build")],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
    built = _extension_in(target)
    if proc.returncode != 0 or built is None:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise LoadError("a C compiler able to build rawref's extension", last[0][:200])
    return built, f"built from the checkout's rawrefmodule.c into {target}"


def _load_extension(name: str, path: Path) -> types.ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def _placeholder(name: str) -> type:
    """A named class that stands for an upstream name nobody calls on this path. Called with one
    argument it returns it (for NewType-like ids); subscripting returns the class."""

    def __new__(cls, *args, **kwargs):  # noqa: N807
        if len(args) == 1 and not kwargs:
            return args[0]
        raise LoadError(f"a GPU for {name}", "a stand-in was called; this path needs the real module")

    return type(name, (), {"__new__": __new__, "__class_getitem__": classmethod(lambda cls, _item: cls)})


def _relative_imports(path: Path) -> dict[str, list[str]]:
    """Top-level ``from .X import a, b`` of a module: ``{"X": ["a", "b"]}``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.setdefault(node.module, []).extend(a.name for a in node.names)
    return out


def _install_stand_ins(folder: Path) -> tuple[str, ...]:
    """Stand-in modules for what ``_storage_manager`` imports beyond the pure modules."""
    names = []
    for module, imported in _relative_imports(folder / f"{STORAGE_MANAGER}.py").items():
        if module.split(".")[0] in PURE_MODULES + ("rawref",):
            continue
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            full = f"{PACKAGE}." + ".".join(parts[:depth])
            if full not in sys.modules:
                _synthetic(full, path=[] if depth < len(parts) else None)
        target = sys.modules[f"{PACKAGE}.{module}"]
        for name in imported:
            if not hasattr(target, name):
                setattr(target, name, _placeholder(name))
        names.append(module)
    return tuple(sorted(set(names)))


def load(path: str | os.PathLike | None) -> Upstream:
    """Load the upstream modules from ``path`` (see :func:`resolve_source`); raises :class:`LoadError`."""
    folder = resolve_source(path)
    _check_files(folder)
    _purge()
    _synthetic("tensorrt_llm", path=[])
    _synthetic("tensorrt_llm.runtime", path=[])
    sys.modules["tensorrt_llm"].runtime = sys.modules["tensorrt_llm.runtime"]  # type: ignore[attr-defined]
    sys.modules["tensorrt_llm"].envs = _envs_stand_in()  # type: ignore[attr-defined]
    _synthetic(PACKAGE, path=[str(folder)])
    ext, origin = _build_rawref(folder / "rawref")
    rawref_pkg = f"{PACKAGE}.rawref"
    modules: dict[str, types.ModuleType] = {}
    try:
        if ext is not None:
            _load_extension(f"{rawref_pkg}._rawref", ext)
        modules["rawref"] = importlib.import_module(rawref_pkg)
        for name in PURE_MODULES:
            modules[name] = importlib.import_module(f"{PACKAGE}.{name}")
        stand_ins = _install_stand_ins(folder)
        modules[STORAGE_MANAGER] = importlib.import_module(f"{PACKAGE}.{STORAGE_MANAGER}")
    except ModuleNotFoundError as exc:
        name = exc.name or str(exc)
        if name.startswith("cuda"):
            raise LoadError("Python package cuda-bindings", f"module {name!r}; pip install cuda-bindings") from None
        raise LoadError(f"module {name!r}", str(exc)[:200]) from None
    except ImportError as exc:
        raise LoadError(f"a name the loader expected ({exc})"[:200]) from None
    _check_names(modules)
    return Upstream(folder, modules, stand_ins, origin)


#: The names the check calls, per module (``A.b``: attribute ``b`` of class ``A``).
REQUIRED_NAMES = {
    "rawref": ("NULL",),
    "_common": ("GPU_LEVEL", "CacheTier"),
    "_config": ("BufferConfig", "AttentionLayerConfig", "SsmLayerConfig", "KVCacheDesc", "BatchDesc",
                "SwaScratchReuseConfig"),
    "_exceptions": ("OutOfPagesError",),
    "_life_cycle_registry": ("AttnLifeCycle.make", "AttnLifeCycle.get_stale_range", "LifeCycleRegistry",
                             "make_life_cycle", "compute_scratch_range"),
    STORAGE_MANAGER: ("StorageManager._compute_min_slots_from_constraints",
                      "StorageManager._compute_slots_for_batch", "StorageManager.new_gpu_slots",
                      "StorageManager.release_slot", "StorageManager.get_statistics", "CacheLevelManager"),
}


def _check_names(modules: dict) -> None:
    missing = []
    for module, names in REQUIRED_NAMES.items():
        for dotted in names:
            obj: Any = modules[module]
            for part in dotted.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if obj is None:
                missing.append(f"{module}.{dotted}")
    if missing:
        raise LoadError(", ".join(missing), "this source's API differs from what the check drives")
