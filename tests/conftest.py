"""In CI (``CI=true``, which ``.ci/run`` exports) a skipped test fails the run: every optional peer
(cvc5, torch, hypofuzz, the vLLM venv) is installed there, so a skip would only hide that one is
missing. Elsewhere a test whose peer is absent skips as usual.

An ``xfail`` is strict everywhere (pyproject's ``xfail_strict``: a test marked xfail that passes fails
the run), and in CI an expected failure fails too: pytest reports it as a skip that passed, and a
failure CI does not count is a failure hidden. A known bug is a real failing test, tracked in docs."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def _fail_the_skip(report, what: str) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"{what} was skipped in CI (CI=true), where nothing may skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped:
        if hasattr(report, "wasxfail"):  # an expected failure: still a failure
            reason = report.wasxfail
            del report.wasxfail  # pytest counts no failure that still carries it
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} failed as marked xfail ({reason or 'no reason'}); "
                               "in CI (CI=true) an xfail is a failure: fix it, or let the test fail")
        else:
            _fail_the_skip(report, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped:  # a module-level skip (pytest.skip(..., allow_module_level=True))
        _fail_the_skip(report, collector.nodeid)
