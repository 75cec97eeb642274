"""Record contract for every backend: content-addressed JSON records beside the screenshot blobs."""

from __future__ import annotations

import hashlib
import json

import pytest

from causalcache_memory.errors import ArchiveKeyError, BlobCorruptError, BlobNotFoundError


def _record(i: int) -> bytes:
    return json.dumps({"v": 1, "i": i, "text": "not an image"}, sort_keys=True).encode()


def test_put_record_round_trips_and_dedups(archive):
    data = _record(1)
    sha = archive.put_record(data)
    assert sha == hashlib.sha256(data).hexdigest()
    assert archive.get_record(sha) == data
    assert archive.put_record(bytearray(data)) == sha  # same content: one record
    assert list(archive.iter_records()) == [sha] and archive.has_record(sha)


def test_records_are_not_blobs(archive):
    sha = archive.put_record(_record(2))
    assert sha not in archive and list(archive.iter_hashes()) == []
    with pytest.raises(BlobNotFoundError):
        archive.get_bytes(sha)


def test_missing_record_and_bad_input(archive):
    absent = hashlib.sha256(b"absent").hexdigest()
    with pytest.raises(BlobNotFoundError, match=f"record {absent}"):
        archive.get_record(absent)
    with pytest.raises(ArchiveKeyError):
        archive.get_record("../etc/passwd")
    with pytest.raises(ArchiveKeyError, match="must be bytes"):
        archive.put_record("a string")  # type: ignore[arg-type]


def _overwrite(archive, sha: str, data: bytes) -> None:
    rel = f"records/{sha[:2]}/{sha}"
    if hasattr(archive, "fs"):
        archive.fs.pipe_file(f"{archive.root}/{rel}", data)
    else:
        (archive.root / rel).write_bytes(data)


def test_corrupt_record_is_never_returned(archive):
    sha = archive.put_record(_record(3))
    _overwrite(archive, sha, _record(4))
    with pytest.raises(BlobCorruptError, match=f"record {sha}.*corrupt"):
        archive.get_record(sha)


def test_gc_keeps_retained_records_and_drops_released_ones(archive):
    live, dead = archive.put_record(_record(5)), archive.put_record(_record(6))
    archive.retain("live-episode", [live])
    archive.retain("dead-episode", [dead])
    archive.release("dead-episode")
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 1 and report.kept == 1
    assert archive.get_record(live) == _record(5)
    assert not archive.has_record(dead)
    with pytest.raises(BlobNotFoundError):
        archive.get_record(dead)


def test_gc_grace_period_protects_fresh_records(archive):
    sha = archive.put_record(_record(7))
    report = archive.gc(grace_seconds=3600)
    assert report.deleted == 0 and report.skipped_recent == 1 and archive.has_record(sha)
