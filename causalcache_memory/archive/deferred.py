"""Screenshot writes that overlap the model call, behind a barrier that commits wait for.

:class:`DeferredArchive` wraps an archive that splits ``put`` into a check and a store
(:class:`~causalcache_memory.archive.local.LocalArchive`: ``check_image`` / ``store_image``). Its
``put`` checks the screenshot's format, header, pixel count and structure and hashes it on the caller's
thread (an image that fails these is refused there, as by any ``put``), keeps the bytes in memory and
hands the PNG chunk CRCs and the full pixel decode (:func:`~causalcache_memory.archive.images.check_pixels`,
the costly part of validation) and the durable write (temporary file, ``fsync``, atomic rename,
directory ``fsync``) to one background thread. A screenshot whose pixel data does not decode is never
written: its :class:`~causalcache_memory.errors.ImageRejectedError` is raised by the next :meth:`flush`,
so the step that took it fails before anything that references it is committed. Until the write lands,
reads of that hash are served from the kept bytes (they were hashed, so they are the blob), so the step
goes on to render the prompt and call the model while the disk works.

The guarantee (docs/RELIABILITY.md, "Screenshot writes overlap the model call"): nothing that references
a screenshot is committed before the screenshot is durable. :meth:`DeferredArchive.flush` returns once
every write handed over so far is durable (re-raising the first failure); the memory calls it before a
checkpoint is persisted (its checkpointer waits on it) and, with any other checkpointer, before a node
returns.

Trace-chain records (:meth:`put_record`), their retention markers (:meth:`retain`) and the ``fsync``
calls of a trace-owner claim (:meth:`claim`: its bytes, then its folder) go through the same single
writer thread, in the order they were
handed over, behind the same barrier: a record is reachable only through a checkpoint, and the checkpoint
waits for :meth:`flush`. Each runs the inner archive's own call unchanged (so every guarantee of
``put_record``/``retain`` holds once :meth:`flush` returns), and its failure is raised by that flush. A
record's hash is computed on the caller's thread and its bytes kept for reads until it lands. The claim
itself (the exclusive create of a complete claim file, which decides between two processes) is made
on the caller's thread: a conflict is raised by the commit, as without this view. A power loss before
the flush may leave a claim whose bytes never reached the disk (a torn claim); a claim matters only for
the head a checkpoint names, and :mod:`causalcache_memory.trace.owner` takes a torn claim over.

Screen text (:meth:`DeferredArchive.put_text`) is checked (type, size cap) on the caller's thread and
stored by the inner archive's ``put_text`` on the same writer thread, after the screenshot it belongs to
(so its blob is there); until it lands, :meth:`get_text` serves the kept text. A failure is raised by
the next :meth:`flush`, like any write.

While a write is in flight, :meth:`DeferredArchive.blob_stamp` is ``("kept", sha256)``: a wire
encoding built from the kept bytes is cached under it (or, for a screenshot that arrived as a data URL
already in wire form, :class:`~causalcache_memory.render.messages.WireBytes`, that URL itself). When the write lands, the writer thread moves
that encoding to the file's own stamp (:meth:`~causalcache_memory.render.messages.WireCache.restamp`)
or, if no step has encoded the screenshot yet, encodes the kept bytes itself: each screenshot is
base64-encoded once, and the step that sends it never re-reads or re-hashes the file.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._keys import check_episode_id, check_hashes, check_record_bytes, digest
from causalcache_memory.archive._text_memo import ABSENT, TextMemo
from causalcache_memory.archive._texts import encode_sidecar
from causalcache_memory.archive.images import check_pixels, open_image_bytes

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.archive.base import GCReport, StoredImage

__all__ = ["DeferredArchive", "can_defer"]


#: what an archive needs to be wrapped: ``put`` split in two, records, references and claims
_NEEDS = ("check_image", "store_image", "put_record", "retain", "claim", "read_claim", "sync_claim")


def can_defer(archive: object) -> bool:
    """Whether ``archive`` splits ``put`` into ``check_image``/``store_image`` and has the record,
    reference and claim calls of :class:`~causalcache_memory.archive.local.LocalArchive` (then it can
    be wrapped)."""
    return all(callable(getattr(archive, name, None)) for name in _NEEDS)


class DeferredArchive:
    """An archive view whose screenshot writes run on a background thread (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        if not can_defer(inner):
            raise TypeError(f"{type(inner).__name__} lacks one of {', '.join(_NEEDS)}; use it directly")
        self.inner = inner
        self.url = inner.url
        self.max_pixels = getattr(inner, "max_pixels", None)
        self.formats = getattr(inner, "formats", None)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="causalcache-write")
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[bytes, Future[None]]] = {}
        self._records: dict[str, bytes] = {}
        self._texts: dict[str, str] = {}
        self._text_memo = TextMemo()
        self._text_puts = 0  # put_text calls so far: a read that overlapped one is not remembered
        self._tasks: set[Future[None]] = set()
        self._failed: BaseException | None = None

    def __repr__(self) -> str:
        return f"DeferredArchive({self.inner!r})"

    # ------------------------------------------------------------------ writes
    def put(self, data: bytes | Image.Image) -> StoredImage:
        """Check and hash now; decode and write (durably) in the background. See :meth:`flush`."""
        raw, stored = self.inner.check_image(data, decode=False)
        wire = getattr(data, "data_url", None)  # a WireBytes: the user's data URL is the wire form
        with self._lock:
            if stored.sha256 not in self._pending:
                if isinstance(wire, str):
                    from causalcache_memory.render.messages import WIRE_CACHE

                    WIRE_CACHE.put((self.url, stored.sha256, ("kept", stored.sha256)), wire)
                future = self._pool.submit(self._write, raw, stored)
                self._pending[stored.sha256] = (raw, future)
        return stored

    def _write(self, raw: bytes, stored: StoredImage) -> None:
        try:
            with self._noting_failure():
                check_pixels(raw, stored.format, max_pixels=self.inner.max_pixels)
                self.inner.store_image(raw, stored)
                self._encode_for_the_wire(raw, stored.sha256)
        finally:
            with self._lock:
                self._pending.pop(stored.sha256, None)

    @contextlib.contextmanager
    def _noting_failure(self) -> Iterator[None]:
        """Keep the first failure of the writer thread for the next :meth:`flush` to raise."""
        try:
            yield
        except BaseException as exc:
            with self._lock:
                self._failed = self._failed or exc
            raise

    def _encode_for_the_wire(self, raw: bytes, sha: str) -> None:
        """Leave the landed file's wire encoding in the cache, built from the bytes hashed by ``put``.

        Done here, off the step's critical path: the step that renders this screenshot next neither
        re-reads nor re-hashes nor re-encodes it. An encoding the step already made from the kept
        bytes is moved to the file's stamp instead of being made again.
        """
        from causalcache_memory.render.messages import WIRE_CACHE, data_url_of

        landed = self.inner.blob_stamp(sha)
        WIRE_CACHE.restamp(self.url, sha, ("kept", sha), landed)
        if landed is not None and WIRE_CACHE.get((self.url, sha, landed)) is None:
            WIRE_CACHE.put((self.url, sha, landed), data_url_of(raw))

    def _submit(
        self,
        call: Any,
        *args: Any,
        record: tuple[str, bytes] | None = None,
        text: tuple[str, str] | None = None,
    ) -> None:
        """Run ``call(*args)`` on the writer thread (after everything handed over before it)."""

        def run() -> None:
            try:
                with self._noting_failure():
                    call(*args)
            finally:
                with self._lock:
                    self._tasks.discard(future)
                    if record is not None:
                        self._records.pop(record[0], None)
                    if text is not None and self._texts.get(text[0]) is text[1]:
                        del self._texts[text[0]]

        with self._lock:
            if record is not None:
                self._records[record[0]] = record[1]
            if text is not None:
                self._texts.setdefault(text[0], text[1])
                text = (text[0], self._texts[text[0]])
            future = self._pool.submit(run)
            self._tasks.add(future)

    def flush(self) -> None:
        """Return once every write handed over so far (screenshots, records, references, claims'
        syncs) is durable; re-raise the first failure."""
        with self._lock:
            futures = [future for _, future in self._pending.values()] + list(self._tasks)
        wait(futures)
        with self._lock:
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def close(self, *, wait: bool = True) -> None:
        """Finish the writes handed over, then stop the writer thread (idempotent).

        ``wait=False`` (a finalizer's close) returns at once: the writes handed over still run on the
        writer thread, which ends after them (and which the interpreter joins at exit), but this call
        never joins a thread — a finalizer can run inside ``threading``'s own locks, where a join
        deadlocks.
        """
        self._pool.shutdown(wait=wait)

    def put_record(self, data: bytes) -> str:
        """Hash now; store (``inner.put_record``, durably) in the background. See :meth:`flush`."""
        raw = check_record_bytes(data)
        sha = digest(raw)
        self._submit(self.inner.put_record, raw, record=(sha, raw))
        return sha

    def put_text(self, sha256: str, text: str) -> None:
        """Check ``text`` now (``ScreenTextError``); store it (``inner.put_text``) in the background,
        after the screenshot handed over before it. See :meth:`flush`."""
        encode_sidecar(sha256, text)
        with self._lock:
            self._text_puts += 1
        self._submit(self.inner.put_text, sha256, text, text=(sha256, text))
        self._text_memo.forget(sha256)  # read again once it landed (the first text stays)

    def get_text(self, sha256: str) -> str | None:
        """The text in flight for ``sha256`` if any (the first handed over), else the inner archive's
        (remembered in memory: :mod:`~causalcache_memory.archive._text_memo`)."""
        if not isinstance(sha256, str):
            return None
        with self._lock:
            kept, puts = self._texts.get(sha256), self._text_puts
        if kept is not None:
            return kept
        known = self._text_memo.get(sha256)
        if known is not ABSENT:
            return known  # type: ignore[return-value]
        text: str | None = self.inner.get_text(sha256)
        with self._lock:
            if self._text_puts == puts:  # no put_text of ours started meanwhile: what we read is current
                self._text_memo.put(sha256, text)
        return text

    def retain(self, episode_id: str, hashes: Iterable[str]) -> None:
        """References to records still in flight: written in the background, after those records;
        every other reference (a screenshot's included): ``inner.retain`` now, as without this view.

        A screenshot's reference stays synchronous: its marker exists before the screenshot lands (as
        before), and ``retain`` does not touch the landed file's mtime, so the wire encoding the writer
        cached under the file's stamp stays valid.
        """
        episode, wanted = check_episode_id(episode_id), check_hashes(hashes)
        with self._lock:
            later = [sha for sha in wanted if sha in self._records]
        now = [sha for sha in wanted if sha not in later]
        if now:
            self.inner.retain(episode, now)
        if later:
            self._submit(self.inner.retain, episode, later)

    def claim(self, episode_id: str, name: str, data: bytes, *, exclusive: bool = True) -> bytes | None:
        """``inner.claim`` now (the exclusive create decides); its ``fsync`` calls (bytes, then folder) in
        the background (``inner.sync_claim``), before :meth:`flush` returns."""
        existing = self.inner.claim(episode_id, name, data, exclusive=exclusive, sync=False)
        if existing is None:
            self._submit(self.inner.sync_claim, episode_id, name)
        return existing

    def read_claim(self, episode_id: str, name: str) -> bytes | None:
        return self.inner.read_claim(episode_id, name)

    # ------------------------------------------------------------------ reads (kept bytes first)
    def _kept(self, sha256: object) -> bytes | None:
        with self._lock:
            entry = self._pending.get(sha256) if isinstance(sha256, str) else None
        return entry[0] if entry is not None else None

    def get_bytes(self, sha256: str) -> bytes:
        kept = self._kept(sha256)
        return kept if kept is not None else bytes(self.inner.get_bytes(sha256))

    def open_image(self, sha256: str) -> Image.Image:
        kept = self._kept(sha256)
        if kept is None:
            return self.inner.open_image(sha256)
        return open_image_bytes(kept, max_pixels=self.inner.max_pixels, formats=self.inner.formats)

    def blob_stamp(self, sha256: str) -> Any:
        """The inner archive's stamp; ``("kept", sha256)`` while the write is in flight."""
        return ("kept", sha256) if self._kept(sha256) is not None else self.inner.blob_stamp(sha256)

    def __contains__(self, sha256: object) -> bool:
        return self._kept(sha256) is not None or sha256 in self.inner

    def get_record(self, sha256: str) -> bytes:
        with self._lock:
            kept = self._records.get(sha256)
        return kept if kept is not None else bytes(self.inner.get_record(sha256))

    def has_record(self, sha256: object) -> bool:
        with self._lock:
            if isinstance(sha256, str) and sha256 in self._records:
                return True
        return bool(self.inner.has_record(sha256))

    # ------------------------------------------------------------------ the rest: the inner archive
    def iter_hashes(self) -> Iterator[str]:
        self.flush()
        return iter(self.inner.iter_hashes())

    def release(self, episode_id: str) -> None:
        self.inner.release(episode_id)

    def live_episodes(self) -> list[str]:
        return list(self.inner.live_episodes())

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        self.flush()
        return self.inner.gc(grace_seconds=grace_seconds, dry_run=dry_run)
