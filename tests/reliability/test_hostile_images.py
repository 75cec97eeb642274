"""Hostile images: every corrupt, truncated, disguised or oversized payload is refused, nothing is stored."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image
from reliability_helpers import screenshot

from causalcache_memory.archive import LocalArchive
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


# ---------------------------------------------------------------- issue 27, finding 5: full decode at put
def _noise(fmt: str, size: tuple[int, int] = (64, 48), **save) -> bytes:
    import numpy as np

    pixels = np.random.default_rng(1).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt, **save)
    return buf.getvalue()


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    out, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        out.append((data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return out


def _png_with_idat(data: bytes, edit) -> bytes:
    """``data`` with its IDAT payload replaced by ``edit(payload)``; every CRC is recomputed (valid)."""
    chunks = _png_chunks(data)
    idat = b"".join(p for k, p in chunks if k == b"IDAT")
    body = b"".join(_chunk(k, p) for k, p in chunks if k not in (b"IDAT", b"IEND"))
    return b"\x89PNG\r\n\x1a\n" + body + _chunk(b"IDAT", edit(idat)) + _chunk(b"IEND", b"")


def _flip_in(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1 :]


def _webp_truncated_frame(data: bytes) -> bytes:
    """A lossy WEBP whose VP8 frame is cut in half, with the RIFF and chunk lengths made consistent."""
    (length,) = struct.unpack("<I", data[16:20])
    half = data[20 : 20 + length // 2]
    return b"RIFF" + struct.pack("<I", 12 + len(half)) + b"WEBPVP8 " + struct.pack("<I", len(half)) + half


def _jpeg_without_huffman_codes(data: bytes) -> bytes:
    at = data.index(b"\xff\xc4") + 5  # the 16 code-length counts of the first Huffman table
    return data[:at] + b"\x00" * 16 + data[at + 16 :]


PNG_NOISE = _noise("PNG")
UNDECODABLE = {
    "png: corrupt zlib data, valid CRCs": _png_with_idat(PNG_NOISE, lambda z: _flip_in(z, len(z) // 2)),
    "png: bad Adler-32, valid CRCs": _png_with_idat(PNG_NOISE, lambda z: _flip_in(z, len(z) - 2)),
    "png: image data cut short, valid CRCs": _png_with_idat(
        PNG_NOISE, lambda z: zlib.compress(zlib.decompress(z)[:-100])
    ),
    "png: bad row filter type, valid CRCs": _png_with_idat(
        PNG_NOISE, lambda z: zlib.compress(b"\x07" + zlib.decompress(z)[1:])
    ),
    "jpeg: broken Huffman table": _jpeg_without_huffman_codes(_noise("JPEG")),
    "webp (lossy): truncated frame, consistent lengths": _webp_truncated_frame(_noise("WEBP")),
    "webp (lossless): flipped bitstream byte": _flip_in(_noise("WEBP", lossless=True), 54),
}


@pytest.mark.parametrize("case", sorted(UNDECODABLE))
def test_undecodable_image_is_refused_at_put(any_archive, case):
    """These were stored by ``put`` and failed later, at decode, with a bare OSError."""
    data = UNDECODABLE[case]
    with pytest.raises(OSError):  # the payload really does not decode
        Image.open(io.BytesIO(data)).load()
    with pytest.raises(ImageRejectedError, match="pixel data"):
        any_archive.put(data)
    assert list(any_archive.iter_hashes()) == []


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_decodable_images_are_still_stored(any_archive, fmt):
    any_archive.put(_noise(fmt))
    (sha,) = any_archive.iter_hashes()
    with Image.open(io.BytesIO(any_archive.get_bytes(sha))) as image:
        image.load()


def test_png_check_agrees_with_pillow_on_random_damage():
    """The inflate-only PNG check never accepts what Pillow cannot decode (nor refuses what it decodes)."""
    import random

    from causalcache_memory.archive.images import validate_image_bytes

    rng = random.Random(27)
    idat = sum(len(p) for k, p in _png_chunks(PNG_NOISE) if k == b"IDAT")
    disagreements, refused = [], 0
    for case in range(300):
        at = rng.randrange(idat)
        damaged = _png_with_idat(PNG_NOISE, lambda z, at=at: _flip_in(z, at))
        try:
            Image.open(io.BytesIO(damaged)).load()
            pillow_ok = True
        except OSError:
            pillow_ok = False
        try:
            validate_image_bytes(damaged)
            ours_ok = True
        except ImageRejectedError:
            ours_ok = False
        refused += not ours_ok
        if ours_ok and not pillow_ok:
            disagreements.append(case)
    assert disagreements == []
    assert refused > 250  # almost every flipped byte of compressed data is detected


@pytest.mark.parametrize("case", sorted(UNDECODABLE))
def test_undecodable_image_is_never_stored_by_a_deferred_archive(tmp_path, case):
    """The LangGraph memory defers the full decode to its writer thread (off the step's critical path):
    the refusal then comes from ``put`` or from the next ``flush`` (which every commit waits for), and
    the payload never reaches the archive."""
    from causalcache_memory.archive.deferred import DeferredArchive

    inner = LocalArchive(tmp_path)
    view = DeferredArchive(inner)
    with pytest.raises(ImageRejectedError, match="pixel data"):
        view.put(UNDECODABLE[case])
        view.flush()
    assert list(inner.iter_hashes()) == []
    view.flush()  # the failure is reported once
    view.close()


def test_a_deferred_put_leaves_the_full_decode_to_the_writer_thread(tmp_path):
    from causalcache_memory.archive.deferred import DeferredArchive

    view = DeferredArchive(LocalArchive(tmp_path))
    stored = view.put(UNDECODABLE["png: corrupt zlib data, valid CRCs"])  # header and structure are fine
    assert stored.format == "PNG"
    with pytest.raises(ImageRejectedError, match="pixel data"):
        view.flush()
    assert stored.sha256 not in view
    view.close()


def test_a_bad_crc_is_refused_by_a_deferred_archive_before_the_write(tmp_path):
    """The PNG chunk CRCs are checked with the pixel decode on the writer thread (``check_pixels``)."""
    from causalcache_memory.archive.deferred import DeferredArchive

    inner = LocalArchive(tmp_path)
    view = DeferredArchive(inner)
    with pytest.raises(ImageRejectedError, match="truncated or corrupt"):
        view.put(_flip(GOOD_PNG, len(GOOD_PNG) - 13))  # the IDAT chunk's CRC: the header still reads
        view.flush()
    assert list(inner.iter_hashes()) == []
    view.close()
