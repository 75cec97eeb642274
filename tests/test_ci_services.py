"""The CI guard (tests/ci_services.py): under CI=true a test needing a service that .ci/run listed in
CAUSALCACHE_CI_SERVICES fails instead of skipping, a listed service with no passing test fails the run,
and the summary line says which services ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from ci_services import NESTED_ENV

TESTS = str(Path(__file__).resolve().parent)

SKIPPING = """
import pytest

@pytest.mark.service("postgres")
def test_needs_postgres():
    pytest.skip("set CAUSALCACHE_POSTGRES_URI")

@pytest.mark.service("chromium")
def test_needs_chromium():
    pass
"""


#: a serial run, and the README's test command's two xdist workers (the controller decides the run)
RUNNERS = pytest.mark.parametrize("runner", [(), ("-n", "2")], ids=["serial", "xdist"])


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, services: str, runner=()):
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("CAUSALCACHE_CI_SERVICES", services)
    monkeypatch.setenv("PYTHONPATH", TESTS)
    monkeypatch.delenv(NESTED_ENV, raising=False)  # as the outermost session (CI sets it for children)
    pytester.makeini("[pytest]\nmarkers =\n    service(name): a CI service\n")
    pytester.makepyfile(test_services=SKIPPING)
    return pytester.runpytest_subprocess("-p", "ci_services", "-p", "no:cacheprovider", *runner)


@RUNNERS
def test_a_listed_service_whose_test_skips_fails_under_ci(pytester, monkeypatch, runner):
    result = _run(pytester, monkeypatch, "true", "postgres,chromium", runner)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*service 'postgres' is listed in CAUSALCACHE_CI_SERVICES (CI=true) but this test skipped*",
            "CI services: postgres DID NOT RUN (1 failed); chromium ran (1 passed)",
            "CI services FAILED: postgres *",
        ]
    )
    assert result.ret != 0


@RUNNERS
def test_outside_ci_a_skip_stays_a_skip(pytester, monkeypatch, runner):
    result = _run(pytester, monkeypatch, "", "postgres", runner)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 0


@RUNNERS
def test_a_listed_service_without_tests_fails_the_run(pytester, monkeypatch, runner):
    result = _run(pytester, monkeypatch, "true", "chromium,langgraph-server", runner)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*langgraph-server DID NOT RUN (no tests)*", "CI services FAILED: langgraph-server *"]
    )
    assert result.ret != 0


def test_a_pytest_run_nested_in_the_ci_session_does_not_enforce(pytester, monkeypatch):
    monkeypatch.setenv(NESTED_ENV, "1")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("CAUSALCACHE_CI_SERVICES", "postgres,langgraph-server")
    monkeypatch.setenv("PYTHONPATH", TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    service(name): a CI service\n")
    pytester.makepyfile(test_services=SKIPPING)
    result = pytester.runpytest_subprocess("-p", "ci_services", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 0
