"""Issue 27, finding 3: one run per thread across processes, on local disk and on S3.

Before the fix the compare-and-swap on a thread's trace head lived in one process's memory: a second
process on a running thread extended the same heads and both runs "succeeded". Now each commit claims its
base head's successor with an exclusive create in the shared archive (``trace_owner``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import screenshot

from causalcache_memory import Action
from causalcache_memory.archive import FsspecArchive, LocalArchive
from causalcache_memory.errors import TraceConflictError
from causalcache_memory.trace.store import TraceStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

WORKER = Path(__file__).with_name("trace_owner_worker.py")


def _target(backend: str, tmp_path: Path, s3, s3_url: str):
    if backend == "local":
        return str(tmp_path / "archive"), LocalArchive(tmp_path / "archive"), {}
    return s3_url, FsspecArchive(s3_url, **s3.options), s3.env


def _step(store: TraceStore, archive, head: str, i: int) -> str:
    trace = store.load_trace(head)
    trace.record(Action("type", text=f"mine {i}"), f"mine {i}", archive.put(screenshot(700 + i)).sha256)
    return store.commit(head, trace)


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_a_second_process_on_a_running_thread_fails(tmp_path, s3, s3_url, backend):
    target, archive, env = _target(backend, tmp_path, s3, s3_url)
    other = subprocess.Popen(
        [sys.executable, str(WORKER), target, "thread-1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        started = json.loads(other.stdout.readline())
        store = TraceStore(archive)  # this process never wrote the thread: no in-process memory of it
        with pytest.raises(
            TraceConflictError, match=r"thread 'thread-1': another run \(.*\) already extended"
        ):
            _step(store, archive, started["root"], 0)  # the other run already went past the root
        mine = _step(store, archive, started["head"], 1)  # both runs at the same head: the first wins ...
        other.stdin.write("go\n")
        other.stdin.flush()
        assert other.stdout.readline().startswith("conflict thread 'thread-1'")  # ... the other fails
        assert store.load_trace(mine).t == 3
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
        other.stdin.close()
        other.stdout.close()


def test_a_run_taken_over_elsewhere_fails_at_its_next_commit(tmp_path):
    archive = LocalArchive(tmp_path / "archive")
    store = TraceStore(archive)
    trace = store.load_trace(_root(store, archive))
    base = store.head_of("thread-2")
    trace.record(Action("type", text="a"), "a", archive.put(screenshot(801)).sha256)
    head = store.commit(base, trace)
    # a live run elsewhere took the thread over (reset_head there): the thread's first take-over record
    foreign = {"v": 1, "base": base, "child": "f" * 64, "owner": "other-host.4242.0123456789ab"}
    assert archive.claim("thread-2", "take.1", json.dumps(foreign).encode()) is None
    trace.record(Action("type", text="b"), "b", archive.put(screenshot(802)).sha256)
    with pytest.raises(TraceConflictError, match=r"other-host\.4242.* took this thread over"):
        store.commit(head, trace)
    store.reset_head("thread-2", head)  # a deliberate take-over back
    assert store.commit(head, trace) != head


def _root(store: TraceStore, archive) -> str:
    from causalcache_memory.trace import Trace

    trace = Trace("goal", episode_id="thread-2")
    trace.observe(archive.put(screenshot(800)).sha256)
    return store.commit(None, trace)


def test_release_removes_the_claims_and_the_thread_id_can_start_again(tmp_path):
    archive = LocalArchive(tmp_path / "archive")
    store = TraceStore(archive)
    _root(store, archive)
    assert archive.read_claim("thread-2", "head.root") is not None
    archive.release("thread-2")
    assert archive.read_claim("thread-2", "head.root") is None and archive.live_episodes() == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("alive", [True, False])
def test_a_claim_of_a_killed_process_on_this_host_is_taken_over(tmp_path, alive):
    """A run killed between committing and checkpointing leaves a claim; its resume (same host) may take
    it over, a claim of a process that still runs may not."""
    from causalcache_memory.archive._keys import process_tag

    archive = LocalArchive(tmp_path / "archive")
    pid = os.getppid() if alive else _dead_pid()
    host = process_tag().split(".")[0]
    claim = {"v": 1, "child": "e" * 64, "owner": f"{host}.{pid}.0123456789ab"}
    archive.claim("thread-2", "head.root", json.dumps(claim).encode())
    if alive:
        with pytest.raises(TraceConflictError, match=f"{host}\\.{pid}"):
            _root(TraceStore(archive), archive)
    else:
        assert TraceStore(archive).load_trace(_root(TraceStore(archive), archive)).t == 1


def test_a_torn_claim_left_by_a_power_loss_is_taken_over(tmp_path):
    """The memory syncs a claim off the step's thread, before the checkpoint: a power loss before that
    sync can leave the claim's name with no bytes. Its writer died with the machine, so the resume (from
    the checkpoint's head, whose successor it claimed) takes it over instead of failing forever."""
    archive = LocalArchive(tmp_path / "archive")
    archive.claim("thread-2", "head.root", b"")  # what the power loss left: the name, not the bytes
    store = TraceStore(archive)
    assert store.load_trace(_root(store, archive)).t == 1
    assert archive.read_claim("thread-2", "head.root") == b""  # nothing overwrites a claim ...
    claim = json.loads(archive.read_claim("thread-2", "take.1"))  # ... a take-over record replaces it
    assert claim["child"] == store.head_of("thread-2") and claim["base"] == "root"


_RIVAL = """
import sys
from causalcache_memory import Action
from causalcache_memory.archive import LocalArchive
from causalcache_memory.trace.store import TraceStore
archive = LocalArchive(sys.argv[1])
store = TraceStore(archive)
store.reset_head("thread-2", sys.argv[2])  # a deliberate take-over from an older checkpoint
trace = store.load_trace(sys.argv[2])
trace.record(Action("type", text="rival"), "rival", sys.argv[3])
print(store.commit(sys.argv[2], trace))
"""


def test_a_take_over_from_an_older_checkpoint_stops_the_running_writer(tmp_path):
    """Issue 56: the still-owner check re-read only the claim after the writer's previous base, so a rival
    that took the thread over two or more steps back went unseen and both wrote it to the end. Every
    take-over now creates the thread's next take-over record, which each commit checks."""
    archive = LocalArchive(tmp_path / "archive")
    store = TraceStore(archive)
    shot = archive.put(screenshot(803)).sha256
    heads = [_root(store, archive)]
    trace = store.load_trace(heads[0])
    for i in range(3):
        trace.record(Action("type", text=f"w{i}"), f"w{i}", shot)
        heads.append(store.commit(heads[-1], trace))
    rival = subprocess.run(
        [sys.executable, "-c", _RIVAL, str(tmp_path / "archive"), heads[1], shot],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert len(rival.stdout.strip()) == 64  # the rival's commit after heads[1] was acknowledged
    trace.record(Action("type", text="w3"), "w3", shot)
    with pytest.raises(TraceConflictError, match="took this thread over"):
        store.commit(heads[-1], trace)
