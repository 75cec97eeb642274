"""Archive fixtures: one contract suite parametrized over every backend."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from causalcache_memory.archive import FsspecArchive, LocalArchive


@pytest.fixture
def memory_root():
    """A unique memory:// root, removed afterwards (the memory filesystem is process-global)."""
    import fsspec

    url = f"memory://causalcache-tests/{uuid.uuid4().hex}"
    yield url
    fs = fsspec.filesystem("memory")
    path = url.removeprefix("memory:/")
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture(params=["local", "memory"])
def make_archive(request, tmp_path, memory_root) -> Callable[..., object]:
    """Factory ``make_archive(**options)`` for the parametrized backend (same root on every call)."""

    def factory(**options: object) -> object:
        if request.param == "local":
            return LocalArchive(tmp_path / "archive", **options)  # type: ignore[arg-type]
        return FsspecArchive(memory_root, **options)  # type: ignore[arg-type]

    return factory


@pytest.fixture
def archive(make_archive):
    return make_archive()
