"""The ``core`` backend: the core manager alone (:class:`~swafloor.reference.core.CoreManager`, no
engine layer), behind the backend protocol. Under the default semantics every layer of the
reference does nothing, so the two must agree step by step: fuzzing one against the other in CI
(tests/test_core.py) keeps the core and the composed manager from drifting apart."""

from __future__ import annotations

from swafloor.reference import Config
from swafloor.reference.core import CoreManager

from ..adapter import ManagerBackend
from ..protocol import EXACT_WITH_IDENTITY, factory

__all__ = ["core"]


@factory(EXACT_WITH_IDENTITY, name="core")
def core(config: Config) -> ManagerBackend:
    """The core manager: everything compared exactly, physical identity included, default semantics."""
    return ManagerBackend(CoreManager(config))
