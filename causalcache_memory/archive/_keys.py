"""Validation of archive keys (content hashes, episode ids) and the shared storage layout.

Layout, identical for every backend (relative to the archive root)::

    blobs/<sha256[:2]>/<sha256>    original image bytes, addressed by their sha256
    records/<sha256[:2]>/<sha256>  small JSON records (trace chain nodes), addressed by their sha256
    refs/<episode_id>/<sha256>     empty marker: the episode references the blob or record (retention)
    tmp/                           temporary files of in-flight writes (local backend only)

Keys are validated before any filesystem call, so a hostile id such as ``../x`` can never name a path
outside the archive.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from causalcache_memory.errors import ArchiveKeyError, BlobCorruptError

__all__ = [
    "BLOBS",
    "RECORDS",
    "REFS",
    "TMP",
    "blob_relpath",
    "check_episode_id",
    "check_hash",
    "check_hashes",
    "check_record_bytes",
    "digest",
    "is_hash",
    "record_relpath",
]

BLOBS, RECORDS, REFS, TMP = "blobs", "records", "refs", "tmp"
_HASH = re.compile(r"^[0-9a-f]{64}$")
_EPISODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def digest(data: bytes) -> str:
    """sha256 hex digest: the content address."""
    return hashlib.sha256(data).hexdigest()


def is_hash(value: object) -> bool:
    return isinstance(value, str) and _HASH.fullmatch(value) is not None


def check_hash(value: object) -> str:
    """Return ``value`` if it is a sha256 hex digest (64 lower-case hex characters)."""
    if not is_hash(value):
        raise ArchiveKeyError(
            f"sha256={value!r} is not a content hash (64 lower-case hex characters); "
            "use the value returned by ScreenshotArchive.put()"
        )
    return value  # type: ignore[return-value]


def check_hashes(values: Iterable[str]) -> list[str]:
    if isinstance(values, str):
        raise ArchiveKeyError(
            f"hashes must be an iterable of sha256 strings, got the single string {values!r}"
        )
    return [check_hash(v) for v in values]


def check_episode_id(value: object) -> str:
    """Return ``value`` if it is a safe episode id (no path separators, not ``.``/``..``)."""
    if not isinstance(value, str) or value in (".", "..") or _EPISODE.fullmatch(value) is None:
        raise ArchiveKeyError(
            f"episode_id={value!r} is not a valid archive episode id: use 1-128 characters from "
            "[A-Za-z0-9._-], starting with a letter or digit (no '/', '\\' or '..')"
        )
    return value


def blob_relpath(sha256: str) -> str:
    return f"{BLOBS}/{sha256[:2]}/{sha256}"


def record_relpath(sha256: str) -> str:
    return f"{RECORDS}/{sha256[:2]}/{sha256}"


def check_record_bytes(data: object) -> bytes:
    """Return ``data`` as bytes if it is a bytes-like record payload."""
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if not isinstance(data, bytes):
        raise ArchiveKeyError(
            f"record data must be bytes (for example json.dumps(...).encode()), got {type(data).__name__}"
        )
    return data


def verified(raw: bytes, sha256: str, *, kind: str, url: str, location: str) -> bytes:
    """``raw`` if it hashes to ``sha256``; else :class:`BlobCorruptError` (never wrong bytes or pixels)."""
    actual = digest(raw)
    if actual != sha256:
        fix = f"delete {location} and store the screenshot again" if kind == "blob" else f"delete {location}"
        raise BlobCorruptError(
            f"{kind} {sha256} in archive {url} is corrupt: its bytes hash to {actual}; {fix}"
        )
    return raw
