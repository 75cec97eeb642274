"""Content-addressed screenshot archive (local directory and fsspec backends)."""

from .base import GCReport, ScreenshotArchive

__all__ = ["GCReport", "ScreenshotArchive"]
