"""Integrity check and repair of an archive (``causalcache archive check [--repair]``).

``check_archive`` re-hashes every blob, record and screen text, lists references to objects that are not
stored, symbolic links inside the archive (never followed) and temporary files. With ``repair=True`` it
deletes damaged objects (the next ``put`` of the same bytes, or ``put_text`` of the text, stores them
afresh; until then a read raises ``BlobNotFoundError`` instead of ``BlobCorruptError``, and ``get_text``
returns None) and removes temporary files of writers that no longer run. It never deletes an intact object: retention is ``release`` + ``gc``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from causalcache_memory.errors import BlobCorruptError, BlobNotFoundError

__all__ = ["CheckReport", "check_archive"]


@dataclass(frozen=True)
class CheckReport:
    """Result of :func:`check_archive`.

    Attributes:
        objects: blobs and records read and re-hashed.
        corrupt: ``(kind, sha256)`` of objects whose bytes do not hash to their name.
        repaired: damaged objects deleted (``repair=True``).
        dangling: ``(episode, sha256)`` references to objects that are not stored (corrupt ones are
            listed under ``corrupt``).
        layout: symbolic links found inside the archive (never followed).
        temp_files: temporary files left after the check (in-flight or of crashed writers).
        temp_removed: temporary files of dead writers removed (``repair=True``).
    """

    objects: int
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    repaired: int = 0
    dangling: list[tuple[str, str]] = field(default_factory=list)
    layout: list[str] = field(default_factory=list)
    temp_files: int = 0
    temp_removed: int = 0

    @property
    def ok(self) -> bool:
        """No damaged object remains and nothing unexpected lives in the archive."""
        return len(self.corrupt) == self.repaired and not self.layout

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "objects": self.objects,
            "corrupt": [f"{k} {s}" for k, s in self.corrupt],
            "repaired": self.repaired,
            "dangling": [f"{e} {s}" for e, s in self.dangling],
            "layout": self.layout,
            "temp_files": self.temp_files,
            "temp_removed": self.temp_removed,
        }


def check_archive(archive: Any, *, repair: bool = False) -> CheckReport:
    """Verify every object of a :class:`LocalArchive` or :class:`FsspecArchive` (see module doc)."""
    corrupt: list[tuple[str, str]] = []
    stored: set[str] = set()
    count = 0
    for kind, hashes, read in (
        ("blob", archive.iter_hashes(), archive.get_bytes),
        ("record", archive.iter_records(), archive.get_record),
        ("text", archive.iter_texts(), archive.get_text),
    ):
        for sha in list(hashes):
            count += 1
            try:
                read(sha)
                if kind != "text":  # a text does not make its blob stored
                    stored.add(sha)
            except BlobCorruptError:
                corrupt.append((kind, sha))
            except BlobNotFoundError:
                continue  # collected while we listed
    repaired = 0
    if repair:
        for kind, sha in corrupt:
            archive._discard(kind, sha)
            repaired += 1
    dangling = [
        (episode, sha)
        for episode in archive.live_episodes()
        for sha in sorted(archive.references(episode))
        if sha not in stored and sha not in {c for _, c in corrupt}
    ]
    removed = archive._sweep_tmp(None) if repair else 0
    return CheckReport(
        objects=count,
        corrupt=corrupt,
        repaired=repaired,
        dangling=dangling,
        layout=archive._layout_problems(),
        temp_files=archive._temp_files(),
        temp_removed=removed,
    )
