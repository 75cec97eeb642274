"""The user-shaped agent (user_agent.py) with a slow disk, killed by SIGKILL while a screenshot is written.

The screenshot archived at step ``--kill-at`` takes ``--slow-s`` seconds to write; the model call of
that step waits ``--wait-s`` (long enough for the observe node's checkpoint to be persisted, if nothing
held it back) and then SIGKILLs the process. ``--no-barrier`` turns off the wait that checkpoints make
for the memory's screenshot writes (the control that shows what the barrier prevents)::

    python tests/integrations/durable_agent.py --root DIR --steps N --kill-at K [--no-barrier]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import user_agent as ua

from causalcache_memory.archive.deferred import DeferredArchive
from causalcache_memory.archive.local import LocalArchive


def slow_disk(kill_at: int, slow_s: float) -> None:
    """The ``kill_at``-th screenshot write sleeps ``slow_s`` before it starts (an overloaded disk)."""
    original, writes = LocalArchive.store_image, [0]

    def store_image(self: LocalArchive, raw: bytes, stored: Any) -> None:
        writes[0] += 1
        if writes[0] == kill_at:
            time.sleep(slow_s)
        original(self, raw, stored)

    LocalArchive.store_image = store_image  # type: ignore[method-assign]


class KillingModel(ua.ScriptedModel):
    def __init__(self, kill_at: int, wait_s: float) -> None:
        super().__init__()
        self.kill_at, self.wait_s = kill_at, wait_s

    def __call__(self, messages: list[Any]) -> Any:
        if ua.step_of(messages) == self.kill_at:
            time.sleep(self.wait_s)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--kill-at", type=int, required=True)
    parser.add_argument("--slow-s", type=float, default=3.0)
    parser.add_argument("--wait-s", type=float, default=0.5)
    parser.add_argument("--no-barrier", action="store_true")
    args = parser.parse_args(argv)
    slow_disk(args.kill_at, args.slow_s)
    if args.no_barrier:
        DeferredArchive.flush = lambda self: None  # type: ignore[method-assign]
    memory = ua.memory_for(args.root)
    model = KillingModel(args.kill_at, args.wait_s)
    graph = ua.build_agent(memory, steps=args.steps, checkpointer=memory.checkpointer(), model=model)
    graph.invoke(ua.first_input(), ua.run_config("t1"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
