"""GC concurrent with writers: a returned ``put`` (then ``retain``) is never collected, on every backend.

Objects are aged two hours before the run, so every one of them is a collection candidate until a
writer re-puts it; a collector loops with the default one-hour grace while writer threads re-put and
retain them. This used to lose re-put objects on fsspec (finding 1) and, with forced interleaving, on
the local backend (finding 3).
"""

from __future__ import annotations

import random
import threading

from reliability_helpers import age, screenshot

from causalcache_memory.errors import BlobCorruptError, BlobNotFoundError

N_OBJECTS = 60


def test_collector_never_deletes_an_acknowledged_put(any_archive):
    archive = any_archive
    hashes = [archive.put(screenshot(i)).sha256 for i in range(N_OBJECTS)]
    for sha in hashes:
        age(archive, sha, 7200)
    stop = threading.Event()
    deleted: list[int] = []
    acked: dict[str, list[str]] = {"retained": [], "put only": []}
    errors: list[BaseException] = []

    started = threading.Event()

    def collector() -> None:
        started.wait(30)  # writers have re-put some aged objects: collect while they keep going
        while not stop.is_set():
            deleted.append(archive.gc(grace_seconds=3600).deleted)

    def writer(w: int) -> None:
        rng = random.Random(w)
        try:
            for _ in range(40):
                i = rng.randrange(N_OBJECTS)
                sha = archive.put(screenshot(i)).sha256
                if rng.random() < 0.5:
                    archive.retain(f"ep-{w}", [sha])
                    acked["retained"].append(sha)
                else:
                    acked["put only"].append(sha)  # acknowledged, retained later (within the grace)
                if len(acked["retained"]) + len(acked["put only"]) >= 10:
                    started.set()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    gc_thread = threading.Thread(target=collector)
    gc_thread.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    gc_thread.join(120)
    assert not errors, errors
    assert sum(deleted) > 0  # the collector did delete the objects nobody re-put
    archive.retain("late", acked["put only"])
    lost = torn = 0
    for sha in set(acked["retained"]) | set(acked["put only"]):
        try:
            archive.get_bytes(sha)
        except BlobNotFoundError:
            lost += 1
        except BlobCorruptError:
            torn += 1
    assert (lost, torn) == (0, 0)
