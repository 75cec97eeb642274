"""Text chat formats for servers that take a raw prompt string plus an image list (SGLang ``/generate``).

SGLang's native API does not apply a chat template: the client sends the templated text with one image
placeholder per image and the images in placeholder order. A :class:`ChatFormat` does that rendering for
one model family. :data:`QWEN_VL` covers Qwen2.5-VL and Qwen3-VL (and GUI policies built on them:
GUI-Owl, OpenCUA, UI-TARS) in ChatML::

    <|im_start|>system\\n{text}<|im_end|>\\n
    <|im_start|>user\\n{text}<|vision_start|><|image_pad|><|vision_end|>{text}<|im_end|>\\n
    ...
    <|im_start|>assistant\\n                      <- generation prompt

For teacher-forced scoring the continuation is ``target + end_of_turn`` (``target + "<|im_end|>"`` for
ChatML), so the score also rewards ending the turn after the action, as greedy decoding must.

Another family plugs in with ``ChatFormat(name, render, end_of_turn)`` where ``render`` maps the prompt's
messages to a :class:`ChatText`; :func:`register_chat_format` makes it selectable by name (the registry
:data:`CHAT_FORMATS` is a :class:`~causalcache_memory.registry.Registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError, RenderError
from causalcache_memory.registry import Registry
from causalcache_memory.render.messages import ImagePart, Message, TextPart

if TYPE_CHECKING:
    from causalcache_memory.render.messages import BoundPrompt

__all__ = [
    "CHAT_FORMATS",
    "QWEN_VL",
    "ChatFormat",
    "ChatText",
    "available_chat_formats",
    "chatml_render",
    "lookup_chat_format",
    "openai_messages",
    "qwen_messages",
    "register_chat_format",
]


@dataclass(frozen=True, slots=True)
class ChatText:
    """A templated prompt.

    Attributes:
        text: the prompt string, ending with the generation prompt.
        image_indices: ``prompt.images`` index of each image placeholder, in text order.
    """

    text: str
    image_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChatFormat:
    """How one model family turns chat messages into a prompt string.

    Attributes:
        name: registry name (e.g. ``"qwen-vl"``).
        render: ``messages -> ChatText`` (must end with the generation prompt).
        end_of_turn: text that closes an assistant turn; appended to scoring targets.
        image_placeholder: the text standing for one image (the server expands it to image tokens).
    """

    name: str
    render: Callable[[Sequence[Message]], ChatText]
    end_of_turn: str
    image_placeholder: str = ""

    def format(self, messages: Sequence[Message]) -> ChatText:
        """Render ``messages`` (the generation prompt included)."""
        return self.render(messages)

    def target_text(self, target: str) -> str:
        """The scored continuation for ``target``: ``target + end_of_turn``."""
        return target + self.end_of_turn


QWEN_IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def chatml_render(
    messages: Sequence[Message], *, image_placeholder: str = QWEN_IMAGE_PLACEHOLDER
) -> ChatText:
    """ChatML rendering of ``messages`` followed by the assistant generation prompt."""
    if not messages:
        raise RenderError("cannot format an empty message list; render a prompt first")
    pieces: list[str] = []
    images: list[int] = []
    for message in messages:
        pieces.append(f"<|im_start|>{message.role}\n")
        for part in message.parts:
            if isinstance(part, TextPart):
                pieces.append(part.text)
            elif isinstance(part, ImagePart):
                pieces.append(image_placeholder)
                images.append(part.image)
            else:  # pragma: no cover - Message only holds these two
                raise RenderError(f"unknown message part {part!r}")
        pieces.append("<|im_end|>\n")
    pieces.append("<|im_start|>assistant\n")
    return ChatText("".join(pieces), tuple(images))


QWEN_VL = ChatFormat(
    name="qwen-vl",
    render=chatml_render,
    end_of_turn="<|im_end|>",
    image_placeholder=QWEN_IMAGE_PLACEHOLDER,
)

#: the chat-format registry (``chat_format=`` of the SGLang runtime)
CHAT_FORMATS: Registry[ChatFormat] = Registry(
    "chat format",
    field="chat_format",
    register_with="register_chat_format(ChatFormat(name, render, end_of_turn))",
    error=ConfigError,
)
CHAT_FORMATS.register(QWEN_VL.name, QWEN_VL)


def register_chat_format(chat_format: ChatFormat, *, overwrite: bool = False) -> None:
    """Make ``chat_format`` selectable by its name."""
    if not isinstance(chat_format, ChatFormat):
        raise ConfigError(f"register_chat_format expects a ChatFormat, got {type(chat_format).__name__}")
    CHAT_FORMATS.register(chat_format.name, chat_format, overwrite=overwrite)


def available_chat_formats() -> list[str]:
    return CHAT_FORMATS.available()


def lookup_chat_format(chat_format: str | ChatFormat) -> ChatFormat:
    """A :class:`ChatFormat` by name (or the instance itself)."""
    if isinstance(chat_format, ChatFormat):
        return chat_format
    return CHAT_FORMATS.lookup(chat_format)


# ---------------------------------------------------------------------- structured wire formats
def openai_messages(prompt: BoundPrompt) -> list[dict[str, Any]]:
    """OpenAI-compatible chat messages with ``image_url`` data-URL content blocks (images in prompt order)."""
    out: list[dict[str, Any]] = []
    for message in prompt.messages:
        if message.role in ("system", "assistant") and all(isinstance(p, TextPart) for p in message.parts):
            out.append({"role": message.role, "content": message.text})
            continue
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            else:
                content.append({"type": "image_url", "image_url": {"url": prompt.data_url(part.image)}})
        out.append({"role": message.role, "content": content})
    return out


def qwen_messages(prompt: BoundPrompt, *, with_pixels: bool = True) -> list[dict[str, Any]]:
    """The message structure a Qwen-VL chat template consumes.

    Every content is a list of ``{"type": "text", "text": ...}`` and ``{"type": "image", "image": PIL}``
    blocks (``"image"`` holds the sha256 instead when ``with_pixels`` is False).
    """
    out: list[dict[str, Any]] = []
    for message in prompt.messages:
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                image = prompt.pil_image(part.image) if with_pixels else prompt.images[part.image].sha256
                content.append({"type": "image", "image": image})
        out.append({"role": message.role, "content": content})
    return out
