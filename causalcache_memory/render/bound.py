"""A rendered prompt bound to an archive: pixels are resolved here, only when a request is built."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ArchiveError, PromptImageError
from causalcache_memory.render.prompt import ImagePart, ImageRef, Message, RenderedPrompt, TextPart

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["BoundPrompt", "sniff_mime"]


def sniff_mime(data: bytes) -> str:
    """MIME type of encoded image bytes from their magic number."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


class BoundPrompt:
    """:class:`RenderedPrompt` plus the archive that holds its screenshots.

    Construction checks that every referenced blob exists; reading verifies integrity. A missing or
    corrupt screenshot raises :class:`PromptImageError` naming the event and the hash, never a silently
    different prompt.
    """

    def __init__(self, prompt: RenderedPrompt, archive: ScreenshotArchive) -> None:
        self.prompt = prompt
        self.archive = archive
        self._bytes: dict[int, bytes] = {}
        self._pil: dict[int, Image.Image] = {}
        for ref in prompt.images:
            if ref.sha256 not in archive:
                raise PromptImageError(f"{self._describe(ref)} is not in the archive at {archive.url}")

    @staticmethod
    def _describe(ref: ImageRef) -> str:
        where = (
            f"history screenshot of event {ref.event_index}"
            if ref.role == "history"
            else "current screenshot"
        )
        return f"{where} (sha256 {ref.sha256})"

    @property
    def images(self) -> tuple[ImageRef, ...]:
        return self.prompt.images

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.prompt.messages

    def image_bytes(self, i: int) -> bytes:
        """Original encoded bytes of image ``i`` (integrity-checked)."""
        if i not in self._bytes:
            ref = self.prompt.images[i]
            try:
                self._bytes[i] = self.archive.get_bytes(ref.sha256)
            except ArchiveError as exc:
                raise PromptImageError(f"cannot build the prompt: {self._describe(ref)}: {exc}") from exc
        return self._bytes[i]

    def pil_image(self, i: int) -> Image.Image:
        """Decoded RGB image ``i``."""
        if i not in self._pil:
            ref = self.prompt.images[i]
            try:
                self._pil[i] = self.archive.open_image(ref.sha256).convert("RGB")
            except ArchiveError as exc:
                raise PromptImageError(f"cannot build the prompt: {self._describe(ref)}: {exc}") from exc
        return self._pil[i]

    def pil_images(self) -> list[Image.Image]:
        return [self.pil_image(i) for i in range(len(self.prompt.images))]

    def data_url(self, i: int) -> str:
        data = self.image_bytes(i)
        return f"data:{sniff_mime(data)};base64,{base64.b64encode(data).decode('ascii')}"

    # ------------------------------------------------------------------ wire formats
    def to_openai_messages(self) -> list[dict[str, Any]]:
        """OpenAI-compatible chat messages with ``image_url`` data-URL content blocks."""
        out: list[dict[str, Any]] = []
        for message in self.prompt.messages:
            if message.role in ("system", "assistant") and all(
                isinstance(p, TextPart) for p in message.parts
            ):
                out.append({"role": message.role, "content": message.text})
                continue
            content: list[dict[str, Any]] = []
            for part in message.parts:
                if isinstance(part, TextPart):
                    content.append({"type": "text", "text": part.text})
                else:
                    content.append({"type": "image_url", "image_url": {"url": self.data_url(part.image)}})
            out.append({"role": message.role, "content": content})
        return out

    def to_qwen_messages(self, *, with_pixels: bool = True) -> list[dict[str, Any]]:
        """The message structure a Qwen-VL chat template consumes.

        Every content is a list of ``{"type": "text", "text": ...}`` and ``{"type": "image", "image": PIL}``
        blocks (``"image"`` holds the sha256 instead when ``with_pixels`` is False).
        """
        out: list[dict[str, Any]] = []
        for message in self.prompt.messages:
            content: list[dict[str, Any]] = []
            for part in message.parts:
                if isinstance(part, TextPart):
                    content.append({"type": "text", "text": part.text})
                elif isinstance(part, ImagePart):
                    image = (
                        self.pil_image(part.image) if with_pixels else self.prompt.images[part.image].sha256
                    )
                    content.append({"type": "image", "image": image})
            out.append({"role": message.role, "content": content})
        return out
