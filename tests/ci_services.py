"""pytest plugin: tests that need a service ``.ci/run`` starts must not skip in CI.

A test marked ``@pytest.mark.service("postgres")`` needs that service. ``.ci/run`` starts the services
and lists them in ``CAUSALCACHE_CI_SERVICES`` (comma-separated); under ``CI=true`` a test that needs a
listed service and skips is reported as **failed** (its skip reason kept), so a broken service setup
cannot pass as "skipped", and a listed service none of whose tests passed (a test module skipped at
import, a marker lost) fails the session. The terminal summary ends with one line per run: which services ran and
how their tests ended. Only the outermost pytest session enforces: pytest runs started by tests run
subsets of the suite.

Under pytest-xdist (the README's test command runs ``-n 2``) the workers turn a listed service's skip into
a failure (they inherit ``NESTED_ENV`` from the controller but are recognised by ``config.workerinput``),
each report carries its service in ``user_properties``, and the controller counts the reports it
receives and decides the run: a worker sees only its share of the tests and never fails a session for a
service none of its tests needed.
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

#: ``user_properties`` key of a report whose test needs a service (travels from xdist workers)
REPORT_KEY = "ci_service"

_outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
_enforcing: set[str] = set()
_deciding = False  # this process decides the run (not an xdist worker)
_ACTIVE = pytest.StashKey[bool]()  # set on the config that filled the module state above


def listed_services() -> set[str]:
    """Services listed in ``CAUSALCACHE_CI_SERVICES`` when ``CI`` is true, else none."""
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        return set()
    listed = os.environ.get("CAUSALCACHE_CI_SERVICES", "")
    return {name.strip() for name in listed.split(",") if name.strip()}


def expected_services() -> set[str]:
    """The services this session enforces (none in a pytest run nested in another one)."""
    return set(_enforcing)


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker process (its controller decides the run)."""
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    global _deciding
    worker = is_xdist_worker(config)
    if os.environ.get(NESTED_ENV) and not worker:
        return
    config.stash[_ACTIVE] = True
    _enforcing.update(listed_services())
    _deciding = not worker
    if _enforcing and not worker:
        os.environ[NESTED_ENV] = str(os.getpid())


def pytest_unconfigure(config: pytest.Config) -> None:
    global _deciding
    if not config.stash.get(_ACTIVE, False):
        return  # a nested run in this process: the outer session's state stays
    if _enforcing and os.environ.get(NESTED_ENV) == str(os.getpid()):
        del os.environ[NESTED_ENV]
    _enforcing.clear()
    _outcomes.clear()
    _deciding = False


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
    report.user_properties.append((REPORT_KEY, name))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count a service test's outcome (here in a serial run; in the xdist controller for workers' reports)."""
    name = dict(report.user_properties).get(REPORT_KEY)
    if name is not None and (report.when == "call" or report.outcome != "passed"):
        _outcomes[str(name)][report.outcome] += 1


def missing_services() -> list[str]:
    """Expected services none of whose tests passed (a module skipped at import counts here)."""
    return sorted(n for n in expected_services() if not _outcomes.get(n, Counter())["passed"])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _deciding and missing_services() and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if is_xdist_worker(config):
        return
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
