"""A writer process for the kill -9 tests: stores objects forever and logs what each call acknowledged.

Usage: ``python crash_writer.py KIND TARGET WRITER SEED ACKLOG``

* ``KIND=archive``: ``put`` a screenshot (ids overlap between writers, so de-duplication races too),
  ``retain`` it, then append ``"<id> <sha256>\\n"`` to ACKLOG (flushed): a line exists only for a put
  that returned.
* ``KIND=trace``: extend the trace of episode ``w<WRITER>`` by one step and commit it to the trace
  store, then append ``"<steps> <head>\\n"``. A restarted writer continues from its last logged head.

The parent kills this process with SIGKILL at random moments; a torn last log line is ignored.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from reliability_helpers import screenshot

from causalcache_memory.archive import open_archive


def last_ack(path: str) -> tuple[int, str] | None:
    if not os.path.exists(path):
        return None
    lines = [ln.split() for ln in Path(path).read_text().splitlines() if len(ln.split()) == 2]
    good = [(int(a), b) for a, b in lines if len(b) == 64]
    return good[-1] if good else None


def run_archive(archive, writer: int, seed: int, log) -> None:
    rng = random.Random(seed)
    while True:
        i = rng.randrange(0, 400)  # shared id space: writers race on the same objects
        sha = archive.put(screenshot(i, size=(48 + i % 16, 32))).sha256
        archive.retain(f"writer-{writer}", [sha])
        log.write(f"{i} {sha}\n")
        log.flush()


def run_trace(archive, writer: int, ack_path: str, log) -> None:
    from causalcache_memory import Action
    from causalcache_memory.trace import Trace
    from causalcache_memory.trace.store import TraceStore

    store = TraceStore(archive)
    episode = f"w{writer}"
    previous = last_ack(ack_path)
    if previous is None:
        head, trace = None, Trace("goal", episode_id=episode)
        trace.observe(archive.put(screenshot(writer)).sha256)
    else:
        head = previous[1]
        store.reset_head(episode, head)
        trace = store.load_trace(head, episode_id=episode)
    while True:
        step = trace.t
        trace.record(
            Action("type", text=str(step)), f"step {step}", archive.put(screenshot(1000 + step)).sha256
        )
        head = store.commit(head, trace)
        log.write(f"{trace.t} {head}\n")
        log.flush()


def main() -> None:
    kind, target, writer, seed, ack_path = sys.argv[1:6]
    archive = open_archive(target)
    with open(ack_path, "a", encoding="utf-8") as log:
        if kind == "archive":
            run_archive(archive, int(writer), int(seed), log)
        else:
            run_trace(archive, int(writer), ack_path, log)


if __name__ == "__main__":
    main()
