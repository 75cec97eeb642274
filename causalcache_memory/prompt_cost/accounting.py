"""Exact token accounting of a rendered prompt, part by part, and the prefix two prompts share.

The prompt is laid out as the Qwen-VL chat template lays it out (ChatML, the runtime's ``QWEN_VL`` chat
format; :class:`ChatFraming` holds the framing strings, so another family's framing is config)::

    <|im_start|>{role}\\n{text}<|vision_start|>[image]<|vision_end|>{text}<|im_end|>\\n ... <|im_start|>assistant\\n

and cut into *chunks*: the text between two images, or an image. Every cut falls next to a special token
(``<|vision_start|>``, ``<|vision_end|>``, ``<|im_start|>``), which a tokenizer splits off before it
tokenizes text, so tokenizing the chunks one by one gives exactly the ids of the whole prompt. Each chunk
belongs to one *part*:

* ``system``: the system message; ``summaries``: the goal and every event summary (in the
  ``conversation`` layout, a message each: the renderer names every message's part, ``meta["message_parts"]``);
* ``response:j`` and ``screen:j`` for each retained event ``j`` (its response; its header and image,
  the image tokens counted apart), ``current`` (the current screen, its header and the request; in the
  ``conversation`` layout the screen of event ``t-1``),
  ``generation`` (``<|im_start|>assistant\\n``).

An image chunk holds ``n`` tokens given by an :class:`~causalcache_memory.prompt_cost.image_tokens.ImageRule`
at the image's size, and is keyed by its content hash (a radix cache keys images by content, so two
different screenshots share no token even at equal size).

The text tokenizer is passed in (``tokenize: str -> Sequence[int]``, special tokens recognised): for a
Hugging Face tokenizer use :func:`hf_tokenize`. Nothing is downloaded here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from causalcache_memory.errors import RenderError
from causalcache_memory.prompt_cost.image_tokens import AreaImageRule, PatchImageRule, TileImageRule
from causalcache_memory.render.messages import ImagePart, ImageRef, RenderedPrompt, TextPart

__all__ = [
    "ChatFraming",
    "Chunk",
    "PromptTokens",
    "account_prompt",
    "hf_tokenize",
    "image_sizes_of",
    "shared_prefix",
]

Tokenize = Callable[[str], Sequence[int]]
Rule = PatchImageRule | AreaImageRule | TileImageRule


class ChatFraming(BaseModel):
    """The strings that frame messages and images (defaults: Qwen-VL ChatML, as the runtime sends it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    message_open: str = "<|im_start|>{role}\n"
    message_close: str = "<|im_end|>\n"
    image_open: str = "<|vision_start|>"
    image_close: str = "<|vision_end|>"
    generation_prompt: str = "<|im_start|>assistant\n"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One cut of the prompt: text ``ids`` or an image (``image`` = sha256, ``n`` tokens)."""

    part: str
    n: int
    ids: tuple[int, ...] | None = None
    image: str | None = None


@dataclass(frozen=True)
class PromptTokens:
    """A prompt's chunks in order, and the token count of each part.

    Attributes:
        chunks: the prompt cut at images (module docstring).
        parts: ``{part: (text tokens, image tokens)}`` in prompt order.
    """

    chunks: tuple[Chunk, ...]
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(c.n for c in self.chunks)

    @property
    def image_tokens(self) -> int:
        return sum(c.n for c in self.chunks if c.image is not None)

    def part_total(self, part: str) -> int:
        """Tokens of ``part`` (text and images; 0 when the prompt has no such part)."""
        return sum(c.n for c in self.chunks if c.part == part)

    def end_of(self, part: str) -> int:
        """Tokens up to and including the last chunk of ``part`` (0 when the prompt has no such part)."""
        pos, end = 0, 0
        for chunk in self.chunks:
            pos += chunk.n
            if chunk.part == part:
                end = pos
        return end


def hf_tokenize(tokenizer: Any) -> Tokenize:
    """``text -> ids`` of a Hugging Face tokenizer, without added BOS/EOS (special tokens recognised)."""

    def tokenize(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    return tokenize


def image_sizes_of(trace: Any) -> dict[str, tuple[int, int]]:
    """``{sha256: (width, height)}`` of a trace's screenshots whose size was recorded (and the current one)."""
    sizes = {e.screenshot: e.screenshot_size for e in trace.events if e.screenshot_size is not None}
    if trace.current_screenshot is not None and trace.current_screen_size is not None:
        sizes[trace.current_screenshot] = tuple(trace.current_screen_size)
    return sizes


def _part_of(role: str, index: int, prompt: RenderedPrompt, ref: ImageRef | None, position: int) -> str:
    named = prompt.meta.get("message_parts")  # the conversation layout names each message's part
    if isinstance(named, tuple):
        return str(named[index])
    if role == "system":
        return "system"
    if index == prompt.meta.get("summaries_message", 1) and role == "user":
        return "summaries"
    if role == "assistant":
        return f"response:{_event_of(prompt, position)}"
    if ref is not None and ref.role == "history":
        return f"screen:{ref.event_index}"
    if index == len(prompt.messages) - 1:
        return "current"
    return f"screen:{_event_of(prompt, position)}"


def _event_of(prompt: RenderedPrompt, position: int) -> int:
    """The event of the ``position``-th retained turn (0-based) of ``prompt``."""
    return prompt.allocation.selected[position]


def account_prompt(
    prompt: RenderedPrompt,
    *,
    tokenize: Tokenize,
    image_rule: Rule,
    image_sizes: Mapping[str, tuple[int, int]] | Callable[[ImageRef], tuple[int, int]],
    framing: ChatFraming | None = None,
) -> PromptTokens:
    """Cut ``prompt`` into chunks and count every part exactly (module docstring).

    Args:
        tokenize: ``text -> ids`` (:func:`hf_tokenize` for a Hugging Face tokenizer).
        image_rule: the model family's image-token rule.
        image_sizes: ``{sha256: (width, height)}`` (:func:`image_sizes_of`) or ``ref -> (width, height)``.
        framing: the chat framing (default: Qwen-VL ChatML).
    """
    framing = framing or ChatFraming()
    chunks: list[Chunk] = []
    parts: dict[str, list[int]] = {}
    text: list[str] = []
    turn = -1

    def flush(part: str) -> None:
        if text:
            ids = tuple(int(i) for i in tokenize("".join(text)))
            chunks.append(Chunk(part, len(ids), ids=ids))
            parts.setdefault(part, [0, 0])[0] += len(ids)
            text.clear()

    for index, message in enumerate(prompt.messages):
        if message.role == "assistant":
            turn += 1
        first = next((p for p in message.parts if isinstance(p, ImagePart)), None)
        ref = prompt.images[first.image] if first is not None else None
        part = _part_of(message.role, index, prompt, ref, max(turn, 0))
        text.append(framing.message_open.format(role=message.role))
        for piece in message.parts:
            if isinstance(piece, TextPart):
                text.append(piece.text)
                continue
            image = prompt.images[piece.image]
            text.append(framing.image_open)
            flush(part)
            size = image_sizes(image) if callable(image_sizes) else image_sizes.get(image.sha256)
            if size is None:
                raise RenderError(
                    f"no size for the {image.role} screenshot {image.sha256} (event {image.event_index}); "
                    "record screenshot sizes in the trace or pass image_sizes={sha256: (width, height)}"
                )
            n = image_rule.tokens(int(size[0]), int(size[1]))
            chunks.append(Chunk(part, n, image=image.sha256))
            parts.setdefault(part, [0, 0])[1] += n
            text.append(framing.image_close)
        text.append(framing.message_close)
        flush(part)
    text.append(framing.generation_prompt)
    flush("generation")
    return PromptTokens(tuple(chunks), {k: (v[0], v[1]) for k, v in parts.items()})


def shared_prefix(a: PromptTokens, b: PromptTokens) -> int:
    """Tokens of the longest common prefix of two prompts (images equal when their content hashes are)."""
    total = 0
    for x, y in zip(a.chunks, b.chunks, strict=False):
        if x.image is not None or y.image is not None:
            if x.image != y.image or x.n != y.n:
                return total
            total += x.n
            continue
        assert x.ids is not None and y.ids is not None
        if x.ids == y.ids:
            total += x.n
            continue
        for u, v in zip(x.ids, y.ids, strict=False):
            if u != v:
                break
            total += 1
        return total
    return total
