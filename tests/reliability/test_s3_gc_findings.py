"""Issue 27, findings 1 and 9: ``gc`` on a shared object store decides only from what the store says now.

Another process's view of the bucket is a plain boto3 client (no fsspec cache), exactly what a second
agent worker sees. Before the fix, ``FsspecArchive`` listed ``refs/`` through s3fs's listing cache, so a
collector never saw references written elsewhere after its first listing, ``retain`` trusted a cached
"this reference exists", and ``release`` missed references; object-store stamps (whole seconds) made the
grace up to a second shorter than set.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from reliability_helpers import age, screenshot

from causalcache_memory.archive import FsspecArchive, LocalArchive
from causalcache_memory.archive import _remote_gc as remote_gc
from causalcache_memory.errors import BlobNotFoundError


def _ref_key(archive: FsspecArchive, episode: str, sha: str) -> str:
    return f"{archive.root.split('/', 1)[1]}/refs/{episode}/{sha}"


def test_gc_sees_a_reference_another_process_wrote_after_its_listing(s3, s3_url):
    archive = FsspecArchive(s3_url, **s3.options)
    kept = archive.put(screenshot(1)).sha256
    archive.retain("mine", [kept])
    theirs = archive.put(screenshot(2)).sha256
    assert archive.live_episodes() == ["mine"]  # this process has listed refs/ once
    s3.client().put_object(Bucket=s3.bucket, Key=_ref_key(archive, "theirs", theirs), Body=b"")
    archive.gc(grace_seconds=0)
    assert theirs in archive and kept in archive
    assert archive.live_episodes() == ["mine", "theirs"]


def test_retain_writes_its_reference_even_if_a_listing_remembers_it(s3, s3_url):
    archive = FsspecArchive(s3_url, **s3.options)
    sha = archive.put(screenshot(3)).sha256
    archive.retain("ep", [sha])
    assert archive.references("ep") == {sha}  # listed (and cached) here ...
    s3.client().delete_object(Bucket=s3.bucket, Key=_ref_key(archive, "ep", sha))  # ... released there
    archive.retain("ep", [sha])  # must write the reference again
    FsspecArchive(s3_url, **s3.options).gc(grace_seconds=0)
    assert sha in archive


def test_release_removes_references_another_process_added(s3, s3_url):
    archive = FsspecArchive(s3_url, **s3.options)
    first, second = archive.put(screenshot(4)).sha256, archive.put(screenshot(5)).sha256
    archive.retain("ep", [first])
    assert archive.references("ep") == {first}
    s3.client().put_object(Bucket=s3.bucket, Key=_ref_key(archive, "ep", second), Body=b"")
    archive.release("ep")
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=_ref_key(archive, "ep", ""))
    assert listed.get("KeyCount", 0) == 0


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.mark.parametrize("grace", [1.0, 3.0])
def test_whole_second_stamps_never_shorten_the_grace(memory_url, monkeypatch, grace):
    """A stamp ``s`` (whole seconds, as S3 keeps them) may name a write at ``s + 0.99``: keep it until
    ``s + 1 + grace``; collect it after."""
    archive = FsspecArchive(memory_url)
    sha = archive.put(screenshot(6)).sha256
    stamp = 1_700_000_000.0
    path = f"{archive.root}/blobs/{sha[:2]}/{sha}"
    archive.fs.store[path].created = datetime.fromtimestamp(stamp, tz=UTC)
    clock = _Clock(stamp + 1 + grace - 0.25)  # written at most grace - 0.25 s ago
    monkeypatch.setattr(remote_gc, "time", clock)
    report = archive.gc(grace_seconds=grace)
    assert (report.deleted, report.skipped_recent, sha in archive) == (0, 1, True)
    clock.now = stamp + 1 + grace + 0.01  # certainly older than the grace now
    assert archive.gc(grace_seconds=grace).deleted == 1 and sha not in archive


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_retain_between_the_scan_and_the_marks_is_seen(tmp_path, monkeypatch, s3, s3_url, backend):
    """Finding 9: an aged object retained after the collector's scan and before its marks is kept; only
    the re-read of references after marking (``run_gc`` step 2) can see that reference."""
    if backend == "local":
        archive = LocalArchive(tmp_path / "archive")
    else:
        archive = FsspecArchive(s3_url, **s3.options)
    sha = archive.put(screenshot(7)).sha256
    if backend == "local":
        age(archive, sha, 7200)
    scan = archive._stored

    def scan_then_retain():
        stored = scan()
        archive.retain("late", [sha])  # another writer retains the candidate now
        return stored

    monkeypatch.setattr(archive, "_stored", scan_then_retain)
    report = archive.gc(grace_seconds=0)
    monkeypatch.undo()
    assert report.deleted == 0 and sha in archive
    assert archive.get_bytes(sha) == screenshot(7)


def test_retain_can_require_the_objects_to_be_stored(any_archive):
    """A retain that comes after its object was collected (later than the grace) can say so instead of
    recording a reference to nothing: the writer then knows to put the object again."""
    stored = any_archive.put(screenshot(8)).sha256
    missing = "d" * 64
    with pytest.raises(BlobNotFoundError, match=f"object {missing} is not stored"):
        any_archive.retain("ep", [stored, missing], require_stored=True)
    any_archive.retain("ep", [stored, missing])  # the default records a reference to anything
    assert any_archive.references("ep") == {stored, missing}


class _SlowCollectorClock:
    """``time`` for ``_gc``: the collector's monotonic clock jumps 16 s after it starts marking a chunk."""

    def __init__(self) -> None:
        self.calls = 0

    def monotonic(self) -> float:
        self.calls += 1
        return 0.0 if self.calls == 1 else 16.0

    @staticmethod
    def time() -> float:
        import time

        return time.time()


def test_gc_decides_nothing_once_its_markers_are_half_stale(tmp_path, monkeypatch):
    """Writers stop waiting for a marker after 30 s; a collector that took 15 s since marking a chunk
    (paused, slow storage) must not delete from it any more (A3 of the proof in docs/RELIABILITY.md)."""
    from causalcache_memory.archive import _gc

    archive = LocalArchive(tmp_path / "archive")
    sha = archive.put(screenshot(10)).sha256
    age(archive, sha, 7200)
    monkeypatch.setattr(_gc, "time", _SlowCollectorClock())
    report = archive.gc(grace_seconds=3600)
    assert (report.deleted, report.kept, sha in archive) == (0, 1, True)
    monkeypatch.undo()
    assert archive.gc(grace_seconds=3600).deleted == 1  # the next run decides it
