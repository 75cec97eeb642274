"""Local-directory specifics: layout, temp-file hygiene, gc of stale temp files, open_archive."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from causalcache_memory.archive import FsspecArchive, LocalArchive, open_archive
from causalcache_memory.archive.local import TEMP_GRACE_SECONDS
from causalcache_memory.errors import ArchiveKeyError


def test_layout(tmp_path, make_png):
    archive = LocalArchive(tmp_path)
    sha = archive.put(make_png()).sha256
    archive.retain("ep1", [sha])
    assert (tmp_path / "blobs" / sha[:2] / sha).read_bytes() == make_png()
    marker = tmp_path / "refs" / "ep1" / sha
    assert marker.is_file() and marker.stat().st_size == 0
    assert archive.url == tmp_path.resolve().as_uri()
    assert archive.size_bytes(sha) == len(make_png())
    assert archive.references("ep1") == {sha}


def test_path_like_ids_write_nothing(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    sha = archive.put(make_png()).sha256
    for bad in ("../x", "../../etc", "a/b"):
        with pytest.raises(ArchiveKeyError):
            archive.retain(bad, [sha])
    assert list((tmp_path / "a" / "refs").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_reput_refreshes_grace_period(tmp_path, make_png):
    archive = LocalArchive(tmp_path)
    sha = archive.put(make_png()).sha256
    path = tmp_path / "blobs" / sha[:2] / sha
    past = time.time() - 7200
    os.utime(path, (past, past))
    archive.put(make_png())  # dedup: no rewrite, but the blob is young again
    assert path.stat().st_mtime > past + 3600
    assert archive.gc(grace_seconds=3600).skipped_recent == 1


def test_gc_sweeps_only_stale_temp_files(tmp_path):
    archive = LocalArchive(tmp_path)
    stale, fresh = tmp_path / "tmp" / "stale.tmp", tmp_path / "tmp" / "fresh.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"in flight")
    past = time.time() - TEMP_GRACE_SECONDS - 10
    os.utime(stale, (past, past))
    archive.gc(grace_seconds=0, dry_run=True)
    assert stale.exists()
    archive.gc(grace_seconds=0)
    assert not stale.exists() and fresh.exists()


def test_release_then_gc_ignores_unknown_files(tmp_path, make_png):
    archive = LocalArchive(tmp_path)
    sha = archive.put(make_png()).sha256
    (tmp_path / "blobs" / "README").write_text("not a blob")
    archive.retain("ep", [sha])
    archive.release("ep")
    assert archive.live_episodes() == []
    assert not (tmp_path / "refs" / "ep").exists()
    assert archive.gc(grace_seconds=0).deleted == 1
    assert (tmp_path / "blobs" / "README").exists()


def test_gc_rejects_negative_grace(tmp_path):
    with pytest.raises(ValueError, match="grace_seconds"):
        LocalArchive(tmp_path).gc(grace_seconds=-1)


def test_open_archive_dispatch(tmp_path, memory_root):
    assert isinstance(open_archive(tmp_path / "p"), LocalArchive)
    assert isinstance(open_archive(str(tmp_path / "s")), LocalArchive)
    from_uri = open_archive((tmp_path / "u").as_uri(), max_pixels=100)
    assert isinstance(from_uri, LocalArchive)
    assert from_uri.root == Path(tmp_path / "u").resolve() and from_uri.max_pixels == 100
    remote = open_archive(memory_root, formats=["PNG"])
    assert isinstance(remote, FsspecArchive) and remote.formats == ("PNG",)
