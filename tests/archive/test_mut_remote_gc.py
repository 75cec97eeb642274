"""``gc`` and the maintenance hooks of the fsspec archive on ``memory://`` (issue 52's mutation run of
``archive/_remote_gc.py``): object stamps of every store, the grace at its edge, a blob's text collected
with it, temporary files, and the hooks of ``causalcache archive check``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from causalcache_memory.archive import FsspecArchive
from causalcache_memory.archive import _remote_gc as remote_gc
from causalcache_memory.archive._keys import temp_name
from causalcache_memory.archive.check import check_archive

STAMP = 1_700_000_000.0


def _png(i: int) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (i, 2 * i % 256, 3 * i % 256)).save(buf, format="PNG")
    return buf.getvalue()


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def _stamp(archive: FsspecArchive, rel: str, when: float) -> None:
    archive.fs.store[f"{archive.root}/{rel}"].created = datetime.fromtimestamp(when, tz=UTC)


def _blob(sha: str) -> str:
    return f"blobs/{sha[:2]}/{sha}"


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"mtime": 5, "LastModified": 6}, 5.0),  # the first key present decides
        ({"LastModified": datetime.fromtimestamp(STAMP, tz=UTC), "last_modified": 1}, STAMP),
        ({"last_modified": "2023-11-14T22:13:20Z", "updated": 1}, STAMP),  # ISO with a Z
        ({"updated": "2023-11-14T22:13:20+00:00", "created": 1}, STAMP),
        ({"created": 7.5, "timeCreated": 1}, 7.5),
        ({"timeCreated": 8}, 8.0),
        ({"mtime": True, "created": 9}, 9.0),  # a bool is no stamp
        ({"mtime": "not a date", "created": 10}, 10.0),  # neither is an unparsable string
        ({"mtime": None, "size": 3}, None),
        ({}, None),
    ],
)
def test_info_mtime_reads_the_first_usable_stamp_of_every_store(info, expected) -> None:
    assert remote_gc.info_mtime(info) == expected


def test_an_object_exactly_one_grace_past_its_stamps_second_is_old(memory_root, monkeypatch) -> None:
    archive = FsspecArchive(memory_root)
    sha = archive.put(_png(1)).sha256
    _stamp(archive, _blob(sha), STAMP)
    monkeypatch.setattr(remote_gc, "time", _Clock(STAMP + 1 + 60))  # now - (s + 1) == grace
    assert archive.gc(grace_seconds=60).deleted == 1 and sha not in archive


def test_grace_zero_collects_even_an_object_stamped_in_the_future(memory_root, monkeypatch) -> None:
    archive = FsspecArchive(memory_root)
    sha = archive.put(_png(2)).sha256
    _stamp(archive, _blob(sha), STAMP + 100)
    monkeypatch.setattr(remote_gc, "time", _Clock(STAMP))
    assert archive.gc(grace_seconds=0).deleted == 1


def test_an_object_without_any_stamp_is_old(memory_root, monkeypatch) -> None:
    archive = FsspecArchive(memory_root)
    sha = archive.put(_png(3)).sha256
    info = archive._fs.info
    monkeypatch.setattr(archive._fs, "info", lambda path, **kw: {"size": info(path)["size"], "type": "file"})
    report = archive.gc(grace_seconds=3600)
    assert (report.deleted, report.skipped_recent, sha in archive) == (1, 0, False)


def test_a_blob_takes_its_younger_text_with_it_and_frees_both(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    data = _png(4)
    sha = archive.put(data).sha256
    archive.put_text(sha, "hello there")
    text_bytes = archive.fs.size(f"{archive.root}/texts/{sha[:2]}/{sha}")
    _stamp(archive, _blob(sha), STAMP)  # the blob is old, its text new
    dry = archive.gc(grace_seconds=3600, dry_run=True)
    assert (dry.deleted, dry.bytes_freed, archive.get_text(sha)) == (1, len(data) + text_bytes, "hello there")
    report = archive.gc(grace_seconds=3600)
    assert (report.deleted, report.bytes_freed) == (1, len(data) + text_bytes)
    assert sha not in archive and archive.get_text(sha) is None


def test_the_text_of_a_stored_blob_is_no_candidate_of_its_own(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    kept, other = archive.put(_png(5)).sha256, archive.put(_png(6)).sha256
    archive.put_text(kept, "kept")
    archive.retain("ep", [kept])
    archive.retain("ep2", [other])
    report = archive.gc(grace_seconds=0)
    assert (report.kept, report.deleted) == (2, 0)  # two blobs, every episode's references counted
    assert archive.get_text(kept) == "kept"


def test_a_record_is_collected_like_a_blob(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    rec = archive.put_record(b'{"kind": "node"}')
    assert archive.has_record(rec)
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 1 and report.bytes_freed == len(b'{"kind": "node"}')
    assert not archive.has_record(rec)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _tmp(archive: FsspecArchive, name: str, age_s: float | None = None) -> str:
    path = f"{archive.root}/tmp/{name}"
    archive.fs.pipe_file(path, b"partial")
    if age_s is not None:
        _stamp(archive, f"tmp/{name}", remote_gc.time.time() - age_s)
    return name


def _dead_writers_file(final: str) -> str:
    parts = temp_name(final).split(".")
    parts[-4] = str(_dead_pid())  # <name>.<host>.<pid>.<thread>.<uuid>.tmp
    return ".".join(parts)


def test_gc_sweeps_temp_files_of_dead_writers_and_older_than_its_temp_grace(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    grace = remote_gc.TEMP_GRACE_SECONDS
    assert grace == 300.0
    dead = _tmp(archive, _dead_writers_file("blob"))  # young, but its writer is gone
    mine = _tmp(archive, temp_name("blob"), age_s=grace - 5)  # a live writer of this process
    foreign_young = _tmp(archive, "x.otherhost.1.2.3.tmp", age_s=grace - 5)
    foreign_old = _tmp(archive, "y.otherhost.1.2.3.tmp", age_s=grace + 5)
    archive.fs.mkdir(f"{archive.root}/tmp/folder.tmp")
    archive.gc(grace_seconds=0)  # the temp grace still applies
    left = {p.rsplit("/", 1)[-1] for p in archive.fs.ls(f"{archive.root}/tmp", detail=False)}
    assert dead not in left and foreign_old not in left
    assert {mine, foreign_young, "folder.tmp"} <= left


def test_a_longer_gc_grace_holds_temp_files_back_too(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    held = _tmp(archive, "z.otherhost.1.2.3.tmp", age_s=1000)
    archive.gc(grace_seconds=3600)
    assert held in {p.rsplit("/", 1)[-1] for p in archive.fs.ls(f"{archive.root}/tmp", detail=False)}
    archive.gc(grace_seconds=900)
    assert not archive.fs.exists(f"{archive.root}/tmp/{held}")


def test_check_counts_temp_files_and_repair_removes_only_dead_writers(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    assert check_archive(archive).temp_files == 0  # no tmp/ folder at all
    _tmp(archive, _dead_writers_file("a"))
    _tmp(archive, _dead_writers_file("b"))
    _tmp(archive, "c.otherhost.1.2.3.tmp", age_s=10**6)  # old, but check judges writers only
    archive.fs.mkdir(f"{archive.root}/tmp/sub")
    report = check_archive(archive)
    assert (report.temp_files, report.temp_removed, report.layout) == (3, 0, [])
    repaired = check_archive(archive, repair=True)
    assert (repaired.temp_removed, repaired.temp_files) == (2, 1)


@pytest.mark.parametrize("kind", ["blob", "text", "record"])
def test_discard_deletes_exactly_one_object_of_its_kind(memory_root, kind) -> None:
    archive = FsspecArchive(memory_root)
    sha = archive.put(_png(7)).sha256
    archive.put_text(sha, "words")
    rec = archive.put_record(b"{}")
    archive._discard(kind, rec if kind == "record" else sha)
    assert (sha in archive, archive.get_text(sha) is not None, archive.has_record(rec)) == (
        kind != "blob",
        kind != "text",
        kind != "record",
    )
    archive._discard(kind, rec if kind == "record" else sha)  # already gone: no error


def test_gc_on_a_store_without_atomic_puts_makes_its_marker_folder(tmp_path) -> None:
    archive = FsspecArchive(f"local://{tmp_path}/archive", atomic_put=False)
    sha = archive.put(_png(8)).sha256
    assert archive.gc(grace_seconds=0).deleted == 1 and sha not in archive
    assert list((tmp_path / "archive" / "gc").iterdir()) == []  # markers removed again


def test_a_text_removed_by_another_collector_before_its_delete_frees_only_the_blob(
    memory_root, monkeypatch
) -> None:
    """The race between a text's stat and its delete: the text is gone, it adds no bytes (not -1)."""
    archive = FsspecArchive(memory_root)
    data = _png(9)
    sha = archive.put(data).sha256
    archive.put_text(sha, "words")
    rm_file = archive._fs.rm_file

    def other_collector_first(path: str) -> None:
        rm_file(path)
        if "/texts/" in path:
            raise FileNotFoundError(path)

    monkeypatch.setattr(archive._fs, "rm_file", other_collector_first)
    report = archive.gc(grace_seconds=0)
    assert (report.deleted, report.bytes_freed) == (1, len(data))


def test_repair_without_a_tmp_folder_removes_nothing(memory_root) -> None:
    archive = FsspecArchive(memory_root)
    repaired = check_archive(archive, repair=True)
    assert (repaired.temp_removed, repaired.temp_files) == (0, 0)


def _listing(archive: FsspecArchive, monkeypatch, change) -> None:
    """The store lists ``tmp/`` as ``change`` makes it (an order, or a type another store reports)."""
    ls = archive._fs.ls
    monkeypatch.setattr(archive._fs, "ls", lambda path, **kw: change(ls(path, **kw)))


@pytest.mark.parametrize("first", ["folder", "file"])
def test_the_sweep_goes_on_past_a_folder_whatever_the_listing_order(memory_root, monkeypatch, first) -> None:
    archive = FsspecArchive(memory_root)
    archive.fs.mkdir(f"{archive.root}/tmp/a-folder")
    dead = _tmp(archive, _dead_writers_file("z"))
    _listing(
        archive,
        monkeypatch,
        lambda es: sorted(es, key=lambda e: (e["type"] == "file") == (first == "folder")),
    )
    assert check_archive(archive, repair=True).temp_removed == 1
    assert not archive.fs.exists(f"{archive.root}/tmp/{dead}")
    assert archive.fs.isdir(f"{archive.root}/tmp/a-folder")


def test_an_old_folder_in_tmp_is_no_temp_file_and_stays(tmp_path) -> None:
    archive = FsspecArchive(f"local://{tmp_path}/archive")
    folder = tmp_path / "archive" / "tmp" / "old.otherhost.1.2.3.tmp"
    folder.mkdir(parents=True)
    old = _tmp(archive, "y.otherhost.1.2.3.tmp")
    for path in (folder, tmp_path / "archive" / "tmp" / old):
        os.utime(path, (STAMP, STAMP))  # both far older than the temp grace
    archive.gc(grace_seconds=0)
    assert folder.is_dir() and not (tmp_path / "archive" / "tmp" / old).exists()


@pytest.mark.parametrize(
    "listed", [{"type": "file", "islink": True}, {"type": "other"}], ids=["link-as-file", "other"]
)
def test_only_plain_files_are_temp_files_whatever_the_store_reports(memory_root, monkeypatch, listed) -> None:
    """A link reported with its target's type, or an entry of another type (a fifo, a socket) named like
    a dead writer's temp file, is no temp file of a writer: it stays."""
    archive = FsspecArchive(memory_root)
    entry = _tmp(archive, _dead_writers_file("blob"))
    _listing(archive, monkeypatch, lambda es: [{**e, **listed} for e in es])
    assert check_archive(archive, repair=True).temp_removed == 0
    assert archive.fs.exists(f"{archive.root}/tmp/{entry}")


def test_the_default_grace_is_one_hour_at_its_edge(memory_root, monkeypatch) -> None:
    archive = FsspecArchive(memory_root)
    sha = archive.put(_png(10)).sha256
    _stamp(archive, _blob(sha), STAMP)
    monkeypatch.setattr(remote_gc, "time", _Clock(STAMP + 1 + 3599))
    assert archive.gc().skipped_recent == 1 and sha in archive  # 3599 s past its second
    monkeypatch.setattr(remote_gc, "time", _Clock(STAMP + 1 + 3600))
    assert archive.gc().deleted == 1 and sha not in archive


def test_an_object_whose_store_reports_no_size_frees_zero_bytes(memory_root, monkeypatch) -> None:
    archive = FsspecArchive(memory_root)
    archive.put(_png(11))
    info = archive._fs.info
    monkeypatch.setattr(archive._fs, "info", lambda path, **kw: {**info(path, **kw), "size": None})
    report = archive.gc(grace_seconds=0)
    assert (report.deleted, report.bytes_freed) == (1, 0)


def test_a_temp_file_exactly_the_temp_grace_old_stays_and_one_second_older_goes(
    memory_root, monkeypatch
) -> None:
    from causalcache_memory.archive import _gc

    archive = FsspecArchive(memory_root)
    edge = _tmp(archive, "e.otherhost.1.2.3.tmp")
    older = _tmp(archive, "o.otherhost.1.2.3.tmp")
    _stamp(archive, f"tmp/{edge}", STAMP - remote_gc.TEMP_GRACE_SECONDS)
    _stamp(archive, f"tmp/{older}", STAMP - remote_gc.TEMP_GRACE_SECONDS - 1)
    monkeypatch.setattr(_gc, "time", SimpleNamespace(time=lambda: STAMP, monotonic=time.monotonic))
    archive.gc(grace_seconds=0)
    left = {p.rsplit("/", 1)[-1] for p in archive.fs.ls(f"{archive.root}/tmp", detail=False)}
    assert edge in left and older not in left
