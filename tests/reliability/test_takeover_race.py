"""Issue 56, finding 1: exactly one of N resumers takes over a dead writer's claim (local disk and S3).

A writer killed between committing and checkpointing leaves the claim of its checkpoint head's successor.
Several processes resuming the thread from that checkpoint all find the claim's owner dead. Before the
fix each overwrote the claim and went on: in most races two or three of them had a commit of the same head
acknowledged, and some wrote the thread to the end side by side. Now a take-over is an exclusive create of
the thread's next take-over record (``trace_owner``): one resumer wins each race, the others get
:class:`TraceConflictError` before anything of theirs is acknowledged, and nobody commits after a rival's
take-over.

Each race is cheap (a fresh thread id, one shared screenshot, long-lived resumer processes), so the test
runs many. Measured figures (races, double acknowledgements) are in docs/RELIABILITY.md (P14).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from reliability_helpers import screenshot

from causalcache_memory.archive import FsspecArchive, LocalArchive
from causalcache_memory.archive._keys import process_tag
from causalcache_memory.trace import Trace
from causalcache_memory.trace.store import TraceStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process liveness is POSIX")

WORKER = Path(__file__).with_name("takeover_race_worker.py")
RESUMERS = 3
#: races per backend in CI; CAUSALCACHE_TAKEOVER_RACES raises it (docs/RELIABILITY.md: 200+ by hand)
RACES = {"local": 60, "s3": 20}


def _races(backend: str) -> int:
    return int(os.environ.get("CAUSALCACHE_TAKEOVER_RACES", RACES[backend]))


def _dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{process_tag().split('.')[0]}.{proc.pid}.0123456789ab"


@contextmanager
def _resumers(target: str, env: dict[str, str], *mode: str) -> Iterator[list[subprocess.Popen]]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), target, f"resumer-{i}", *mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for i in range(RESUMERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        yield procs
    finally:
        for proc in procs:
            proc.stdin.close()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


@contextmanager
def _atomic_conditional_put() -> Iterator[None]:
    """moto checks ``If-None-Match: *`` and stores the object in two steps with no lock between them (a
    second PUT may pass the check before the first stores); AWS S3 decides a conditional PUT atomically.
    The test serialises moto's PUT handler so the emulated store gives S3's guarantee, which the protocol
    relies on (docs/RELIABILITY.md, P14)."""
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    lock = threading.Lock()

    def put_object(self):
        with lock:
            return original(self)

    S3Response.put_object = put_object
    try:
        yield
    finally:
        S3Response.put_object = original


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_exactly_one_resumer_takes_over_a_dead_writers_claim(tmp_path, s3, s3_url, backend):
    if backend == "local":
        target, archive, env, guard = str(tmp_path / "a"), LocalArchive(tmp_path / "a"), {}, None
    else:
        target, archive, env = s3_url, FsspecArchive(s3_url, **s3.options), s3.env
        guard = _atomic_conditional_put()
    store = TraceStore(archive)
    shot = archive.put(screenshot(900)).sha256
    dead = _dead_owner()
    races, doubles, untaken, cut = _races(backend), [], [], []
    with guard or _nothing(), _resumers(target, env) as procs:
        for race in range(races):
            thread = f"race-{race}"
            trace = Trace("goal", episode_id=thread)
            trace.observe(shot)
            head = store.commit(None, trace)  # the checkpoint every resumer resumes from
            claim = {"v": 1, "child": "e" * 64, "owner": dead}  # the dead writer's commit after it
            assert archive.claim(thread, f"head.{head}", json.dumps(claim).encode()) is None
            for proc in procs:
                proc.stdin.write(f"{thread} {head} {shot}\n")
                proc.stdin.flush()
            acks = [json.loads(proc.stdout.readline())["acks"] for proc in procs]
            winners = [a for a in acks if a]
            if len(winners) > 1:
                doubles.append((thread, acks))
            if not winners:
                untaken.append(thread)
            if any(len(a) == 1 for a in acks):  # acknowledged once, then refused: a rival took over after
                cut.append((thread, acks))
    assert doubles == [], f"{len(doubles)} of {races} races acknowledged two resumers: {doubles[:3]}"
    assert untaken == [], f"no resumer took over in {len(untaken)} of {races} races"
    assert cut == [], f"an acknowledged resumer lost the thread in {len(cut)} of {races} races: {cut[:3]}"


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def test_with_a_reservation_only_the_winner_runs_the_interrupted_steps_action(tmp_path):
    """The LangGraph path: the middleware reserves the head's successor before the step's tool call
    (``TraceStore.reserve``), so of the resumers of a dead run only the winner runs the action; without
    it each resumer runs it once before its commit fails (the other test)."""
    archive = LocalArchive(tmp_path / "a")
    store = TraceStore(archive)
    shot = archive.put(screenshot(901)).sha256
    dead, races, actions = _dead_owner(), 20, []
    with _resumers(str(tmp_path / "a"), {}, "reserve") as procs:
        for race in range(races):
            thread = f"reserve-{race}"
            trace = Trace("goal", episode_id=thread)
            trace.observe(shot)
            head = store.commit(None, trace)
            reservation = {"v": 1, "child": f"reserved:{dead}", "owner": dead}  # died during its action
            assert archive.claim(thread, f"head.{head}", json.dumps(reservation).encode()) is None
            for proc in procs:
                proc.stdin.write(f"{thread} {head} {shot}\n")
                proc.stdin.flush()
            replies = [json.loads(proc.stdout.readline()) for proc in procs]
            first_actions = sum(r["acted"] >= 1 for r in replies)
            winners = [r for r in replies if r["acks"]]
            actions.append((first_actions, len(winners), sum(len(r["acks"]) == 2 for r in replies)))
    assert actions == [(1, 1, 1)] * races
