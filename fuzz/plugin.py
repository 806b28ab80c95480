"""The pytest plugin (entry point ``pytest11``): run the differential suite against any backend.

``pytest --swafloor-backend=pkg.mod:factory`` adds one test item that fuzzes that backend against
the reference (the ``ci`` profile: a fixed seed, bounded) and fails with the whole input and the
replay command on a divergence. Without ``--swafloor-backend`` the plugin only adds its options and
does nothing else; it imports nothing heavy (Hypothesis and the backends load when the item runs).
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["pytest_addoption", "pytest_collection_modifyitems", "SwafloorDifferentialItem"]


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("swafloor", "swafloor differential fuzzing")
    group.addoption("--swafloor-backend", action="store", default=None, metavar="NAME|MODULE:FACTORY",
                    help="fuzz this backend against the swafloor reference (adds one test)")
    group.addoption("--swafloor-against", action="store", default="reference", metavar="NAME|MODULE:FACTORY",
                    help="what to compare with (default: reference)")
    group.addoption("--swafloor-examples", action="store", type=int, default=None, metavar="N",
                    help="examples to run (default: the ci profile's)")
    group.addoption("--swafloor-seed", action="store", type=int, default=None, metavar="S",
                    help="seed (default: the ci profile's fixed seed)")
    group.addoption("--swafloor-out", action="store", default="fuzz-failures", metavar="DIR",
                    help="where a divergence's trace is saved (default ./fuzz-failures)")


class SwafloorDivergence(Exception):
    """Raised by the item on a divergence; its message is the whole report."""


class SwafloorDifferentialItem(pytest.Item):
    """One test: the differential campaign of a backend against the reference."""

    def __init__(self, *, backend: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = backend

    def runtest(self) -> None:
        from swafloor.fuzz.runner import format_report, run_campaign

        options = self.config.option
        result = run_campaign(
            self.backend,
            options.swafloor_against,
            profile="ci",
            examples=options.swafloor_examples,
            seed=options.swafloor_seed,
            out_dir=options.swafloor_out,
        )
        if result.divergence is not None:
            raise SwafloorDivergence(format_report(result))

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, SwafloorDivergence):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"swafloor differential: {self.backend} vs {self.config.option.swafloor_against}"


def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    backend = config.getoption("swafloor_backend", default=None)
    if not backend:
        return
    items.append(
        SwafloorDifferentialItem.from_parent(session, name=f"swafloor-differential[{backend}]", backend=backend)
    )
