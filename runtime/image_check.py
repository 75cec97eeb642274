"""Detect a policy server that accepts images but silently drops them.

A server whose processor resolves to a tokenizer only (``transformers serve`` on a model directory
without a processor config), or a gateway that rebuilds requests from the fields it knows, answers an
image prompt like a text prompt: the reply looks normal and the agent acts blind. The only reliable
signal a client without the model's tokenizer has is the server's own token count, so once per server
the client sends a probe twice, with and without one image, and reads the reported prompt tokens:

    delta = prompt_tokens(text + image) - prompt_tokens(text)

A vision encoder spends many tokens on the 224x224 probe image (Qwen-VL: 64 image tokens plus two
frame tokens; OpenAI-style hosted models: >= 85); a server that ignores the image keeps at most its
placeholder text (Qwen's ``<|vision_start|><|image_pad|><|vision_end|>`` is 3 tokens). ``delta <
min_image_tokens`` (default 5) raises :class:`~causalcache_memory.errors.ImagesIgnoredError`, and every
later image request to that server raises it again; the result is cached per server.
"""

from __future__ import annotations

import base64
import io
import threading
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError, ImagesIgnoredError

if TYPE_CHECKING:
    from causalcache_memory.runtime.chat_format import ChatFormat

__all__ = [
    "DEFAULT_MIN_IMAGE_TOKENS",
    "OPENAI_HINT",
    "PROBE_TEXT",
    "SGLANG_HINT",
    "ImageCheck",
    "openai_probe_messages",
    "probe_image_url",
    "sglang_probe",
]

#: fewest tokens one encoded image must add; a bare placeholder is at most 3-4 tokens
DEFAULT_MIN_IMAGE_TOKENS = 5
PROBE_TEXT = "Describe this screen."
_PROBE_SIDE = 224

#: ``count(with_image) -> prompt_tokens`` for one server (the client builds the request)
Counter = Callable[[bool], int]


@cache
def probe_image_url() -> str:
    """A deterministic 224x224 PNG data URL with structure in it (not a flat colour)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (_PROBE_SIDE, _PROBE_SIDE), (240, 240, 240))
    draw = ImageDraw.Draw(image)
    for k in range(7):
        draw.rectangle((10 + 30 * k, 20, 30 + 30 * k, 200 - 15 * k), fill=(30 * k, 90, 200 - 25 * k))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


OPENAI_HINT = (
    "Serve the model with its image processor: for `transformers serve` the model directory needs the "
    "processor's config (processor_config.json beside preprocessor_config.json, so AutoProcessor loads the "
    "model's processor and not its tokenizer); for vLLM/SGLang serve a vision-language model "
    "(vLLM: --limit-mm-per-prompt image=N). Pass check_images=False only for an endpoint that encodes "
    "images but reports no usage.prompt_tokens."
)
SGLANG_HINT = (
    "Serve a vision-language model whose processor encodes images; behind the SGLang Model Gateway, run "
    "the gateway in HTTP mode (worker URLs http://..., not grpc://): in gRPC mode it rebuilds requests "
    "from the fields it knows."
)


def openai_probe_messages(with_image: bool) -> list[dict[str, Any]]:
    """The probe as OpenAI chat messages (one user turn)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": PROBE_TEXT}]
    if with_image:
        content.insert(0, {"type": "image_url", "image_url": {"url": probe_image_url()}})
    return [{"role": "user", "content": content}]


def sglang_probe(chat_format: ChatFormat, with_image: bool) -> dict[str, Any]:
    """The probe as an SGLang ``/generate`` request (prompt only: ``max_new_tokens`` 0)."""
    from causalcache_memory.render.messages import ImagePart, Message, TextPart
    from causalcache_memory.runtime.sglang_server.roles import ROLES_KWARG

    parts = (ImagePart(0), TextPart(PROBE_TEXT)) if with_image else (TextPart(PROBE_TEXT),)
    payload: dict[str, Any] = {
        "text": chat_format.format([Message("user", parts)]).text,
        "sampling_params": {"temperature": 0, "max_new_tokens": 0},
    }
    if with_image:
        payload["image_data"] = [probe_image_url()]
        payload["mm_processor_kwargs"] = {ROLES_KWARG: ["current"]}
    return payload


class ImageCheck:
    """Per-server cache of the probe's verdict (thread-safe; one probe per server).

    Args:
        min_image_tokens: fewest tokens the probe image must add to the prompt.
        hint: what to change when a server drops images (appended to the error).
    """

    def __init__(self, *, min_image_tokens: int = DEFAULT_MIN_IMAGE_TOKENS, hint: str = "") -> None:
        if (
            not isinstance(min_image_tokens, int)
            or isinstance(min_image_tokens, bool)
            or min_image_tokens < 1
        ):
            raise ConfigError(f"min_image_tokens={min_image_tokens!r} must be an integer >= 1")
        self.min_image_tokens = min_image_tokens
        self.hint = hint
        self._verdicts: dict[str, ImagesIgnoredError | None] = {}
        self._lock = threading.Lock()

    def ensure(self, server: str, count: Counter) -> None:
        """Raise :class:`ImagesIgnoredError` when ``server`` drops images (probing it the first time)."""
        with self._lock:
            if server in self._verdicts:
                verdict = self._verdicts[server]
                if verdict is not None:
                    raise verdict
                return
        verdict = self.verdict(server, count(True), count(False))
        with self._lock:
            self._verdicts[server] = verdict
        if verdict is not None:
            raise verdict

    def verdict(self, server: str, with_image: int, without_image: int) -> ImagesIgnoredError | None:
        """The error for a server whose probe image added ``with_image - without_image`` tokens, or None."""
        delta = with_image - without_image
        if delta >= self.min_image_tokens:
            return None
        return ImagesIgnoredError(
            f"{server} ignores images: a {_PROBE_SIDE}x{_PROBE_SIDE} image added {delta} prompt tokens "
            f"({without_image} without it, {with_image} with it; an encoded image adds at least "
            f"{self.min_image_tokens}), so the model would answer without seeing the screenshots. "
            + self.hint
        )
