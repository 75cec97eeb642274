"""Shared HTTP plumbing of the server runtimes: timeouts, bounded retries, clear errors.

Retry rule: connection errors, timeouts, HTTP 5xx and HTTP 429 are retried up to ``max_retries`` times
with exponential backoff and full jitter (attempt ``a`` sleeps ``U(0.5, 1) * min(max_backoff_s,
backoff_s * 2**a)`` seconds, or the server's numeric ``Retry-After`` when it is smaller than
``max_backoff_s``); any other 4xx is the caller's bug and fails at once.

``timeout_s`` is a deadline for each whole attempt (connect, send, and the complete response), not a
per-read timeout: a server trickling a few bytes at a time cannot hold a call longer. The request runs on
a short-lived daemon thread; past the deadline the caller gets the timeout at once and the thread stops
at its next chunk (or when the read timeout fires). A call therefore ends within ``(max_retries + 1) *
timeout_s`` plus the backoff sleeps. Decoding the JSON body is part of the attempt, so it too ends within
the deadline.

Bodies are bounded: a response larger than ``max_response_bytes`` (announced by ``Content-Length`` or
counted while streaming) is dropped at the cap and raises :class:`PolicyResponseTooLargeError`, never
retried and never buffered past the cap. The body is decoded by :mod:`._json_reply`: non-finite numbers
and JSON nested deeper than ``max_json_depth`` levels raise :class:`PolicyResponseError` (never a NaN
score, never a bare ``RecursionError``). After the last attempt a :class:`PolicyUnavailableError` names
the URL, the number of attempts and the last failure. A response that is not the JSON the caller expects
raises :class:`PolicyResponseError` naming the field and showing a snippet of the body.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from causalcache_memory.actions.parse import Platform

import httpx

from causalcache_memory.errors import (
    ActionParseError,
    PolicyError,
    PolicyResponseError,
    PolicyUnavailableError,
)
from causalcache_memory.runtime._json_reply import decode_json_reply, snippet

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "HttpClient",
    "PolicyRequestRejectedError",
    "PolicyResponseTooLargeError",
    "check_image_limit",
    "get_field",
    "parse_response_action",
    "snippet",
]

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})

#: default cap of one response body (a generation or a prompt's logprobs is a few MB at most)
DEFAULT_MAX_RESPONSE_BYTES = 64 << 20
#: default limit of JSON nesting (a policy server's reply is a few levels deep)
DEFAULT_MAX_JSON_DEPTH = 64


class PolicyRequestRejectedError(PolicyResponseError):
    """The server answered a 4xx (other than 429): the request itself is wrong. Never retried.

    Attributes:
        status_code: the HTTP status.
        body: the response body (text).
        url: the URL that rejected the request.
    """

    def __init__(self, message: str, *, status_code: int, body: str, url: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.url = url


class PolicyResponseTooLargeError(PolicyResponseError):
    """A response body exceeded the client's ``max_response_bytes`` (it was dropped at the cap).

    Attributes:
        url: the URL that answered.
        limit: the cap in bytes.
    """

    def __init__(self, message: str, *, url: str, limit: int) -> None:
        super().__init__(message)
        self.url = url
        self.limit = limit


def get_field(obj: Any, path: str, *, url: str, kind: type | tuple[type, ...] | None = None) -> Any:
    """``obj[a][b]...`` for ``path = "a.b"`` (integers index lists); a missing or mistyped field raises.

    Raises:
        PolicyResponseError: naming ``path``, the URL, and a snippet of ``obj``.
    """
    cur = obj
    for key in path.split("."):
        try:
            cur = cur[int(key)] if key.isdigit() and isinstance(cur, list) else cur[key]
        except (KeyError, IndexError, TypeError):
            raise PolicyResponseError(
                f"response from {url} has no field `{path}`; is this the expected server/API? "
                f"body: {snippet(obj)}"
            ) from None
    if kind is not None and not _is_kind(cur, _as_tuple(kind)):
        names = "/".join(k.__name__ for k in _as_tuple(kind))
        raise PolicyResponseError(
            f"response field `{path}` from {url} should be {names}, got {type(cur).__name__} "
            f"{snippet(cur, 120)}"
        )
    return cur


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _is_kind(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in kinds:  # JSON true is not a number here
        return False
    return isinstance(value, kinds)


class HttpClient:
    """A thread-safe JSON-over-HTTP client with bounded retries.

    Args:
        timeout_s: deadline of one whole attempt in seconds (connect is also capped at 10 s).
        max_retries: retries after the first attempt (``0`` = one attempt only).
        backoff_s: base of the exponential backoff in seconds.
        max_backoff_s: cap of one backoff sleep.
        headers: extra headers on every request (e.g. ``Authorization``).
        sleep: injectable sleep (tests).
        max_response_bytes: cap of one response body in bytes (:class:`PolicyResponseTooLargeError`).
        max_json_depth: deepest JSON nesting accepted in a response body.
    """

    def __init__(
        self,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        max_backoff_s: float = 8.0,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s!r} must be > 0 seconds")
        for name, value in (("max_response_bytes", max_response_bytes), ("max_json_depth", max_json_depth)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        self.max_response_bytes = max_response_bytes
        self.max_json_depth = max_json_depth
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries={max_retries!r} must be an integer >= 0")
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self._sleep = sleep
        self._rng = random.Random()
        timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))
        self._client = httpx.Client(timeout=timeout, headers=dict(headers or {}), transport=transport)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests
    def post_json(self, url: str, payload: Any, *, headers: Mapping[str, str] | None = None) -> Any:
        """POST ``payload`` as JSON and return the decoded JSON body (retrying as documented).

        ``headers`` are added to this request only (e.g. the gateway's routing key).
        """
        return self._request("POST", url, payload, headers)

    def get_json(self, url: str) -> Any:
        return self._request("GET", url, None)

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        if retry_after is not None:
            try:
                hinted = float(retry_after)
            except ValueError:
                hinted = -1.0
            if 0 <= hinted <= self.max_backoff_s:
                return hinted
        return delay * (0.5 + 0.5 * self._rng.random())

    def _request(self, method: str, url: str, payload: Any, headers: Mapping[str, str] | None = None) -> Any:
        attempts = self.max_retries + 1
        last = ""
        for attempt in range(attempts):
            retry_after = None
            try:
                response = self._send(method, url, payload, headers)
            except (httpx.TimeoutException, _DeadlineExceeded) as exc:
                last = f"timed out: no complete response within {self.timeout_s:g} s ({type(exc).__name__.lstrip('_')})"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 400:
                    return response.value
                body = response.text
                if response.status_code not in _RETRY_STATUS:
                    raise PolicyRequestRejectedError(
                        f"{url} rejected the request with HTTP {response.status_code}: {snippet(body)}",
                        status_code=response.status_code,
                        body=body,
                        url=url,
                    )
                last = f"HTTP {response.status_code}: {snippet(body, 200)}"
                retry_after = response.headers.get("retry-after")
            if attempt + 1 < attempts:
                self._sleep(self._backoff(attempt, retry_after))
        raise PolicyUnavailableError(
            f"policy server {url} is unavailable after {attempts} attempt(s) "
            f"(deadline {self.timeout_s:g} s each); last error: {last}. Check that the server is running "
            "and reachable, or raise timeout_s/max_retries."
        )

    def _send(self, method: str, url: str, payload: Any, headers: Mapping[str, str] | None) -> _Reply:
        """One attempt, read and decoded within ``timeout_s`` or :class:`_DeadlineExceeded` (module doc)."""
        deadline = time.monotonic() + self.timeout_s
        box: dict[str, Any] = {}
        cancelled = threading.Event()

        def run() -> None:
            try:
                with self._client.stream(method, url, json=payload, headers=headers) as response:
                    content = self._read_capped(
                        response, url, lambda: cancelled.is_set() or time.monotonic() > deadline
                    )
                    if content is None:
                        return
                    reply = _Reply(
                        response.status_code, response.headers, content, response.encoding or "utf-8"
                    )
                if reply.status_code < 400:
                    reply.value = decode_json_reply(
                        content, url=url, status_code=reply.status_code, max_depth=self.max_json_depth
                    )
                box["reply"] = reply
            except BaseException as exc:  # handed to the caller
                box["error"] = exc

        worker = threading.Thread(target=run, name="causalcache-http", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive() or ("reply" not in box and "error" not in box):
            cancelled.set()
            raise _DeadlineExceeded(f"deadline of {self.timeout_s:g} s passed")
        if "error" in box:
            raise box["error"]
        return box["reply"]

    def _read_capped(self, response: httpx.Response, url: str, stop: Callable[[], bool]) -> bytes | None:
        """The body, at most ``max_response_bytes`` (else :class:`PolicyResponseTooLargeError`); None if stopped."""
        limit = self.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(url, f"announces {int(declared)} bytes")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            if stop():
                return None
            size += len(chunk)
            if size > limit:
                raise self._too_large(url, f"sent more than {limit} bytes (stopped reading there)")
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, url: str, what: str) -> PolicyResponseTooLargeError:
        return PolicyResponseTooLargeError(
            f"the response from {url} {what}, above max_response_bytes={self.max_response_bytes}; "
            "is this the expected server/API? Raise max_response_bytes if such replies are expected",
            url=url,
            limit=self.max_response_bytes,
        )


@dataclass
class _Reply:
    """A complete HTTP response read (and, below HTTP 400, decoded into ``value``) within the deadline."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    encoding: str
    value: Any = None

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, errors="replace")


class _DeadlineExceeded(Exception):
    """The attempt did not complete within ``timeout_s``."""


# ---------------------------------------------------------------------- shared by the HTTP policies
def check_image_limit(prompts: Any, limit: int | None, *, server: str) -> None:
    """Raise before any request when a prompt holds more images than ``limit``.

    Raises:
        PolicyError: naming the prompt position, its image count, the limit and the fixes.
    """
    if limit is None:
        return
    for i, prompt in enumerate(prompts):
        n = len(prompt.images)
        if n > limit:
            raise PolicyError(
                f"prompt {i} has {n} images but max_images_per_prompt={limit} for {server}; "
                f"lower the budget B to at most {limit - 1} history images, or raise the server's "
                "per-prompt image limit and max_images_per_prompt"
            )


def parse_response_action(
    response: str, *, platform: Platform = "auto", screen_size: tuple[int, int] | None = None
) -> tuple[Any, str | None]:
    """``(action, parse_error)`` for a policy response; never raises for an unparsable response.

    Uses :func:`causalcache_memory.actions.parse_action` (imported on use).
    """
    try:
        from causalcache_memory.actions import parse_action
    except ImportError as exc:  # pragma: no cover - the parser is part of the core package
        return None, f"action parser unavailable: {exc}"
    try:
        return parse_action(response, platform=platform, screen_size=screen_size), None
    except (ActionParseError, ValueError) as exc:
        return None, str(exc)
