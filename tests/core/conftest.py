"""Fixtures shared by the core tests: an archive of distinct screenshots."""

from __future__ import annotations

import pytest

from causalcache_memory.archive import LocalArchive


@pytest.fixture
def archive(tmp_path, make_png):
    """A local archive holding 40 distinct PNGs; their hashes in ``archive.shots``."""
    archive = LocalArchive(tmp_path / "a")
    archive.shots = [archive.put(make_png((i * 5 % 256, i, 0))).sha256 for i in range(40)]
    return archive
