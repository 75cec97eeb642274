"""Validation of archive keys (content hashes, episode ids) and the shared storage layout.

Layout, identical for every backend (relative to the archive root)::

    blobs/<sha256[:2]>/<sha256>    original image bytes, addressed by their sha256
    records/<sha256[:2]>/<sha256>  small JSON records (trace chain nodes), addressed by their sha256
    texts/<sha256[:2]>/<sha256>    screen text of blob <sha256> (``_texts.py``), addressed by the blob's hash
    refs/<episode_id>/<sha256>     empty marker: the episode references the blob or record (retention)
    refs/<episode_id>/head.<sha>   claim of a trace head's successor (``trace/store.py``; ``head.root``)
    tmp/                           temporary files of in-flight writes (rename-based backends)
    gc/<sha256>.<ms>.<uuid>        empty marker: a ``gc`` is deciding whether to delete that object

Keys are validated before any filesystem call, so a hostile id such as ``../x`` can never name a path
outside the archive.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable

from causalcache_memory.errors import (
    ArchiveError,
    ArchiveKeyError,
    ArchivePermissionError,
    ArchiveUnavailableError,
    BlobCorruptError,
)

__all__ = [
    "BLOBS",
    "GC",
    "GC_MARKER_STALE_SECONDS",
    "RECORDS",
    "REFS",
    "TMP",
    "blob_relpath",
    "check_claim_name",
    "check_episode_id",
    "check_hash",
    "check_hashes",
    "check_record_bytes",
    "digest",
    "gc_marker_name",
    "is_hash",
    "marker_is_stale",
    "not_stored",
    "os_error",
    "process_is_dead",
    "process_tag",
    "record_relpath",
    "temp_name",
    "temp_writer_is_dead",
]

BLOBS, RECORDS, REFS, TMP, GC = "blobs", "records", "refs", "tmp", "gc"
#: A ``gc/`` marker older than this belongs to a collector that died; writers stop waiting for it.
GC_MARKER_STALE_SECONDS = 30.0


def host_field(hostname: str) -> str:
    """This host's field in temp-file names: at most 40 of ``[A-Za-z0-9-]`` (a dot would add a field).

    A longer name keeps its first 31 characters plus ``-`` and 8 hex digits of its SHA-256, so two hosts
    whose names share a long prefix (StatefulSet pods ``...-writer-0`` and ``...-writer-1``) never share a
    field and never take each other's in-flight writes for their own dead writers'."""
    safe = re.sub(r"[^A-Za-z0-9-]", "-", hostname) or "host"
    if len(safe) <= 40:
        return safe
    return f"{safe[:31]}-{hashlib.sha256(hostname.encode()).hexdigest()[:8]}"


_HOST = host_field(socket.gethostname())
_HASH = re.compile(r"^[0-9a-f]{64}$")
_CLAIM = re.compile(r"^(head\.([0-9a-f]{64}|root)|take\.[1-9][0-9]{0,8})$")
_EPISODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def digest(data: bytes) -> str:
    """sha256 hex digest: the content address."""
    return hashlib.sha256(data).hexdigest()


def is_hash(value: object) -> bool:
    return isinstance(value, str) and _HASH.fullmatch(value) is not None


def check_hash(value: object) -> str:
    """Return ``value`` if it is a sha256 hex digest (64 lower-case hex characters)."""
    if not is_hash(value):
        raise ArchiveKeyError(
            f"sha256={value!r} is not a content hash (64 lower-case hex characters); "
            "use the value returned by ScreenshotArchive.put()"
        )
    return value  # type: ignore[return-value]


def check_hashes(values: Iterable[str]) -> list[str]:
    if isinstance(values, str):
        raise ArchiveKeyError(
            f"hashes must be an iterable of sha256 strings, got the single string {values!r}"
        )
    return [check_hash(v) for v in values]


def check_episode_id(value: object) -> str:
    """Return ``value`` if it is a safe episode id (no path separators, not ``.``/``..``)."""
    if not isinstance(value, str) or value in (".", "..") or _EPISODE.fullmatch(value) is None:
        raise ArchiveKeyError(
            f"episode_id={value!r} is not a valid archive episode id: use 1-128 characters from "
            "[A-Za-z0-9._-], starting with a letter or digit (no '/', '\\' or '..')"
        )
    return value


def check_claim_name(name: str) -> str:
    """Return ``name`` if it names a trace head claim: ``head.<sha256>`` or ``head.root``."""
    if not isinstance(name, str) or _CLAIM.fullmatch(name) is None:
        raise ArchiveKeyError(f"claim name {name!r} is not head.<sha256> or head.root")
    return name


def not_stored(sha: str, episode_id: str) -> str:
    """Message of ``retain(..., require_stored=True)`` for an object that is not stored."""
    return (
        f"object {sha} is not stored, so episode {episode_id!r} retained a reference only; put it again "
        "(retain within grace_seconds of its put)"
    )


def blob_relpath(sha256: str) -> str:
    return f"{BLOBS}/{sha256[:2]}/{sha256}"


def record_relpath(sha256: str) -> str:
    return f"{RECORDS}/{sha256[:2]}/{sha256}"


def check_record_bytes(data: object) -> bytes:
    """Return ``data`` as bytes if it is a bytes-like record payload."""
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if not isinstance(data, bytes):
        raise ArchiveKeyError(
            f"record data must be bytes (for example json.dumps(...).encode()), got {type(data).__name__}"
        )
    return data


def verified(raw: bytes, sha256: str, *, kind: str, url: str, location: str) -> bytes:
    """``raw`` if it hashes to ``sha256``; else :class:`BlobCorruptError` (never wrong bytes or pixels)."""
    actual = digest(raw)
    if actual != sha256:
        fix = f"delete {location} and store the screenshot again" if kind == "blob" else f"delete {location}"
        raise BlobCorruptError(
            f"{kind} {sha256} in archive {url} is corrupt: its bytes hash to {actual}; {fix}"
        )
    return raw


def gc_marker_name(sha256: str) -> str:
    """A unique ``gc/`` marker name for ``sha256``: ``<sha256>.<epoch ms>.<uuid>``."""
    return f"{sha256}.{int(time.time() * 1000)}.{uuid.uuid4().hex}"


def marker_is_stale(name: str, now: float | None = None) -> bool:
    """True for a ``gc/`` marker written more than :data:`GC_MARKER_STALE_SECONDS` ago (or unparsable)."""
    parts = name.split(".")
    try:
        written = int(parts[1]) / 1000.0
    except (IndexError, ValueError):
        return True
    return (time.time() if now is None else now) - written > GC_MARKER_STALE_SECONDS


def temp_name(final_name: str) -> str:
    """Temporary file name of one write: ``<name>.<host>.<pid>.<thread>.<uuid>.tmp``.

    Host and pid let any later process on the same host recognise the file of a killed writer.
    """
    return f"{final_name}.{_HOST}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex}.tmp"


def temp_writer_is_dead(name: str) -> bool:
    """True when ``name`` is a temporary file of a process on this host that no longer runs."""
    parts = name.split(".")
    if len(parts) != 6 or parts[-1] != "tmp":
        return False
    return process_is_dead(parts[1], parts[2])


def process_tag() -> str:
    """``<host>.<pid>``: names this process for :func:`process_is_dead` in any later process."""
    return f"{_HOST}.{os.getpid()}"


def process_is_dead(host: str, pid_text: str) -> bool:
    """True only when ``host`` is this host and process ``pid_text`` no longer runs (never guesses)."""
    if os.name != "posix" or host != _HOST:
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False  # exists under another user, or cannot tell: keep it
    return False


def os_error(exc: OSError, what: str) -> ArchiveError:
    """The named archive error for an ``OSError`` raised while doing ``what`` (a phrase naming the object)."""
    if isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
    ):
        return ArchivePermissionError(
            f"{what}: permission denied ({exc}); give this process write access to the archive location "
            "or open a different one"
        )
    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):
        return ArchiveUnavailableError(
            f"{what}: the storage cannot be reached ({type(exc).__name__}: {exc}); check the URL, the "
            "network and that the server is running"
        )
    return ArchiveError(f"{what}: {type(exc).__name__}: {exc}")
