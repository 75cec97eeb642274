"""Collection and maintenance of :class:`~causalcache_memory.archive.local.LocalArchive`.

``gc`` follows the marker rule of :mod:`causalcache_memory.archive.local`; ``_sweep_tmp`` removes
temporary files of writers that no longer run (and old ones); the ``_discard``/``_layout_problems``/
``_temp_files`` hooks serve :func:`~causalcache_memory.archive.check.check_archive`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from causalcache_memory.archive._gc import run_gc
from causalcache_memory.archive._keys import (
    BLOBS,
    GC,
    RECORDS,
    REFS,
    TMP,
    gc_marker_name,
    os_error,
    record_relpath,
    temp_writer_is_dead,
)
from causalcache_memory.archive._localfs import (
    NOFOLLOW,
    list_dir,
    lstat_at,
    names,
    open_dir,
    refuse_symlink,
    unlink_at,
)
from causalcache_memory.archive._texts import TEXTS, text_relpath
from causalcache_memory.archive.base import GCReport

__all__ = ["TEMP_GRACE_SECONDS", "LocalCollection"]

#: Temporary files younger than this are never collected by age, whatever ``grace_seconds`` says: they
#: may belong to a write in flight. Files of writers that no longer run are removed at once.
TEMP_GRACE_SECONDS = 300.0


class LocalCollection:
    """``gc`` and the maintenance hooks of the local archive (a mixin)."""

    root: Path
    url: str
    # provided by the archive class this mixin is part of (LocalArchive)
    _blob: Callable[[str], Path]
    iter_hashes: Callable[[], Iterator[str]]
    iter_records: Callable[[], Iterator[str]]
    iter_texts: Callable[[], Iterator[str]]

    if TYPE_CHECKING:

        def __contains__(self, sha256: object) -> bool: ...

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        """Delete blobs and records no live episode references, older than ``grace_seconds`` (by mtime).

        Also removes temporary files of writers that no longer run, and any older than
        ``max(grace_seconds, TEMP_GRACE_SECONDS)``. ``dry_run`` reports what would be deleted and deletes
        nothing. Each deletion follows the marker rule of the module docstring.
        """
        for sub in (BLOBS, RECORDS, TEXTS, REFS, TMP, GC):
            refuse_symlink(self.root / sub)
        return run_gc(
            self, grace_seconds=grace_seconds, dry_run=dry_run, temp_grace_seconds=TEMP_GRACE_SECONDS
        )

    def _stored(self) -> list[tuple[str, Path]]:
        """Every blob and record, and every text whose blob is not stored (an orphan); the text of a
        stored blob is no candidate of its own: it is deleted with its blob (:meth:`_collect`)."""
        blobs = list(self.iter_hashes())
        stored = [(sha, self._blob(sha)) for sha in blobs]
        stored += [(sha, self.root / record_relpath(sha)) for sha in self.iter_records()]
        have = set(blobs)
        return stored + [(sha, self._text(sha)) for sha in self.iter_texts() if sha not in have]

    def _text(self, sha: str) -> Path:
        return self.root / text_relpath(sha)

    def _mark(self, sha: str) -> Path:
        """Announce that a collector is deciding on ``sha`` (writers wait while the marker exists)."""
        marker = self.root / GC / gc_marker_name(sha)
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644))
        except OSError as exc:
            raise os_error(exc, f"cannot write gc marker {marker}") from exc
        return marker

    def _unmark(self, marker: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()

    def _collect(self, sha: str, path: Path, grace: float, dry_run: bool) -> tuple[str, int]:
        """Delete one object (marked and still unreferenced) if it is older than ``grace`` now.

        A blob takes its text with it. An orphan text is deleted only if its blob is still absent now
        (a writer may have stored the blob again since the listing)."""
        text = path == self._text(sha)
        if text and sha in self:
            return "kept", 0
        try:
            st = path.lstat()
        except FileNotFoundError:
            return "gone", 0
        if time.time() - st.st_mtime < grace:
            return "recent", 0
        size = st.st_size
        if not text:
            with contextlib.suppress(FileNotFoundError):
                size += self._text(sha).lstat().st_size
        if not dry_run:
            try:
                path.unlink()
            except FileNotFoundError:
                return "gone", 0
            except OSError as exc:
                raise os_error(exc, f"cannot delete {path}") from exc
            if not text:
                self._unlink_quietly(self._text(sha))
        return "deleted", size

    @staticmethod
    def _unlink_quietly(path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise os_error(exc, f"cannot delete {path}") from exc

    def _sweep_tmp(self, cutoff: float | None) -> int:
        """Remove temp files of dead writers on this host, and (``cutoff`` given) any older than it."""
        folder = self.root / TMP
        removed = 0
        with open_dir(folder) as fd:
            for name in names(folder, fd):
                try:
                    st = lstat_at(folder, name, fd)
                except FileNotFoundError:
                    continue
                if temp_writer_is_dead(name) or (cutoff is not None and st.st_mtime < cutoff):
                    unlink_at(folder, name, fd)
                    removed += 1
        return removed

    # ------------------------------------------------------------------ maintenance (causalcache archive check)
    def _discard(self, kind: str, sha: str) -> None:
        """Delete a damaged object so the next ``put`` of its bytes stores it afresh."""
        if kind == "blob":
            path = self._blob(sha)
        else:
            path = self._text(sha) if kind == "text" else self.root / record_relpath(sha)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def _layout_problems(self) -> list[str]:
        """Symlinks (never followed) where the archive keeps its own files and folders."""
        problems = []
        for sub in (BLOBS, RECORDS, TEXTS, REFS, TMP, GC):
            base = self.root / sub
            if base.is_symlink():
                problems.append(f"{base} is a symbolic link")
                continue
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(base):
                    if entry.is_symlink():
                        problems.append(f"{entry.path} is a symbolic link")
                    elif entry.is_dir(follow_symlinks=False) and sub in (BLOBS, RECORDS, TEXTS, REFS):
                        problems += [
                            f"{e.path} is a symbolic link" for e in os.scandir(entry.path) if e.is_symlink()
                        ]
        return problems

    def _temp_files(self) -> int:
        return sum(1 for _ in list_dir(self.root / TMP))
