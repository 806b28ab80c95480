"""The import graph is one-way: reference <- proofs, fuzz <- CLI (swafloor/); reference never imports z3 at
import; inside a room (a package folder) modules import each other relatively, and other rooms absolutely."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package folder -> the swafloor subpackages its modules may import
ALLOWED = {
    "reference": set(),
    "proofs": {"reference", "proofs"},
    "fuzz": {"reference", "fuzz"},
}
#: The rooms: the folders pyproject.toml maps to swafloor's packages (swafloor/ holds the CLI, the
#: pictures and the docs generator; the others are swafloor.reference, swafloor.proofs, swafloor.fuzz).
ROOMS = ("reference", "proofs", "fuzz", "swafloor")


def _swafloor_imports(path: Path) -> set[str]:
    """The swafloor subpackages a module imports (absolute imports; relative ones stay inside)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "swafloor":
                found.add(parts[1] if len(parts) > 1 else "swafloor")
    return found


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_imports_flow_one_way(folder):
    for path in sorted((ROOT / folder).rglob("*.py")):
        bad = _swafloor_imports(path) - ALLOWED[folder]
        assert not bad, f"{path.relative_to(ROOT)} imports swafloor.{sorted(bad)}"


def test_reference_does_not_import_z3_at_import_time():
    code = (
        "import sys; import swafloor.reference as r; "
        "m = r.Manager(r.Config(4, [r.AttentionLayer(4)])); m.create('a'); m.resume('a'); m.resize('a', 9, 8); "
        "assert 'z3' not in sys.modules, 'z3 imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reference_modules_name_no_z3_at_top_level():
    for path in sorted((ROOT / "reference").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: lazy imports inside functions are the design
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n and n.split(".")[0] == "z3" for n in names), path.name


#: The only modules that may import torch at their top level: the data plane's device side, imported
#: when a ``dataplane:`` backend is built (never by swafloor's own imports).
TORCH_MODULES = {"fuzz/engines/dataplane/engine.py"}


def test_only_the_data_plane_engine_names_torch_at_top_level():
    for folder in ("swafloor", "reference", "proofs", "fuzz"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                    if any(n and n.split(".")[0] == "torch" for n in names):
                        assert rel in TORCH_MODULES, f"{rel} imports torch at import time"


def test_swafloor_and_its_commands_do_not_import_torch():
    code = (
        "import sys, importlib, pkgutil; import swafloor.cli, swafloor.commands as c; "
        "[importlib.import_module('swafloor.commands.' + m.name) for m in pkgutil.iter_modules(c.__path__)]; "
        "import swafloor.fuzz.runner, swafloor.fuzz.backends as b, swafloor.fuzz.engines.dataplane; "
        "swafloor.cli.build_parser(); b.resolve('reference'); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _imported_modules(path: Path) -> set[str]:
    """The dotted names of everything a module imports (anywhere in it, lazily or not)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_pictures_and_docs_never_import_commands():
    """The block picture is a model: swafloor.picture, swafloor.svg and swafloor.docs import it, and
    never a command module (which would make a circle: explain imports them). The docs may read the
    parser (swafloor.cli) to document it."""
    paths = [ROOT / "swafloor" / "picture.py", ROOT / "swafloor" / "svg.py",
             *sorted((ROOT / "swafloor" / "docs").rglob("*.py"))]
    for path in paths:
        bad = {m for m in _imported_modules(path) if m.startswith("swafloor.commands")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
    assert "swafloor.svg" not in _imported_modules(ROOT / "swafloor" / "picture.py")


def _style_violations(room: str) -> list[str]:
    """Imports in ``room`` of the wrong style: an absolute import of the room itself (one uses a
    relative import inside a room), or a relative import that climbs out of it."""
    bad = []
    for path in sorted((ROOT / room).rglob("*.py")):
        rel = path.relative_to(ROOT / room)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                if node.level > len(rel.parts):
                    bad.append(f"{room}/{rel.as_posix()}:{node.lineno} climbs out of {room}/")
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                parts = name.split(".")
                if parts[0] != "swafloor":
                    continue
                target = parts[1] if len(parts) > 1 and parts[1] in ROOMS[:3] else "swafloor"
                if target == room:
                    bad.append(f"{room}/{rel.as_posix()}:{node.lineno} imports {name} absolutely")
    return bad


@pytest.mark.parametrize("room", ROOMS)
def test_one_import_style_per_room(room):
    assert _style_violations(room) == []


def test_the_style_check_sees_an_absolute_import_inside_its_room(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "fuzz" / "sub").mkdir(parents=True)
    (tmp_path / "fuzz" / "sub" / "m.py").write_text(
        "from swafloor.fuzz.runner import x\nfrom swafloor.reference import y\nfrom ... import z\nfrom .. import w\n")
    assert _style_violations("fuzz") == ["fuzz/sub/m.py:1 imports swafloor.fuzz.runner absolutely",
                                         "fuzz/sub/m.py:3 climbs out of fuzz/"]


#: What a backend's module may import from the rest of fuzz/: the contract (protocol), the shared
#: adapter of Manager-like classes, and the engines' rooms (an adapter its own room and the rooms' shared
#: common helpers); never the harness (runner, replay, compare, lockstep, machine, ...), and never the
#: registry (fuzz/backends/__init__.py), which imports them.
# stream: a leaf (it imports nothing of ours) that pins a fixed-seed Hypothesis run to its seed; the
# rooms' own fixed-seed checks (TensorRT-LLM's properties, vLLM's admission cases) run inside it
BACKEND_MAY_IMPORT = {"protocol", "adapter", "engines", "stream"}


def test_the_stream_module_is_a_leaf():
    tree = ast.parse((ROOT / "fuzz" / "stream.py").read_text())
    ours = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and (
        node.level or (node.module or "").startswith("swafloor"))]
    ours += [node for node in ast.walk(tree) if isinstance(node, ast.Import)
             and any(alias.name.startswith("swafloor") for alias in node.names)]
    assert not ours, [ast.dump(node) for node in ours]


def _engine_adapter_modules() -> list[Path]:
    """The modules of the engines' rooms that build or serve a backend: every one but the rooms' one-off
    checks (swafloor.fuzz.checks, which run campaigns) and their release data (matrix.py, an Engine
    of the one matrix machinery; profiles.py, the releases' semantics, and verdicts.py, the named divergence
    classes of its releases, both read by that machinery)."""
    from swafloor.fuzz.checks import CHECKS

    checks = {ROOT / "fuzz" / Path(*c.module.split(".")[2:]).with_suffix(".py") for c in CHECKS}
    return [p for p in sorted((ROOT / "fuzz" / "engines").rglob("*.py"))
            if p not in checks and p.name not in ("matrix.py", "profiles.py", "verdicts.py")]


def _fuzz_imports(path: Path) -> set[str]:
    """The fuzz modules a module under fuzz/backends/ imports (as names relative to fuzz/)."""
    rel = path.relative_to(ROOT / "fuzz")
    package = list(rel.parts[:-1])  # e.g. ["backends", "dataplane"]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            if not node.module:  # from .. import x: each name is a module or an attribute of the package
                folder = ROOT.joinpath("fuzz", *base)
                for alias in node.names:
                    is_module = (folder / f"{alias.name}.py").exists() or (folder / alias.name / "__init__.py").exists()
                    found.add(".".join(base + [alias.name] if is_module else base) or "fuzz")
                continue
            found.add(".".join(target) if target else "fuzz")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("swafloor.fuzz"):
            found.add(node.module.removeprefix("swafloor.fuzz").lstrip(".") or "fuzz")
    return found


def test_backends_import_no_harness_and_no_registry():
    paths = [p for p in sorted((ROOT / "fuzz" / "backends").rglob("*.py")) if p.name != "__init__.py"]
    for path in paths + _engine_adapter_modules():
        room = path.relative_to(ROOT / "fuzz").parts[:2]  # ("engines", "vllm") for an engine's module
        for name in _fuzz_imports(path):
            top = name.split(".")[0]
            if top == "backends":
                assert name != "backends", f"{path.relative_to(ROOT)} imports the registry"
                continue
            assert top in BACKEND_MAY_IMPORT, f"{path.relative_to(ROOT)} imports fuzz/{name} (upward)"
            if top == "engines" and room[0] == "engines":  # its own room, or what the rooms share
                assert name.split(".")[:2] == list(room) or name == "engines.common", (
                    f"{path.relative_to(ROOT)} imports fuzz/{name}, another engine's room")


def test_the_harness_core_imports_no_engine_room():
    """The core (fuzz/*.py, fuzz/backends/) names an engine's room only as a string (the registry's
    targets, the matrix's ENGINES), imported when a name is resolved: never by an import statement."""
    paths = sorted((ROOT / "fuzz").glob("*.py")) + sorted((ROOT / "fuzz" / "backends").rglob("*.py"))
    for path in paths:
        rooms = {name for name in _fuzz_imports(path) if name.split(".")[0] == "engines"}
        assert not rooms, f"{path.relative_to(ROOT)} imports {sorted(rooms)}"


def test_an_engine_room_imports_no_other_room():
    """A room (a folder of fuzz/engines) imports only itself and the engine-neutral modules beside the rooms
    (fuzz/engines/*.py: common, gate), which import no room."""
    shared = {f"engines.{p.stem}" for p in (ROOT / "fuzz" / "engines").glob("*.py") if p.stem != "__init__"}
    assert {"engines.common", "engines.gate"} <= shared
    for path in sorted((ROOT / "fuzz" / "engines").rglob("*.py")):
        room = path.relative_to(ROOT / "fuzz").parts[:2]
        if len(room) < 2:
            continue
        for name in _fuzz_imports(path):
            if name.split(".")[0] != "engines":
                continue
            if room[1].endswith(".py"):  # an engine-neutral module
                assert name in shared, f"{path.relative_to(ROOT)} imports fuzz/{name}, an engine's room"
            else:
                assert name.split(".")[:2] == list(room) or name in shared, (
                    f"{path.relative_to(ROOT)} imports fuzz/{name}, another engine's room")


def test_every_python_m_check_is_listed():
    """fuzz/checks.py lists every module of swafloor.fuzz with a ``__main__`` entry (the docs' table is
    made from it), but the matrix's cell runner, which only swafloor matrix starts."""
    from swafloor.fuzz.checks import CHECKS

    with_main = set()
    for path in sorted((ROOT / "fuzz").rglob("*.py")):
        if 'if __name__ == "__main__"' in path.read_text():
            rel = path.relative_to(ROOT / "fuzz").with_suffix("")
            with_main.add(".".join(["swafloor", "fuzz", *rel.parts]))
    assert {c.module for c in CHECKS} == with_main - {"swafloor.fuzz.matrix"}


def test_import_graph_has_no_cycle():
    """No import cycle among swafloor's modules, counting imports inside functions too."""
    modules = {}
    for room, folder in (("reference", "reference"), ("proofs", "proofs"), ("fuzz", "fuzz"), ("", "swafloor")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join(["swafloor"] + ([room] if room else []) + parts)
            modules[name] = (path, path.name == "__init__.py")
    edges = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
    # a package's __init__ importing its own submodules is how packages are made; leave those edges
    for name, (_, is_package) in modules.items():
        if is_package:
            edges[name] = {t for t in edges[name] if not t.startswith(name + ".")}
    seen, on_path = set(), []

    def visit(node: str) -> None:
        if node in on_path:
            raise AssertionError("import cycle: " + " -> ".join(on_path[on_path.index(node):] + [node]))
        if node in seen:
            return
        on_path.append(node)
        for nxt in sorted(edges[node]):
            visit(nxt)
        on_path.pop()
        seen.add(node)

    for node in sorted(edges):
        visit(node)


def test_no_code_outside_reference_reads_a_private_name_of_the_manager():
    """Issue 29: tests, fuzz, proofs and the CLI reach a manager through its public names (hooks,
    ``record_of``, ``pool_of``, snapshots). Any attribute access ``x._name`` whose ``_name`` is one
    of the manager's private attributes or methods is refused unless ``x`` is ``self`` in a class
    that does not derive from the reference's (an adapter's own state of the same name)."""
    import ast

    from swafloor.reference import AttentionLayer, Config, Manager

    m = Manager(Config(4, [AttentionLayer(8)], slots=[8]))
    m.create("a")
    m.resume("a")
    private = {n for n in vars(m) if n.startswith("_") and not n.startswith("__")}
    for cls in Manager.__mro__:
        private |= {n for n in vars(cls) if n.startswith("_") and not n.startswith("__")}
    assert {"_requests", "_pools", "_get"} <= private  # the scan knows what it looks for
    reference_classes = {"Manager", "CoreManager", "Pool"}
    found = []
    for folder in ("tests", "fuzz", "proofs", "swafloor"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            in_reference_class: set[int] = set()
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
                bases = {ast.unparse(b).split(".")[-1] for b in cls.bases}
                if bases & reference_classes or any(b.startswith("_") for b in bases):
                    in_reference_class |= {id(n) for n in ast.walk(cls)}
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Attribute) and node.attr in private):
                    continue
                own = isinstance(node.value, ast.Name) and node.value.id == "self"
                if not own or id(node) in in_reference_class:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not found, found


def test_every_package_of_ours_is_installed_by_a_plain_pip_install():
    """pyproject's package list names every folder of ours with an __init__.py: an editable install
    finds a missing one by path, `pip install .` (README's first command) would leave it out."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(data["tool"]["setuptools"]["packages"])
    dirs = data["tool"]["setuptools"]["package-dir"]
    found = set()
    for name, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found - listed == set(), sorted(found - listed)
