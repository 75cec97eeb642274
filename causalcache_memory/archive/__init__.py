"""Content-addressed screenshot archive (local directory and fsspec backends)."""

from causalcache_memory.archive.base import GCReport, ScreenshotArchive, StoredImage
from causalcache_memory.archive.check import CheckReport, check_archive
from causalcache_memory.archive.factory import open_archive
from causalcache_memory.archive.local import LocalArchive
from causalcache_memory.archive.remote import FsspecArchive
from causalcache_memory.archive.thumbs import ThumbnailCache

__all__ = [
    "CheckReport",
    "FsspecArchive",
    "GCReport",
    "LocalArchive",
    "ScreenshotArchive",
    "StoredImage",
    "ThumbnailCache",
    "check_archive",
    "open_archive",
]
