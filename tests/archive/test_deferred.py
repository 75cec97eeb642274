"""DeferredArchive: check and hash now, write durably in the background, serve reads meanwhile, flush."""

from __future__ import annotations

import threading

import pytest

from causalcache_memory.archive import LocalArchive
from causalcache_memory.archive.deferred import DeferredArchive, can_defer
from causalcache_memory.errors import ArchiveError, ImageRejectedError


class GatedArchive(LocalArchive):
    """Blob writes wait for ``gate``; ``fail`` makes them raise."""

    def __init__(self, root) -> None:  # type: ignore[no-untyped-def]
        super().__init__(root)
        self.gate = threading.Event()
        self.fail = False

    def store_image(self, raw, stored) -> None:  # type: ignore[no-untyped-def]
        assert self.gate.wait(10)
        if self.fail:
            raise ArchiveError("disk full")
        super().store_image(raw, stored)


def test_put_returns_before_the_write_and_reads_are_served_meanwhile(tmp_path, make_png) -> None:
    inner = GatedArchive(tmp_path)
    view = DeferredArchive(inner)
    png = make_png(size=(20, 10))
    stored = view.put(png)
    assert stored.size == (20, 10) and stored.sha256 not in inner  # not written yet
    assert stored.sha256 in view and view.get_bytes(stored.sha256) == png
    assert view.open_image(stored.sha256).size == (20, 10)
    assert view.blob_stamp(stored.sha256) == ("kept", stored.sha256)
    inner.gate.set()
    view.flush()
    assert inner.get_bytes(stored.sha256) == png and view.blob_stamp(stored.sha256) == inner.blob_stamp(
        stored.sha256
    )
    view.close()


def test_the_landed_screenshot_is_encoded_for_the_wire_once_off_the_step(tmp_path, make_png) -> None:
    from causalcache_memory.render.messages import WIRE_CACHE, data_url_of

    inner = GatedArchive(tmp_path)
    inner.gate.set()
    view = DeferredArchive(inner)
    png = make_png(color=(3, 4, 5))
    sha = view.put(png).sha256
    view.flush()
    assert WIRE_CACHE.get((inner.url, sha, inner.blob_stamp(sha))) == data_url_of(png)
    view.close()


def test_a_bad_image_is_refused_by_put_itself(tmp_path) -> None:
    view = DeferredArchive(LocalArchive(tmp_path))
    with pytest.raises(ImageRejectedError):
        view.put(b"not an image")
    view.close()


def test_a_failed_write_is_raised_by_the_next_flush_once(tmp_path, make_png) -> None:
    inner = GatedArchive(tmp_path)
    inner.fail = True
    view = DeferredArchive(inner)
    view.put(make_png())
    inner.gate.set()
    with pytest.raises(ArchiveError, match="disk full"):
        view.flush()
    view.flush()  # reported once
    view.close()


def test_only_archives_that_split_put_can_be_deferred(tmp_path) -> None:
    assert can_defer(LocalArchive(tmp_path))
    with pytest.raises(TypeError, match="check_image"):
        DeferredArchive(object())


def test_records_and_their_references_land_after_the_screenshots_behind_the_flush(tmp_path, make_png) -> None:
    inner = GatedArchive(tmp_path)
    view = DeferredArchive(inner)
    shot = view.put(make_png()).sha256
    record = view.put_record(b'{"current": "x"}')
    view.retain("ep", [record])
    view.retain("ep", [shot])  # a screenshot's reference is written at once (its marker before the blob)
    assert not inner.has_record(record) and inner.references("ep") == {shot}
    assert view.has_record(record) and view.get_record(record) == b'{"current": "x"}'  # served meanwhile
    inner.gate.set()
    view.flush()
    assert inner.get_record(record) == b'{"current": "x"}' and inner.references("ep") == {shot, record}
    view.close()


def test_a_failed_record_write_is_raised_by_the_flush(tmp_path, make_png, monkeypatch) -> None:
    inner = GatedArchive(tmp_path)
    inner.gate.set()
    view = DeferredArchive(inner)

    def full(data: bytes) -> str:
        raise ArchiveError("disk full (record)")

    monkeypatch.setattr(inner, "put_record", full)
    view.put_record(b"{}")
    with pytest.raises(ArchiveError, match="record"):
        view.flush()
    view.close()


def test_a_claim_is_decided_at_once_and_synced_before_the_flush_returns(tmp_path, monkeypatch) -> None:
    inner = LocalArchive(tmp_path)
    view = DeferredArchive(inner)
    synced: list[tuple[str, str]] = []
    monkeypatch.setattr(inner, "sync_claim", lambda episode, name: synced.append((episode, name)))
    assert view.claim("ep", "head.root", b"mine") is None and inner.read_claim("ep", "head.root") == b"mine"
    assert view.claim("ep", "head.root", b"theirs") == b"mine"  # the exclusive create decides, now
    view.flush()
    assert synced == [("ep", "head.root")]  # one sync, for the claim that was written
    view.close()


def test_a_claims_fsync_calls_run_on_the_writer_thread_before_the_flush_returns(
    tmp_path, monkeypatch
) -> None:
    """The step's thread makes the exclusive create of a complete claim file and no ``fsync``; the claim's
    bytes and its folder are synced by the writer thread, and ``flush`` returns after both."""
    import os

    inner = LocalArchive(tmp_path)
    view = DeferredArchive(inner)
    calls: list[tuple[str, str]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        kind = "folder" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"
        calls.append((threading.current_thread().name.split("_")[0], kind))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)  # the claim's bytes (_local_refs) and its folder (_localfs)
    assert view.claim("ep", "head.root", b"mine") is None
    assert inner.read_claim("ep", "head.root") == b"mine" and not [c for c in calls if c[0] == "MainThread"]
    view.flush()
    assert calls == [("causalcache-write", "file"), ("causalcache-write", "folder")]
    view.close()


def test_a_screenshot_sent_as_a_data_url_is_not_encoded_again(tmp_path, make_png, monkeypatch) -> None:
    import base64

    from causalcache_memory.render import messages
    from causalcache_memory.render.messages import WIRE_CACHE, WireBytes, data_url_of, wire_bytes

    png = make_png(color=(9, 8, 7))
    url = data_url_of(png)
    assert isinstance(wire_bytes(png, url), WireBytes)
    assert not isinstance(wire_bytes(png, url.replace("image/png", "image/jpeg")), WireBytes)
    assert not isinstance(wire_bytes(png, url[:-4] + "\n" + url[-4:]), WireBytes)  # not the wire form
    assert not isinstance(wire_bytes(png, url.replace(",", ";")), WireBytes)  # no comma: no body
    assert not isinstance(wire_bytes(png, url + "AAAA"), WireBytes)  # a body longer than raw's encoding
    monkeypatch.setattr(messages.pybase64, "b64encode_as_string", lambda data: pytest.fail("encoded again"))
    inner = GatedArchive(tmp_path)
    view = DeferredArchive(inner)
    sha = view.put(wire_bytes(png, url)).sha256
    assert WIRE_CACHE.get((view.url, sha, ("kept", sha))) == url
    inner.gate.set()
    view.flush()
    assert WIRE_CACHE.get((inner.url, sha, inner.blob_stamp(sha))) == url
    assert base64.b64decode(url.partition(",")[2]) == inner.get_bytes(sha)
    view.close()
