"""The screenshot archive protocol: content-addressed cold storage, separate from the active prompt.

Every screenshot of an episode is archived once, addressed by the sha256 of its original bytes, and only
the hash travels in traces, graph state and checkpoints. Pixels are resolved from the archive only when
a prompt is built for a model call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.archive.images import ImageInfo

__all__ = ["GCReport", "ScreenshotArchive", "StoredImage"]


@dataclass(frozen=True, slots=True)
class StoredImage:
    """What :meth:`ScreenshotArchive.put` returns: the content hash and what the header said.

    The archive validates the header of every image it stores; returning what it read lets callers
    record the screen's size without opening the image again.
    """

    sha256: str
    """sha256 hex digest of the stored (original) bytes: the address in the archive."""
    format: str
    """Container format read from the header: ``"PNG"``, ``"JPEG"`` or ``"WEBP"``."""
    width: int
    """Width in pixels, from the header."""
    height: int
    """Height in pixels, from the header."""
    nbytes: int
    """Length of the stored bytes."""

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)``."""
        return self.width, self.height

    @classmethod
    def of(cls, sha256: str, info: ImageInfo, nbytes: int) -> StoredImage:
        """From a hash and the :class:`~causalcache_memory.archive.images.ImageInfo` validation returned."""
        return cls(sha256, info.format, info.width, info.height, nbytes)


@dataclass(frozen=True, slots=True)
class GCReport:
    """Result of :meth:`ScreenshotArchive.gc`."""

    kept: int
    deleted: int
    bytes_freed: int
    skipped_recent: int


@runtime_checkable
class ScreenshotArchive(Protocol):
    """Content-addressed screenshot store.

    Contract (tested for every backend in ``tests/archive``):

    * ``put`` stores the original bytes unchanged (no re-encode) after checking they decode as an image
      within the pixel limit; returns a :class:`StoredImage` (the sha256 hex digest with the format,
      pixel size and byte length its header check read). Storing the same bytes twice stores once.
      Writes are atomic: a reader never sees a partial blob.
    * ``get_bytes`` re-hashes what it read and raises ``BlobCorruptError`` on mismatch and
      ``BlobNotFoundError`` when absent: never wrong pixels.
    * ``open_image`` decodes lazily with Pillow's decompression-bomb limit enforced.
    * ``put_record``/``get_record`` store and read small JSON records (trace chain nodes) under their own
      prefix with the same atomicity, de-duplication and integrity check, but no image validation;
      records are not listed by ``iter_hashes`` and ``in`` tests blobs only.
    * ``put_text``/``get_text`` store and read the UTF-8 text of a stored screenshot (accessibility tree
      or OCR), once per blob, addressed by the blob's sha256 (``texts/ab/<sha256>``), re-hashed on read.
      ``put_text`` refuses a blob that is not stored (``BlobNotFoundError``) and text over 256 KiB
      (``ScreenTextError``); the first intact text of a blob stays (a second call only refreshes it).
      ``get_text`` returns None when there is no text, never raises for a missing one. The text lives
      and dies with its blob (``gc`` deletes it with the blob). Rules: :mod:`causalcache_memory.archive._texts`.
    * ``retain``/``release`` record which episodes reference which blobs and records; ``gc`` deletes
      blobs and records no live episode references (blobs younger than ``grace_seconds`` are kept, so a concurrent writer's
      just-stored blob is not collected before its episode records the reference).
    """

    url: str

    def put(self, data: bytes | Image.Image) -> StoredImage: ...

    def get_bytes(self, sha256: str) -> bytes: ...

    def put_record(self, data: bytes) -> str: ...

    def get_record(self, sha256: str) -> bytes: ...

    def put_text(self, sha256: str, text: str) -> None: ...

    def get_text(self, sha256: str) -> str | None: ...

    def open_image(self, sha256: str) -> Image.Image: ...

    def __contains__(self, sha256: object) -> bool: ...

    def iter_hashes(self) -> Iterator[str]: ...

    def retain(self, episode_id: str, hashes: Iterable[str], *, require_stored: bool = False) -> None: ...

    def release(self, episode_id: str) -> None: ...

    def live_episodes(self) -> list[str]: ...

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport: ...
