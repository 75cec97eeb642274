"""A dict-backed screenshot archive with the read side of the archive protocol (tests only).

No image validation and no persistence: tests that exercise the real archive use ``LocalArchive`` or
``FsspecArchive("memory://...")``; this one keeps runtime and adapter tests independent of them.
"""

from __future__ import annotations

import hashlib
import io

from causalcache_memory.archive.base import StoredImage
from causalcache_memory.archive.images import validate_image_bytes
from causalcache_memory.errors import BlobNotFoundError


class DictArchive:
    """In-memory archive keyed by sha256 (``put``, ``get_bytes``, ``open_image``, ``in``)."""

    def __init__(self, url: str = "memory://dict-archive") -> None:
        self.url = url
        self.blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> StoredImage:
        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return StoredImage.of(digest, validate_image_bytes(data), len(data))

    def get_bytes(self, sha256: str) -> bytes:
        if sha256 not in self.blobs:
            raise BlobNotFoundError(f"{sha256} is not in {self.url}")
        return self.blobs[sha256]

    def open_image(self, sha256: str):
        from PIL import Image

        return Image.open(io.BytesIO(self.get_bytes(sha256)))

    def __contains__(self, sha256: object) -> bool:
        return sha256 in self.blobs
