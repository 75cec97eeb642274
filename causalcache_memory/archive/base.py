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

__all__ = ["GCReport", "ScreenshotArchive"]


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
      within the pixel limit; returns the sha256 hex digest. Storing the same bytes twice stores once.
      Writes are atomic: a reader never sees a partial blob.
    * ``get_bytes`` re-hashes what it read and raises ``BlobCorruptError`` on mismatch and
      ``BlobNotFoundError`` when absent: never wrong pixels.
    * ``open_image`` decodes lazily with Pillow's decompression-bomb limit enforced.
    * ``put_record``/``get_record`` store and read small JSON records (trace chain nodes) under their own
      prefix with the same atomicity, de-duplication and integrity check, but no image validation;
      records are not listed by ``iter_hashes`` and ``in`` tests blobs only.
    * ``retain``/``release`` record which episodes reference which blobs and records; ``gc`` deletes
      blobs and records no live episode references (blobs younger than ``grace_seconds`` are kept, so a concurrent writer's
      just-stored blob is not collected before its episode records the reference).
    """

    url: str

    def put(self, data: bytes | Image.Image) -> str: ...

    def get_bytes(self, sha256: str) -> bytes: ...

    def put_record(self, data: bytes) -> str: ...

    def get_record(self, sha256: str) -> bytes: ...

    def open_image(self, sha256: str) -> Image.Image: ...

    def __contains__(self, sha256: object) -> bool: ...

    def iter_hashes(self) -> Iterator[str]: ...

    def retain(self, episode_id: str, hashes: Iterable[str], *, require_stored: bool = False) -> None: ...

    def release(self, episode_id: str) -> None: ...

    def live_episodes(self) -> list[str]: ...

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport: ...
