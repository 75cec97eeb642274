"""Fixtures of the fault-injection suite: archives on every backend, a deterministic screenshot maker."""

from __future__ import annotations

import uuid

import pytest

from causalcache_memory.archive import FsspecArchive, LocalArchive


@pytest.fixture
def memory_url():
    import fsspec

    url = f"memory://causalcache-reliability/{uuid.uuid4().hex}"
    yield url
    fs = fsspec.filesystem("memory")
    path = url.removeprefix("memory:/")
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture(params=["local", "memory", "local-fsspec"])
def any_archive(request, tmp_path, memory_url):
    """One archive per backend: LocalArchive, FsspecArchive on memory:// (atomic PUT) and on local://."""
    if request.param == "local":
        return LocalArchive(tmp_path / "archive")
    if request.param == "memory":
        return FsspecArchive(memory_url)
    return FsspecArchive(f"local://{tmp_path}/archive")


@pytest.fixture(scope="session")
def s3():
    """moto's S3 server on loopback (a thread of this process), one per session; tests name it through
    ``s3.options`` (explicit endpoint) and use their own prefixes. Subprocesses get ``s3.env``."""
    from moto_s3 import MotoS3

    with MotoS3() as server:
        yield server


@pytest.fixture
def s3_url(s3):
    return f"s3://{s3.bucket}/{uuid.uuid4().hex}"
