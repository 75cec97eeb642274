"""A second agent process on one thread (run by test_trace_owner.py).

Usage: ``python trace_owner_worker.py TARGET THREAD``. Starts the thread's trace (root and one step),
prints ``{"root": ..., "head": ...}``; then for each line ``go`` on stdin commits one more step after its
own head and prints ``ok <head>`` or ``conflict <message>``. Exits when stdin closes. The AWS variables
name the S3 endpoint of an ``s3://`` target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from reliability_helpers import screenshot

from causalcache_memory import Action
from causalcache_memory.archive import open_archive
from causalcache_memory.errors import TraceConflictError
from causalcache_memory.trace import Trace
from causalcache_memory.trace.store import TraceStore


def main() -> None:
    target, thread = sys.argv[1:3]
    archive = open_archive(target)
    store = TraceStore(archive)
    trace = Trace("goal", episode_id=thread)
    trace.observe(archive.put(screenshot(500)).sha256)
    root = store.commit(None, trace)
    trace.record(Action("type", text="first"), "step 1", archive.put(screenshot(501)).sha256)
    head = store.commit(root, trace)
    print(json.dumps({"root": root, "head": head}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            continue
        trace.record(
            Action("type", text="again"), f"step {trace.t}", archive.put(screenshot(500 + trace.t)).sha256
        )
        try:
            head = store.commit(head, trace)
            print(f"ok {head}", flush=True)
        except TraceConflictError as exc:
            print(f"conflict {exc}", flush=True)


if __name__ == "__main__":
    main()
