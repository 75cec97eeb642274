"""Content-addressed screenshot archive (local directory and fsspec backends)."""

from .base import GCReport, ScreenshotArchive
from .factory import open_archive
from .local import LocalArchive
from .remote import FsspecArchive
from .thumbs import ThumbnailCache

__all__ = ["FsspecArchive", "GCReport", "LocalArchive", "ScreenshotArchive", "ThumbnailCache", "open_archive"]
