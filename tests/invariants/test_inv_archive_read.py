"""Archive read/verify invariants on both backends: what comes out is exactly what hashes to the key, a
malformed key never reaches storage, and absence, corruption and malformed keys are told apart."""

from __future__ import annotations

import hashlib
import uuid

import fsspec
import pytest

from causalcache_memory.archive import FsspecArchive, LocalArchive
from causalcache_memory.errors import ArchiveKeyError, BlobCorruptError, BlobNotFoundError

BAD_KEYS = ["", "abc", "A" * 64, "g" * 64, "../" + "a" * 61, 12, None]


@pytest.fixture(params=["local", "memory"])
def archive(request, tmp_path):
    if request.param == "local":
        yield LocalArchive(tmp_path / "a")
        return
    url = f"memory://causalcache-inv/{uuid.uuid4().hex}"
    yield FsspecArchive(url)
    fs = fsspec.filesystem("memory")
    if fs.exists(url.removeprefix("memory:/")):
        fs.rm(url.removeprefix("memory:/"), recursive=True)


def _path(archive, kind: str, sha: str):
    rel = f"{kind}/{sha[:2]}/{sha}"
    return f"{archive.root}/{rel}" if hasattr(archive, "fs") else archive.root / rel


def _overwrite(archive, path, data: bytes) -> None:
    archive.fs.pipe_file(path, data) if hasattr(archive, "fs") else path.write_bytes(data)


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_a_malformed_key_is_never_present_and_never_read(archive, bad, make_png) -> None:
    archive.put(make_png((4, 5, 6)))  # something is stored: the answers below are not "empty archive"
    archive.put_record(b'{"a": 1}')
    assert archive.has_record(bad) is False
    assert (bad in archive) is False
    with pytest.raises(ArchiveKeyError, match="64 lower-case hex"):
        archive.get_record(bad)
    with pytest.raises(ArchiveKeyError, match="64 lower-case hex"):
        archive.get_bytes(bad)


def test_presence_is_per_kind(archive, make_png) -> None:
    blob = archive.put(make_png((1, 2, 3))).sha256
    record = archive.put_record(b'{"kind": "record"}')
    assert blob in archive and archive.has_record(record) is True
    assert record not in archive and archive.has_record(blob) is False
    absent = hashlib.sha256(b"never stored").hexdigest()
    assert absent not in archive and archive.has_record(absent) is False
    with pytest.raises(BlobNotFoundError, match=f"record {absent} is not in archive"):
        archive.get_record(absent)
    with pytest.raises(BlobNotFoundError, match=f"blob {absent} is not in archive"):
        archive.get_bytes(absent)


@pytest.mark.parametrize("kind", ["records", "blobs"])
def test_a_changed_byte_is_refused_with_both_hashes(archive, make_png, kind) -> None:
    data = b'{"t": 1, "selected": [1, 2]}' if kind == "records" else make_png((9, 9, 9))
    sha = archive.put_record(data) if kind == "records" else archive.put(data).sha256
    read = archive.get_record if kind == "records" else archive.get_bytes
    assert read(sha) == data
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x01
    _overwrite(archive, _path(archive, kind, sha), bytes(flipped))
    actual = hashlib.sha256(bytes(flipped)).hexdigest()
    name = "record" if kind == "records" else "blob"
    with pytest.raises(
        BlobCorruptError, match=rf"{name} {sha} in archive .* is corrupt: its bytes hash to {actual}"
    ):
        read(sha)
    if kind == "blobs":
        with pytest.raises(BlobCorruptError):
            archive.open_image(sha)


def test_a_symlink_in_place_of_a_stored_file_is_never_followed(tmp_path, make_png) -> None:
    """Even a link to the right bytes is refused: the archive only reads files it wrote itself."""
    from causalcache_memory.errors import ArchiveError

    archive = LocalArchive(tmp_path / "a")
    data = make_png((3, 3, 3))
    sha = archive.put(data).sha256
    record = archive.put_record(b'{"r": 1}')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for kind, key, read in (("blobs", sha, archive.get_bytes), ("records", record, archive.get_record)):
        path = _path(archive, kind, key)
        target = elsewhere / key
        target.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(target)
        with pytest.raises(ArchiveError, match=f"could not read {kind[:-1]} {key}"):
            read(key)
