"""A dropped memory is closed by its finalizers without joining any thread.

A garbage collection can start in any thread at any allocation, including inside ``threading``'s own
critical sections: CI hung once with a new thread's bootstrap holding ``threading._shutdown_locks_lock``
while the collection it triggered ran the memory's finalizer, whose ``join`` needs that same lock. So the
finalizers (memory, controller) signal their threads to stop and return; the writes already handed over
still land on the writer thread.
"""

from __future__ import annotations

import gc
import threading
import time

import pytest

from causalcache_memory.archive import LocalArchive


@pytest.fixture
def no_joins(monkeypatch):
    """Fail any ``Thread.join`` made while the fixture is active, from any thread."""
    calls: list[str] = []
    original = threading.Thread.join

    def join(self, timeout=None):
        calls.append(self.name)
        return original(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)
    return calls


def _stored(archive: LocalArchive, sha: str) -> bool:
    return sha in set(archive.iter_hashes())


def _wait_for(predicate, timeout_s: float = 10.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_a_dropped_memory_joins_no_thread_and_its_writes_still_land(tmp_path, make_png, no_joins) -> None:
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    archive = LocalArchive(tmp_path / "archive")
    memory = CausalCacheMemory(budget=2, archive=archive)
    store = memory.trace_store()  # builds the controller and the deferred (writer-thread) archive
    _, _, controller = memory._stores[id(archive)]
    controller._owned_worker()  # the allocator worker thread a step would start
    sha = store.archive.put(make_png((9, 9, 9))).sha256  # handed to the writer thread
    del memory, store, controller
    gc.collect()
    assert no_joins == []  # the finalizers joined nothing
    assert _wait_for(lambda: _stored(archive, sha))  # the write handed over still landed


def test_close_still_waits_for_the_writes(tmp_path, make_png) -> None:
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    archive = LocalArchive(tmp_path / "archive")
    memory = CausalCacheMemory(budget=2, archive=archive)
    sha = memory.trace_store().archive.put(make_png((1, 2, 3))).sha256
    memory.close()
    assert _stored(archive, sha)  # an explicit close is durable on return


def test_a_dropped_controller_signals_its_worker_without_joining(tmp_path, no_joins) -> None:
    from causalcache_lab.world.sim_policy import SimulatedPolicy
    from causalcache_memory.config import parse_config
    from causalcache_memory.factory import build_controller

    config = parse_config({"budget": 2})
    controller = build_controller(
        config, policy=SimulatedPolicy(seed=0), archive=LocalArchive(tmp_path / "a")
    )
    worker = controller._owned_worker()
    worker.call(lambda: None, timeout_s=5.0)  # the thread is running
    thread = worker._thread
    del controller, worker
    gc.collect()
    assert no_joins == []
    assert _wait_for(lambda: not thread.is_alive())  # it found the stop signal and ended
