"""Screen text stored off the decision path: the agent's text as given, else OCR in the background.

:class:`ScreenTextWriter` is what a memory calls at archive time with a stored screenshot's hash and the
text that came with it (or None):

* **text given** (an accessibility-tree dump, the agent's own OCR): ``archive.put_text``. On a
  :class:`~causalcache_memory.archive.deferred.DeferredArchive` that call only queues the write on its
  writer thread, behind the screenshot (a failure is raised by the next ``flush``, like the screenshot's);
  on any other archive it runs on this writer's own thread, and a failure is logged (the text is a cache:
  the selector masks its text features for a screen without text).
* **no text, OCR configured** (``archive.ocr.engine``): the screenshot is read back from the archive and
  OCR runs on this writer's thread ("causalcache-ocr"); a blob that already has text is not read again
  (the archive is the cache, keyed by the blob hash). With ``thread`` given and an engine that reads
  lines, the read is **incremental** (:mod:`~causalcache_memory.archive.ocr_incremental`: only the
  regions that changed since the previous screen of that thread). The lines' boxes stay in memory
  (:meth:`~ScreenTextWriter.get_lines`, relative boxes; the newest ``lines_memo`` screens). The result,
  clipped to the archive's cap, is stored with ``put_text`` as above.
* **neither**: nothing is stored.

**Text on time.** The queue holds at most ``max_pending`` screens and is served **newest first** (the
screen an agent is about to decide on matters most; an older one is read when the worker is idle). When
it is full the *oldest* waiting screen is dropped (counted, logged once): the queue never grows without
bound. :meth:`~ScreenTextWriter.at_decision` (called by the memory at each decision of a thread) counts,
for each screen that became history since the last decision, whether its text was ready (stored),
late (still waiting or being read) or missing (dropped, failed); and whether *every* earlier screen of the
thread had text at that decision. :meth:`~ScreenTextWriter.stats` returns these counts.

**Bounded close.** :meth:`~ScreenTextWriter.close` drops the waiting screens, asks the running read to
stop (the engines check between stages: detection, each recognition batch) and waits at most
``close_timeout_s`` seconds for the worker; a worker still running then is abandoned (a daemon thread:
it never holds the interpreter's exit) and a WARNING names the timeout and the config key.

Nothing here runs on the caller's thread but the hand-over, so the step that archived the screenshot never
waits for OCR, and ``flush`` (which commits wait for) never waits for OCR either: only for the short
``put_text`` it queued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._text_ready import TextClock
from causalcache_memory.archive._texts import MAX_TEXT_BYTES
from causalcache_memory.archive.deferred import DeferredArchive
from causalcache_memory.errors import OcrCancelledError

if TYPE_CHECKING:
    from causalcache_memory.archive.ocr import OcrEngine

__all__ = ["ScreenTextWriter", "clip_text"]

_log = logging.getLogger("causalcache_memory.archive.text_writer")


def _cpu_seconds() -> float:
    """CPU seconds of this thread plus those of finished child processes (tesseract runs as one)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def clip_text(text: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 at a character boundary."""
    body = text.encode("utf-8", errors="replace")
    if len(body) <= limit:
        return text
    return body[:limit].decode("utf-8", errors="ignore")


class ScreenTextWriter:
    """Stores each screenshot's text off the decision path (see the module docstring).

    Args:
        engine: the OCR engine (:func:`~causalcache_memory.archive.ocr.build_ocr`), None for no OCR. An
            engine with only ``read(bytes) -> str`` works too (no lines, no incremental reads).
        max_pending: screenshots waiting for OCR at most (the oldest is dropped beyond).
        close_timeout_s: how long :meth:`close` waits for a running read (``archive.ocr.close_timeout_s``).
        incremental: read only the changed regions of a thread's next screen.
        full_share: incremental reads fall back to a full read above this changed share of the screen.
        lines_memo: screens whose line boxes :meth:`get_lines` keeps.
    """

    def __init__(
        self,
        engine: OcrEngine | None = None,
        *,
        max_pending: int = 32,
        close_timeout_s: float = 10.0,
        incremental: bool = True,
        full_share: float = 0.5,
        lines_memo: int = 4096,
    ) -> None:
        self.engine = engine
        self.max_pending = int(max_pending)
        self.close_timeout_s = float(close_timeout_s)
        self.incremental = bool(incremental)
        self.full_share = float(full_share)
        self.lines_memo = int(lines_memo)
        self._cond = threading.Condition()
        self._stores: deque[tuple[Any, str, str]] = deque()
        self._jobs: OrderedDict[tuple[int, str], tuple[Any, str, str | None]] = OrderedDict()
        self._busy = False
        self._worker: threading.Thread | None = None
        self._cancel = threading.Event()
        self._closed = False
        self._generation = 0  # a close starts a new one: a worker of an older one stops
        self._reader: Any = None
        self._reader_engine: Any = None
        self._lines: OrderedDict[str, list[tuple[str, tuple[float, float, float, float]]]] = OrderedDict()
        self.warned: set[str] = set()  # kinds of warning logged already (once per writer)
        self.counts = {
            "given": 0,
            "ocr": 0,
            "cached": 0,
            "dropped": 0,
            "failed": 0,
            "cancelled": 0,
            "full_reads": 0,
            "incremental_reads": 0,
            "decisions": 0,
            "decisions_text_ready": 0,
            "screens_ready": 0,
            "screens_late": 0,
            "screens_missing": 0,
            "close_timeouts": 0,
        }
        self._clock = TextClock(self.counts)  # text statuses and ready/late/missing at decisions
        self.ocr_seconds = 0.0
        self.ocr_cpu_seconds = 0.0
        #: the newest reads: ``{"sha256", "thread", "full", "read_share", "wall_s", "cpu_s"}`` each
        self.reads: deque[dict[str, Any]] = deque(maxlen=1024)

    @classmethod
    def from_config(cls, config: Any) -> ScreenTextWriter:
        """From an :class:`~causalcache_memory.config.OcrConfig` (a missing engine raises at once)."""
        from causalcache_memory.archive.ocr import build_ocr

        return cls(
            build_ocr(config),
            max_pending=getattr(config, "max_pending", 32),
            close_timeout_s=getattr(config, "close_timeout_s", 10.0),
            incremental=getattr(config, "incremental", True),
            full_share=getattr(config, "full_read_share", 0.5),
        )

    # ------------------------------------------------------------------ hand-over (caller's thread)
    def submit(self, archive: Any, sha256: str, text: str | None, *, thread: str | None = None) -> None:
        """Store ``text`` (or OCR of the screenshot when ``text`` is None) for blob ``sha256``.

        ``thread``: the agent thread (episode id) the screen belongs to: its screens are read
        incrementally and counted by :meth:`at_decision`. Returns at once. ``text`` that the archive
        refuses (not a str, over the cap) raises here; the caller names the field it came from."""
        if text is not None:
            self._bump("given")
            self._note(sha256, "given", thread)
            if isinstance(archive, DeferredArchive):
                archive.put_text(sha256, text)  # queued behind the screenshot; checked now
            else:
                from causalcache_memory.archive._texts import encode_sidecar

                encode_sidecar(sha256, text)  # refuse bad text now, on the caller's thread
                with self._cond:
                    self._reopen()
                    self._stores.append((archive, sha256, text))
                    self._start()
                    self._cond.notify_all()
            return
        if self.engine is None:
            return
        key = (id(archive), sha256)
        dropped = None
        with self._cond:
            self._reopen()
            if thread is not None:
                self._clock.screen(thread, sha256)
            if key in self._jobs or self._clock.status.get(sha256) == "running":
                return
            if len(self._jobs) >= self.max_pending:
                _, (_, dropped, _) = self._jobs.popitem(last=False)  # the oldest waiting screen
                self._clock.set(dropped, "dropped")
            self._jobs[key] = (archive, sha256, thread)
            self._clock.set(sha256, "pending")
            self._start()
            self._cond.notify_all()
        if dropped is not None:
            self._bump("dropped")
            self._warn_once(
                "dropped",
                f"OCR is {self.max_pending} screenshots behind (archive.ocr.max_pending={self.max_pending}); "
                "the oldest waiting screenshots are dropped and get no text (newest first). Send "
                "screen_text from the agent, raise archive.ocr.threads, or accept masked text features",
            )

    def at_decision(self, thread: str) -> bool:
        """Count, at a decision of ``thread``, whether the texts of its earlier screens were ready.

        Each screen of the thread but the newest (the one being decided on) is judged once, at the
        first decision after it arrived: ready, late or missing (see the module docstring). Returns
        whether every earlier screen of the thread (its newest 256) had its text at this decision."""
        with self._cond:
            return self._clock.decision(thread)

    def get_lines(self, sha256: str) -> list[tuple[str, tuple[float, float, float, float]]] | None:
        """The lines OCR read on screen ``sha256`` with their boxes relative to the screen (x0, y0, x1,
        y1 in [0, 1]), as the selector's label lookup reads them; None when this writer did not read it."""
        with self._cond:
            found = self._lines.get(sha256)
            return None if found is None else list(found)

    def stats(self) -> dict[str, Any]:
        """Counts of this writer (see the module docstring) and OCR time (wall and CPU, seconds)."""
        with self._cond:
            out: dict[str, Any] = dict(self.counts)
            out["waiting"] = len(self._jobs)
        out["ocr_seconds"] = round(self.ocr_seconds, 3)
        out["ocr_cpu_seconds"] = round(self.ocr_cpu_seconds, 3)
        judged = out["screens_ready"] + out["screens_late"] + out["screens_missing"]
        out["ready_share"] = None if not judged else round(out["screens_ready"] / judged, 4)
        return out

    # ------------------------------------------------------------------ bookkeeping (lock held)
    def _note(self, sha256: str, status: str, thread: str | None) -> None:
        with self._cond:
            self._clock.set(sha256, status)
            if thread is not None:
                self._clock.screen(thread, sha256)

    def _bump(self, kind: str, seconds: float = 0.0, cpu: float = 0.0) -> None:
        with self._cond:
            self.counts[kind] += 1
            self.ocr_seconds += seconds
            self.ocr_cpu_seconds += cpu

    def _reopen(self) -> None:
        """After :meth:`close`, a new hand-over starts a new generation (steps restart the worker)."""
        if self._closed:
            self._closed = False
            self._cancel = threading.Event()
            self._worker = None

    def _start(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(
                target=self._work, args=(self._generation, self._cancel), name="causalcache-ocr", daemon=True
            )
            self._worker.start()

    # ------------------------------------------------------------------ the worker
    def _work(self, generation: int, cancel: threading.Event) -> None:
        while True:
            with self._cond:
                while self._generation == generation and not self._stores and not self._jobs:
                    self._busy = False
                    self._cond.notify_all()
                    self._cond.wait()
                if self._generation != generation:  # closed meanwhile: an abandoned worker just ends
                    return
                self._busy = True
                if self._stores:
                    job: tuple[Any, ...] = ("store", *self._stores.popleft())
                else:
                    _, (archive, sha, thread) = self._jobs.popitem(last=True)  # newest first
                    self._clock.set(sha, "running")
                    job = ("ocr", archive, sha, thread)
            if job[0] == "store":
                self._store(job[1], job[2], job[3])
            else:
                self._ocr(job[1], job[2], job[3], cancel)

    def _store(self, archive: Any, sha256: str, text: str) -> None:
        try:
            archive.put_text(sha256, text)
        except Exception as exc:
            self._failed(sha256, exc)

    def _read(self, image: bytes, thread: str | None, cancel: threading.Event) -> tuple[str, Any]:
        """``(text, ReadResult | None)`` of ``image`` with the engine (incrementally when it can)."""
        engine = self.engine
        assert engine is not None
        if not callable(getattr(engine, "read_lines", None)):
            return engine.read(image), None
        from causalcache_memory.archive.ocr import decode_rgb, join_lines
        from causalcache_memory.archive.ocr_incremental import IncrementalReader

        if self._reader is None or self._reader_engine is not engine:
            self._reader = IncrementalReader(engine, full_share=self.full_share)
            self._reader_engine = engine
        result = self._reader.read(decode_rgb(image), thread if self.incremental else None, cancel=cancel)
        return join_lines(result.lines), result

    def _ocr(self, archive: Any, sha256: str, thread: str | None, cancel: threading.Event) -> None:
        status = "failed"
        try:
            if archive.get_text(sha256) is not None:
                self._bump("cached")
                status = "cached"
                return
            image = archive.get_bytes(sha256)
            start, cpu = time.perf_counter(), _cpu_seconds()
            text, result = self._read(image, thread, cancel)
            if cancel.is_set():  # closed while reading: an abandoned read stores nothing
                raise OcrCancelledError("OCR read finished after its writer was closed")
            wall, used = time.perf_counter() - start, _cpu_seconds() - cpu
            self._bump("ocr", wall, used)
            full = result.full if result is not None else True
            share = result.read_share if result is not None else 1.0
            with self._cond:
                self.reads.append(
                    {
                        "sha256": sha256,
                        "thread": thread,
                        "full": full,
                        "read_share": round(share, 4),
                        "wall_s": round(wall, 4),
                        "cpu_s": round(used, 4),
                    }
                )
            if result is not None:
                self._bump("full_reads" if result.full else "incremental_reads")
                with self._cond:
                    self._lines[sha256] = result.relative_lines()
                    while len(self._lines) > self.lines_memo:
                        self._lines.popitem(last=False)
            archive.put_text(sha256, clip_text(text))
            status = "ocr"
        except OcrCancelledError:
            self._bump("cancelled")
            status = "cancelled"
        except Exception as exc:
            self._failed(sha256, exc)
        finally:
            with self._cond:
                self._clock.set(sha256, status)

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

    # ------------------------------------------------------------------ waiting and closing
    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job handed over so far has run (True), or ``timeout`` seconds passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._stores or self._jobs or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, *, wait: bool = True, timeout: float | None = None) -> bool:
        """Stop the worker: waiting screenshots get no text, the running read is asked to stop, and
        the worker is waited for at most ``timeout`` seconds (default ``close_timeout_s``); True when it
        stopped in time. A worker still running then is abandoned (a daemon thread) and a WARNING is
        logged. ``wait=False`` (a finalizer's close) waits for nothing. Idempotent; a later ``submit``
        stores nothing."""
        limit = self.close_timeout_s if timeout is None else float(timeout)
        with self._cond:
            self._closed = True
            self._generation += 1
            self._busy = False
            for _, sha, _ in self._jobs.values():
                self._clock.set(sha, "dropped")
            self._jobs.clear()
            self._stores.clear()
            self._cancel.set()
            self._cond.notify_all()
            worker = self._worker
        if worker is None or not worker.is_alive() or not wait:
            return worker is None or not worker.is_alive()
        start = time.monotonic()
        worker.join(limit)
        if worker.is_alive():
            with self._cond:
                self.counts["close_timeouts"] += 1
            _log.warning(
                "screen-text writer closed after %.1f s with an OCR read still running "
                "(archive.ocr.close_timeout_s=%s): the read is abandoned on its daemon thread and its "
                "screen gets no text",
                time.monotonic() - start,
                limit,
            )
            return False
        return True
