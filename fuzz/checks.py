"""Every ``python -m`` check of :mod:`swafloor.fuzz`: one :class:`Check` each, with what it shows,
where it runs and how long it takes (the data: checks.json beside this file); the docs' table of them is generated from :data:`CHECKS`
(``swafloor docs build``), and a test holds the list to the modules that have a ``__main__`` entry.

A check is a module run on its own, outside the test suite, for a figure or a finding: the engines'
checks live in their rooms (:mod:`swafloor.fuzz.engines`), the harness's at the top of ``fuzz/``.
``typical`` is a wall time measured on this project's 2-core machine, ``measured`` says when and how;
a check not timed yet, or needing what that machine lacks (a GPU), says so instead of a number.
"""

from __future__ import annotations

import importlib.resources
import json

import attrs

__all__ = ["Check", "CHECKS", "VENVS"]


@attrs.frozen
class Check:
    """One ``python -m`` check: ``module`` (its dotted name), ``usage`` (its arguments), ``shows`` (what
    it prints), ``runs_in`` (the interpreter it needs), ``typical`` (its wall time) and ``measured``
    (how that time was taken), ``tested_by`` (the test that runs it, if any)."""

    module: str
    usage: str
    shows: str
    runs_in: str
    typical: str
    measured: str
    tested_by: str = ""

    @property
    def command(self) -> str:
        return f"python -m {self.module}" + (f" {self.usage}" if self.usage else "")


#: The interpreters a check names by a short key in checks.json; any other ``runs_in`` is said as it is.
VENVS = {
    "main": "the main venv",
    "vllm": "the vLLM venv (`scripts/vllm-venv`)",
    "sglang": "the SGLang venv (`scripts/sglang-venv`)",
    "lmdeploy": "the LMDeploy venv (`scripts/lmdeploy-venv`)",
}


def _load() -> tuple[Check, ...]:
    rows = json.loads(importlib.resources.files(__package__).joinpath("checks.json").read_text(encoding="utf-8"))
    return tuple(Check(**{**row, "runs_in": VENVS.get(row["runs_in"], row["runs_in"])}) for row in rows)


#: The checks, in the docs' order: the data is fuzz/checks.json (one object per check, Check's fields).
CHECKS = _load()
