"""Issue 27, finding 2: a frozen S3 endpoint makes archive calls fail with a named error at their deadline.

The endpoint is moto's S3 server in a process of its own, stopped with SIGSTOP: connections are still
accepted by the kernel, no reply ever comes. Before the fix ``put`` waited forever (no deadline reached
s3fs/botocore). Each call runs on a daemon thread here, so a regression fails instead of hanging.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest
from moto_s3 import MotoS3Process
from reliability_helpers import screenshot

from causalcache_memory.archive import FsspecArchive
from causalcache_memory.errors import ArchiveTimeoutError, ArchiveUnavailableError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")

TIMEOUT_S = 1.0
SLACK_S = 4.0  # scheduling noise on a loaded machine; a hang is unbounded


@pytest.fixture
def frozen():
    with MotoS3Process() as server:
        yield server


def _outcome(call) -> tuple[BaseException | None, float, bool]:
    result: list[BaseException | None] = []
    start = time.monotonic()

    def run() -> None:
        try:
            call()
            result.append(None)
        except BaseException as exc:  # inspected below
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(TIMEOUT_S + SLACK_S)
    return (result[0] if result else None), time.monotonic() - start, not worker.is_alive()


def test_put_to_a_frozen_endpoint_fails_with_a_named_error_within_its_deadline(frozen):
    url = f"s3://{frozen.bucket}/frozen"
    # set-up without the deadline under test (a loaded machine may take over 1 s for a first put)
    FsspecArchive(url, timeout_s=60.0, **frozen.options).put(screenshot(1))  # the endpoint works ...
    archive = FsspecArchive(url, timeout_s=TIMEOUT_S, **frozen.options)
    frozen.freeze()  # ... then stops answering
    for call in (
        lambda: archive.put(screenshot(2)),
        lambda: archive.get_bytes("0" * 64),
        lambda: archive.gc(grace_seconds=0),
    ):
        error, elapsed, returned = _outcome(call)
        assert returned, f"still blocked after {elapsed:.1f} s"
        assert isinstance(error, ArchiveTimeoutError), error
        assert isinstance(error, ArchiveUnavailableError) and isinstance(error, TimeoutError)
        assert "timeout_s=1.0" in str(error) and "frozen" in str(error)


def test_timeout_must_be_positive():
    with pytest.raises(Exception, match=r"timeout_s=0 must be a number of seconds > 0"):
        FsspecArchive("memory://deadline", timeout_s=0)


def test_config_timeout_reaches_the_archive(tmp_path):
    from causalcache_memory.config.models import ArchiveConfig
    from causalcache_memory.factory import build_archive

    archive = build_archive(ArchiveConfig(url="memory://deadline-config", timeout_s=7.5))
    assert isinstance(archive, FsspecArchive) and archive.timeout_s == 7.5
    assert build_archive(ArchiveConfig(url=str(tmp_path / "local"), timeout_s=7.5)).put(screenshot(3))
