"""Retention of :class:`~causalcache_memory.archive.local.LocalArchive`: one empty marker per reference.

``refs/<episode>/<sha256>`` markers need no lock and no read-modify-write across processes; the folder
of an episode is never followed through a symbolic link.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from causalcache_memory.archive._keys import (
    REFS,
    TMP,
    check_claim_name,
    check_episode_id,
    check_hashes,
    is_hash,
    not_stored,
    os_error,
    record_relpath,
    temp_name,
)
from causalcache_memory.archive._localfs import (
    NOFOLLOW,
    fsync_dir,
    is_regular,
    list_dir,
    names,
    open_dir,
    refuse_symlink,
    unlink_at,
)
from causalcache_memory.errors import ArchiveLayoutError, BlobNotFoundError

__all__ = ["LocalRetention"]


class LocalRetention:
    """``retain``/``release``/``live_episodes``/``references`` of the local archive (a mixin)."""

    root: Path
    url: str
    # provided by the archive class this mixin is part of (LocalArchive and its collection mixin)
    _blob: Callable[[str], Path]
    _wait_for_collectors: Callable[[str], None]

    def _object_path(self, sha: str) -> Path | None:
        for path in (self._blob(sha), self.root / record_relpath(sha)):
            if is_regular(path):
                return path
        return None

    def retain(self, episode_id: str, hashes: Iterable[str], *, require_stored: bool = False) -> None:
        """Record that ``episode_id`` references ``hashes`` (all validated before anything is written).

        Objects already stored get a fresh mtime, and ``retain`` waits out a ``gc`` deciding on them;
        an object such a ``gc`` deleted meanwhile raises :class:`BlobNotFoundError` (put it again).

        ``require_stored=True`` also raises :class:`BlobNotFoundError` for a hash that is not stored when
        ``retain`` checks (never put, or collected because ``retain`` came later than ``grace_seconds``
        after its ``put``); the references are written either way. A normal return then means every
        object is stored and kept while the episode references it (docs/RELIABILITY.md, Theorem 2).
        """
        folder = self.root / REFS / check_episode_id(episode_id)
        wanted = check_hashes(hashes)
        refuse_symlink(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | NOFOLLOW
            with open_dir(folder) as fd:
                for sha in wanted:
                    os.close(
                        os.open(sha, flags, 0o644, dir_fd=fd)
                        if fd is not None
                        else os.open(folder / sha, flags)
                    )
            for sha in wanted:
                path = self._object_path(sha)
                if path is None:
                    if require_stored:
                        raise BlobNotFoundError(not_stored(sha, episode_id))
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.utime(path, follow_symlinks=False)
                self._wait_for_collectors(sha)
                if not is_regular(path):
                    raise BlobNotFoundError(
                        f"object {sha} was collected by a concurrent gc while episode {episode_id!r} "
                        "retained it; put it again"
                    )
        except OSError as exc:
            raise os_error(exc, f"cannot record references of episode {episode_id!r} under {folder}") from exc

    def claim(
        self, episode_id: str, name: str, data: bytes, *, exclusive: bool = True, sync: bool = True
    ) -> bytes | None:
        """Write the claim ``refs/<episode>/<name>`` (whole, fsynced); ``exclusive``: only if absent.

        Returns None when written, else the bytes of the claim already there (a hard link of a complete
        temporary file creates the name atomically, so no process ever reads a partial claim).
        ``sync=False`` leaves both ``fsync`` calls (the claim's bytes, and the episode folder that makes
        its name survive a power loss) to a later :meth:`sync_claim`; the claim is visible to every
        process at once, whole. A power loss before that sync may leave the name with empty bytes: a
        torn claim, which :mod:`causalcache_memory.trace.owner` takes over (its writer did not survive)."""
        folder = self.root / REFS / check_episode_id(episode_id)
        final = folder / check_claim_name(name)
        refuse_symlink(folder)
        tmp = self.root / TMP / temp_name(name)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb") as fh:
                fh.write(data)
                if sync:
                    fh.flush()
                    os.fsync(fh.fileno())
            if not exclusive:
                os.replace(tmp, final)
            else:
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    return self._read_claim(final)
            if sync:
                fsync_dir(folder)
            return None
        except OSError as exc:
            raise os_error(
                exc, f"cannot write claim {name} of episode {episode_id!r} under {folder}"
            ) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def sync_claim(self, episode_id: str, name: str) -> None:
        """``fsync`` the claim ``refs/<episode>/<name>`` written with ``sync=False`` (its bytes), then its
        episode folder (its name); nothing to do when it is gone (released)."""
        folder = self.root / REFS / check_episode_id(episode_id)
        try:
            fd = os.open(folder / check_claim_name(name), os.O_RDONLY | NOFOLLOW)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise os_error(exc, f"cannot sync claim {name} of episode {episode_id!r} under {folder}") from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            raise os_error(exc, f"cannot sync claim {name} of episode {episode_id!r} under {folder}") from exc
        finally:
            os.close(fd)
        self.sync_references(episode_id)

    def sync_references(self, episode_id: str) -> None:
        """``fsync`` the folder of ``episode_id``'s references and claims (names created in it survive a
        power loss); nothing to do when it is missing."""
        folder = self.root / REFS / check_episode_id(episode_id)
        try:
            fsync_dir(folder)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise os_error(exc, f"cannot sync references of episode {episode_id!r} under {folder}") from exc

    def read_claim(self, episode_id: str, name: str) -> bytes | None:
        """The bytes of the claim ``refs/<episode>/<name>``, None if there is none."""
        path = self.root / REFS / check_episode_id(episode_id) / check_claim_name(name)
        try:
            return self._read_claim(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise os_error(exc, f"cannot read claim {name} of episode {episode_id!r}") from exc

    @staticmethod
    def _read_claim(path: Path) -> bytes:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def release(self, episode_id: str) -> None:
        """Forget every reference of ``episode_id`` (its blobs become collectable). Never follows links."""
        folder = self.root / REFS / check_episode_id(episode_id)
        try:
            if not folder.is_symlink() and not folder.is_dir():
                return
            with open_dir(folder) as fd:
                for name in names(folder, fd):
                    unlink_at(folder, name, fd)
            with contextlib.suppress(OSError):  # a concurrent retain may have added a marker: keep it
                folder.rmdir()
        except ArchiveLayoutError:
            raise
        except OSError as exc:
            raise os_error(exc, f"cannot release episode {episode_id!r} under {folder}") from exc

    def live_episodes(self) -> list[str]:
        """Episodes with a folder of references (symlinked folders are not episodes)."""
        try:
            return sorted(e.name for e in os.scandir(self.root / REFS) if e.is_dir(follow_symlinks=False))
        except OSError as exc:
            raise os_error(exc, f"cannot list episodes of archive {self.url}") from exc

    def references(self, episode_id: str) -> set[str]:
        """Hashes retained by ``episode_id``."""
        folder = self.root / REFS / check_episode_id(episode_id)
        return {name for name in list_dir(folder) if is_hash(name)}

    def _episode_mtime(self, episode_id: str) -> float | None:
        folder = self.root / REFS / check_episode_id(episode_id)
        try:
            st = folder.lstat()
        except FileNotFoundError:
            return None
        return st.st_mtime if stat.S_ISDIR(st.st_mode) else None

    def _referenced(self) -> set[str]:
        refs: set[str] = set()
        for episode in self.live_episodes():
            refs |= self.references(episode)
        return refs
