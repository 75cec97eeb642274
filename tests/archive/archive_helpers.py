"""Helpers shared by the archive tests (blob paths, corruption)."""

from __future__ import annotations

from pathlib import Path

from causalcache_memory.archive import FsspecArchive, LocalArchive


def blob_file(archive: object, sha: str) -> str:
    """Backend path of a stored blob (for corruption tests)."""
    rel = f"blobs/{sha[:2]}/{sha}"
    if isinstance(archive, LocalArchive):
        return str(archive.root / rel)
    assert isinstance(archive, FsspecArchive)
    return f"{archive.root}/{rel}"


def corrupt(archive: object, sha: str) -> None:
    """Flip one byte in the middle of a stored blob."""
    path = blob_file(archive, sha)
    if isinstance(archive, LocalArchive):
        raw = bytearray(Path(path).read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        Path(path).write_bytes(bytes(raw))
    else:
        raw = bytearray(archive.fs.cat_file(path))  # type: ignore[attr-defined]
        raw[len(raw) // 2] ^= 0xFF
        archive.fs.pipe_file(path, bytes(raw))  # type: ignore[attr-defined]
