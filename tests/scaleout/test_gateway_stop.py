"""Issue 56, finding 10: a gateway a test starts is stopped by that test, even when the test fails.

``Gateway.stop`` used to SIGKILL only the ``timeout`` wrapper around ``smg launch``: the ``smg::router``
process lived on as an orphan with nothing left to bound its life (eight were found after a few runs of
the suite). Now the wrapper and smg share a process group of their own, and ``stop`` signals the group:
``SIGTERM``, a bounded wait, then ``SIGKILL``.
"""

from __future__ import annotations

import os
import sys

import pytest
from scaleout_support import Gateway, free_port, proc_stat, start_workers

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process trees from /proc")


def _children(pid: int) -> list[int]:
    stats = {int(e): proc_stat(int(e)) for e in os.listdir("/proc") if e.isdigit()}
    return [p for p, fields in stats.items() if fields and int(fields[1]) == pid]


def _running(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


def _smg_pids(gateway: Gateway) -> list[int]:
    wrapper = gateway._proc.pid  # the `timeout` wrapper (or smg itself without coreutils' timeout)
    return [wrapper, *_children(wrapper)]


def test_stop_leaves_no_gateway_process_running():
    workers = start_workers(1, lifetime_s=60)
    try:
        gateway = Gateway([workers[0].url], lifetime_s=60).start()
        pids = _smg_pids(gateway)
        assert all(_running(p) for p in pids) and len(pids) >= 1
        gateway.stop()
        assert [p for p in pids if _running(p)] == []
    finally:
        for worker in workers:
            worker.stop()


def test_a_gateway_that_fails_to_start_leaves_nothing_running(monkeypatch):
    gateway = Gateway([f"http://127.0.0.1:{free_port()}"], lifetime_s=60)  # no worker answers there
    seen: list[int] = []
    original = gateway.healthy_workers

    def healthy() -> int:
        if not seen and gateway._proc is not None:
            seen.extend(_smg_pids(gateway))
        return original()

    monkeypatch.setattr(gateway, "healthy_workers", healthy)
    with pytest.raises(RuntimeError, match="did not register"):
        gateway.start(timeout_s=3)
    assert seen and [p for p in seen if _running(p)] == [], sys.platform
