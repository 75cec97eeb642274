"""``CausalCacheMemory(prompt_cost=...)``: the thread's decision log carries predicted cache reads/writes."""

from __future__ import annotations

import user_agent as ua

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.prompt_cost import BlockPrefixCache, PatchImageRule, PromptCostMeter


def test_the_episode_log_carries_prompt_cost_per_call(tmp_path):
    meter = PromptCostMeter(
        tokenize=lambda text: [ord(c) for c in text],
        image_rule=PatchImageRule(),
        cache=BlockPrefixCache(input_price=1.0),
    )
    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator(), prompt_cost=meter)
    graph = ua.build_agent(memory, steps=5, checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("pc"))
    log = memory.episode_log(graph, ua.run_config("pc"))
    assert len(log) == 5
    costs = [r["prompt_cost"] for r in log]
    assert all(len(c) == 1 for c in costs)
    assert costs[0][0]["cache_read_tokens"] == 0
    for c in costs[1:]:  # the system text and the old summaries are read again at every later step
        step = c[0]
        assert 0 < step["cache_read_tokens"] < step["prompt_tokens"]
        assert step["cache_read_tokens"] + step["cache_write_tokens"] == step["prompt_tokens"]


def test_without_a_meter_the_log_has_no_prompt_cost(tmp_path):
    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    graph = ua.build_agent(memory, steps=2, checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("no"))
    assert all("prompt_cost" not in r for r in memory.episode_log(graph, ua.run_config("no")))
