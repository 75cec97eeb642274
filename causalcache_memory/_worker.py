"""A worker thread owned by one :class:`~causalcache_memory.controller.MemoryController`.

The allocator (the learned selector, or any user allocator) runs on this thread, never on the agent's:

* :meth:`BoundedWorker.call` waits at most ``timeout_s`` for a result and raises
  :class:`WorkerTimeout` past it; the call keeps running on the worker, the caller does not wait for it.
* while an earlier call is still running past its own limit (a hung scorer, a stalled archive read),
  :meth:`BoundedWorker.call` raises :class:`WorkerBusy` at once: one hung allocator costs one time limit,
  then every later step falls back immediately instead of queueing behind it.
* :meth:`BoundedWorker.post` queues a fire-and-forget job (the allocator's ``prepare`` hook) and drops
  it when the worker is stuck or the queue is full, so ``observe``/``record`` never wait on the
  allocator's locks.
* a call that finished after its limit is a :class:`WorkerTimeout` too, even if its result arrived before
  the caller woke up: whether a late result is used must not depend on thread scheduling.
* **Limitation — code that holds the GIL.** The limit is enforced by the *caller's* thread waking up,
  which needs the GIL. An allocator that runs C code without releasing the GIL (a catastrophic regular
  expression, a long ``list.sort`` with a C key, some extension loops) keeps the caller asleep until it
  lets go: the step then takes as long as that call (a 250 ms limit was measured at 4.5-8.3 s), and
  no thread can interrupt it. The step still falls back to Recent-B, and the timeout names the measured
  wait and logs a warning on ``causalcache_memory._worker`` so the overrun is visible. Allocators must
  release the GIL in long native calls (numpy, ONNX Runtime and torch do) or run their work in a
  subprocess; see docs/SELECTOR.md, "Time limits".
* the thread is a daemon: a call that never returns cannot keep the interpreter alive, and
  :meth:`BoundedWorker.close` (called by ``MemoryController.close()``, its context exit and its garbage
  collection) stops an idle worker and abandons a hung one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["BoundedWorker", "WorkerBusy", "WorkerTimeout"]

_STOP = object()
_log = logging.getLogger("causalcache_memory._worker")
#: a wait longer than ``limit + max(_LATE_S, limit / 2)`` means the caller could not wake up (GIL held)
_LATE_S = 0.05


class WorkerTimeout(TimeoutError):
    """The call did not finish within its time limit (it keeps running on the worker)."""


class WorkerBusy(RuntimeError):
    """The worker is still running an earlier call past its time limit."""


def _timeout(label: str, limit_s: float, waited_s: float) -> WorkerTimeout:
    """The timeout of one call; names a wait the caller could not cut short (GIL held) and logs it."""
    message = f"{label} did not finish within {limit_s * 1000:.0f} ms"
    if waited_s > limit_s + max(_LATE_S, limit_s / 2):
        message += (
            f"; the caller got control back only after {waited_s * 1000:.0f} ms because the call held the "
            "GIL (native code that does not release it cannot be interrupted): release the GIL in long "
            "native calls or run the work in a subprocess (docs/SELECTOR.md, 'Time limits')"
        )
        _log.warning("%s", message)
    return WorkerTimeout(message)


class BoundedWorker:
    """One daemon thread running jobs in order (see the module docstring).

    Args:
        name: thread name.
        max_queued: fire-and-forget jobs kept waiting at most; more are dropped.
    """

    def __init__(self, name: str = "causalcache-alloc", *, max_queued: int = 8) -> None:
        self.name = name
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._max_queued = max_queued
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running: tuple[str, float, float | None] | None = None  # (label, started, limit)
        self._closed = False

    # ------------------------------------------------------------------ state
    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stuck(self) -> str | None:
        """The label of a call running past its time limit, else None."""
        running = self._running
        if running is None:
            return None
        label, started, limit = running
        return label if limit is not None and time.monotonic() - started > limit else None

    # ------------------------------------------------------------------ jobs
    def call(self, fn: Callable[..., Any], *args: Any, timeout_s: float, label: str = "call") -> Any:
        """``fn(*args)`` on the worker; its result, its exception, or :class:`WorkerTimeout`."""
        busy = self.stuck()
        if busy is not None:
            raise WorkerBusy(f"still running {busy} past its time limit")
        future: Future[Any] = Future()
        start = time.monotonic()
        self._submit((fn, args, future, label, timeout_s))
        try:
            result = future.result(timeout=timeout_s)
        except TimeoutError:
            future.cancel()  # if it has not started yet it never will
            raise _timeout(label, timeout_s, time.monotonic() - start) from None
        finished = getattr(future, "finished_at", start)
        if finished - start > timeout_s:  # late, but the caller only woke up after the result was set
            raise _timeout(label, timeout_s, time.monotonic() - start)
        return result

    def post(
        self, fn: Callable[..., Any], *args: Any, label: str = "job", limit_s: float | None = None
    ) -> bool:
        """Queue ``fn(*args)`` without waiting; False (dropped) when the worker is stuck or full."""
        if self.stuck() is not None or self._jobs.qsize() >= self._max_queued:
            return False
        self._submit((fn, args, None, label, limit_s))
        return True

    def _submit(self, job: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"worker {self.name} is closed")
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._jobs.put(job)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            fn, args, future, label, limit = job
            if future is not None and not future.set_running_or_notify_cancel():
                continue
            self._running = (label, time.monotonic(), limit)
            try:
                result = fn(*args)
            except BaseException as exc:  # delivered to the caller (or dropped for posted jobs)
                if future is not None:
                    future.set_exception(exc)
            else:
                if future is not None:
                    future.finished_at = time.monotonic()
                    future.set_result(result)
            finally:
                self._running = None

    # ------------------------------------------------------------------ lifecycle
    def close(self, join_s: float | None = 0.5) -> bool:
        """Stop the worker; True if its thread ended within ``join_s`` (a hung call is abandoned).

        ``join_s=None`` (a finalizer's close) never joins: a finalizer can run inside ``threading``'s
        own locks, where even ``join(0)`` deadlocks; the thread ends on its own after the stop signal.
        """
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is None:
                return True
            while True:  # queued jobs are not run after close
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not _STOP and job[2] is not None:
                    job[2].cancel()
            self._jobs.put(_STOP)
        if join_s is not None:
            thread.join(join_s)
        return not thread.is_alive()
