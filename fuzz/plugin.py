"""The pytest plugin (entry point ``pytest11``): run the differential suite against any backend.

``pytest --swafloor-backend=pkg.mod:factory`` adds one test item that fuzzes that backend against
the reference (the ``ci`` profile: a fixed seed, bounded) and fails with the whole input and the
replay command on a divergence. Without ``--swafloor-backend`` the plugin only adds its options and
does nothing else; it imports nothing heavy (Hypothesis and the backends load when the item runs).

With ``--swafloor-hypofuzz`` the item is instead a plain Hypothesis test function (the differential
state machine, run by Hypothesis's own ``@given`` machinery against the default example database),
the form HypoFuzz collects and fuzzes across processes and machines (``hypothesis fuzz -- ...``).
Its example database key is derived from the item's node id, as HypoFuzz derives it, so a failure
HypoFuzz saved replays first in a plain ``pytest --swafloor-hypofuzz`` run on the same database.
``--swafloor-db DIR`` (or ``redis://HOST:PORT/N``) makes that database the default one, shared.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "pytest_collection_modifyitems",
    "SwafloorDifferentialItem",
    "SwafloorHypothesisFunction",
    "differential_test",
]


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("swafloor", "swafloor differential fuzzing")
    group.addoption("--swafloor-backend", action="append", default=None, metavar="NAME|MODULE:FACTORY",
                    help="fuzz this backend against the swafloor reference (adds one test; repeatable)")
    group.addoption("--swafloor-against", action="store", default="reference", metavar="NAME|MODULE:FACTORY",
                    help="what to compare with (default: reference)")
    group.addoption("--swafloor-examples", action="store", type=int, default=None, metavar="N",
                    help="examples to run (default: the ci profile's)")
    group.addoption("--swafloor-seed", action="store", type=int, default=None, metavar="S",
                    help="seed (default: the ci profile's fixed seed)")
    group.addoption("--swafloor-out", action="store", default="fuzz-failures", metavar="DIR",
                    help="where a divergence's trace is saved (default ./fuzz-failures)")
    group.addoption("--swafloor-hypofuzz", action="store_true", default=False,
                    help="add the differential test as a Hypothesis test function (what HypoFuzz fuzzes)")
    group.addoption("--swafloor-db", action="store", default=None, metavar="DIR|redis://HOST:PORT/N",
                    help="the shared Hypothesis example database (loaded as the default settings profile)")


def pytest_configure(config: Any) -> None:
    """``--swafloor-db``: make the shared example database the default one, before collection (HypoFuzz
    fuzzes only tests whose database is the default one)."""
    location = config.getoption("swafloor_db", default=None)
    if not location:
        return
    from hypothesis import settings

    # derandomize off: Hypothesis's own profile under CI=true derandomizes, and HypoFuzz refuses that.
    settings.register_profile("swafloor-shared-db", database=_database(location), derandomize=False)
    settings.load_profile("swafloor-shared-db")


def _database(location: str) -> Any:
    if location.startswith(("redis://", "rediss://")):
        try:
            import redis  # the redis package, only for this form
        except ImportError:
            raise pytest.UsageError(f"--swafloor-db={location!r}: needs the redis package (pip install redis)") from None
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(location))
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(location)


class SwafloorDivergence(Exception):
    """Raised by the item on a divergence; its message is the whole report."""


class SwafloorDifferentialItem(pytest.Item):
    """One test: the differential campaign of a backend against the reference."""

    def __init__(self, *, backend: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = backend

    def runtest(self) -> None:
        from .runner import format_report, run_campaign

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


def differential_test(backend: str, against: str = "reference", examples: int | None = None, seed: int | None = None):
    """The differential state machine of ``backend`` against ``against`` as a Hypothesis test function
    (``@given``), with the ``ci`` profile's rules per example and the default example database."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.stateful import get_state_machine_test

    from .backends import resolve
    from .machine import Stats, build_machine
    from .runner import PROFILES

    _hypofuzz_compat()
    profile = PROFILES["ci"]
    machine = build_machine(resolve(backend, "--swafloor-backend"), resolve(against, "--swafloor-against"), Stats())
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    test = get_state_machine_test(machine, settings=settings(
        max_examples=profile.examples if examples is None else examples,
        stateful_step_count=profile.steps,
        deadline=None,
        derandomize=False,  # a seed or the database decides; HypoFuzz refuses derandomized tests
        # HypoFuzz refuses tests that suppress nested_given (undefined observability semantics).
        suppress_health_check=[h for h in HealthCheck if h is not HealthCheck.nested_given],
        phases=[p for p in Phase if p is not Phase.explain],  # explaining traces coverage: slow
    ))
    test.__name__ = test.__qualname__ = "swafloor_differential"
    return test


def _hypofuzz_compat() -> None:
    """HypoFuzz 25.11.1 (the newest) reads ``slice_comments`` from the shrinker's result after it
    shrinks a failure; Hypothesis dropped that attribute in 6.157.1, so on Hypothesis >= 6.157.1 a
    HypoFuzz worker crashes with AttributeError on the first failure it finds. An empty class
    default restores what HypoFuzz expects (it only copies it to the data it replays)."""
    from hypothesis.internal.conjecture.data import ConjectureResult

    if not hasattr(ConjectureResult, "slice_comments"):
        ConjectureResult.slice_comments = {}  # type: ignore[attr-defined]


class SwafloorHypothesisFunction(pytest.Function):
    """The differential test as a Hypothesis test function (see ``--swafloor-hypofuzz``)."""

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"swafloor differential (Hypothesis test): {self.name}"


@pytest.hookimpl(tryfirst=True)  # before -m/-k select (HypoFuzz collects with -m hypothesis)
def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    for backend in dict.fromkeys(config.getoption("swafloor_backend", default=None) or ()):
        if config.getoption("swafloor_hypofuzz", default=False):
            against = config.getoption("swafloor_against")
            test = differential_test(backend, against, config.getoption("swafloor_examples"),
                                     config.getoption("swafloor_seed"))
            name = f"swafloor-hypofuzz[{backend}|{against}]"
            item = SwafloorHypothesisFunction.from_parent(session, name=name, callobj=test)
            # The database key from the node id, as HypoFuzz sets it: plain runs replay its failures.
            test.hypothesis.inner_test._hypothesis_internal_add_digest = item.nodeid.encode()
            item.add_marker(pytest.mark.hypothesis)
            items.append(item)
        else:
            items.append(
                SwafloorDifferentialItem.from_parent(session, name=f"swafloor-differential[{backend}]", backend=backend)
            )
