"""A write-through local cache in front of a shared archive (an object store such as S3).

Every agent step uploads its new screenshot once and reads the ``B + 1`` screenshots of each prompt it
renders (twice when pass 2 fires) plus the selector's inputs; against an object store each read is a
round trip. :class:`CachedArchive` keeps a local copy of what this worker wrote or read, so reads of
recent screenshots never leave the machine, while writes keep the shared archive's guarantees:

* ``put``/``put_record`` return only after the **shared** archive's own ``put`` returned, so a hash in a
  trace is a durable blob in the shared archive, exactly as without the cache (nothing is deferred or
  batched). The local copy is written after that.
* a local copy is re-hashed on every read; a corrupt or torn copy is deleted and the shared archive is
  read instead, so the cache can serve stale-free bytes only (content addressing: a hash names one
  content forever).
* screen text (``put_text``) is written to the shared archive only; ``get_text`` keeps a local copy of
  a text it read (re-checked on every read like a blob), so the selector's reads of recent screens'
  text stay on the machine too. A blob with no text is asked of the shared archive each time. (A text
  is replaced only when damaged, or when its blob was collected and stored again with other text.)
* retention, ``gc``, listings and existence checks always go to the shared archive: the cache never
  decides what is durable or live.

The local copies are bounded by ``max_bytes`` (oldest-read first out); files are written to a temporary
name and renamed, so concurrent processes may share one cache directory.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._keys import check_hash, digest, is_hash
from causalcache_memory.archive._text_memo import ABSENT, TextMemo
from causalcache_memory.archive._texts import decode_text, encode_sidecar, text_is_intact
from causalcache_memory.archive.images import open_image_bytes, to_bytes

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.archive.base import GCReport, ScreenshotArchive, StoredImage

__all__ = ["CachedArchive"]


class CachedArchive:
    """Write-through cache of ``inner`` in ``cache_dir`` (see the module docstring for the guarantees).

    Args:
        inner: the shared archive (any :class:`~causalcache_memory.archive.base.ScreenshotArchive`).
        cache_dir: local directory for the copies (created if missing).
        max_bytes: bound of the local copies; the least recently used are deleted past it.
    """

    def __init__(self, inner: ScreenshotArchive, cache_dir: str | Path, *, max_bytes: int = 2 << 30) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes={max_bytes!r} must be >= 0")
        self.inner = inner
        self.url = inner.url  # the identity of the data is the shared archive's
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = int(max_bytes)
        self.max_pixels = getattr(inner, "max_pixels", None)
        self.formats = getattr(inner, "formats", None)
        self._lock = threading.Lock()
        self._sizes: OrderedDict[Path, int] = OrderedDict()  # copies this process knows, LRU order
        self._total = 0
        self._text_memo = TextMemo()
        self.hits = 0
        self.misses = 0

    def child(self, relpath: str) -> CachedArchive:
        """The namespaced archive of the shared one, cached under ``cache_dir/relpath`` (:mod:`.namespaces`)."""
        return CachedArchive(self.inner.child(relpath), self.cache_dir / relpath, max_bytes=self.max_bytes)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"CachedArchive({self.inner!r}, cache_dir={str(self.cache_dir)!r})"

    def __getattr__(self, name: str) -> Any:  # listings, gc helpers, size_bytes, ...: the shared archive
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ------------------------------------------------------------------ local copies
    def _local(self, kind: str, sha: str) -> Path:
        return self.cache_dir / kind / sha[:2] / sha

    def _keep(self, kind: str, sha: str, raw: bytes) -> None:
        if len(raw) > self.max_bytes:
            return
        path = self._local(kind, sha)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{sha}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(raw)
            os.replace(tmp, path)
        self._touch(path, len(raw))

    def _touch(self, path: Path, size: int) -> None:
        with self._lock:
            if path in self._sizes:
                self._sizes.move_to_end(path)
                return
            self._sizes[path] = size
            self._total += size
            while self._total > self.max_bytes and self._sizes:
                old, old_size = self._sizes.popitem(last=False)
                self._total -= old_size
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()

    def _cached(self, kind: str, sha: str) -> bytes | None:
        path = self._local(kind, sha)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        intact = text_is_intact(raw) if kind == "texts" else digest(raw) == sha
        if not intact:  # torn or corrupt copy: drop it, the shared archive decides
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return None
        self._touch(path, len(raw))
        return raw

    # ------------------------------------------------------------------ blobs and records
    def put(self, data: bytes | Image.Image) -> StoredImage:
        """Store in the shared archive (returns when it returned), then keep a local copy."""
        raw = to_bytes(data)
        stored = self.inner.put(raw)
        self._keep("blobs", stored.sha256, raw)
        return stored

    def put_record(self, data: bytes) -> str:
        sha = self.inner.put_record(data)
        self._keep("records", sha, bytes(data))
        return sha

    def get_bytes(self, sha256: str) -> bytes:
        return self._get("blobs", check_hash(sha256), self.inner.get_bytes)

    def put_text(self, sha256: str, text: str) -> None:
        """Store in the shared archive (its rules: the first intact text of a blob stays)."""
        self.inner.put_text(sha256, text)
        self._text_memo.forget(sha256)

    def get_text(self, sha256: str) -> str | None:
        """The blob's text: remembered in memory (:mod:`~causalcache_memory.archive._text_memo`), else
        the local copy when there is an intact one, else the shared archive's."""
        if not is_hash(sha256):
            return None
        known = self._text_memo.get(sha256)
        if known is not ABSENT:
            self.hits += 1
            return known  # type: ignore[return-value]
        raw = self._cached("texts", sha256)
        if raw is not None:
            self.hits += 1
            text: str | None = decode_text(
                raw, sha256, url=self.url, location=str(self._local("texts", sha256))
            )
        else:
            self.misses += 1
            text = self.inner.get_text(sha256)
            if text is not None:
                self._keep("texts", sha256, encode_sidecar(sha256, text))
        self._text_memo.put(sha256, text)
        return text

    def get_record(self, sha256: str) -> bytes:
        return self._get("records", check_hash(sha256), self.inner.get_record)

    def _get(self, kind: str, sha: str, fetch: Any) -> bytes:
        raw = self._cached(kind, sha)
        if raw is not None:
            self.hits += 1
            return raw
        self.misses += 1
        raw = fetch(sha)  # verified by the shared archive
        self._keep(kind, sha, raw)
        return raw

    def open_image(self, sha256: str) -> Image.Image:
        raw = self.get_bytes(sha256)
        if self.max_pixels is None or self.formats is None:
            return self.inner.open_image(sha256)
        return open_image_bytes(raw, max_pixels=self.max_pixels, formats=self.formats)

    def __contains__(self, sha256: object) -> bool:
        return sha256 in self.inner

    # ------------------------------------------------------------------ retention: the shared archive only
    def retain(self, episode_id: str, hashes: Iterable[str], *, require_stored: bool = False) -> None:
        self.inner.retain(episode_id, hashes, require_stored=require_stored)

    def release(self, episode_id: str) -> None:
        self.inner.release(episode_id)

    def iter_hashes(self) -> Iterator[str]:
        return self.inner.iter_hashes()

    def live_episodes(self) -> list[str]:
        return self.inner.live_episodes()

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        return self.inner.gc(grace_seconds=grace_seconds, dry_run=dry_run)
