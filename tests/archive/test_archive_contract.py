"""The ScreenshotArchive contract, run on the local-directory and memory:// backends."""

from __future__ import annotations

import io
import os
import time
from datetime import UTC, datetime

import pytest
from archive_helpers import blob_file, corrupt
from PIL import Image

from causalcache_memory.archive import FsspecArchive, LocalArchive, ScreenshotArchive
from causalcache_memory.errors import (
    ArchiveKeyError,
    BlobCorruptError,
    BlobNotFoundError,
    ImageRejectedError,
)


def test_backends_satisfy_protocol(archive):
    assert isinstance(archive, ScreenshotArchive)
    assert isinstance(archive.url, str) and archive.url


def test_round_trip_keeps_original_bytes(archive, make_png):
    data = make_png((1, 2, 3), text="orders")
    sha = archive.put(data).sha256
    assert len(sha) == 64
    assert archive.get_bytes(sha) == data
    assert sha in archive
    assert list(archive.iter_hashes()) == [sha]


def test_jpeg_and_webp_are_stored_without_reencoding(archive):
    image = Image.new("RGB", (40, 30), (200, 10, 10))
    for fmt in ("JPEG", "WEBP"):
        buf = io.BytesIO()
        image.save(buf, format=fmt)
        data = buf.getvalue()
        sha = archive.put(data).sha256
        assert archive.get_bytes(sha) == data
        with archive.open_image(sha) as opened:
            assert opened.format == fmt and opened.size == (40, 30)


def test_pil_image_is_encoded_as_png(archive):
    sha = archive.put(Image.new("RGB", (8, 6), (5, 6, 7))).sha256
    with archive.open_image(sha) as opened:
        assert opened.format == "PNG"
        assert opened.convert("RGB").getpixel((3, 3)) == (5, 6, 7)


def test_same_bytes_stored_once(archive, make_png):
    data = make_png((9, 9, 9))
    assert archive.put(data).sha256 == archive.put(data).sha256
    other = archive.put(make_png((9, 9, 10))).sha256
    assert sorted(archive.iter_hashes()) == sorted({archive.put(data).sha256, other})


def test_open_image_is_lazy_and_correct(archive, make_png):
    sha = archive.put(make_png((12, 34, 56), size=(20, 10))).sha256
    image = archive.open_image(sha)
    assert image.size == (20, 10)
    assert image.convert("RGB").getpixel((5, 5)) == (12, 34, 56)


def test_corruption_is_detected(archive, make_png):
    sha = archive.put(make_png((1, 1, 1), size=(64, 64))).sha256
    corrupt(archive, sha)
    with pytest.raises(BlobCorruptError, match=sha):
        archive.get_bytes(sha)
    with pytest.raises(BlobCorruptError):
        archive.open_image(sha)


def test_missing_blob(archive):
    missing = "0" * 64
    assert missing not in archive
    with pytest.raises(BlobNotFoundError, match=missing):
        archive.get_bytes(missing)
    with pytest.raises(BlobNotFoundError):
        archive.open_image(missing)


@pytest.mark.parametrize("bad", ["", "abc", "A" * 64, "../" + "a" * 61, "g" * 64, 12])
def test_malformed_hash_rejected_before_io(archive, bad):
    with pytest.raises(ArchiveKeyError, match="64 lower-case hex"):
        archive.get_bytes(bad)
    assert bad not in archive


def _truncated_png(make_png) -> bytes:
    data = make_png((1, 2, 3), size=(64, 64), text="x")
    return data[: len(data) - 20]


@pytest.mark.parametrize(
    ("label", "match"),
    [
        ("text", "not a PNG, JPEG or WEBP"),
        ("empty", "not a PNG, JPEG or WEBP"),
        ("truncated_png", "truncated or corrupt"),
        ("truncated_jpeg", "end-of-image"),
        ("gif", "not a PNG, JPEG or WEBP"),
        ("not_bytes", "PIL.Image.Image"),
    ],
)
def test_bad_input_rejected_and_nothing_stored(archive, make_png, label, match):
    kept = archive.put(make_png((7, 7, 7))).sha256
    if label == "text":
        data: object = b"hello, this is not a screenshot"
    elif label == "empty":
        data = b""
    elif label == "truncated_png":
        data = _truncated_png(make_png)
    elif label == "truncated_jpeg":
        buf = io.BytesIO()
        Image.effect_noise((64, 64), 40).convert("RGB").save(buf, format="JPEG")
        data = buf.getvalue()[:-10]
    elif label == "gif":
        buf = io.BytesIO()
        Image.new("RGB", (4, 4)).save(buf, format="GIF")
        data = buf.getvalue()
    else:
        data = 123
    with pytest.raises(ImageRejectedError, match=match):
        archive.put(data)
    assert list(archive.iter_hashes()) == [kept]
    assert archive.get_bytes(kept) == make_png((7, 7, 7))


def test_oversized_image_rejected(make_archive, make_png):
    archive = make_archive(max_pixels=64 * 48 - 1)
    with pytest.raises(ImageRejectedError, match="max_pixels=3071"):
        archive.put(make_png(size=(64, 48)))
    assert list(archive.iter_hashes()) == []
    assert len(archive.put(make_png(size=(32, 48))).sha256) == 64


def test_decode_enforces_pixel_limit(make_archive, make_png):
    sha = make_archive().put(make_png(size=(64, 48))).sha256
    strict = make_archive(max_pixels=100)
    assert strict.get_bytes(sha)  # bytes are still readable
    with pytest.raises(ImageRejectedError, match="max_pixels=100"):
        strict.open_image(sha)


def test_format_allow_list(make_archive):
    archive = make_archive(formats=["png"])
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="JPEG")
    with pytest.raises(ImageRejectedError, match="JPEG images are not accepted"):
        archive.put(buf.getvalue())
    with pytest.raises(ValueError, match="formats="):
        make_archive(formats=["GIF"])


@pytest.mark.parametrize(
    "episode", ["../x", "a/b", "..", ".", "", "a\\b", "/abs", ".hidden", "x" * 129, "a b"]
)
def test_path_like_episode_ids_rejected(archive, make_png, episode):
    sha = archive.put(make_png()).sha256
    with pytest.raises(ArchiveKeyError, match="episode_id="):
        archive.retain(episode, [sha])
    with pytest.raises(ArchiveKeyError):
        archive.release(episode)
    assert archive.live_episodes() == []


def test_retain_validates_all_hashes_before_writing(archive, make_png):
    sha = archive.put(make_png()).sha256
    with pytest.raises(ArchiveKeyError):
        archive.retain("ep-1", [sha, "not-a-hash"])
    assert archive.live_episodes() == []


def test_retain_release_and_gc(archive, make_png):
    keep = archive.put(make_png((1, 0, 0))).sha256
    shared = archive.put(make_png((2, 0, 0))).sha256
    drop = archive.put(make_png((3, 0, 0))).sha256
    archive.retain("ep-1", [keep, shared])
    archive.retain("ep_2.b", [shared])
    archive.retain("ep_2.b", [shared])  # idempotent
    assert archive.live_episodes() == ["ep-1", "ep_2.b"]

    report = archive.gc(grace_seconds=3600)
    assert (report.kept, report.deleted, report.skipped_recent) == (2, 0, 1)

    dry = archive.gc(grace_seconds=0, dry_run=True)
    assert (dry.kept, dry.deleted) == (2, 1) and dry.bytes_freed == len(make_png((3, 0, 0)))
    assert drop in archive

    report = archive.gc(grace_seconds=0)
    assert (report.kept, report.deleted) == (2, 1)
    assert drop not in archive and keep in archive and shared in archive

    archive.release("ep-1")
    assert archive.live_episodes() == ["ep_2.b"]
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 1 and keep not in archive
    assert archive.get_bytes(shared) == make_png((2, 0, 0))
    archive.release("never-existed")  # no error


def test_gc_grace_uses_blob_age(archive, make_png):
    old = archive.put(make_png((1, 1, 0))).sha256
    new = archive.put(make_png((1, 1, 1))).sha256
    if isinstance(archive, LocalArchive):
        past = time.time() - 7200
        os.utime(blob_file(archive, old), (past, past))
    else:
        assert isinstance(archive, FsspecArchive)
        past_dt = datetime.fromtimestamp(time.time() - 7200, tz=UTC)
        archive.fs.store[blob_file(archive, old)].created = past_dt
    report = archive.gc(grace_seconds=3600)
    assert (report.deleted, report.skipped_recent) == (1, 1)
    assert old not in archive and new in archive
