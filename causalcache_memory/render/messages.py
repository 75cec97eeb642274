"""Prompt data types: messages with image *references*, and the prompt bound to its archive.

A :class:`RenderedPrompt` holds no pixels: each image is an :class:`ImageRef` (role, sha256, event).
:class:`BoundPrompt` attaches the archive and resolves pixels only when a model request is built; wire
formats (OpenAI chat, Qwen-VL chat template, SGLang text) live in :mod:`causalcache_memory.runtime.chat_format`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pybase64

from causalcache_memory.errors import ArchiveError, PromptImageError

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.allocation.base import Allocation
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = [
    "WIRE_CACHE",
    "BoundPrompt",
    "ImagePart",
    "ImageRef",
    "Message",
    "RenderedPrompt",
    "TextPart",
    "WireCache",
    "data_url_of",
    "sniff_mime",
]


@dataclass(frozen=True, slots=True)
class ImageRef:
    """Declaration of one image in a prompt.

    Attributes:
        role: ``history`` for a restored archived screenshot, ``current`` for ``x_t``.
        sha256: content hash in the archive.
        event_index: the event ``j`` whose ``v_j`` this is (None for the current screen).
    """

    role: Literal["history", "current"]
    sha256: str
    event_index: int | None = None


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ImagePart:
    """Placeholder for ``RenderedPrompt.images[image]``."""

    image: int


@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    parts: tuple[TextPart | ImagePart, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True)
class RenderedPrompt:
    """A rendered prompt holding image *references* only (no pixels).

    ``images[i]`` is the image of the ``i``-th :class:`ImagePart` in message order. Bind it to an archive
    (:meth:`bind`) to resolve pixels for a model call.
    """

    messages: tuple[Message, ...]
    images: tuple[ImageRef, ...]
    allocation: Allocation
    goal: str
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def history_images(self) -> tuple[ImageRef, ...]:
        return tuple(i for i in self.images if i.role == "history")

    def structure(self) -> list[tuple[str, list[str]]]:
        """Roles and part kinds, e.g. ``[("user", ["text", "image"]), ...]`` (for parity checks)."""
        return [
            (m.role, ["image" if isinstance(p, ImagePart) else "text" for p in m.parts])
            for m in self.messages
        ]

    def bind(self, archive: object, *, present: set[str] | None = None) -> BoundPrompt:
        """Attach an archive so pixels can be resolved; checks every image is present.

        ``present``: hashes already checked (for example by an earlier pass of the same step); they are
        not checked again and the newly checked ones are added to it.
        """
        return BoundPrompt(self, archive, present=present)  # type: ignore[arg-type]


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

    Construction checks that every referenced blob exists (except hashes in ``present``, already checked
    this step; the set is shared so the two passes of a step check each image once); reading verifies
    integrity. A missing or corrupt screenshot raises :class:`PromptImageError` naming the event and the
    hash, never a silently different prompt.
    """

    def __init__(
        self, prompt: RenderedPrompt, archive: ScreenshotArchive, *, present: set[str] | None = None
    ) -> None:
        self.prompt = prompt
        self.archive = archive
        self._bytes: dict[int, bytes] = {}
        self._pil: dict[int, Image.Image] = {}
        checked = present if present is not None else set()
        for ref in prompt.images:
            if ref.sha256 in checked:
                continue
            if ref.sha256 not in archive:
                raise PromptImageError(f"{self._describe(ref)} is not in the archive at {archive.url}")
            checked.add(ref.sha256)

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
        """``data:<mime>;base64,...`` of image ``i``: encoded once per blob (see :class:`WireCache`)."""
        sha = self.prompt.images[i].sha256
        stamp_of = getattr(self.archive, "blob_stamp", None)
        stamp = stamp_of(sha) if callable(stamp_of) else None
        key = (getattr(self.archive, "url", ""), sha, stamp)
        url = WIRE_CACHE.get(key) if stamp is not None else None
        if url is None:
            url = data_url_of(self.image_bytes(i))  # read and verified
            if stamp is not None:
                WIRE_CACHE.put(key, url)
        return url


def data_url_of(data: bytes) -> str:
    """``data:<mime>;base64,<data>``: the wire form of an image in OpenAI-style messages."""
    return f"data:{sniff_mime(data)};base64,{pybase64.b64encode_as_string(data)}"  # = base64.b64encode


class WireBytes(bytes):
    """Image bytes that arrived as a data URL already in the wire form :func:`data_url_of` makes.

    Made by :func:`wire_bytes` only; :class:`~causalcache_memory.archive.deferred.DeferredArchive` caches
    :attr:`data_url` as the screenshot's wire encoding, so a screenshot a user sent as a data URL is not
    base64-encoded again to be sent to the model.
    """

    data_url: str


def wire_bytes(raw: bytes, url: str) -> bytes:
    """``raw`` tagged with ``url`` (:class:`WireBytes`) when ``url`` is ``data:<mime>;base64,<b64>`` with
    ``raw``'s sniffed MIME type and the padded length of ``raw``'s encoding; else ``raw`` unchanged.

    The caller must have decoded ``raw`` from ``url`` strictly (``pybase64.b64decode(..., validate=True)``):
    with the length check, ``url`` then holds no character outside the base64 alphabet and encodes ``raw``.
    """
    comma = url.find(",")  # no partition: it would copy the 2.7 MB body just to measure it
    if (
        comma < 0
        or url[:comma] != f"data:{sniff_mime(raw)};base64"
        or len(url) - comma - 1 != 4 * ((len(raw) + 2) // 3)
    ):
        return raw
    out = WireBytes(raw)
    out.data_url = url
    return out


class WireCache:
    """Bounded LRU of screenshots' wire encodings (base64 data URLs), shared by the process.

    A retained screenshot is sent again at every step it stays in the prompt (up to ``B + 1`` images a
    call, two calls when pass 2 fires); re-reading, re-hashing and base64-encoding a 2 MB PNG each time
    costs milliseconds per image. Entries are keyed by ``(archive url, sha256, stamp)``, where the stamp
    is the archive's ``blob_stamp(sha256)`` (the stored file's inode, size and mtime): a file replaced or
    damaged after it was cached gets a new stamp, so it is read and verified again and a corrupt blob
    still raises :class:`PromptImageError`. Archives without ``blob_stamp`` are never cached.

    Args:
        max_chars: total length of the cached strings kept at most (oldest dropped first).
    """

    def __init__(self, max_chars: int = 64 * 2**20) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[Hashable, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> str | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: str) -> None:
        if len(value) > self.max_chars:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self._chars -= len(old) if old is not None else 0
            self._items[key] = value
            self._chars += len(value)
            while self._chars > self.max_chars:
                _, dropped = self._items.popitem(last=False)
                self._chars -= len(dropped)

    def restamp(self, url: str, sha256: str, old: Hashable, new: Hashable | None) -> None:
        """Move the entry of ``(url, sha256, old)`` to stamp ``new`` (dropped when ``new`` is None)."""
        with self._lock:
            value = self._items.pop((url, sha256, old), None)
            if value is None:
                return
            self._chars -= len(value)
            if new is None:
                return
            existing = self._items.pop((url, sha256, new), None)
            self._chars += len(value) - (len(existing) if existing is not None else 0)
            self._items[(url, sha256, new)] = value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0


#: the process's cache of wire encodings (64 MiB of base64: about 24 retained 2 MB screenshots)
WIRE_CACHE = WireCache()
