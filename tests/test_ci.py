"""What CI runs is what it says it ran (issue 16, part 3): ``.ci/run`` declares ``CI=true``, under
which a skipped test fails (tests/conftest.py), and ``scripts/vllm-venv`` proves by importing that
the venv's swafloor is this checkout, exercised here against a fake venv (no vLLM built)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {"vllm": ROOT / "scripts" / "vllm-venv", "sglang": ROOT / "scripts" / "sglang-venv"}


# ----------------------------------------------------------------------------- .ci/run and skips
def test_ci_run_exports_ci_before_running_anything():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    exported = [i for i, line in enumerate(lines) if re.fullmatch(r"export CI=true", line)]
    work = [i for i, line in enumerate(lines) if "pip install" in line or "pytest" in line.split("#")[0]]
    assert exported and work and exported[0] < min(work), "export CI=true must come before the first command"


def _pytest_in(folder: Path, ci: bool) -> subprocess.CompletedProcess:
    (folder / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("body", [
    "import pytest\n\ndef test_a():\n    pytest.skip('peer missing')\n\ndef test_b():\n    pass\n",
    "import pytest\npytest.skip('torch missing', allow_module_level=True)\n\ndef test_a():\n    pass\n",
], ids=["in-a-test", "module-level"])
def test_a_skip_fails_in_ci_and_only_there(tmp_path, body):
    (tmp_path / "test_peer.py").write_text(body)
    (tmp_path / "test_other.py").write_text("def test_c():\n    pass\n")
    outside = _pytest_in(tmp_path, ci=False)
    assert outside.returncode == 0 and "skipped" in outside.stdout, outside.stdout
    inside = _pytest_in(tmp_path, ci=True)
    assert inside.returncode != 0 and "skipped in CI" in inside.stdout, inside.stdout


def _pytest_xfail_in(folder: Path, ci: bool) -> subprocess.CompletedProcess:
    """pytest on ``folder`` under this repository's own configuration (pyproject's ini options)."""
    (folder / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    return _pytest_in(folder, ci)


@pytest.mark.parametrize("body, outside_ok", [
    ("import pytest\n\n@pytest.mark.xfail(reason='known bug')\ndef test_a():\n    assert False\n", True),
    ("import pytest\n\n@pytest.mark.xfail(reason='known bug')\ndef test_a():\n    pass\n", False),
    ("import pytest\n\ndef test_a():\n    pytest.xfail('known bug')\n", True),
], ids=["xfailed", "xpassed", "imperative"])
def test_an_xfail_fails_in_ci_and_an_xpass_everywhere(tmp_path, body, outside_ok):
    """Before issue 28 an xfail passed in CI (the skip check let it through) and an xpass passed
    everywhere (xfail was not strict)."""
    (tmp_path / "test_known.py").write_text(body)
    (tmp_path / "test_other.py").write_text("def test_c():\n    pass\n")
    outside = _pytest_xfail_in(tmp_path, ci=False)
    assert (outside.returncode == 0) == outside_ok, outside.stdout
    inside = _pytest_xfail_in(tmp_path, ci=True)
    assert inside.returncode != 0, inside.stdout


def test_no_test_is_marked_xfail():
    """Every known bug is a real failing test, its issue tracked in docs: no xfail in the suite."""
    marked = [p.name for p in (ROOT / "tests").glob("test_*.py") if re.search(r"\bxfail\(", p.read_text())
              and p.name != "test_ci.py"]
    assert not marked, marked


# ----------------------------------------------------------------------------- scripts/vllm-venv, scripts/sglang-venv
def _recipe(engine: str) -> str:
    return re.search(r'^recipe="([^"]*)"', SCRIPTS[engine].read_text(), re.M).group(1)


ENGINES = pytest.mark.parametrize("engine", ["vllm", "sglang"])


def _fake_venv(tmp_path: Path, imports_from: str, pip_fixes: bool, engine: str = "vllm") -> Path:
    """A venv with the complete-marker, whose python is this test's python (so ``swafloor`` is this
    checkout's editable install) unless ``$venv/override`` names a folder put first on its path; its
    pip logs each call and, when ``pip_fixes``, removes the override (as a reinstall would)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / f".swafloor-{engine}-complete").write_text(_recipe(engine) + "\n")
    if imports_from != "here":
        other = tmp_path / "other-checkout"
        for package in ("swafloor", "swafloor/reference", "swafloor/fuzz"):
            (other / package).mkdir(parents=True, exist_ok=True)
            (other / package / "__init__.py").write_text("")
        (venv / "override").write_text(str(other))
    python = venv / "bin" / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        'override="$(dirname "$0")/../override"\n'
        'if [[ -f "$override" ]]; then export PYTHONPATH="$(cat "$override")"; else unset PYTHONPATH; fi\n'
        f'exec "{sys.executable}" "$@"\n')
    pip = venv / "bin" / "pip"
    pip.write_text(
        "#!/usr/bin/env bash\n"
        'echo "$@" >> "$(dirname "$0")/../pip.log"\n'
        + ('rm -f "$(dirname "$0")/../override"\n' if pip_fixes else ""))
    python.chmod(0o755)
    pip.chmod(0o755)
    return venv


def _run_script(venv: Path, engine: str = "vllm") -> subprocess.CompletedProcess:
    env = dict(os.environ, **{f"SWAFLOOR_{engine.upper()}_VENV": str(venv)})
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(SCRIPTS[engine])], env=env, capture_output=True, text=True, timeout=120)


@ENGINES
def test_venv_of_this_checkout_is_left_alone(tmp_path, engine):
    venv = _fake_venv(tmp_path, "here", pip_fixes=False, engine=engine)
    proc = _run_script(venv, engine)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"{venv}/bin/python"
    assert not (venv / "pip.log").exists()  # nothing reinstalled


@ENGINES
def test_venv_of_another_checkout_is_reinstalled_and_then_verified(tmp_path, engine):
    venv = _fake_venv(tmp_path, "elsewhere", pip_fixes=True, engine=engine)
    proc = _run_script(venv, engine)
    assert proc.returncode == 0, proc.stderr
    assert f"-e {ROOT}" in (venv / "pip.log").read_text()


@ENGINES
def test_venv_fails_loudly_when_the_reinstall_does_not_take(tmp_path, engine):
    """Before issue 16 scripts/vllm-venv trusted the marker and the reinstall: it printed the venv's
    python and exited 0 although that python imported another checkout's swafloor; before issue 28
    scripts/sglang-venv still did (it checked only that swafloor's path began with this checkout's)."""
    venv = _fake_venv(tmp_path, "elsewhere", pip_fixes=False, engine=engine)
    proc = _run_script(venv, engine)
    assert proc.returncode != 0, proc.stderr
    assert "ERROR" in proc.stderr and "other-checkout" in proc.stderr and "not this checkout" in proc.stderr
    assert (venv / "pip.log").exists()  # it did try

