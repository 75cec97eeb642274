"""Fixtures for the synthetic-world tests: an in-memory archive (fast) and small task sets."""

from __future__ import annotations

import hashlib
import io

import pytest

from causalcache_lab.world import generate_tasks
from causalcache_memory.archive.base import StoredImage
from causalcache_memory.archive.images import validate_image_bytes


class MemoryArchive:
    """Dict-backed stand-in for a screenshot archive (put/get_bytes/open_image/contains), for tests."""

    url = "memory://world-tests"

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> StoredImage:
        sha = hashlib.sha256(data).hexdigest()
        self.blobs[sha] = bytes(data)
        return StoredImage.of(sha, validate_image_bytes(data), len(data))

    def get_bytes(self, sha256: str) -> bytes:
        return self.blobs[sha256]

    def open_image(self, sha256: str):
        from PIL import Image

        return Image.open(io.BytesIO(self.blobs[sha256]))

    def __contains__(self, sha256: object) -> bool:
        return sha256 in self.blobs


@pytest.fixture
def archive() -> MemoryArchive:
    return MemoryArchive()


@pytest.fixture(scope="session")
def mixed_tasks():
    return generate_tasks(60, seed=3, platform="mixed")
