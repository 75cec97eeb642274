"""Validation of screenshot bytes offered to the archive, without re-encoding them.

Everything ``put`` stores decodes: validation ends with a full decode of the pixel data, so a corrupt
image is refused at ``put`` with :class:`ImageRejectedError` instead of failing later with a bare
``OSError`` when a prompt is rendered. The cheap checks run first:

1. sniff the container format from the magic bytes (PNG, JPEG, WEBP; configurable allow-list);
2. read the pixel size from the header with a tiny parser of our own, and reject ``width * height >
   max_pixels`` *before* Pillow sees the bytes;
3. open the header with Pillow (lazy: no pixel decode) restricted to the sniffed format, re-check the size,
   and map Pillow's decompression-bomb error or warning to :class:`ImageRejectedError`;
4. a structural check: PNG chunk CRCs up to ``IEND`` via ``Image.verify()`` (about 0.25 ms for a
   1920x1080 screenshot, less than hashing it), the JPEG end-of-image marker, the WEBP RIFF length;
5. the full decode (:func:`check_decodes`), bounded by ``max_pixels`` (checked before it). For a
   non-interlaced PNG (every screenshot we have seen) the ``IDAT`` zlib stream is inflated in 1 MiB
   pieces and discarded: it must inflate to exactly the ``height * (1 + row_bytes)`` bytes the header
   declares, end with a valid Adler-32, and every row must start with a filter type 0-4. That is every
   way the pixel data of a PNG can fail to decode (unfiltering itself cannot fail), at about 60% of
   the cost of Pillow's ``load()``. CPU time per 1920x1080 image on the 2-core development machine:
   a ~450 KB screenshot PNG 13.0 ms (header checks alone 0.12 ms, sha256 0.24 ms, Pillow ``load()``
   21.4 ms); a 2.4 MB PNG 14.1 ms.
   Inflating is the floor of any complete check. Other images (JPEG, WEBP, interlaced PNG) are decoded
   with Pillow's ``load()`` once and dropped (1.2 MB 1080p JPEG ~15 ms).

Pillow's global ``Image.MAX_IMAGE_PIXELS`` is never modified (that would leak across threads); our own
``max_pixels`` check runs first and again on every decode. If you raise ``max_pixels`` above Pillow's
global limit, Pillow may still warn or refuse very large images; such refusals are reported as
:class:`ImageRejectedError` too.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from causalcache_memory.errors import ImageRejectedError

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "DEFAULT_FORMATS",
    "DEFAULT_MAX_PIXELS",
    "ImageInfo",
    "check_decodes",
    "check_formats",
    "check_pixels",
    "encode_png",
    "open_image_bytes",
    "sniff_format",
    "to_bytes",
    "validate_image_bytes",
]

DEFAULT_MAX_PIXELS = 40_000_000
DEFAULT_FORMATS: tuple[str, ...] = ("PNG", "JPEG", "WEBP")
_KNOWN = frozenset(DEFAULT_FORMATS)
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What validation learned about accepted bytes."""

    format: str
    width: int
    height: int


def check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """Normalize an allow-list of formats (upper case); raise ``ValueError`` for unknown names."""
    if isinstance(formats, str):
        formats = (formats,)
    out = tuple(dict.fromkeys(str(f).upper() for f in formats))
    bad = [f for f in out if f not in _KNOWN]
    if bad or not out:
        raise ValueError(f"formats={list(formats)!r} must be a non-empty subset of {list(DEFAULT_FORMATS)}")
    return out


def check_max_pixels(max_pixels: object) -> int:
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels < 1:
        raise ValueError(
            f"max_pixels={max_pixels!r} must be a positive integer (default {DEFAULT_MAX_PIXELS})"
        )
    return max_pixels


def sniff_format(data: bytes) -> str | None:
    """Container format from the magic bytes: ``"PNG"``, ``"JPEG"``, ``"WEBP"`` or None."""
    if data.startswith(_PNG_MAGIC):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


def _png_size(data: bytes) -> tuple[int, int] | None:
    if len(data) >= 24 and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    pos, n = 2, len(data)
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # start of frame
            if pos + 9 > n:
                return None
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return width, height
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        pos += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    if len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_HEADER_SIZE = {"PNG": _png_size, "JPEG": _jpeg_size, "WEBP": _webp_size}


def _reject_size(width: int, height: int, max_pixels: int) -> None:
    if width < 1 or height < 1:
        raise ImageRejectedError(
            f"image size {width}x{height} is empty; screenshots need at least 1x1 pixels"
        )
    if width * height > max_pixels:
        raise ImageRejectedError(
            f"image is {width}x{height} = {width * height} pixels, above max_pixels={max_pixels}; "
            "downscale the screenshot or raise max_pixels of the archive"
        )


def _structure_error(fmt: str, data: bytes) -> str | None:
    if fmt == "JPEG" and b"\xff\xd9" not in data[-64:]:
        return "JPEG has no end-of-image marker (truncated)"
    if fmt == "WEBP":
        declared = int.from_bytes(data[4:8], "little") + 8
        if declared > len(data):
            return f"WEBP declares {declared} bytes but has {len(data)} (truncated)"
    return None


def open_image_bytes(
    data: bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS, formats: Iterable[str] = DEFAULT_FORMATS
) -> Image.Image:
    """Open ``data`` lazily (header only) after the format and pixel-limit checks.

    The returned image decodes its pixels on first access; its size has been checked against
    ``max_pixels``, so decoding allocates at most ``max_pixels`` pixels.
    """
    from PIL import Image

    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ImageRejectedError(f"image data must be bytes or a PIL image, got {type(data).__name__}")
    data = bytes(data)
    allowed = check_formats(formats)
    fmt = sniff_format(data)
    if fmt is None:
        head = data[:8]
        raise ImageRejectedError(
            f"bytes ({len(data)} bytes, starting {head!r}) are not a PNG, JPEG or WEBP image"
        )
    if fmt not in allowed:
        raise ImageRejectedError(f"{fmt} images are not accepted by this archive (formats={list(allowed)})")
    size = _HEADER_SIZE[fmt](data)
    if size is not None:
        _reject_size(*size, max_pixels)
    try:
        image = Image.open(io.BytesIO(data), formats=[fmt])
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRejectedError(f"{fmt} image refused by Pillow's decompression-bomb limit: {exc}") from exc
    except Exception as exc:
        raise ImageRejectedError(f"{fmt} header could not be read ({type(exc).__name__}: {exc})") from exc
    _reject_size(image.width, image.height, max_pixels)
    return image


def validate_image_bytes(
    data: bytes,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    formats: Iterable[str] = DEFAULT_FORMATS,
    decode: bool = True,
) -> ImageInfo:
    """Check that ``data`` is an acceptable image whose pixel data decodes (see the module docstring).

    ``decode=False`` stops before :func:`check_pixels` (PNG chunk CRCs and the full decode, the costly
    part: ~13 ms for a 1080p PNG); a caller that passes it must run :func:`check_pixels` before the bytes
    are stored (:class:`~causalcache_memory.archive.deferred.DeferredArchive` does, on its writer thread).

    Raises :class:`ImageRejectedError` naming what is wrong (not an image, format not allowed, too many
    pixels, truncated or corrupt).
    """
    image = open_image_bytes(data, max_pixels=max_pixels, formats=formats)
    fmt = str(image.format)
    info = ImageInfo(format=fmt, width=image.width, height=image.height)
    image.close()
    problem = _structure_error(fmt, bytes(data))
    if problem is not None:
        raise ImageRejectedError(problem)
    if decode:
        check_pixels(bytes(data), fmt, max_pixels=max_pixels)
    return info


def check_pixels(data: bytes, fmt: str, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    """The costly half of :func:`validate_image_bytes`: PNG chunk CRCs, then :func:`check_decodes`.

    ``data`` is a ``fmt`` image whose header, pixel count and structure were already checked.

    Raises:
        ImageRejectedError: a chunk CRC does not match, or the pixel data is corrupt or truncated.
    """
    if fmt == "PNG":
        from PIL import Image

        try:
            with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
                image.verify()  # chunk CRCs up to IEND; no pixel decode
        except Exception as exc:
            raise ImageRejectedError(f"PNG is truncated or corrupt ({type(exc).__name__}: {exc})") from exc
    check_decodes(data, fmt, max_pixels=max_pixels)


def check_decodes(data: bytes, fmt: str, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    """Decode the pixel data of ``data`` (a ``fmt`` image already header-checked) and drop it.

    Raises:
        ImageRejectedError: the pixel data is corrupt or truncated (names the format and the failure).
    """
    if fmt == "PNG":
        header = _png_header(data)
        if header is not None and header[4] == 0:  # not interlaced: inflate-only check
            problem = _png_data_problem(data, header)
            if problem is not None:
                raise ImageRejectedError(f"PNG pixel data is corrupt: {problem}")
            return
    image = open_image_bytes(data, max_pixels=max_pixels, formats=(fmt,))
    try:
        image.load()
    except Exception as exc:
        raise ImageRejectedError(
            f"{fmt} pixel data does not decode ({type(exc).__name__}: {exc}); the image is corrupt"
        ) from exc
    finally:
        image.close()


_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_PNG_PIECE = 1 << 20
_PNG_SURPLUS = 1 << 16


def _png_header(data: bytes) -> tuple[int, int, int, int, int] | None:
    """``(width, height, bit_depth, color_type, interlace)`` from ``IHDR``; None if unusual."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    return (width, height, depth, color, interlace) if color in _PNG_CHANNELS else None


def _png_data_problem(data: bytes, header: tuple[int, int, int, int, int]) -> str | None:
    """Inflate the ``IDAT`` stream piece by piece (output dropped); what is wrong with it, or None.

    Expected size: ``height * (1 + ceil(width * channels * bit_depth / 8))`` bytes; each row starts with
    its filter type byte (0-4). Chunk CRCs were checked by ``Image.verify()`` before.
    """
    width, height, depth, color, _ = header
    stride = 1 + (width * _PNG_CHANNELS[color] * depth + 7) // 8
    expected = height * stride
    inflater = zlib.decompressobj()
    produced = 0
    try:
        for chunk in _png_idat(data):
            pending = chunk
            while pending and not inflater.eof:
                piece = inflater.decompress(pending, _PNG_PIECE)
                pending = inflater.unconsumed_tail
                rows = piece[(-produced) % stride : max(0, expected - produced) : stride]
                if rows and max(rows) > 4:
                    return f"a row starts with filter type {max(rows)} (valid: 0-4)"
                produced += len(piece)
                if produced > expected + _PNG_SURPLUS:
                    return f"the image data inflates beyond the {expected} bytes its header declares"
    except zlib.error as exc:
        return f"the zlib stream is broken after {produced} of {expected} bytes ({exc})"
    if produced < expected:
        return f"the image data ends after {produced} of {expected} bytes (truncated)"
    if not inflater.eof:
        return "the zlib stream has no end (its Adler-32 checksum is missing)"
    return None


def _png_idat(data: bytes) -> Iterable[bytes]:
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            yield data[pos + 8 : pos + 8 + length]
        elif kind == b"IEND":
            return
        pos += 12 + length


def encode_png(image: Image.Image) -> bytes:
    """Encode a PIL image as PNG (the only case where the archive encodes: a caller passed pixels)."""
    buf = io.BytesIO()
    if image.mode not in ("1", "L", "LA", "I", "P", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    image.save(buf, format="PNG")
    return buf.getvalue()


def to_bytes(data: object) -> bytes:
    """``bytes`` unchanged; a PIL image encoded as PNG; anything else rejected."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - pillow is a core dependency
        Image = None  # type: ignore[assignment]
    if Image is not None and isinstance(data, Image.Image):
        return encode_png(data)
    raise ImageRejectedError(
        f"put() takes PNG/JPEG/WEBP bytes or a PIL.Image.Image, got {type(data).__name__}"
    )
