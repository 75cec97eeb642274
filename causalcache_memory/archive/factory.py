"""Open an archive from a path or URL: local directory for paths and ``file://``, fsspec otherwise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from causalcache_memory.archive.base import ScreenshotArchive
from causalcache_memory.archive.local import LocalArchive

__all__ = ["open_archive"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def open_archive(
    url_or_path: str | Path, *, cache_dir: str | Path | None = None, **options: Any
) -> ScreenshotArchive:
    """Open a screenshot archive.

    ``"/data/screens"``, ``Path(...)`` or ``"file:///data/screens"`` give a :class:`LocalArchive`
    (atomic rename, fsync); any other URL (``"s3://bucket/screens"``, ``"memory://x"``) gives an
    :class:`~causalcache_memory.archive.remote.FsspecArchive`. ``options`` are ``max_pixels``,
    ``formats`` and, for URLs, ``timeout_s`` (deadline of each storage call) and fsspec storage options
    (``timeout_s`` is ignored for local directories). ``cache_dir`` wraps the archive in a
    :class:`~causalcache_memory.archive.cached.CachedArchive` (write-through local copies; for an
    object-store archive shared by many workers).
    """
    if cache_dir is not None:
        from causalcache_memory.archive.cached import CachedArchive

        return CachedArchive(open_archive(url_or_path, **options), cache_dir)
    text = str(url_or_path)
    if isinstance(url_or_path, Path) or not _SCHEME.match(text) or text.lower().startswith("file://"):
        options.pop("timeout_s", None)  # local disk: no storage calls to bound
    if isinstance(url_or_path, Path):
        return LocalArchive(url_or_path, **options)
    if not _SCHEME.match(text):
        return LocalArchive(text, **options)
    if text.lower().startswith("file://"):
        parsed = urlparse(text)
        local = parsed.path if parsed.netloc in ("", "localhost") else f"//{parsed.netloc}{parsed.path}"
        return LocalArchive(unquote(local), **options)
    from causalcache_memory.archive.remote import FsspecArchive

    return FsspecArchive(text, **options)
