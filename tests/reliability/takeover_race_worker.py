"""One resumer of the take-over race (run by test_takeover_race.py, several at once).

Usage: ``python takeover_race_worker.py TARGET NAME [reserve]``. Prints ``ready``; then for each line
``<thread> <head> <screenshot sha>`` on stdin it resumes ``thread`` from the checkpoint ``head`` (whose
successor a dead process claimed) and commits two steps of its own, then prints one JSON line
``{"thread": ..., "acks": [head, ...], "acted": n}``: the heads whose commits were acknowledged (0, 1 or 2;
a ``TraceConflictError`` ends the race for this process) and how many steps' actions ran. With
``reserve``, each step first reserves its head's successor (``TraceStore.reserve``, what the LangGraph
middleware does before a tool call) and only then "acts"; without it the action runs before the commit
decides. Exits when stdin closes. The AWS variables name the S3 endpoint of an ``s3://`` target.
"""

from __future__ import annotations

import json
import sys

from causalcache_memory import Action
from causalcache_memory.archive import open_archive
from causalcache_memory.errors import TraceConflictError
from causalcache_memory.trace.store import TraceStore


def main() -> None:
    target, name = sys.argv[1:3]
    reserve = sys.argv[3:4] == ["reserve"]
    archive = open_archive(target)
    print("ready", flush=True)
    for line in sys.stdin:
        thread, head, shot = line.split()
        store = TraceStore(archive)
        trace = store.load_trace(head)
        acks: list[str] = []
        acted = 0
        try:
            for step in range(2):
                if reserve:
                    store.reserve(thread, head)
                acted += 1  # the step's action (a click) runs here
                trace.record(Action("type", text=f"{name} {step}"), f"{name} step {step}", shot)
                head = store.commit(head, trace)
                acks.append(head)
        except TraceConflictError:
            pass
        print(json.dumps({"thread": thread, "acks": acks, "acted": acted}), flush=True)


if __name__ == "__main__":
    main()
