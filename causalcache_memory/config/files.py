"""Reading a config file: a regular file in its own folder, at most ``MAX_CONFIG_BYTES`` bytes.

Nothing here prints what it reads: a wrong or planted path (a link to ``~/.aws/credentials``, a FIFO,
``/dev/stdin``) is refused before its bytes are read, so no error can show another file's lines.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from causalcache_memory.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "read_regular_file"]

#: the most bytes a config file may hold (a real config is a few KiB)
MAX_CONFIG_BYTES = 1 << 20


def _real_inside(path: Path) -> Path:
    """``path`` with its links resolved, refused when that leaves the folder holding ``path``."""
    folder = Path(os.path.realpath(path.parent))
    real = Path(os.path.realpath(path))
    if real.parent != folder and folder not in real.parents:
        raise ConfigError(
            f"config file {str(path)!r} is a symbolic link to a file outside its folder; a config is read "
            "from its own folder only, so a link cannot make the loader print another file. Give the real "
            "path of the file (or copy it next to the link)"
        )
    return real


def _refuse_irregular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "not a file"
        raise ConfigError(
            f"config file {str(path)!r} is {kind}; a config is read from a regular file only "
            "(pipes, /dev/stdin and devices are refused so loading cannot block); save it to a file"
        )


def read_regular_file(path: Path, *, follow_links: bool = False) -> bytes:
    """At most ``MAX_CONFIG_BYTES + 1`` bytes of a regular file; anything else is refused unread.

    The file is opened non-blocking (opening a FIFO for reading would otherwise wait for a writer) and
    checked with ``fstat`` on the open descriptor, so a path swapped after a check cannot slip through.
    Without ``follow_links`` the link-resolved path must stay in the folder of ``path`` and is opened
    with ``O_NOFOLLOW`` (a link planted after the check is refused by the kernel).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_links:
        with contextlib.suppress(OSError):  # a pipe or device behind a link is named as such
            _refuse_irregular(path, os.stat(path).st_mode)
        path = _real_inside(path)
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from exc
    try:
        _refuse_irregular(path, os.fstat(fd).st_mode)
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            return fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from exc
    finally:
        if fd >= 0:
            os.close(fd)
