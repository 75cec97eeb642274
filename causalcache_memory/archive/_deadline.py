"""A wall-clock deadline on every call the fsspec archive makes to its storage.

A storage endpoint that accepts connections and never answers (a frozen server, a black-holed route)
would otherwise hold ``put`` forever: botocore's own timeouts restart with each retry, and other fsspec
backends have none. :class:`BoundedFS` wraps a filesystem so that each method call either returns or
raises :class:`~causalcache_memory.errors.ArchiveTimeoutError` within ``timeout_s`` (plus scheduling
noise):

* methods of an async filesystem (s3fs, gcsfs, adlfs, http) run on fsspec's event loop under fsspec's
  own ``timeout=``, which cancels the request's coroutine at the deadline;
* any other method runs on a daemon thread that the caller stops waiting for at the deadline (the
  thread ends when the storage answers or its own timeouts fire; it never keeps the interpreter alive).

Attributes that are not methods (``protocol``, ``store`` ...) and private names pass through unchanged.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from causalcache_memory.errors import ArchiveTimeoutError

__all__ = ["DEFAULT_TIMEOUT_S", "BoundedFS", "storage_timeouts"]

#: default deadline of one storage call of an fsspec archive (``archive.timeout_s`` in the config)
DEFAULT_TIMEOUT_S = 60.0

_NO_DEADLINE = frozenset({"invalidate_cache", "split_path", "unstrip_protocol", "open"})


def storage_timeouts(protocols: tuple[str, ...], timeout_s: float | None, options: dict[str, Any]) -> None:
    """Give an S3 client connect/read timeouts of ``timeout_s`` unless ``options`` already set them."""
    if timeout_s is None or not {"s3", "s3a"} & set(protocols):
        return
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("connect_timeout", timeout_s)
    config.setdefault("read_timeout", timeout_s)
    options["config_kwargs"] = config


class BoundedFS:
    """``fs`` whose public method calls end within ``timeout_s`` seconds (None: no deadline)."""

    def __init__(self, fs: Any, timeout_s: float | None, url: str) -> None:
        self._fs = fs
        self._timeout_s = timeout_s
        self._url = url

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._fs, name)
        if self._timeout_s is None or name.startswith("_") or name in _NO_DEADLINE or not callable(attr):
            return attr
        if inspect.iscoroutinefunction(getattr(attr, "__wrapped__", None)):
            return lambda *args, **kwargs: self._on_loop(name, attr, args, kwargs)
        return lambda *args, **kwargs: self._on_thread(name, attr, args, kwargs)

    def _expired(self, name: str) -> ArchiveTimeoutError:
        return ArchiveTimeoutError(
            f"storage call {name}() of archive {self._url} did not answer within timeout_s={self._timeout_s} "
            "s; check that the storage endpoint is up and reachable, or raise archive.timeout_s"
        )

    def _on_loop(self, name: str, method: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        try:
            return method(*args, timeout=self._timeout_s, **kwargs)
        except TimeoutError as exc:  # fsspec's FSTimeoutError (an asyncio.TimeoutError)
            raise self._expired(name) from exc

    def _on_thread(self, name: str, method: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        outcome: list[Any] = []
        done = threading.Event()

        def call() -> None:
            try:
                outcome.append((True, method(*args, **kwargs)))
            except BaseException as exc:  # handed to the caller below
                outcome.append((False, exc))
            finally:
                done.set()

        threading.Thread(target=call, name=f"causalcache-archive-{name}", daemon=True).start()
        if not done.wait(self._timeout_s):
            raise self._expired(name)
        ok, value = outcome[0]
        if ok:
            return value
        raise value
