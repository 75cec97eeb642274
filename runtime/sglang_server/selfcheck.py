"""Start-up self-check of an SGLang server launched with the causalcache plugin (client side, httpx only).

SGLang only logs a warning when an ``SGLANG_EXTERNAL_*`` package fails to import and then serves the stock
model, so a launcher must prove the plugin is active before it reports ready. Two probes on one prompt
with two small images (:func:`probe_images`):

1. **roles reach the radix key** (the processor plugin): the prompt is sent twice with both images
   ``current`` and once with the first image ``history`` (no logprobs, so the radix cache may match). A
   stock server reuses the whole prompt on the third request; with the plugin the history image has a
   new key, so ``meta_info.cached_tokens`` stops before it.
2. **the adapter changes history tokens** (the model plugin; only with an adapter): the prompt is scored
   with ``logprob_start_len = 0`` once per role assignment; the logprobs after the history image must
   differ. An adapter whose ``B`` is all zero cannot be checked this way (the launcher refuses it).

Behind the SGLang Model Gateway the same probes go through the gateway (:func:`gateway_self_check`), all
with one routing key so they reach one worker: a gateway that rebuilds requests from the fields it knows
(smg in gRPC mode) drops ``mm_processor_kwargs``, the plugin then sees no roles and runs the frozen model
for every request, and the check fails saying to run the gateway in HTTP mode.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from causalcache_memory.runtime.routing import ROUTING_KEY_HEADER
from causalcache_memory.runtime.sglang_server.roles import ROLES_KWARG

__all__ = ["SelfCheckReport", "gateway_self_check", "probe_images", "probe_text", "self_check"]

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"

Post = Callable[[str, dict[str, Any]], Any]


@dataclass
class SelfCheckReport:
    """Outcome of :func:`self_check`; ``ok`` is False when the plugin is not proven active."""

    ok: bool
    checks: dict[str, bool] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return "; ".join(self.details)


def probe_text() -> str:
    """A ChatML prompt with two image placeholders and text after each (Qwen-VL layout)."""
    return (
        "<|im_start|>system\nYou are a GUI agent.<|im_end|>\n"
        f"<|im_start|>user\nScreen after step 1: {IMAGE} Current screen: {IMAGE} "
        "What is the next action?<|im_end|>\n<|im_start|>assistant\n"
    )


def probe_images() -> list[str]:
    """Two distinct 112x112 PNG data URLs (deterministic)."""
    import base64

    from PIL import Image

    urls = []
    for k in range(2):
        image = Image.new("RGB", (112, 112))
        image.putdata(
            [
                ((x * 7 + k * 90) % 256, (y * 5) % 256, (x * y + k * 40) % 256)
                for y in range(112)
                for x in range(112)
            ]
        )
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        urls.append("data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii"))
    return urls


def _request(roles: list[str], *, logprobs: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "text": probe_text(),
        "image_data": probe_images(),
        "sampling_params": {"temperature": 0, "max_new_tokens": 1},
        "mm_processor_kwargs": {ROLES_KWARG: roles},
    }
    if logprobs:
        payload["return_logprob"] = True
        payload["logprob_start_len"] = 0
    return payload


def _meta(body: Any) -> dict[str, Any]:
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    meta = body.get("meta_info") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise ValueError(f"/generate answered without meta_info: {str(body)[:200]}")
    return meta


#: the routing key of every self-check request sent through a gateway (keeps the probes on one worker)
SELFCHECK_ROUTING_KEY = "causalcache-selfcheck"

GATEWAY_HINT = (
    "the history-image roles did not reach the server through the gateway at {url}: run the SGLang Model "
    "Gateway in HTTP mode (register the workers as http://host:port, not grpc://; in gRPC mode smg rebuilds "
    "requests from the fields it knows and drops mm_processor_kwargs, so HGKV is silently off), and start "
    "it with --routing-key-override so an episode stays on one worker"
)


def _http_post(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> Post:
    import httpx

    def post(path: str, payload: dict[str, Any]) -> Any:
        response = httpx.post(url.rstrip("/") + path, json=payload, headers=headers, timeout=timeout_s)
        response.raise_for_status()
        return response.json()

    return post


def self_check(
    url: str, *, adapter: bool, post: Post | None = None, timeout_s: float = 120.0
) -> SelfCheckReport:
    """Probe the server at ``url``; ``adapter`` says whether an HGKV adapter should be active."""
    send = post or _http_post(url, timeout_s)
    report = SelfCheckReport(ok=True)
    current, history = ["current", "current"], ["history", "current"]
    try:
        send("/flush_cache", {})
    except Exception as exc:  # older servers answer GET only; the probe still works with a warm cache
        report.details.append(f"/flush_cache failed ({exc}); probing with a possibly warm cache")
    first = _meta(send("/generate", _request(current, logprobs=False)))
    repeat = _meta(send("/generate", _request(current, logprobs=False)))
    flagged = _meta(send("/generate", _request(history, logprobs=False)))
    total = int(first.get("prompt_tokens", 0))
    c_repeat, c_flagged = int(repeat.get("cached_tokens", 0)), int(flagged.get("cached_tokens", 0))
    if c_repeat <= 0:
        report.details.append(
            "the radix cache is off (a repeated prompt reused 0 tokens): role keys not checked"
        )
    else:
        keyed = c_flagged < c_repeat
        report.checks["roles_in_radix_key"] = keyed
        report.details.append(
            f"roles in the radix key: {'yes' if keyed else 'NO'} (prompt {total} tokens; repeat reused "
            f"{c_repeat}, history-flagged reused {c_flagged})"
        )
    if adapter:
        lp_current = _meta(send("/generate", _request(current, logprobs=True))).get("input_token_logprobs")
        lp_history = _meta(send("/generate", _request(history, logprobs=True))).get("input_token_logprobs")
        values = [
            [e[0] if isinstance(e, (list, tuple)) and e else None for e in lp or []]
            for lp in (lp_current, lp_history)
        ]
        changed = bool(values[0]) and values[0] != values[1]
        report.checks["adapter_changes_history"] = changed
        report.details.append(f"HGKV adapter changes history-image logprobs: {'yes' if changed else 'NO'}")
    report.ok = bool(report.checks) and all(report.checks.values())
    if not report.checks:
        report.details.append("nothing could be checked (no adapter and no radix cache): not proven active")
    return report


def gateway_self_check(
    gateway_url: str, *, adapter: bool, post: Post | None = None, timeout_s: float = 120.0
) -> SelfCheckReport:
    """:func:`self_check` through the gateway at ``gateway_url`` (one routing key for every probe).

    Run it after the server itself passed :func:`self_check`: a failure here is the gateway's, and the
    report's last detail says what to change.
    """
    headers = {ROUTING_KEY_HEADER: SELFCHECK_ROUTING_KEY}
    send = post or _http_post(gateway_url, timeout_s, headers)
    report = self_check(gateway_url, adapter=adapter, post=send, timeout_s=timeout_s)
    report.details.insert(0, f"through the gateway {gateway_url}")
    if not report.ok:
        report.details.append(GATEWAY_HINT.format(url=gateway_url))
    return report
