"""Screen text beside its screenshot: put_text/get_text, the size cap, first-text-stays, GC and check,
on every backend (local directory, memory://; S3 on moto: tests/reliability/test_s3_screen_text.py) and through the Cached/Deferred views."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from causalcache_memory.archive import FsspecArchive, LocalArchive, check_archive
from causalcache_memory.archive._texts import MAX_TEXT_BYTES
from causalcache_memory.archive.cached import CachedArchive
from causalcache_memory.archive.deferred import DeferredArchive
from causalcache_memory.errors import BlobCorruptError, BlobNotFoundError, ScreenTextError

ORDER = "Order #A-1042 · Desk Lamp · 3 × €19.90"


def text_file(archive: object, sha: str) -> str:
    rel = f"texts/{sha[:2]}/{sha}"
    if isinstance(archive, LocalArchive):
        return str(archive.root / rel)
    assert isinstance(archive, FsspecArchive)
    return f"{archive.root}/{rel}"


def age(archive: object, path: str, seconds: float) -> None:
    """Make the object at ``path`` look ``seconds`` old."""
    past = time.time() - seconds
    if isinstance(archive, LocalArchive):
        os.utime(path, (past, past))
    else:
        archive.fs.store[path].created = datetime.fromtimestamp(past, tz=UTC)  # type: ignore[attr-defined]


def test_text_round_trips_beside_its_blob(archive, make_png):
    sha = archive.put(make_png((1, 2, 3))).sha256
    assert archive.get_text(sha) is None  # no text yet: None, not an error
    archive.put_text(sha, ORDER)
    assert archive.get_text(sha) == ORDER
    assert list(archive.iter_texts()) == [sha]
    assert list(archive.iter_hashes()) == [sha]  # a text is not a blob
    archive.put_text(sha, "")  # the first text stays
    assert archive.get_text(sha) == ORDER


def test_get_text_never_raises_for_a_missing_text(archive):
    assert archive.get_text("0" * 64) is None
    assert archive.get_text("not-a-hash") is None


def test_put_text_refuses_a_blob_that_is_not_stored(archive):
    with pytest.raises(BlobNotFoundError, match="put the screenshot first") as err:
        archive.put_text("ab" * 32, "hello")
    assert "ab" * 32 in str(err.value)
    assert archive.get_text("ab" * 32) is None and list(archive.iter_texts()) == []


def test_put_text_refuses_bad_text_naming_the_blob_and_the_cap(archive, make_png):
    sha = archive.put(make_png((3, 2, 1))).sha256
    with pytest.raises(ScreenTextError, match=rf"{sha}.*over the cap of {MAX_TEXT_BYTES} bytes"):
        archive.put_text(sha, "é" * (MAX_TEXT_BYTES // 2 + 1))  # 2 bytes each in UTF-8
    with pytest.raises(ScreenTextError, match="must be a str, got bytes"):
        archive.put_text(sha, b"text")  # type: ignore[arg-type]
    with pytest.raises(ScreenTextError, match="not valid Unicode"):
        archive.put_text(sha, "lone \udc80 surrogate")
    assert archive.get_text(sha) is None
    archive.put_text(sha, "x" * MAX_TEXT_BYTES)  # exactly at the cap is accepted
    assert archive.get_text(sha) == "x" * MAX_TEXT_BYTES


def test_a_damaged_text_raises_on_read_and_is_replaced_by_the_next_put_text(archive, make_png):
    sha = archive.put(make_png((5, 5, 5))).sha256
    archive.put_text(sha, ORDER)
    path = text_file(archive, sha)
    if isinstance(archive, LocalArchive):
        raw = bytearray(Path(path).read_bytes())
        raw[-3] ^= 0x01
        Path(path).write_bytes(bytes(raw))
    else:
        raw = bytearray(archive.fs.cat_file(path))
        raw[-3] ^= 0x01
        archive.fs.pipe_file(path, bytes(raw))
    with pytest.raises(BlobCorruptError, match=f"text of blob {sha}"):
        archive.get_text(sha)
    report = check_archive(archive, repair=True)
    assert ("text", sha) in report.corrupt and report.repaired == 1 and not report.dangling
    assert archive.get_text(sha) is None and sha in archive  # the blob is untouched
    archive.put_text(sha, "new text")
    assert archive.get_text(sha) == "new text"


def test_gc_deletes_the_text_with_its_blob(archive, make_png):
    kept = archive.put(make_png((7, 0, 0))).sha256
    dropped = archive.put(make_png((7, 0, 1))).sha256
    for sha in (kept, dropped):
        archive.put_text(sha, f"text of {sha[:8]}")
    archive.retain("ep-1", [kept])
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 1 and dropped not in archive
    assert archive.get_text(dropped) is None and list(archive.iter_texts()) == [kept]
    assert archive.get_text(kept) == f"text of {kept[:8]}"


def test_gc_keeps_the_text_of_a_recent_blob_and_sweeps_an_old_orphan(archive, make_png):
    young = archive.put(make_png((8, 0, 0))).sha256
    archive.put_text(young, "young")
    orphan = archive.put(make_png((8, 0, 1))).sha256
    archive.put_text(orphan, "orphan")
    check_archive(archive)  # nothing to repair
    archive._discard("blob", orphan)  # its blob is gone (as after `check --repair` of a damaged blob)
    age(archive, text_file(archive, orphan), 7200)
    assert archive.gc(grace_seconds=3600).deleted == 1
    assert archive.get_text(young) == "young" and archive.get_text(orphan) is None


def test_an_orphan_text_of_a_referenced_blob_waits_for_the_blob(archive, make_png):
    data = make_png((9, 0, 0))
    sha = archive.put(data).sha256
    archive.put_text(sha, "still wanted")
    archive.retain("ep-1", [sha])
    archive._discard("blob", sha)
    assert archive.gc(grace_seconds=0).deleted == 0  # referenced: the blob may be stored again
    archive.put(data)
    assert archive.get_text(sha) == "still wanted"


def test_gc_does_not_sweep_an_orphan_whose_blob_came_back(archive, make_png, monkeypatch):
    data = make_png((9, 0, 1))
    sha = archive.put(data).sha256
    archive.put_text(sha, "back")
    archive._discard("blob", sha)
    stored = archive._stored()
    assert [s for s, _ in stored] == [sha]  # the orphan text is a candidate
    archive.put(data)  # a writer stores the blob again after the listing
    monkeypatch.setattr(archive, "_stored", lambda: stored)
    report = archive.gc(grace_seconds=0)
    assert (report.deleted, report.kept) == (0, 1)
    assert archive.get_text(sha) == "back"


def test_put_text_waits_out_a_collector_and_rewrites_what_it_deleted(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    data = make_png((4, 4, 4))
    sha = archive.put(data).sha256
    archive.put_text(sha, "first")
    marker = archive._mark(sha)  # a collector is deciding on the blob's sha ...
    done = threading.Event()

    def writer() -> None:
        archive.put_text(sha, "first")
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.05)
    assert not done.is_set()  # W2: the writer waits while the marker exists
    Path(text_file(archive, sha)).unlink()  # ... and deletes the text meanwhile
    archive._unmark(marker)
    thread.join(5)
    assert done.is_set() and archive.get_text(sha) == "first"  # W3 found it gone and wrote it again


def test_put_text_raises_when_its_blob_was_collected_meanwhile(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    sha = archive.put(make_png((4, 4, 5))).sha256
    marker = archive._mark(sha)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            archive.put_text(sha, "late")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.05)
    archive._discard("blob", sha)  # the collector deletes the blob while put_text waits
    archive._unmark(marker)
    thread.join(5)
    assert len(errors) == 1 and isinstance(errors[0], BlobNotFoundError)


def test_cached_archive_reads_text_locally_after_the_first_read(tmp_path, memory_root, make_png):
    inner = FsspecArchive(memory_root)
    cached = CachedArchive(inner, tmp_path / "cache")
    sha = cached.put(make_png((6, 6, 6))).sha256
    assert cached.get_text(sha) is None
    cached.put_text(sha, ORDER)
    assert inner.get_text(sha) == ORDER  # written to the shared archive
    assert cached.get_text(sha) == ORDER and cached.misses == 2
    inner.fs.rm_file(text_file(inner, sha))
    assert cached.get_text(sha) == ORDER and cached.hits == 1  # remembered in memory
    fresh = CachedArchive(inner, tmp_path / "cache")  # another process on the same cache folder
    assert fresh.get_text(sha) == ORDER and (fresh.hits, fresh.misses) == (1, 0)  # the local copy
    copy = tmp_path / "cache" / "texts" / sha[:2] / sha
    copy.write_bytes(copy.read_bytes()[:-1])  # a torn local copy is dropped, the shared archive decides
    assert CachedArchive(inner, tmp_path / "cache").get_text(sha) is None and not copy.exists()


class CountingReads(LocalArchive):
    def __init__(self, root) -> None:  # type: ignore[no-untyped-def]
        super().__init__(root)
        self.reads = 0

    def get_text(self, sha256: str) -> str | None:
        self.reads += 1
        return super().get_text(sha256)


def test_deferred_view_remembers_texts_and_forgets_on_its_own_put_text(tmp_path, make_png):
    inner = CountingReads(tmp_path / "a")
    view = DeferredArchive(inner)
    try:
        with_text = inner.put(make_png((1, 0, 9))).sha256
        without = inner.put(make_png((2, 0, 9))).sha256
        inner.put_text(with_text, ORDER)
        for _ in range(3):  # a selector reads every event's text at every decision
            assert view.get_text(with_text) == ORDER and view.get_text(without) is None
        assert inner.reads == 2  # one storage read per blob
        view.put_text(without, "OCR text")  # the memory's OCR of that screen
        assert view.get_text(without) == "OCR text"  # kept bytes while in flight
        view.flush()
        assert view.get_text(without) == "OCR text" and inner.reads == 3  # read again once, then kept
        assert view.get_text(without) == "OCR text" and inner.reads == 3
    finally:
        view.close()


class GatedTexts(LocalArchive):
    """Text writes wait for ``gate``."""

    def __init__(self, root) -> None:  # type: ignore[no-untyped-def]
        super().__init__(root)
        self.gate = threading.Event()
        self.writer_threads: list[str] = []

    def put_text(self, sha256: str, text: str) -> None:
        assert self.gate.wait(10)
        self.writer_threads.append(threading.current_thread().name)
        super().put_text(sha256, text)


def test_deferred_put_text_runs_on_the_writer_thread_after_its_screenshot(tmp_path, make_png):
    inner = GatedTexts(tmp_path / "a")
    view = DeferredArchive(inner)
    try:
        sha = view.put(make_png((2, 4, 6))).sha256
        view.put_text(sha, ORDER)  # queued behind the screenshot; returns at once
        assert inner.get_text(sha) is None and view.get_text(sha) == ORDER  # served meanwhile
        with pytest.raises(ScreenTextError, match="over the cap"):
            view.put_text(sha, "x" * (MAX_TEXT_BYTES + 1))  # refused on the caller's thread
        inner.gate.set()
        view.flush()
        assert inner.get_text(sha) == ORDER and view.get_text(sha) == ORDER
        assert inner.writer_threads and inner.writer_threads[0].startswith("causalcache-write")
        assert view._texts == {}
    finally:
        view.close()


def test_deferred_put_text_failure_is_raised_by_flush(tmp_path):
    inner = LocalArchive(tmp_path / "a")
    view = DeferredArchive(inner)
    try:
        view.put_text("cd" * 32, "no such screenshot")
        with pytest.raises(BlobNotFoundError, match="put the screenshot first"):
            view.flush()
        assert view.get_text("cd" * 32) is None
    finally:
        view.close()
