"""pytest plugin: tests that need a service ``.ci/run`` starts must not skip in CI.

A test marked ``@pytest.mark.service("postgres")`` needs that service. ``.ci/run`` starts the services
and lists them in ``CAUSALCACHE_CI_SERVICES`` (comma-separated); under ``CI=true`` a test that needs a
listed service and skips is reported as **failed** (its skip reason kept), so a broken service setup
cannot pass as "skipped", and a listed service none of whose tests passed (a test module skipped at
import, a marker lost) fails the session. The terminal summary ends with one line per run: which services ran and
how their tests ended. Only the outermost pytest session enforces: pytest runs started by tests run
subsets of the suite.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict

import pytest

#: what ``.ci/run`` can start (docs/TESTING.md)
SERVICES = ("postgres", "langgraph-server", "transformers-serve", "chromium")

#: set by the enforcing session for its child processes: a pytest run started by a test (the planted-bug
#: table, pytester) runs a subset and must not demand every service
NESTED_ENV = "CAUSALCACHE_CI_SERVICES_SESSION"

_outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
_enforcing: set[str] = set()


def listed_services() -> set[str]:
    """Services listed in ``CAUSALCACHE_CI_SERVICES`` when ``CI`` is true, else none."""
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        return set()
    listed = os.environ.get("CAUSALCACHE_CI_SERVICES", "")
    return {name.strip() for name in listed.split(",") if name.strip()}


def expected_services() -> set[str]:
    """The services this session enforces (none in a pytest run nested in another one)."""
    return set(_enforcing)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(NESTED_ENV):
        return
    _enforcing.update(listed_services())
    if _enforcing:
        os.environ[NESTED_ENV] = str(os.getpid())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _enforcing and os.environ.get(NESTED_ENV) == str(os.getpid()):
        del os.environ[NESTED_ENV]
    _enforcing.clear()


def _service(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("service")
    return str(marker.args[0]) if marker is not None and marker.args else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    name = _service(item)
    if name is None:
        return
    if report.skipped and name in expected_services():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"service {name!r} is listed in CAUSALCACHE_CI_SERVICES (CI=true) but this test skipped: {reason}"
        )
    if report.when == "call" or report.outcome != "passed":
        _outcomes[name][report.outcome] += 1


def missing_services() -> list[str]:
    """Expected services none of whose tests passed (a module skipped at import counts here)."""
    return sorted(n for n in expected_services() if not _outcomes.get(n, Counter())["passed"])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if missing_services() and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    expected = expected_services()
    if not _outcomes and not expected:
        return
    parts = []
    for name in SERVICES:
        counts = _outcomes.get(name, Counter())
        if not counts and name not in expected:
            continue
        ran = counts["passed"] > 0 and not counts["failed"] and not counts["skipped"]
        detail = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests"
        parts.append(f"{name} {'ran' if ran else 'DID NOT RUN'} ({detail})")
    terminalreporter.write_line("CI services: " + "; ".join(parts))
    missing = missing_services()
    if missing:
        terminalreporter.write_line(
            f"CI services FAILED: {', '.join(missing)} started by .ci/run but no test of theirs passed"
        )
