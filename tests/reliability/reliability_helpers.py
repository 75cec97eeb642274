"""Helpers of the fault-injection suite: object paths, ageing and damaging stored objects."""

from __future__ import annotations

import io
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from causalcache_memory.archive import FsspecArchive, LocalArchive


def screenshot(i: int, size: tuple[int, int] = (24, 16)) -> bytes:
    """Deterministic small PNG number ``i`` (same ``i`` -> same bytes in every process)."""
    from PIL import Image

    image = Image.new("RGB", size, (i % 256, (7 * i) % 256, (13 * i) % 256))
    image.putpixel((0, 0), ((i // 256) % 256, (i // 65536) % 256, 1))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def object_path(archive: object, sha: str, kind: str = "blob") -> str:
    rel = f"{'blobs' if kind == 'blob' else 'records'}/{sha[:2]}/{sha}"
    if isinstance(archive, LocalArchive):
        return str(archive.root / rel)
    assert isinstance(archive, FsspecArchive)
    return f"{archive.root}/{rel}"


def age(archive: object, sha: str, seconds: float, kind: str = "blob") -> None:
    """Make a stored object look ``seconds`` old to ``gc``."""
    path = object_path(archive, sha, kind)
    past = time.time() - seconds
    if isinstance(archive, LocalArchive) or archive.fs.protocol[0] in ("file", "local"):  # type: ignore[union-attr]
        os.utime(path, (past, past))
    else:
        entry = archive.fs.store[path]  # type: ignore[union-attr]
        entry.created = datetime.fromtimestamp(past, tz=UTC)
        if hasattr(entry, "modified"):
            entry.modified = entry.created


def write_raw(archive: object, sha: str, data: bytes, kind: str = "blob") -> None:
    """Overwrite a stored object's bytes directly (a torn or damaged object)."""
    path = object_path(archive, sha, kind)
    if isinstance(archive, LocalArchive):
        Path(path).write_bytes(data)
    else:
        archive.fs.pipe_file(path, data)  # type: ignore[union-attr]
