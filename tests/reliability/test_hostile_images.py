"""Hostile images: every corrupt, truncated, disguised or oversized payload is refused, nothing is stored."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image
from reliability_helpers import screenshot

from causalcache_memory.errors import ArchiveKeyError, ImageRejectedError


def _chunk(kind: bytes, payload: bytes) -> bytes:
    body = kind + payload
    return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))


def _png_claiming(width: int, height: int) -> bytes:
    ihdr = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + _chunk(b"IDAT", zlib.compress(b"")) + _chunk(b"IEND", b"")


def _encode(fmt: str, size: tuple[int, int] = (32, 24)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (90, 10, 200)).save(buf, format=fmt)
    return buf.getvalue()


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


GOOD_PNG = screenshot(3)
HOSTILE = {
    "empty": b"",
    "random bytes": bytes(range(256)) * 4,
    "text": b"<svg xmlns='http://www.w3.org/2000/svg'/>",
    "png signature only": b"\x89PNG\r\n\x1a\n",
    "truncated png": GOOD_PNG[: len(GOOD_PNG) // 2],
    "png without IEND": GOOD_PNG[:-12],
    "png with a bad CRC": _flip(GOOD_PNG, 29),
    "png pixel bomb (100k x 100k)": _png_claiming(100_000, 100_000),
    "png zero size": _png_claiming(0, 0),
    "truncated jpeg": _encode("JPEG")[:200],
    "jpeg without EOI": _encode("JPEG")[:-2],
    "gif (format not allowed)": _encode("GIF"),
    "bmp (format not allowed)": _encode("BMP"),
    "tiff (format not allowed)": _encode("TIFF"),
    "webp header only": _encode("WEBP")[:20],
    "png after garbage": b"junk" + GOOD_PNG,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_image_is_refused_and_nothing_is_stored(any_archive, case):
    with pytest.raises(ImageRejectedError):
        any_archive.put(HOSTILE[case])
    assert list(any_archive.iter_hashes()) == []


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "", "x" * 200, "ep\x00", "/abs"])
def test_path_like_episode_ids_are_refused(any_archive, bad):
    sha = any_archive.put(GOOD_PNG).sha256
    with pytest.raises(ArchiveKeyError):
        any_archive.retain(bad, [sha])
    with pytest.raises(ArchiveKeyError):
        any_archive.release(bad)
    assert any_archive.live_episodes() == []
