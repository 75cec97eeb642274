"""Checks against real SGLang 0.5.23 servers (GPU machine; skipped without the URLs). See README.md here.

* ``CAUSALCACHE_SGLANG_URL``: ``causalcache serve`` with the tiny model and its random adapter;
* ``CAUSALCACHE_SGLANG_STOCK_URL``: stock SGLang, same model and flags;
* ``CAUSALCACHE_SGLANG_NOGRAPH_URL``: like the first, with ``--cuda-graph-backend-decode disabled``.
"""

from __future__ import annotations

import base64
import io
import os
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

PLUGIN = os.environ.get("CAUSALCACHE_SGLANG_URL")
STOCK = os.environ.get("CAUSALCACHE_SGLANG_STOCK_URL")
NOGRAPH = os.environ.get("CAUSALCACHE_SGLANG_NOGRAPH_URL")
IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"

pytestmark = [
    pytest.mark.sglang_server,
    pytest.mark.skipif(
        not (PLUGIN and STOCK), reason="set CAUSALCACHE_SGLANG_URL and CAUSALCACHE_SGLANG_STOCK_URL"
    ),
]


def _png(seed: int, size: tuple[int, int] = (1280, 800)) -> str:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, ((37 * seed) % 256, (91 * seed) % 256, (53 * seed) % 256))
    ImageDraw.Draw(image).rectangle((100 + 40 * seed, 100, 700, 500), fill=(255, 255 - 20 * seed, 0))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _prompt(history: list[int], current: int) -> tuple[str, list[str]]:
    turns = "".join(
        f"<|im_start|>assistant\nclick {j}<|im_end|>\n<|im_start|>user\nScreen after step {j}: {IMAGE}<|im_end|>\n"
        for j in history
    )
    text = (
        "<|im_start|>system\nYou are a GUI agent.<|im_end|>\n<|im_start|>user\nTask: open settings\n"
        + "\n".join(f"{j}. clicked" for j in range(1, 9))
        + "<|im_end|>\n"
        + turns
        + f"<|im_start|>user\nCurrent screen: {IMAGE} Next action?<|im_end|>\n<|im_start|>assistant\n"
    )
    return text, [_png(j) for j in history] + [_png(current)]


def _generate(
    url: str, text: str, images: list[str], roles: list[str] | None, *, input_lp: bool, n: int = 16
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "text": text,
        "image_data": images,
        "sampling_params": {"temperature": 0, "max_new_tokens": n},
        "return_logprob": True,
        "logprob_start_len": 0 if input_lp else -1,
    }
    if roles is not None:
        payload["mm_processor_kwargs"] = {"causalcache_image_roles": roles}
    response = httpx.post(f"{url}/generate", json=payload, timeout=300)
    response.raise_for_status()
    return response.json()


def _lp(body: dict[str, Any], key: str) -> list[Any]:
    return [e[0] for e in body["meta_info"].get(key) or []]


def _flush(url: str) -> None:
    httpx.post(f"{url}/flush_cache", timeout=60).raise_for_status()


def test_no_history_output_is_bitwise_the_stock_server():
    text, images = _prompt([1, 2], 3)
    for roles in (None, ["current", "current", "current"]):
        a = _generate(PLUGIN, text, images, roles, input_lp=True)
        b = _generate(STOCK, text, images, roles, input_lp=True)
        assert a["text"] == b["text"]
        assert _lp(a, "input_token_logprobs") == _lp(b, "input_token_logprobs")
        assert _lp(a, "output_token_logprobs") == _lp(b, "output_token_logprobs")


def test_history_flag_changes_the_output():
    text, images = _prompt([1, 2], 3)
    flagged = _generate(PLUGIN, text, images, ["history", "history", "current"], input_lp=True)
    plain = _generate(PLUGIN, text, images, ["current", "current", "current"], input_lp=True)
    assert _lp(flagged, "input_token_logprobs") != _lp(plain, "input_token_logprobs")
    stock = _generate(STOCK, text, images, ["history", "history", "current"], input_lp=True)
    assert _lp(stock, "input_token_logprobs") == _lp(plain, "input_token_logprobs")  # stock ignores roles


def test_warm_pass_two_equals_cold_pass_two():
    roles = ["history", "history", "current"]
    pass1, pass2 = _prompt([1, 2], 3), _prompt([4, 2], 3)
    _flush(PLUGIN)
    _generate(PLUGIN, *pass1, roles, input_lp=False)
    warm = _generate(PLUGIN, *pass2, roles, input_lp=False)
    assert warm["meta_info"]["cached_tokens"] > 0
    _flush(PLUGIN)
    cold = _generate(PLUGIN, *pass2, roles, input_lp=False)
    assert cold["meta_info"]["cached_tokens"] == 0
    assert warm["text"] == cold["text"]
    assert _lp(warm, "output_token_logprobs") == _lp(cold, "output_token_logprobs")


def test_cached_current_image_is_not_reused_as_history():
    text, images = _prompt([1, 2], 3)
    _flush(PLUGIN)
    _generate(PLUGIN, text, images, ["current"] * 3, input_lp=False)
    again = _generate(PLUGIN, text, images, ["current"] * 3, input_lp=False)
    flagged = _generate(PLUGIN, text, images, ["history", "history", "current"], input_lp=False)
    assert flagged["meta_info"]["cached_tokens"] < again["meta_info"]["cached_tokens"]


@pytest.mark.skipif(not NOGRAPH, reason="set CAUSALCACHE_SGLANG_NOGRAPH_URL")
def test_cuda_graph_decode_on_equals_off():
    text, images = _prompt([1, 2], 3)
    roles = ["history", "history", "current"]
    on = _generate(PLUGIN, text, images, roles, input_lp=False, n=32)
    off = _generate(NOGRAPH, text, images, roles, input_lp=False, n=32)
    assert on["text"] == off["text"]
    assert _lp(on, "output_token_logprobs") == _lp(off, "output_token_logprobs")


def test_mixed_batch_leaves_no_history_requests_unchanged():
    (t0, i0), (t1, i1) = _prompt([1, 2], 3), _prompt([5, 6], 7)
    alone = _generate(PLUGIN, t0, i0, ["current"] * 3, input_lp=True)
    payload = {
        "text": [t0, t1],
        "image_data": [i0, i1],
        "rid": ["mixed-0", "mixed-1"],
        "sampling_params": {"temperature": 0, "max_new_tokens": 16},
        "return_logprob": True,
        "logprob_start_len": [0, 0],
        "mm_processor_kwargs": {
            "causalcache_image_roles": {
                "mixed-0": ["current"] * 3,
                "mixed-1": ["history", "history", "current"],
            }
        },
    }
    response = httpx.post(f"{PLUGIN}/generate", json=payload, timeout=300)
    response.raise_for_status()
    batch = response.json()
    assert batch[0]["text"] == alone["text"]
    assert _lp(batch[0], "input_token_logprobs") == _lp(alone, "input_token_logprobs")
    assert _lp(batch[0], "output_token_logprobs") == _lp(alone, "output_token_logprobs")
