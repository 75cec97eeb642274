"""Validation of incoming image bytes: format sniffing, header sizes, pixel limits, truncation."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from causalcache_memory.archive import images
from causalcache_memory.archive.images import (
    encode_png,
    open_image_bytes,
    sniff_format,
    to_bytes,
    validate_image_bytes,
)
from causalcache_memory.errors import ImageRejectedError


def _chunk(kind: bytes, payload: bytes) -> bytes:
    body = kind + payload
    return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width x height`` but which carries (almost) no pixel data."""
    ihdr = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + _chunk(b"IDAT", zlib.compress(b"")) + _chunk(b"IEND", b"")


def _encode(image: Image.Image, fmt: str, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "kwargs", "mode"),
    [
        ("PNG", {}, "RGB"),
        ("JPEG", {}, "RGB"),
        ("JPEG", {"progressive": True, "exif": Image.Exif()}, "RGB"),
        ("WEBP", {"lossless": True}, "RGB"),
        ("WEBP", {"quality": 50}, "RGB"),
        ("WEBP", {}, "RGBA"),
    ],
)
@pytest.mark.parametrize("size", [(1, 1), (37, 301), (640, 17)])
def test_header_size_parser_agrees_with_pillow(fmt, kwargs, mode, size):
    data = _encode(Image.new(mode, size, (10, 200, 30, 128)[: len(mode)]), fmt, **kwargs)
    assert sniff_format(data) == fmt
    assert images._HEADER_SIZE[fmt](data) == size
    info = validate_image_bytes(data)
    assert (info.format, info.width, info.height) == (fmt, *size)


def test_oversized_header_rejected_before_pillow_decodes():
    data = _png_header_only(100_000, 100_000)
    with pytest.raises(ImageRejectedError, match="10000000000 pixels, above max_pixels=40000000"):
        validate_image_bytes(data)


def test_pillow_bomb_limit_is_mapped_and_global_untouched():
    before = Image.MAX_IMAGE_PIXELS
    assert before is not None
    side = int((2 * before) ** 0.5) + 10  # above Pillow's hard limit, below our (raised) limit
    with pytest.raises(ImageRejectedError, match="decompression-bomb"):
        open_image_bytes(_png_header_only(side, side), max_pixels=side * side)
    assert Image.MAX_IMAGE_PIXELS == before


def test_png_with_bad_crc_rejected():
    data = bytearray(_encode(Image.effect_noise((32, 32), 50).convert("RGB"), "PNG"))
    idat = data.index(b"IDAT")
    data[idat + 10] ^= 0xFF
    with pytest.raises(ImageRejectedError, match="PNG is truncated or corrupt"):
        validate_image_bytes(bytes(data))


def test_truncated_webp_rejected():
    data = _encode(Image.effect_noise((32, 32), 50).convert("RGB"), "WEBP")
    with pytest.raises(ImageRejectedError, match="WEBP"):
        validate_image_bytes(data[:-30])


def test_empty_size_rejected():
    with pytest.raises(ImageRejectedError, match="empty"):
        validate_image_bytes(_png_header_only(0, 10))


def test_encode_png_round_trip_and_modes():
    image = Image.new("RGB", (5, 4), (1, 2, 3))
    data = encode_png(image)
    assert sniff_format(data) == "PNG"
    with Image.open(io.BytesIO(data)) as back:
        assert back.convert("RGB").getpixel((1, 1)) == (1, 2, 3)
    cmyk = Image.new("CMYK", (3, 3))
    assert validate_image_bytes(encode_png(cmyk)).format == "PNG"
    assert to_bytes(bytearray(b"ab")) == b"ab"


def test_bad_options_rejected():
    with pytest.raises(ValueError, match="max_pixels"):
        images.check_max_pixels(0)
    with pytest.raises(ValueError, match="formats"):
        images.check_formats([])
