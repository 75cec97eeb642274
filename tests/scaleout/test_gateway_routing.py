"""The SGLang client behind the SGLang Model Gateway (smg) on loopback: one worker per episode, episodes
spread over workers, a worker killed mid-run."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from loopback import MemoryArchive, make_prompt
from scaleout_support import keys_by_worker

from causalcache_memory.allocation.simple import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.config.models import PolicyConfig, SGLangPolicyConfig
from causalcache_memory.controller import MemoryController
from causalcache_memory.runtime.routing import ROUTING_KEY_HEADER, routing_headers, routing_key
from causalcache_memory.runtime.sglang_client import SGLangPolicy, policy_from_config
from causalcache_memory.trace import Trace


def _png(i: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 24), ((37 * i) % 256, (11 * i) % 256, 90)).save(buf, "PNG")
    return buf.getvalue()


def _owners(workers) -> dict[str, set[int]]:
    owners: dict[str, set[int]] = {}
    for w, keys in enumerate(keys_by_worker(workers)):
        for key in keys:
            owners.setdefault(key, set()).add(w)
    return owners


def test_each_episode_sticks_to_one_worker_and_episodes_spread(workers, gateway):
    archive = MemoryArchive()
    with SGLangPolicy(gateway.url, gateway=True) as policy:
        for e in range(16):
            for step in range(3):  # pass 1, pass 2 and a scoring call of the same episode
                prompt = make_prompt(
                    archive,
                    history=[_png(e * 10 + j) for j in range(step)],
                    current=_png(e * 10 + 9),
                    episode_id=f"ep-{e}",
                )
                policy.generate(prompt)
                policy.score([prompt, prompt], ["pyautogui.click(x=0.5, y=0.5)", "x"])
    owners = _owners(workers)
    assert set(owners) == {f"ep-{e}" for e in range(16)}
    assert all(len(ws) == 1 for ws in owners.values()), owners  # sticky: one worker per episode
    used = Counter(next(iter(ws)) for ws in owners.values())
    assert len(used) >= 2, used  # spread: more than one worker serves episodes
    # every request went through the gateway with its key: 3 steps x (generate + 2 probes + 2 scores),
    # plus the client's image check (two requests, once per URL: runtime/image_check.py)
    assert sum(len(k) for k in keys_by_worker(workers)) == 16 * 3 * 5 + 2


def test_worker_killed_mid_run_episode_continues_without_double_records(workers, gateway, tmp_path):
    archive = LocalArchive(tmp_path / "archive")
    policy = SGLangPolicy(gateway.url, gateway=True, max_retries=3, backoff_s=0.05)
    controller = MemoryController(policy=policy, archive=archive, allocator=RecentAllocator(), budget=2)
    traces = [Trace(f"goal {e}", episode_id=f"kill-{e}") for e in range(6)]
    for e, trace in enumerate(traces):
        controller.observe(trace, _png(100 * e))
    steps = 6
    victim = None
    for step in range(1, steps + 1):
        if step == 3:  # kill the worker that holds the most episodes
            load = Counter(w for ws in _owners(workers).values() for w in ws)
            victim = load.most_common(1)[0][0]
            workers[victim].stop()
            before = {key: ws for key, ws in _owners(workers).items()}
            victim_seen = len(keys_by_worker(workers)[victim])
        for e, trace in enumerate(traces):
            decision = controller.decide(trace)
            controller.record(trace, decision, _png(100 * e + step))
    controller.close()
    policy.close()
    assert victim is not None
    assert len(keys_by_worker(workers)[victim]) == victim_seen  # the dead worker got nothing more
    moved = [key for key, ws in before.items() if victim in ws]
    assert moved, "the killed worker held no episode"
    after = _owners(workers)
    for key in moved:  # requests moved on to one surviving worker, which then kept the episode
        survivors = after[key] - {victim}
        assert len(survivors) == 1, (key, after[key])
    for trace in traces:  # the episode continued: every step recorded exactly once, in order
        assert [ev.index for ev in trace] == list(range(1, steps + 1))
        assert len({ev.screenshot for ev in trace}) == steps


def test_routing_key_and_header_rules():
    archive = MemoryArchive()
    prompt = make_prompt(
        archive, history=[], current=_png(1), goal="Open the settings page", episode_id="e-7"
    )
    assert routing_key(prompt) == "e-7"
    assert routing_key(prompt, "explicit") == "explicit"
    assert routing_headers("e-7") == {ROUTING_KEY_HEADER: "e-7"}
    goal_key = routing_headers(routing_key(make_prompt(archive, history=[], current=_png(2))))[
        ROUTING_KEY_HEADER
    ]
    assert goal_key.startswith("k-") and " " not in goal_key  # a goal text is sent as a digest
    assert routing_headers(None) == {}


def test_direct_multi_url_mode_sends_the_header_and_sticks(workers):
    archive = MemoryArchive()
    with SGLangPolicy([w.url for w in workers]) as policy:
        for e in range(9):
            policy.generate(make_prompt(archive, history=[], current=_png(e), episode_id=f"d-{e}"))
            policy.generate(
                make_prompt(archive, history=[_png(e)], current=_png(e + 50), episode_id=f"d-{e}")
            )
    owners = _owners(workers)
    assert set(owners) == {f"d-{e}" for e in range(9)}
    assert all(len(ws) == 1 for ws in owners.values())


def test_config_names_the_gateway():
    cfg = PolicyConfig(kind="sglang", sglang=SGLangPolicyConfig(gateway_url="http://127.0.0.1:30000"))
    with policy_from_config(cfg) as policy:
        assert policy.urls == ("http://127.0.0.1:30000",)
    with pytest.raises(ValueError, match="exactly one of policy"):
        SGLangPolicyConfig(urls=("http://a:1",), gateway_url="http://b:2")
    with pytest.raises(ValueError, match="exactly one of policy"):
        SGLangPolicyConfig()
