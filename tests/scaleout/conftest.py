"""Fixtures of the scale-out tests (loopback only; see scaleout_support)."""

from __future__ import annotations

import pytest
from scaleout_support import Gateway, MotoS3, start_workers


@pytest.fixture
def workers():
    """Three fake SGLang workers on loopback."""
    servers = start_workers(3)
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def gateway(workers):
    with Gateway([w.url for w in workers]) as gw:
        yield gw


@pytest.fixture(scope="session")
def s3():
    """moto S3 on loopback, one per session (fsspec caches a filesystem per set of options, so the
    endpoint must not change); the standard AWS variables point this process at it. Tests use their own
    prefixes."""
    with MotoS3() as server, server.environ():
        yield server
