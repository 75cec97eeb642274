"""The shared archive on a real S3 API (moto's server mode on loopback): several processes, integrity,
GC with the grace rule, credentials from the standard environment, and the write-through cache."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from causalcache_memory.archive import open_archive
from causalcache_memory.archive.cached import CachedArchive
from causalcache_memory.errors import BlobCorruptError, BlobNotFoundError

WORKER = Path(__file__).with_name("s3_worker.py")


def _png(i: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (24, 16), (i % 256, 80, 160)).save(buf, "PNG")
    return buf.getvalue()


def _run(s3, *args: str) -> dict:
    env = {**os.environ, **s3.env}
    out = subprocess.run(
        [sys.executable, str(WORKER), *args], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _spawn(s3, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, **s3.env}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_several_processes_write_and_read_one_archive(s3):
    url = f"s3://{s3.bucket}/shared"
    procs = [_spawn(s3, "write", url, f"ep-{k}", str(k), "4") for k in range(3)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    shared = {r["hashes"][-1] for r in results}
    assert len(shared) == 1  # the screenshot every writer stored is one blob
    everything = sorted({h for r in results for h in r["hashes"]})
    assert len(everything) == 3 * 4 + 1
    read = _run(s3, "read", url, *everything)  # a fourth process reads what the others wrote
    assert set(read) == set(everything) and all(size > 0 for size in read.values())
    archive = open_archive(url)  # credentials and endpoint from the environment only
    assert sorted(archive.iter_hashes()) == everything
    assert archive.live_episodes() == ["ep-0", "ep-1", "ep-2"]
    for k, r in enumerate(results):
        assert archive.references(f"ep-{k}") == {*r["hashes"], r["record"]}
        assert json.loads(archive.get_record(r["record"]))["hashes"] == r["hashes"]


def test_integrity_a_changed_object_is_refused(s3):
    import boto3

    archive = open_archive(f"s3://{s3.bucket}/integrity")
    sha = archive.put(_png(1)).sha256
    key = f"integrity/blobs/{sha[:2]}/{sha}"
    boto3.client("s3").put_object(Bucket=s3.bucket, Key=key, Body=_png(2))  # same key, other bytes
    fresh = open_archive(f"s3://{s3.bucket}/integrity")
    with pytest.raises(BlobCorruptError):
        fresh.get_bytes(sha)
    with pytest.raises(BlobNotFoundError):
        fresh.get_bytes("0" * 64)


def test_gc_keeps_live_and_young_blobs_and_collects_released_ones(s3):
    url = f"s3://{s3.bucket}/gc"
    writer = _run(s3, "write", url, "ep-live", "5", "2")
    archive = open_archive(url)
    orphan = archive.put(_png(77)).sha256  # stored, never retained: only the grace period protects it
    report = archive.gc(grace_seconds=3600)
    assert report.deleted == 0 and report.skipped_recent == 1  # young orphan kept by the grace rule
    assert orphan in archive
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 1 and orphan not in archive  # past the grace period it goes
    assert all(h in archive for h in writer["hashes"])  # the live episode's blobs stay
    archive.release("ep-live")
    archive.gc(grace_seconds=0)
    assert list(archive.iter_hashes()) == []


def test_write_through_cache_returns_after_the_shared_store_and_reads_locally(s3, tmp_path):
    url = f"s3://{s3.bucket}/cached"
    cached = open_archive(url, cache_dir=tmp_path / "cache")
    assert isinstance(cached, CachedArchive) and cached.url == url
    sha = cached.put(_png(3)).sha256
    assert sha in open_archive(url)  # already in the shared archive when put returned
    assert cached.get_bytes(sha) == _png(3) and cached.hits == 1 and cached.misses == 0
    (tmp_path / "cache" / "blobs" / sha[:2] / sha).write_bytes(b"torn")  # a bad local copy is not served
    assert cached.get_bytes(sha) == _png(3) and cached.misses == 1
    other = CachedArchive(open_archive(url), tmp_path / "other-cache")  # another worker: reads from S3 once
    assert other.open_image(sha).size == (24, 16) and other.misses == 1
    assert other.get_bytes(sha) == _png(3) and other.hits == 1
    cached.retain("ep-c", [sha])
    assert open_archive(url).live_episodes() == ["ep-c"]


def test_cache_never_keeps_what_the_shared_store_refused(tmp_path):
    class Refusing:
        url = "memory://refusing"

        def put(self, data: bytes) -> str:
            raise OSError("upload failed")

    cached = CachedArchive(Refusing(), tmp_path / "cache")  # type: ignore[arg-type]
    with pytest.raises(OSError, match="upload failed"):
        cached.put(_png(4))
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_cache_is_bounded(s3, tmp_path):
    cached = CachedArchive(
        open_archive(f"s3://{s3.bucket}/bounded"), tmp_path / "c", max_bytes=3 * len(_png(0)) + 50
    )
    hashes = [cached.put(_png(i)).sha256 for i in range(6)]
    kept = [h for h in hashes if (tmp_path / "c" / "blobs" / h[:2] / h).exists()]
    assert 1 <= len(kept) <= 3 and kept == hashes[-len(kept) :]  # the oldest copies went first
    assert all(cached.get_bytes(h) for h in hashes)  # evicted copies are read from S3 again


def test_config_cache_dir_builds_the_cached_archive(tmp_path):
    from causalcache_memory.config.models import ArchiveConfig
    from causalcache_memory.factory import build_archive

    archive = build_archive(ArchiveConfig(url=str(tmp_path / "a"), cache_dir=str(tmp_path / "c")))
    assert isinstance(archive, CachedArchive)
    assert not isinstance(build_archive(ArchiveConfig(url=str(tmp_path / "a"))), CachedArchive)
