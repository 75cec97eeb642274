"""Symlink-safe directory access for :class:`~causalcache_memory.archive.local.LocalArchive`.

Directories are opened with ``O_NOFOLLOW | O_DIRECTORY`` and entries listed and removed relative to the
open descriptor, so a folder swapped for a symbolic link is never followed (where the platform lacks
``dir_fd`` support, a ``lstat`` check stands in). A symlink where the archive expects its own folder
raises :class:`~causalcache_memory.errors.ArchiveLayoutError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from causalcache_memory.errors import ArchiveLayoutError

__all__ = [
    "NOFOLLOW",
    "fsync_dir",
    "is_regular",
    "list_dir",
    "lstat_at",
    "names",
    "open_dir",
    "refuse_symlink",
    "unlink_at",
]

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FD = os.unlink in os.supports_dir_fd and NOFOLLOW != 0


def refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise ArchiveLayoutError(
            f"{path} is a symbolic link; the archive never follows links inside its root. Remove the "
            f"link (to keep data on another disk, open the archive at a directory on that disk)"
        )


@contextlib.contextmanager
def open_dir(path: Path) -> Iterator[int | None]:
    """A descriptor of directory ``path`` opened without following a symlink (None where unsupported)."""
    if not _DIR_FD:
        refuse_symlink(path)
        yield None
        return
    try:
        fd = os.open(path, os.O_RDONLY | _DIRECTORY | NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
            refuse_symlink(path)
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def lstat_at(path: Path, name: str, fd: int | None) -> os.stat_result:
    return os.stat(name, dir_fd=fd, follow_symlinks=False) if fd is not None else (path / name).lstat()


def names(path: Path, fd: int | None) -> list[str]:
    """Names of the regular files in the open directory ``fd`` (symlinks and folders skipped)."""
    out = []
    for name in os.listdir(fd if fd is not None else path):
        try:
            st = lstat_at(path, name, fd)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.append(name)
    return out


def list_dir(path: Path) -> list[str]:
    """Regular files in ``path`` (none if it is missing); a symlinked ``path`` raises."""
    try:
        with open_dir(path) as fd:
            return names(path, fd)
    except FileNotFoundError:
        return []


def unlink_at(path: Path, name: str, fd: int | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        if fd is not None:
            os.unlink(name, dir_fd=fd)
        else:
            (path / name).unlink()


def is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def fsync_dir(path: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
