"""Per-episode routing for a fleet of SGLang workers: through the SGLang Model Gateway or directly.

An episode's requests (pass 1, pass 2, the prompt-length probe of a scoring call, every later step)
share a long prefix, so they should land on the worker whose radix cache holds it, while different
episodes spread over the fleet. Two ways to get that:

* **Gateway** (production): one URL, the SGLang Model Gateway (``smg``, PyPI) in front of the workers,
  started with ``--routing-key-override`` (see :func:`smg_launch_args`). Every request carries the
  header ``x-smg-routing-key: <episode key>``; the gateway pins the first request of a key to a worker
  (by ``--assignment-mode``: ``min_load`` = the least loaded one) and sends later ones with the same key
  to the same worker. When that worker dies the gateway retries the request on another one and re-pins
  the key there. Without ``--routing-key-override`` the gateway ignores the header (``cache_aware``
  alone routes on prompt text, in which images are invisible).
* **Direct** (small setups, no gateway): several worker URLs; the client picks the worker by rendezvous
  hashing of the key (:func:`rendezvous_route`), stable per key and even over URLs. No failover: a
  dead worker fails the episodes hashed to it, so use the gateway once availability matters.

The header is sent in both modes (a worker ignores it), so a single URL may be a worker or a gateway.

The episode key (:func:`routing_key`) is, in order: an explicit ``route_key``, the prompt's
``meta["episode_id"]``, else the task goal text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from causalcache_memory.render.messages import BoundPrompt

__all__ = [
    "ROUTING_KEY_HEADER",
    "EpisodeRouter",
    "rendezvous_route",
    "routing_headers",
    "routing_key",
    "smg_launch_args",
    "split_batch",
]

#: The request header the SGLang Model Gateway (smg 1.13) reads as the sticky routing key.
ROUTING_KEY_HEADER = "x-smg-routing-key"


def routing_key(prompt: BoundPrompt | None = None, route_key: str | None = None) -> str | None:
    """The episode key of a request: ``route_key``, else ``meta["episode_id"]``, else the goal."""
    if route_key is not None:
        return str(route_key)
    if prompt is None:
        return None
    episode = prompt.prompt.meta.get("episode_id")
    return str(episode) if episode is not None else prompt.prompt.goal


def routing_headers(key: str | None) -> dict[str, str]:
    """``{"x-smg-routing-key": key}`` (empty without a key).

    A key that is not short printable ASCII without spaces (a goal text, say) is sent as a stable
    digest ``k-<32 hex>`` so that it is a valid header value.
    """
    if not key:
        return {}
    if len(key) > 128 or not all(0x20 < ord(c) < 0x7F for c in key):
        key = "k-" + hashlib.sha256(key.encode()).hexdigest()[:32]
    return {ROUTING_KEY_HEADER: key}


def rendezvous_route(key: str, urls: Sequence[str]) -> str:
    """The URL with the highest ``sha256(url | key)``: stable per key, spread evenly over URLs."""
    return max(urls, key=lambda url: hashlib.sha256(f"{url}|{key}".encode()).digest())


class EpisodeRouter:
    """Chooses the URL and headers of a request from its episode key.

    Args:
        urls: one URL (a gateway or a single worker) or several worker URLs (direct rendezvous routing).
    """

    def __init__(self, urls: Sequence[str]) -> None:
        if not urls:
            raise ValueError("EpisodeRouter needs at least one URL")
        self.urls = tuple(urls)

    def url(self, key: str | None) -> str:
        """The URL for ``key`` (the only URL when there is one)."""
        if len(self.urls) == 1:
            return self.urls[0]
        return rendezvous_route(key or "", self.urls)

    def headers(self, key: str | None) -> dict[str, str]:
        return routing_headers(key)


def smg_launch_args(
    worker_urls: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 30000,
    prometheus_port: int = 29000,
    assignment_mode: str = "min_load",
    extra: Sequence[str] = (),
) -> list[str]:
    """The ``smg launch`` command line of the documented deployment (docs/DEPLOY.md).

    ``--policy cache_aware --routing-key-override`` makes the per-episode header decide the worker
    (cache-aware routing still serves requests without a key); ``--assignment-mode`` places a new key.
    """
    if not worker_urls:
        raise ValueError("smg needs at least one worker URL")
    return [
        "smg",
        "launch",
        "--host",
        host,
        "--port",
        str(port),
        "--worker-urls",
        *worker_urls,
        "--policy",
        "cache_aware",
        "--routing-key-override",
        "--assignment-mode",
        assignment_mode,
        "--prometheus-host",
        host,
        "--prometheus-port",
        str(prometheus_port),
        *extra,
    ]


def split_batch(payload: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """One single-prompt ``/generate`` payload per item of a batch payload (list-valued ``text``).

    The SGLang Model Gateway (smg 1.13) accepts only a string ``text`` on ``/generate``, so a batch
    sent through it goes as ``n`` requests; per-item lists (``image_data``, ``logprob_start_len``,
    ...) are split, scalars are copied. An item without images gets no ``image_data``.
    """
    out = []
    for i in range(n):
        item: dict[str, Any] = {}
        for key, value in payload.items():
            item[key] = value[i] if isinstance(value, list) and key in _PER_ITEM else value
        if item.get("image_data") is None:
            item.pop("image_data", None)
        out.append(item)
    return out


_PER_ITEM = frozenset({"text", "image_data", "logprob_start_len", "return_logprob", "sampling_params", "rid"})
