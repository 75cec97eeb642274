"""pytest plugin: no process a test started outlives the test session (issue 56, finding 10).

Each pytest process (the run itself, or each pytest-xdist worker) names itself in the environment
variable :data:`ENV` (its pid) when it starts; every process a test starts inherits it (Linux shows a
process's starting environment in ``/proc/<pid>/environ``), even one that a killed parent left behind
with nothing to stop it (the ``smg::router`` orphans of ``Gateway.stop`` killing only its ``timeout``
wrapper). When the session ends, the processes still running with this session's mark get ``SIGTERM``,
``SIGKILL`` after :data:`GRACE_S`, and are named in the terminal summary: a test that starts a service
must stop it itself (a bounded wait, then a kill), and this sweep only keeps the machine clean when one
forgot. An xdist controller leaves the sweep to its workers. Linux only (elsewhere: nothing happens).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

#: the variable naming the pytest process whose test started a process
ENV = "CAUSALCACHE_TEST_SESSION_PID"
#: how long swept processes get between ``SIGTERM`` and ``SIGKILL``
GRACE_S = 2.0

_left: list[str] = []
_SWEEPS = pytest.StashKey[bool]()  # set on the outermost session of this process (not a pytester run)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SWEEPS] = os.environ.get(ENV) != str(os.getpid())
    os.environ[ENV] = str(os.getpid())


def _marked() -> dict[int, str]:
    """``{pid: command line}`` of running (not zombie) processes started under this session."""
    mark = f"{ENV}={os.getpid()}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if mark not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                found[int(entry)] = fh.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        except (OSError, IndexError):
            continue
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    controller = not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None)
    if not os.path.isdir("/proc") or controller or not config.stash.get(_SWEEPS, False):
        return
    left = _marked()
    _left.extend(f"{pid}: {cmd}" for pid, cmd in sorted(left.items()))
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        for pid in list(left):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                left.pop(pid)
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            still = _marked()
            left = {p: c for p, c in left.items() if p in still}


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _left:
        terminalreporter.write_line(
            f"processes started by tests were still running at the end of the session and were killed "
            f"({len(_left)}); a test that starts a process must stop it:",
            red=True,
        )
        for line in _left:
            terminalreporter.write_line(f"  {line}")
