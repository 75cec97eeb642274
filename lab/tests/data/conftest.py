"""Fixtures of the dataset loader tests: a local archive per test."""

from __future__ import annotations

import pytest


@pytest.fixture
def archive(tmp_path):
    from causalcache_memory.archive import open_archive

    return open_archive(tmp_path / "archive")
