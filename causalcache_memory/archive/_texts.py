"""Screen text beside its screenshot: the sidecar format, its size cap and its checks (every backend).

The text of a screenshot (an accessibility-tree dump the agent sent, or OCR) is stored once per blob,
addressed by the **blob's** sha256, under ``texts/<sha256[:2]>/<sha256>``. A sidecar file is::

    causalcache-text-v1 <sha256 of the UTF-8 body>\\n<UTF-8 body>

so a read re-hashes the body exactly as a blob read does (a torn or flipped sidecar raises
:class:`~causalcache_memory.errors.BlobCorruptError`, never wrong text). The body is at most
:data:`MAX_TEXT_BYTES` bytes of UTF-8.

The rules every backend follows (``put_text``/``get_text``/``gc``; docs/RELIABILITY.md, "Screen text"):

* ``put_text(sha, text)`` refuses a blob that is not stored (``BlobNotFoundError``: put the screenshot
  first) and text over the cap (:class:`~causalcache_memory.errors.ScreenTextError`).
* **The first text stays.** A second ``put_text`` for a blob that already has intact text keeps the text
  already stored (the text of a screen is a property of its pixels) and only refreshes its age; a damaged
  sidecar is replaced.
* ``get_text(sha)`` is None when the blob has no text (or the hash is not a hash): it never raises for a
  missing text.
* The text lives and dies with its blob: ``gc`` deletes it with its blob, and collects a sidecar whose
  blob is gone (an orphan) under the same marker rule as any object.
"""

from __future__ import annotations

from causalcache_memory.archive._keys import check_hash, digest
from causalcache_memory.errors import BlobCorruptError, ScreenTextError

__all__ = [
    "MAX_TEXT_BYTES",
    "TEXTS",
    "decode_text",
    "encode_sidecar",
    "missing_blob",
    "text_is_intact",
    "text_relpath",
]

TEXTS = "texts"
#: Largest accepted body of one screen text, in UTF-8 bytes (256 KiB).
MAX_TEXT_BYTES = 256 * 1024
_MAGIC = b"causalcache-text-v1 "


def text_relpath(sha256: str) -> str:
    """Where the text of blob ``sha256`` lives, relative to the archive root."""
    return f"{TEXTS}/{sha256[:2]}/{sha256}"


def encode_sidecar(sha256: str, text: object) -> bytes:
    """The sidecar bytes of ``text`` for blob ``sha256`` (both validated; nothing written)."""
    check_hash(sha256)
    if not isinstance(text, str):
        raise ScreenTextError(
            f"screen text for blob {sha256} must be a str, got {type(text).__name__}; pass the screen's "
            "text (accessibility-tree dump or OCR output) as one string"
        )
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ScreenTextError(
            f"screen text for blob {sha256} is not valid Unicode ({exc.reason} at position {exc.start}); "
            "decode the source with errors='replace' before passing it"
        ) from None
    if len(body) > MAX_TEXT_BYTES:
        raise ScreenTextError(
            f"screen text for blob {sha256} is {len(body)} bytes of UTF-8, over the cap of "
            f"{MAX_TEXT_BYTES} bytes; send a shorter text (for example the visible part of the "
            "accessibility tree) or truncate it"
        )
    return _MAGIC + digest(body).encode("ascii") + b"\n" + body


def _body(raw: bytes) -> bytes | None:
    head, sep, body = raw.partition(b"\n")
    if not sep or not head.startswith(_MAGIC) or head[len(_MAGIC) :] != digest(body).encode("ascii"):
        return None
    return body


def text_is_intact(raw: bytes) -> bool:
    """Whether ``raw`` is a whole sidecar whose body hashes to its header."""
    body = _body(raw)
    if body is None:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_text(raw: bytes, sha256: str, *, url: str, location: str) -> str:
    """The text in sidecar ``raw`` of blob ``sha256``; :class:`BlobCorruptError` when it is damaged."""
    body = _body(raw)
    try:
        if body is not None:
            return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    raise BlobCorruptError(
        f"text of blob {sha256} in archive {url} is corrupt (its body does not hash to its header); "
        f"delete {location}, or run `causalcache archive check --repair`: the next put_text stores it again"
    )


def missing_blob(sha256: str, url: str) -> str:
    """Message of ``put_text`` for a blob that is not stored."""
    return (
        f"cannot store text for blob {sha256}: that screenshot is not in archive {url}; put the screenshot "
        "first (put_text stores the text of a stored screenshot, keyed by the sha256 put returned)"
    )
