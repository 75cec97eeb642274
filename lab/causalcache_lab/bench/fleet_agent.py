"""One agent worker of the deployment (docs/DEPLOY.md), on the synthetic world: the local rehearsal.

``python -m causalcache_lab.bench.fleet_agent --config fleet.yaml --episode agent-1`` builds the
memory exactly as a deployed worker does (:func:`causalcache_memory.factory.build_controller` from the
config: the SGLang policy through the gateway, the shared object-store archive with its local cache, the
learned selector in the worker), runs one episode of a synthetic-world task and commits the trace after
every step to the archive's hash chain (:class:`~causalcache_memory.trace.store.TraceStore`; a LangGraph
worker keeps that head in its Postgres checkpoint). At the end the trace is read back from the shared
archive by a fresh store and checked: every step recorded exactly once, in order. It prints one JSON line:
``{"episode", "steps", "head", "servers", "second_passes", "verified"}``.

``python -m causalcache_lab.bench.fleet_agent --wait URL [URL ...]`` waits until each URL answers
HTTP 2xx (start-up ordering in scripts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "run_episode", "wait_ready"]


def wait_ready(urls: Sequence[str], *, timeout_s: float = 60.0) -> None:
    """Return when every URL answers a 2xx; ``TimeoutError`` naming the ones that did not."""
    import httpx

    deadline = time.monotonic() + timeout_s
    pending = list(urls)
    while pending and time.monotonic() < deadline:
        still = []
        for url in pending:
            try:
                ok = httpx.get(url, timeout=2.0).is_success
            except httpx.HTTPError:
                ok = False
            if not ok:
                still.append(url)
        pending = still
        if pending:
            time.sleep(0.2)
    if pending:
        raise TimeoutError(f"not ready after {timeout_s:g} s: {pending}")


def run_episode(config_path: str, episode: str, *, steps: int = 8) -> dict[str, Any]:
    """Run one episode with the memory the config describes; returns the summary (module docstring)."""
    from causalcache_lab.world.env import GuiWorld
    from causalcache_lab.world.tasks import generate_tasks
    from causalcache_memory.config import load_config
    from causalcache_memory.errors import CausalCacheWarning
    from causalcache_memory.factory import build_controller
    from causalcache_memory.runtime.registry import build_policy
    from causalcache_memory.trace import Trace
    from causalcache_memory.trace.store import TraceStore

    config = load_config(config_path)
    controller = build_controller(config, policy=build_policy(config.policy))
    seed = int.from_bytes(hashlib.sha256(episode.encode()).digest()[:4], "big")
    task = generate_tasks(1, seed=seed, platform="mobile")[0]
    world = GuiWorld(task)
    trace = Trace(task.goal, episode_id=episode, platform=world.platform)
    store = TraceStore(controller.archive)
    controller.observe(trace, world.reset())
    head = store.commit(None, trace)
    servers: Counter[str] = Counter()
    second = 0
    try:
        for _ in range(steps):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CausalCacheWarning)
                decision = controller.decide(trace)
            servers[str(decision.generation.meta.get("server", "?"))] += 1
            second += int(decision.second_pass)
            action = decision.action
            if action is None or action.type == "done":
                break
            png, info = world.step(action)
            controller.record(trace, decision, png, app=info.app, screen_size=world.size)
            head = store.commit(head, trace, [decision.to_record()])
            if info.done:
                break
    finally:
        controller.close()
        close = getattr(controller.policy, "close", None)
        if callable(close):
            close()
    reread = TraceStore(controller.archive).load_trace(head, episode_id=episode)  # from the shared archive
    indices = [event.index for event in reread]
    verified = indices == list(range(1, len(trace) + 1)) and [e.screenshot for e in reread] == [
        e.screenshot for e in trace
    ]
    return {
        "episode": episode,
        "steps": len(trace),
        "head": head,
        "servers": dict(servers),
        "second_passes": second,
        "verified": verified,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one agent worker of docs/DEPLOY.md (synthetic world)")
    parser.add_argument("--config", help="CausalCache config YAML (policy.sglang.gateway_url, archive.url)")
    parser.add_argument("--episode", help="episode id (also the gateway routing key)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument(
        "--wait", nargs="+", metavar="URL", help="wait until these URLs answer 2xx, then exit"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for --wait (default 60)")
    args = parser.parse_args(argv)
    if args.wait:
        wait_ready(args.wait, timeout_s=args.timeout)
        return 0
    if not args.config or not args.episode:
        parser.error("--config and --episode are required (or --wait URL ...)")
    summary = run_episode(args.config, args.episode, steps=args.steps)
    print(json.dumps(summary), flush=True)
    return 0 if summary["verified"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
