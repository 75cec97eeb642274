"""Retention of :class:`~causalcache_memory.archive.remote.FsspecArchive`: one empty object per reference.

``refs/<episode>/<sha256>`` marker objects need no lock and no read-modify-write across processes; beside
them, ``refs/<episode>/head.<sha>`` claims of :mod:`causalcache_memory.trace.owner`. Every listing or
existence check here goes to the storage itself (``_ls_names``, ``_exists_fresh``), never to fsspec's
listing cache: each decides liveness or deletion for some collector.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from causalcache_memory.archive._keys import (
    REFS,
    blob_relpath,
    check_claim_name,
    check_episode_id,
    check_hashes,
    is_hash,
    not_stored,
    record_relpath,
)
from causalcache_memory.archive._remote_gc import info_mtime
from causalcache_memory.errors import BlobNotFoundError

__all__ = ["FsspecRetention"]


class FsspecRetention:
    """``retain``/``release``/``claim``/``live_episodes``/``references`` of the fsspec archive (a mixin)."""

    _fs: Any
    url: str
    atomic_put: bool
    _path: Any
    _io: Any
    _write: Any
    _ls_names: Any
    _exists_fresh: Any
    _wait_for_collectors: Any
    _refresh: Any

    def retain(self, episode_id: str, hashes: Iterable[str], *, require_stored: bool = False) -> None:
        """Record that ``episode_id`` references ``hashes`` (all validated before anything is written).

        Waits out a ``gc`` deciding on a stored object; one such a ``gc`` deleted meanwhile raises
        :class:`BlobNotFoundError` (put it again).

        ``require_stored=True`` also raises :class:`BlobNotFoundError` for a hash that is not stored when
        ``retain`` checks (never put, or collected because ``retain`` came later than ``grace_seconds``
        after its ``put``); the references are written either way. A normal return then means every
        object is stored and kept while the episode references it (docs/RELIABILITY.md, Theorem 2).
        """
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        wanted = check_hashes(hashes)
        with self._io(f"cannot record references of episode {episode_id!r}"):
            if not self.atomic_put:
                self._fs.makedirs(folder, exist_ok=True)
            present = {}
            for sha in wanted:  # always written: a cached "exists" may predate another process's release
                self._fs.pipe_file(f"{folder}/{sha}", b"")
                present[sha] = self._object_rel(sha)
            for sha, rel in present.items():
                if rel is None:
                    if require_stored:
                        raise BlobNotFoundError(not_stored(sha, episode_id))
                    continue
                self._wait_for_collectors(sha)
                if not self._exists_fresh(self._path(rel)):
                    raise BlobNotFoundError(
                        f"object {sha} was collected by a concurrent gc while episode {episode_id!r} "
                        "retained it; put it again"
                    )

    def _object_rel(self, sha: str) -> str | None:
        for rel in (blob_relpath(sha), record_relpath(sha)):
            if self._exists_fresh(self._path(rel)):
                return rel
        return None

    def claim(self, episode_id: str, name: str, data: bytes, *, exclusive: bool = True) -> bytes | None:
        """Write the claim ``refs/<episode>/<name>``; ``exclusive``: only if absent (S3 ``If-None-Match``).

        Returns None when written, else the bytes of the claim already there. An exclusive write needs a
        store that honours conditional creation (``pipe_file(mode="create")``: AWS S3, moto,
        ``memory://``, local files; check an S3-compatible store before relying on it)."""
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        path = f"{folder}/{check_claim_name(name)}"
        if not exclusive:
            if not self.atomic_put:
                with self._io(f"cannot write claim {name} of episode {episode_id!r}"):
                    self._fs.makedirs(folder, exist_ok=True)
            self._write(path, data, f"cannot write claim {name} of episode {episode_id!r}")
            return None
        with self._io(f"cannot write claim {name} of episode {episode_id!r}"):
            if not self.atomic_put:
                self._fs.makedirs(folder, exist_ok=True)
            try:
                self._fs.pipe_file(path, data, mode="create")
            except FileExistsError:
                return self.read_claim(episode_id, name)
        return None

    def read_claim(self, episode_id: str, name: str) -> bytes | None:
        """The bytes of the claim ``refs/<episode>/<name>`` as stored now, None if there is none."""
        path = self._path(f"{REFS}/{check_episode_id(episode_id)}/{check_claim_name(name)}")
        with self._io(f"cannot read claim {name} of episode {episode_id!r}"):
            self._fs.invalidate_cache(path)
            try:
                return bytes(self._fs.cat_file(path))
            except FileNotFoundError:
                return None

    def release(self, episode_id: str) -> None:
        """Forget every reference of ``episode_id``: removes its marker objects one by one (no recursion
        through links)."""
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        with self._io(f"cannot release episode {episode_id!r}"):
            for name in self._ls_names(folder, files_only=True):
                with contextlib.suppress(FileNotFoundError):
                    self._fs.rm_file(f"{folder}/{name}")
            with contextlib.suppress(OSError):
                if not self.atomic_put and self._exists_fresh(folder) and not self._ls_names(folder):
                    self._fs.rmdir(folder)

    def live_episodes(self) -> list[str]:
        episodes = []
        with self._io("cannot list episodes"):
            for name in self._ls_names(self._path(REFS)):
                if self.references(name):
                    episodes.append(name)
        return sorted(episodes)

    def references(self, episode_id: str) -> set[str]:
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        with self._io(f"cannot list references of episode {episode_id!r}"):
            return {n for n in self._ls_names(folder, files_only=True) if is_hash(n)}

    def _episode_mtime(self, episode_id: str) -> float | None:
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        with self._io(f"cannot list references of episode {episode_id!r}"):
            self._fs.invalidate_cache(folder)
            try:
                entries = self._fs.ls(folder, detail=True, **self._refresh)
            except FileNotFoundError:
                return None
        stamps = [info_mtime(e) for e in entries if e.get("type", "file") == "file"]
        known = [s for s in stamps if s is not None]
        return max(known) if known else None
