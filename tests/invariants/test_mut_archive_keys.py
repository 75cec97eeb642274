"""The archive's shared key and naming rules (``archive/_keys.py``), checked as behaviour.

Four contracts live there, and every backend relies on them:

- ``gc/`` markers are named ``<sha256>.<epoch ms>.<uuid>``; a marker written more than 30 s ago (or one
  nobody can date) belongs to a dead collector, and writers stop waiting for it (docs/RELIABILITY.md);
- temporary files are named ``<name>.<host>.<pid>.<thread>.<uuid>.tmp``, and a sweep deletes one only
  when its writer is a process of *this* host that no longer runs: anything else may be a write in
  flight, on this machine or on another one sharing the folder (RELIABILITY.md, P6);
- an ``OSError`` becomes the named archive error whose message says what to do (errors.py);
- a corrupt object is refused with both hashes and the fix for its kind; malformed keys are
  :class:`ArchiveKeyError` (a ``ValueError``), whatever their type.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import re
import socket
import subprocess
import threading
import time
import uuid
from types import ModuleType

import pytest

from causalcache_memory.archive import LocalArchive
from causalcache_memory.archive import _keys as keys
from causalcache_memory.errors import (
    ArchiveError,
    ArchiveKeyError,
    ArchivePermissionError,
    ArchiveUnavailableError,
    BlobCorruptError,
)

SHA = "3f" + "a1" * 31  # a well-formed content address (64 lower-case hex characters)
MS = 1_764_000_000_000  # 2025-11-24 16:00:00 UTC, in epoch milliseconds: a whole second


# ---------------------------------------------------------------- gc markers
@pytest.mark.parametrize(
    ("written_ms", "age", "stale"),
    [
        (MS, -2.0, False),  # dated 2 s ahead: a collector on a host whose clock runs ahead is live
        (MS, 5.0, False),
        (MS, 29.5, False),
        (MS, 30.0, False),  # "more than 30 s": exactly 30 s is still a live collector
        (MS, 30.5, True),
        (MS, 3600.0, True),
        (MS + 999, 29.5, False),  # the milliseconds count: 29.5 s, not 30.499 s (seconds floored)
        (MS + 999, 30.5, True),
    ],
)
def test_a_gc_marker_is_stale_once_written_more_than_30_seconds_ago(written_ms, age, stale) -> None:
    """Writers wait while a live marker names their object and delete a stale one: a marker judged stale
    too early lets a writer race a collector still deciding; one judged live too long stalls every put of
    that object behind a collector that died (RELIABILITY.md: "markers older than 30 s"). Clocks of
    machines sharing a bucket differ by a little (RELIABILITY.md), so a marker from the near future is
    live, not stale."""
    name = f"{SHA}.{written_ms}.{uuid.UUID(int=7).hex}"
    now = written_ms / 1000 + age
    assert keys.marker_is_stale(name, now=now) is stale


def test_marker_age_is_measured_against_the_clock_when_no_time_is_given() -> None:
    """``now`` defaults to the wall clock (what writers use); an explicit ``now`` is used as given."""
    now = time.time()
    fresh = f"{SHA}.{int((now - 5) * 1000)}.{uuid.uuid4().hex}"
    old = f"{SHA}.{int((now - 120) * 1000)}.{uuid.uuid4().hex}"
    assert keys.marker_is_stale(fresh) is False
    assert keys.marker_is_stale(old) is True
    # An explicit ``now`` far from the clock decides alone, both ways.
    assert keys.marker_is_stale(old, now=now - 110) is False
    assert keys.marker_is_stale(fresh, now=now + 120) is True


@pytest.mark.parametrize(
    "name",
    [SHA, "garbage", f"{SHA}.soon.{uuid.UUID(int=1).hex}", f"{SHA}..{uuid.UUID(int=2).hex}", f"{SHA}.12ab"],
)
def test_a_gc_marker_nobody_can_date_is_stale(name) -> None:
    """A marker without a readable time cannot be told from a dead collector's: treating it as live would
    stall writers for a minute each time; as stale, the writer removes it and goes on."""
    assert keys.marker_is_stale(name, now=MS / 1000) is True


def test_a_new_gc_marker_records_when_it_was_written_in_epoch_milliseconds() -> None:
    """The marker's time field is what every other process reads to judge it: ``<sha>.<epoch ms>.<uuid>``,
    unique per call (two collectors can mark the same object)."""
    before = time.time()
    name = keys.gc_marker_name(SHA)
    after = time.time()
    sha, ms, unique = name.split(".")
    assert sha == SHA and re.fullmatch(r"[0-9a-f]{32}", unique)
    assert int(before * 1000) <= int(ms) <= int(after * 1000)
    assert keys.marker_is_stale(name, now=after + 29) is False
    assert keys.marker_is_stale(name, now=before + 31) is True
    assert keys.gc_marker_name(SHA) != keys.gc_marker_name(SHA)


def test_a_writer_removes_a_dead_collectors_marker_and_stores_its_object(tmp_path, make_png) -> None:
    """End to end: a 31-second-old marker on the object does not hold ``put`` up, and is cleaned away."""
    archive = LocalArchive(tmp_path / "a")
    data = make_png((1, 2, 3))
    sha = keys.digest(data)
    marker = archive.root / "gc" / f"{sha}.{int((time.time() - 31) * 1000)}.{uuid.uuid4().hex}"
    marker.touch()
    started = time.monotonic()
    assert archive.put(data).sha256 == sha
    assert time.monotonic() - started < 5.0
    assert not marker.exists() and archive.get_bytes(sha) == data


# ---------------------------------------------------------------- temporary files and their writers
class _Processes:
    """Stands in for ``os`` inside ``_keys``: which pids run, which belong to another user, and a log of
    every liveness probe (``kill(pid, signal)``). Any pid not listed has exited."""

    def __init__(self, *, own=2_000_000, running=(), other_user=(), unknowable=(), name="posix"):
        self.name, self.own = name, own
        self.running, self.other_user, self.unknowable = set(running), set(other_user), set(unknowable)
        self.probes: list[tuple[int, int]] = []

    def getpid(self) -> int:
        return self.own

    def kill(self, pid: int, sig: int) -> None:
        self.probes.append((pid, sig))
        if pid in self.unknowable:
            raise OSError(errno.ENOSYS, "Function not implemented")
        if pid in self.other_user:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        if pid != self.own and pid not in self.running:
            raise ProcessLookupError(errno.ESRCH, "No such process")


def _host() -> str:
    return keys.temp_name(SHA).split(".")[1]


def _temp(pid: object, *, host: str | None = None, final: str = SHA, suffix: str = "tmp") -> str:
    return f"{final}.{_host() if host is None else host}.{pid}.{threading.get_ident()}.{'ab' * 16}.{suffix}"


def test_a_temp_file_is_dead_only_when_its_writer_on_this_host_has_exited(monkeypatch) -> None:
    """The sweep deletes what this predicate calls dead, so only an exited writer's file qualifies: this
    process's own write in flight, a running writer, one under another user (EPERM) and one whose state
    cannot be read are all kept. Pids below and above ours are judged alike."""
    procs = _Processes(own=2_000_000, running={4242}, other_user={5151}, unknowable={6161})
    monkeypatch.setattr(keys, "os", procs)
    assert keys.temp_writer_is_dead(_temp(1_000)) is True  # exited, pid below ours
    assert keys.temp_writer_is_dead(_temp(3_000_000)) is True  # exited, pid above ours
    assert keys.temp_writer_is_dead(_temp(2_000_000)) is False  # this process: in flight
    assert keys.temp_writer_is_dead(_temp(4242)) is False
    assert keys.temp_writer_is_dead(_temp(5151)) is False
    assert keys.temp_writer_is_dead(_temp(6161)) is False


def test_the_liveness_probe_never_signals_a_writer(monkeypatch) -> None:
    """The probe is ``kill(pid, 0)``, which only checks that the process exists; any other signal would
    hit the running writer it asks about (1 is SIGHUP, which ends it)."""
    procs = _Processes(running={4242})
    monkeypatch.setattr(keys, "os", procs)
    keys.temp_writer_is_dead(_temp(4242))
    keys.temp_writer_is_dead(_temp(1_000))
    assert procs.probes == [(4242, 0), (1_000, 0)]


def test_names_outside_the_temp_file_format_are_never_judged_dead(monkeypatch) -> None:
    """Every pid here has exited, yet nothing is called dead: a file of another host sharing the folder
    (its pid means nothing here), a name that is not a ``.tmp`` file, one with five or seven fields (the
    pid is not where the format puts it), a pid field that is not a number, and a negative one (``kill``
    of a negative number addresses a process group, not a writer)."""
    monkeypatch.setattr(keys, "os", _Processes())
    host = _host()
    names = [
        _temp(1_000, host=host + "x"),  # sorts after this host
        _temp(1_000, host=host[:-1]),  # sorts before it
        _temp(1_000, host="host" if host != "host" else "other"),
        _temp(1_000, suffix="part"),  # sorts before "tmp"
        _temp(1_000, suffix="zip"),  # sorts after it
        f"{SHA}.{host}.1000.{'ab' * 16}.tmp",  # five fields: no thread
        f"{SHA}.{host}.1000.{threading.get_ident()}.{'ab' * 16}.old.tmp",  # seven fields
        _temp("12ab"),
        _temp(-1_000),
    ]
    assert [keys.temp_writer_is_dead(name) for name in names] == [False] * len(names)


def test_temp_files_are_never_judged_outside_posix(monkeypatch) -> None:
    """``kill(pid, 0)`` tests liveness on POSIX only (on Windows signal 0 is CTRL_C_EVENT): elsewhere no
    file is called dead and no process is probed; the age cutoff of ``gc`` still cleans up."""
    procs = _Processes(name="nt")
    monkeypatch.setattr(keys, "os", procs)
    assert keys.temp_writer_is_dead(_temp(1_000)) is False
    assert procs.probes == []


def _exited_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_opening_an_archive_removes_only_the_files_of_exited_writers_on_this_host(tmp_path) -> None:
    """End to end with real processes: reopening sweeps ``tmp/`` and keeps every file that may still be
    a write in flight (this process's, a running child's, another host's) or is not a temp file."""
    LocalArchive(tmp_path)
    folder = tmp_path / "tmp"
    dead, host = _exited_pid(), _host()
    child = subprocess.Popen(["sleep", "30"])
    try:
        gone = _temp(dead)
        kept = [
            keys.temp_name("e" * 64),  # this process
            _temp(child.pid),
            _temp(dead, host=host + "-b"),
            _temp(dead, suffix="part"),
            f"{SHA}.{host}.{dead}.{'ab' * 16}.tmp",
        ]
        for name in [gone, *kept]:
            (folder / name).write_bytes(b"partial")
        LocalArchive(tmp_path)
        assert sorted(p.name for p in folder.iterdir()) == sorted(kept)
        assert child.poll() is None  # probed, not signalled
    finally:
        child.kill()
        child.wait()


def _keys_loaded_on_host(monkeypatch, hostname: str) -> ModuleType:
    """A separate copy of ``_keys`` imported on a machine whose host name is ``hostname``."""
    monkeypatch.setattr(socket, "gethostname", lambda: hostname)
    spec = importlib.util.spec_from_file_location("_keys_on_other_host", keys.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_temp_names_carry_this_hosts_name_pid_and_thread() -> None:
    """The host and pid fields are what lets a later process on the same host recognise a killed writer's
    file, and a process on another host leave it alone."""
    final = "d" * 64
    fields = keys.temp_name(final).split(".")
    host = keys.host_field(socket.gethostname())
    assert fields[:4] == [final, host, str(os.getpid()), str(threading.get_ident())]
    assert re.fullmatch(r"[0-9a-f]{32}", fields[4]) and fields[5] == "tmp"


@pytest.mark.parametrize(
    ("hostname", "field"),
    [
        ("a" * 40, "a" * 40),  # up to 40 safe characters: the name itself
        ("ws_01.lab", "ws-01-lab"),  # a dot would add a field, so it becomes "-" (as "_" does)
        ("", "host"),  # no name at all: still six fields
        # Longer names (a fully qualified one, 52 characters; 41 characters): bounded to 40.
        ("build-node-17.eu-west-1.compute.internal.example.com", None),
        ("a" * 39 + "bc", None),
    ],
)
def test_the_host_field_is_safe_and_at_most_40_characters(monkeypatch, hostname, field) -> None:
    """The host field is part of the on-disk name that every process sharing ``tmp/`` must parse alike: a
    dot in it would break the six fields (the writer's files would never be recognised), and its length is
    bounded so temp names stay far under the 255-byte file-name limit whatever the host is called. A
    writer's file on that host is recognised by the same rule."""
    other = _keys_loaded_on_host(monkeypatch, hostname)
    fields = other.temp_name(SHA).split(".")
    assert len(fields) == 6
    if field is not None:
        assert fields[1] == field
    else:
        assert re.fullmatch(r"[A-Za-z0-9-]{1,40}", fields[1])
    monkeypatch.setattr(other, "os", _Processes())
    assert other.temp_writer_is_dead(f"{SHA}.{fields[1]}.1000.1.{'ab' * 16}.tmp") is True


def test_hosts_whose_names_differ_after_40_characters_never_sweep_each_others_writes(monkeypatch) -> None:
    """Docstring contract: dead means "a process on *this* host that no longer runs"; a write in flight on
    another machine sharing the archive must be kept (RELIABILITY.md: writers on different machines
    share one bucket)."""
    pod_1 = _keys_loaded_on_host(monkeypatch, "causalcache-labelling-fleet-archive-writer-1")
    in_flight = pod_1.temp_name(SHA)  # written by a live process on pod 1
    pod_0 = _keys_loaded_on_host(monkeypatch, "causalcache-labelling-fleet-archive-writer-0")
    monkeypatch.setattr(pod_0, "os", _Processes())  # pod 1's pid does not run on pod 0
    assert pod_0.temp_writer_is_dead(in_flight) is False


# ---------------------------------------------------------------- keys, corruption, errors
@pytest.mark.parametrize("bad", [12, None, b"episode", ".", "..", "../x", "a/b", ""])
def test_a_malformed_episode_id_of_any_type_is_an_archive_key_error(tmp_path, make_png, bad) -> None:
    """Callers catch ``ArchiveKeyError`` (a ``ValueError``) for bad ids: a non-string id must not escape
    as a ``TypeError`` from deep inside the validation, and nothing is written for it."""
    archive = LocalArchive(tmp_path / "a")
    sha = archive.put(make_png((5, 5, 5))).sha256
    with pytest.raises(ArchiveKeyError, match="is not a valid archive episode id"):
        keys.check_episode_id(bad)
    with pytest.raises(ArchiveKeyError, match="is not a valid archive episode id"):
        archive.retain(bad, [sha])
    assert archive.live_episodes() == []


@pytest.mark.parametrize("kind", ["blob", "record"])
def test_a_corrupt_object_is_refused_with_the_fix_for_its_kind(tmp_path, make_png, kind) -> None:
    """A damaged screenshot can be stored again by the agent that took it; a record (a trace chain node)
    cannot be re-derived from a screenshot, so its message only says to delete it."""
    archive = LocalArchive(tmp_path / "a")
    data = make_png((9, 8, 7)) if kind == "blob" else b'{"node": 1}'
    sha = archive.put(data).sha256 if kind == "blob" else archive.put_record(data)
    path = archive.root / f"{kind}s" / sha[:2] / sha
    path.write_bytes(data + b"!")
    actual = keys.digest(data + b"!")
    fix = f"delete {path} and store the screenshot again" if kind == "blob" else f"delete {path}"
    read = archive.get_bytes if kind == "blob" else archive.get_record
    with pytest.raises(BlobCorruptError) as info:
        read(sha)
    assert str(info.value) == (
        f"{kind} {sha} in archive {archive.url} is corrupt: its bytes hash to {actual}; {fix}"
    )


def test_verified_takes_kind_url_and_location_by_name_only() -> None:
    """Three free-form strings in a row: passed by position, a swapped url and location would silently
    produce a message pointing at the wrong file."""
    raw = b"bytes"
    assert keys.verified(raw, keys.digest(raw), kind="record", url="memory://a", location="r/x") == raw
    with pytest.raises(TypeError):
        keys.verified(raw, keys.digest(raw), "record", "memory://a", "r/x")  # type: ignore[misc]


@pytest.mark.parametrize(
    "exc",
    [
        PermissionError("denied"),  # no errno at all
        OSError(errno.EACCES, "Permission denied"),
        OSError(errno.EPERM, "Operation not permitted"),
        OSError(errno.EROFS, "Read-only file system"),
    ],
)
def test_permission_and_read_only_failures_are_permission_errors(exc) -> None:
    """A read-only or forbidden location is fixed by the user (access or another location), and is a
    ``PermissionError`` for callers that catch builtins."""
    err = keys.os_error(exc, "cannot write blob x")
    assert type(err) is ArchivePermissionError and isinstance(err, PermissionError)
    assert str(err) == (
        f"cannot write blob x: permission denied ({exc}); give this process write access to the archive "
        "location or open a different one"
    )


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        TimeoutError("timed out"),
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
    ],
)
def test_unreachable_storage_is_an_unavailable_error(exc) -> None:
    """Refused, timed out or unknown host: the storage is down or misnamed, a ``ConnectionError`` that
    callers may retry, never a permission or data problem."""
    err = keys.os_error(exc, "cannot open archive url='s3://b'")
    assert type(err) is ArchiveUnavailableError and isinstance(err, ConnectionError)
    assert str(err) == (
        f"cannot open archive url='s3://b': the storage cannot be reached ({type(exc).__name__}: {exc}); "
        "check the URL, the network and that the server is running"
    )


def test_other_os_errors_stay_plain_archive_errors() -> None:
    """A full disk is neither a permission nor a connectivity problem: no misleading advice."""
    exc = OSError(errno.ENOSPC, "No space left on device")
    err = keys.os_error(exc, "could not write record r")
    assert type(err) is ArchiveError
    assert str(err) == "could not write record r: OSError: [Errno 28] No space left on device"


def test_a_long_host_name_keeps_a_prefix_and_a_hash_of_the_whole_name() -> None:
    """Bounded to 40 characters, yet unique per host: 31 safe characters, ``-``, then 8 hex digits of the
    SHA-256 of the full name (so pods ``...-writer-0`` and ``...-writer-1`` differ)."""
    name = "causalcache-labelling-fleet-archive-writer-0.svc.cluster.local"
    field = keys.host_field(name)
    digest = hashlib.sha256(name.encode()).hexdigest()
    assert field == "causalcache-labelling-fleet-arc-" + digest[:8]
    assert len(field) == 40
    assert keys.host_field(name.replace("-0.", "-1.")) != field
    assert keys.host_field("a" * 40) == "a" * 40  # at the limit: the name itself
