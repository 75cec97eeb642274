"""The session sweep of ``tests/process_sweep.py``: a process a test leaves running is killed and named
when the session ends (issue 56, finding 10)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the sweep reads /proc")

LEAK = """
import subprocess, sys

def test_starts_a_server_and_forgets_it():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "print('up', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout.readline().strip() == b"up"
    with open("leaked.pid", "w") as fh:
        fh.write(str(proc.pid))
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_left_running_by_a_test_is_killed_and_named(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    pytester.makepyfile(test_leak=LEAK)
    result = pytester.runpytest_subprocess("-p", "process_sweep", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)
    pid = int((pytester.path / "leaked.pid").read_text())
    assert not _running(pid)  # it ignored SIGTERM: killed after the grace
    assert "still running at the end of the session" in result.stdout.str()
    assert f"{pid}: {sys.executable}" in result.stdout.str()
