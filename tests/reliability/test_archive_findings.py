"""Findings 1-6 of the reliability review (issue 17): each test failed on the code before the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from reliability_helpers import age, object_path, screenshot, write_raw

from causalcache_memory.archive import FsspecArchive, LocalArchive, check_archive, open_archive
from causalcache_memory.archive.retention import release_idle
from causalcache_memory.errors import (
    ArchiveError,
    ArchiveLayoutError,
    ArchivePermissionError,
    ArchiveUnavailableError,
    BlobCorruptError,
)


# ---------------------------------------------------------------- 1: touch on de-duplication
@pytest.mark.parametrize("kind", ["blob", "record"])
def test_dedup_put_refreshes_age_so_gc_keeps_it(any_archive, kind):
    archive = any_archive
    data = screenshot(1) if kind == "blob" else b'{"node": 1}'
    put = (lambda d: archive.put(d).sha256) if kind == "blob" else archive.put_record
    sha = put(data)
    age(archive, sha, 7200, kind)
    assert put(data) == sha  # acknowledged again: must not be collectable before retain
    report = archive.gc(grace_seconds=3600)
    assert report.deleted == 0 and report.skipped_recent == 1
    read = archive.get_bytes if kind == "blob" else archive.get_record
    assert read(sha) == data


# ---------------------------------------------------------------- 2: verify before trusting, repair
@pytest.mark.parametrize("damage", ["torn", "flipped", "empty"])
def test_reput_repairs_a_damaged_object(any_archive, damage):
    archive = any_archive
    data = screenshot(2)
    sha = archive.put(data).sha256
    bad = {"torn": data[: len(data) // 2], "flipped": data[:-1] + bytes([data[-1] ^ 1]), "empty": b""}[damage]
    write_raw(archive, sha, bad)
    with pytest.raises(BlobCorruptError):
        archive.get_bytes(sha)
    assert archive.put(data).sha256 == sha
    assert archive.get_bytes(sha) == data


def test_reput_repairs_a_damaged_record(any_archive):
    sha = any_archive.put_record(b'{"a": 1}')
    write_raw(any_archive, sha, b'{"a"', kind="record")
    any_archive.put_record(b'{"a": 1}')
    assert any_archive.get_record(sha) == b'{"a": 1}'


def test_local_fsspec_url_needs_no_auto_mkdir(tmp_path):
    archive = open_archive(f"local://{tmp_path}/a")
    assert isinstance(archive, FsspecArchive) and not archive.atomic_put
    sha = archive.put(screenshot(3)).sha256
    archive.retain("ep", [sha])
    assert archive.get_bytes(sha) == screenshot(3)


def test_non_atomic_store_never_exposes_a_partial_object(tmp_path, monkeypatch):
    """A writer dying inside the data write leaves at most a temp file, never a torn final object."""
    archive = FsspecArchive(f"local://{tmp_path}/a")
    data = screenshot(4)
    real_pipe = archive.fs.pipe_file

    def dying_pipe(path, value, **kw):
        real_pipe(path, value[: len(value) // 3], **kw)
        raise SystemExit("killed mid-write")

    monkeypatch.setattr(archive.fs, "pipe_file", dying_pipe)
    with pytest.raises(SystemExit):
        archive.put(data)
    monkeypatch.undo()
    sha = archive.put(data).sha256
    assert archive.get_bytes(sha) == data


# ---------------------------------------------------------------- 3: the local gc race
def test_gc_between_existence_check_and_touch_cannot_lose_the_put(tmp_path, monkeypatch):
    archive = LocalArchive(tmp_path)
    sha = archive.put(screenshot(5)).sha256
    age(archive, sha, 7200)
    real_utime = os.utime
    fired = []

    def gc_then_utime(path, *args, **kwargs):
        if not fired and str(path).endswith(sha):
            fired.append(archive.gc(grace_seconds=3600).deleted)  # forced interleaving
        return real_utime(path, *args, **kwargs)

    monkeypatch.setattr(os, "utime", gc_then_utime)
    assert archive.put(screenshot(5)).sha256 == sha
    monkeypatch.undo()
    assert fired == [1]  # the collector did delete the old copy in between
    assert archive.get_bytes(sha) == screenshot(5)


def test_put_returning_between_gc_decision_and_unlink_is_kept(tmp_path, monkeypatch):
    archive = LocalArchive(tmp_path)
    sha = archive.put(screenshot(6)).sha256
    age(archive, sha, 7200)
    real_unlink = Path.unlink
    done = threading.Event()
    acked: list[str] = []

    def writer():
        acked.append(LocalArchive(tmp_path).put(screenshot(6)).sha256)
        done.set()

    def unlink_after_a_put(self, *args, **kwargs):
        # the blob itself, not its screen-text sidecar (texts/<ab>/<sha>, unlinked by gc beside it)
        if self.name == sha and "texts" not in self.parts and not acked and not done.is_set():
            threading.Thread(target=writer).start()
            done.wait(1.0)  # a put that could finish now would see the old copy and return
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", unlink_after_a_put)
    archive.gc(grace_seconds=3600)
    assert done.wait(10.0)
    monkeypatch.undo()
    assert acked == [sha]
    assert archive.get_bytes(sha) == screenshot(6)


# ---------------------------------------------------------------- 4: never follow symlinks
def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ("a" * 64)).write_text("precious")
    (victim / "notes.txt").write_text("precious")
    return victim


def test_release_does_not_follow_a_symlinked_episode(tmp_path):
    archive = LocalArchive(tmp_path / "archive")
    victim = _victim(tmp_path)
    (archive.root / "refs" / "ep").symlink_to(victim, target_is_directory=True)
    with pytest.raises(ArchiveLayoutError, match="symbolic link"):
        archive.release("ep")
    assert sorted(p.name for p in victim.iterdir()) == sorted(["a" * 64, "notes.txt"])


def test_gc_does_not_follow_a_symlinked_tmp(tmp_path):
    archive = LocalArchive(tmp_path / "archive")
    victim = _victim(tmp_path)
    old = 1_000_000_000
    for p in victim.iterdir():
        os.utime(p, (old, old))
    (archive.root / "tmp").rmdir()
    (archive.root / "tmp").symlink_to(victim, target_is_directory=True)
    with pytest.raises(ArchiveLayoutError):
        archive.gc(grace_seconds=0)
    assert len(list(victim.iterdir())) == 2


def test_gc_skips_symlinked_objects_and_check_reports_them(tmp_path):
    archive = LocalArchive(tmp_path / "archive")
    victim = _victim(tmp_path)
    fan = archive.root / "blobs" / "aa"
    fan.mkdir()
    (fan / ("a" * 64)).symlink_to(victim / ("a" * 64))
    assert archive.gc(grace_seconds=0).deleted == 0
    assert (victim / ("a" * 64)).read_text() == "precious"
    report = check_archive(archive)
    assert not report.ok and any("symbolic link" in p for p in report.layout)


# ---------------------------------------------------------------- 5: temp files and retention
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temp_files_of_killed_writers_are_removed_at_once(tmp_path):
    from causalcache_memory.archive._keys import temp_name

    archive = LocalArchive(tmp_path)
    name = temp_name("f" * 64).split(".")
    name[2] = str(_dead_pid())
    dead = archive.root / "tmp" / ".".join(name)
    dead.write_bytes(b"partial write of a killed process")
    live = archive.root / "tmp" / temp_name("e" * 64)  # this process: in flight
    live.write_bytes(b"in flight")
    LocalArchive(tmp_path)  # opening sweeps
    assert not dead.exists() and live.exists()


def test_release_idle_then_gc_reclaims_space(any_archive):
    archive = any_archive
    old, new = archive.put(screenshot(7)).sha256, archive.put(screenshot(8)).sha256
    archive.retain("old-thread", [old])
    archive.retain("new-thread", [new])
    now = time.time()
    assert release_idle(archive, 86400, now=now + 3600) == []
    assert sorted(release_idle(archive, 86400, now=now + 2 * 86400, dry_run=True)) == [
        "new-thread",
        "old-thread",
    ]
    assert sorted(release_idle(archive, 86400, now=now + 2 * 86400)) == ["new-thread", "old-thread"]
    assert archive.live_episodes() == []
    assert archive.gc(grace_seconds=0).deleted == 2


# ---------------------------------------------------------------- 6: named errors
def test_unreachable_url_is_a_named_error():
    with pytest.raises(ArchiveUnavailableError, match="cannot be reached"):
        open_archive("ftp://127.0.0.1:9/archive")


def test_read_only_parent_is_a_named_error(tmp_path, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(ArchivePermissionError, match="permission denied"):
        LocalArchive(tmp_path / "ro" / "archive")


def test_retain_on_read_only_refs_is_a_named_error(tmp_path, monkeypatch):
    archive = LocalArchive(tmp_path)
    sha = archive.put(screenshot(9)).sha256

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(ArchivePermissionError):
        archive.retain("ep", [sha])


def test_record_write_error_names_a_record(tmp_path, monkeypatch):
    archive = LocalArchive(tmp_path)

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(ArchiveError, match=r"record .* No space") as info:
        archive.put_record(b"{}")
    assert "blob" not in str(info.value)


def test_object_paths_live_under_the_root(any_archive):
    sha = any_archive.put(screenshot(10)).sha256
    assert sha in object_path(any_archive, sha)
