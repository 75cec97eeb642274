"""Screen text stored off the decision path: the agent's text as given, else OCR in the background.

:class:`ScreenTextWriter` is what a memory calls at archive time with a stored screenshot's hash and the
text that came with it (or None):

* **text given** (an accessibility-tree dump, the agent's own OCR): ``archive.put_text``. On a
  :class:`~causalcache_memory.archive.deferred.DeferredArchive` that call only queues the write on its
  writer thread, behind the screenshot (a failure is raised by the next ``flush``, like the screenshot's);
  on any other archive it runs on this writer's own thread, and a failure is logged (the text is a cache:
  the selector masks its text features for a screen without text).
* **no text, OCR configured** (``archive.ocr.engine``): the screenshot is read back from the archive and
  OCR runs on this writer's thread ("causalcache-ocr"), one screenshot at a time; a blob that already
  has text is not read again (the archive is the cache, keyed by the blob hash). At most ``max_pending``
  screenshots wait; newer ones get no text (logged once). The result, clipped to the archive's cap, is
  stored with ``put_text`` as above.
* **neither**: nothing is stored.

Nothing here runs on the caller's thread but the hand-over, so the step that archived the screenshot never
waits for OCR, and ``flush`` (which commits wait for) never waits for OCR either: only for the short
``put_text`` it queued.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._texts import MAX_TEXT_BYTES
from causalcache_memory.archive.deferred import DeferredArchive

if TYPE_CHECKING:
    from causalcache_memory.archive.ocr import OcrEngine

__all__ = ["ScreenTextWriter", "clip_text"]

_log = logging.getLogger("causalcache_memory.archive.text_writer")


def clip_text(text: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 at a character boundary."""
    body = text.encode("utf-8", errors="replace")
    if len(body) <= limit:
        return text
    return body[:limit].decode("utf-8", errors="ignore")


class ScreenTextWriter:
    """Stores each screenshot's text off the decision path (see the module docstring).

    Args:
        engine: the OCR engine (:func:`~causalcache_memory.archive.ocr.build_ocr`), None for no OCR.
        max_pending: screenshots waiting for OCR at most.
    """

    def __init__(self, engine: OcrEngine | None = None, *, max_pending: int = 32) -> None:
        self.engine = engine
        self.max_pending = int(max_pending)
        self._lock = threading.Lock()
        self._counts_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._waiting: set[tuple[int, str]] = set()
        self.warned: set[str] = set()  # kinds of warning logged already (once per writer)
        self.counts = {"given": 0, "ocr": 0, "cached": 0, "dropped": 0, "failed": 0}
        self.ocr_seconds = 0.0

    @classmethod
    def from_config(cls, config: Any) -> ScreenTextWriter:
        """From an :class:`~causalcache_memory.config.OcrConfig` (a missing engine raises at once)."""
        from causalcache_memory.archive.ocr import build_ocr

        return cls(build_ocr(config), max_pending=getattr(config, "max_pending", 32))

    def submit(self, archive: Any, sha256: str, text: str | None) -> None:
        """Store ``text`` (or OCR of the screenshot when ``text`` is None) for blob ``sha256``.

        Returns at once. ``text`` that the archive refuses (not a str, over the cap) raises here, on a
        :class:`DeferredArchive`; the caller names the field it came from."""
        if text is not None:
            self._bump("given")
            if isinstance(archive, DeferredArchive):
                archive.put_text(sha256, text)  # queued behind the screenshot; checked now
            else:
                from causalcache_memory.archive._texts import encode_sidecar

                encode_sidecar(sha256, text)  # refuse bad text now, on the caller's thread
                self._run(self._store, archive, sha256, text)
            return
        if self.engine is None:
            return
        key = (id(archive), sha256)
        with self._lock:
            if key in self._waiting:
                return
            if len(self._waiting) >= self.max_pending:
                self._bump("dropped")
                self._warn_once(
                    "dropped",
                    f"OCR is {len(self._waiting)} screenshots behind (archive.ocr.max_pending="
                    f"{self.max_pending}); screenshots archived meanwhile get no text. Send screen_text "
                    "from the agent, raise archive.ocr.threads, or accept masked text features",
                )
                return
            self._waiting.add(key)
        self._run(self._ocr, archive, sha256)

    def _bump(self, kind: str, seconds: float = 0.0) -> None:
        with self._counts_lock:
            self.counts[kind] += 1
            self.ocr_seconds += seconds

    def _run(self, job: Any, *args: Any) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="causalcache-ocr")
            pool = self._pool
        try:
            pool.submit(job, *args)
        except RuntimeError:  # closed meanwhile
            if len(args) == 2:
                with self._lock:
                    self._waiting.discard((id(args[0]), args[1]))

    def _store(self, archive: Any, sha256: str, text: str) -> None:
        try:
            archive.put_text(sha256, text)
        except Exception as exc:
            self._failed(sha256, exc)

    def _ocr(self, archive: Any, sha256: str) -> None:
        assert self.engine is not None
        try:
            if archive.get_text(sha256) is not None:
                self._bump("cached")
                return
            image = archive.get_bytes(sha256)
            start = time.perf_counter()
            text = clip_text(self.engine.read(image))
            self._bump("ocr", time.perf_counter() - start)
            archive.put_text(sha256, text)
        except Exception as exc:
            self._failed(sha256, exc)
        finally:
            with self._lock:
                self._waiting.discard((id(archive), sha256))

    def _failed(self, sha256: str, exc: BaseException) -> None:
        self._bump("failed")
        self._warn_once(
            type(exc).__name__,
            f"screen text of blob {sha256} was not stored ({type(exc).__name__}: {exc}); the selector "
            "masks its text features for that screen",
        )

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            _log.warning(message)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job handed over so far has run (True), or ``timeout`` seconds passed."""
        with self._lock:
            pool = self._pool
        if pool is None:
            return True
        done = threading.Event()
        try:
            pool.submit(done.set)
        except RuntimeError:
            return True
        return done.wait(timeout)

    def close(self, *, wait: bool = True) -> None:
        """Stop the worker: the job running finishes, screenshots still waiting get no text (idempotent).

        ``wait=False`` (a finalizer's close) does not join the worker thread (see
        :meth:`DeferredArchive.close <causalcache_memory.archive.deferred.DeferredArchive.close>`)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._waiting.clear()
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=True)
