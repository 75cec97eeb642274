"""Loopback fixtures of the scale-out tests: the SGLang Model Gateway in front of fake SGLang workers, and
an S3 API (moto's server mode). Everything binds 127.0.0.1 and stops by itself."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))  # tests/runtime/loopback.py

from loopback import SGLangLoopback

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/moto_s3.py

from moto_s3 import MotoS3, free_port

from causalcache_memory.runtime.routing import ROUTING_KEY_HEADER, smg_launch_args

__all__ = [
    "Gateway",
    "MotoS3",
    "SGLangLoopback",
    "free_port",
    "group_alive",
    "keys_by_worker",
    "proc_stat",
    "start_workers",
    "stop_group",
]


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies count until reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_group(pgid: int, wait_s: float) -> None:
    """``SIGTERM`` to process group ``pgid``, up to ``wait_s`` seconds for it to go, then ``SIGKILL``."""
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _group_runs(pgid):
                return
            time.sleep(0.05)


def _group_runs(pgid: int) -> bool:
    """Whether a process of group ``pgid`` runs and is not a zombie (Linux: /proc; else: any process)."""
    if not os.path.isdir("/proc"):
        return group_alive(pgid)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = proc_stat(int(entry))
        if fields and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp, ...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


#: Gateway flags that make a loopback test fast: probe workers every second, short retry backoff.
FAST_SMG = (
    "--worker-startup-check-interval",
    "1",
    "--health-check-interval-secs",
    "1",
    "--retry-initial-backoff-ms",
    "10",
    "--log-level",
    "warn",
)


def start_workers(n: int, *, lifetime_s: float = 120.0) -> list[SGLangLoopback]:
    return [SGLangLoopback(lifetime_s=lifetime_s).start() for _ in range(n)]


def keys_by_worker(workers: Sequence[SGLangLoopback]) -> list[list[str]]:
    """For each worker, the routing-key header of every ``/generate`` it answered, in order."""
    out = []
    for worker in workers:
        keys = []
        for path, _, headers in list(worker.requests):
            lower = {k.lower(): v for k, v in headers.items()}
            if path == "/generate":
                keys.append(lower.get(ROUTING_KEY_HEADER, ""))
        out.append(keys)
    return out


class Gateway:
    """``smg launch`` on 127.0.0.1 in front of ``worker_urls``, stopped on exit or after ``lifetime_s``.

    smg runs under ``timeout -s KILL lifetime_s`` (so it stops even if the test process dies first), in a
    process group of its own: :meth:`stop` signals the whole group (``SIGTERM``, then ``SIGKILL`` after
    :data:`STOP_WAIT_S`), never just the ``timeout`` wrapper. Killing only the wrapper orphaned the
    ``smg::router`` process with nothing left to bound its life (issue 56, finding 10), and smg does not
    exit on ``SIGTERM`` alone."""

    #: how long :meth:`stop` waits after ``SIGTERM`` before it sends ``SIGKILL`` to the group
    STOP_WAIT_S = 1.0

    def __init__(
        self, worker_urls: Sequence[str], *, lifetime_s: int = 120, extra: Sequence[str] = FAST_SMG
    ) -> None:
        if shutil.which("smg") is None:
            raise RuntimeError(
                "the `smg` command is missing; install the test extra: pip install -e '.[test]'"
            )
        self.worker_urls = list(worker_urls)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = smg_launch_args(
            self.worker_urls, port=self.port, prometheus_port=free_port(), extra=tuple(extra)
        )
        self.lifetime_s = lifetime_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self, timeout_s: float = 30.0) -> Gateway:
        cmd = list(self.args)
        if shutil.which("timeout"):  # self-stopping even if this process dies first
            cmd = ["timeout", "-s", "KILL", str(self.lifetime_s), *cmd]
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"smg exited with {self._proc.returncode}: {self.log()[-2000:]}")
                if self.healthy_workers() >= len(self.worker_urls):
                    return self
                time.sleep(0.1)
            raise RuntimeError(f"smg did not register {len(self.worker_urls)} workers within {timeout_s} s")
        except BaseException:
            self.stop()  # a failed start leaves nothing running either
            raise

    def healthy_workers(self) -> int:
        try:
            body = httpx.get(f"{self.url}/workers", timeout=1.0).json()
        except (httpx.HTTPError, ValueError):
            return 0
        return sum(bool(w.get("is_healthy")) for w in body.get("workers", []))

    def log(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    @property
    def pgid(self) -> int | None:
        """The process group of smg and its ``timeout`` wrapper (None once stopped)."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Stop every process of the gateway's group: ``SIGTERM``, a bounded wait, then ``SIGKILL``."""
        if self._proc is not None:
            stop_group(self._proc.pid, self.STOP_WAIT_S)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(10)
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
