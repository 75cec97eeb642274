"""Issue 27, finding 3 (second half): graphs built by ``memory.compile`` store each step's checkpoint
before the next step starts (``durability="sync"``), so a process killed right after an action resumes
from the checkpoint of the step that acted and does not act again for earlier steps. LangGraph's own
default (``"async"``) lets the next node run while the previous checkpoint is still being written."""

from __future__ import annotations

import time
from typing import TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from causalcache_memory.config.models import CausalCacheConfig
from causalcache_memory.errors import ConfigError
from causalcache_memory.integrations.langgraph import CausalCacheMemory
from causalcache_memory.integrations.langgraph.savers import with_durability


class _State(TypedDict):
    n: int


class _SlowSaver(InMemorySaver):
    """Stores checkpoints slowly and counts them (a remote database under load)."""

    stored = 0

    def put(self, config, checkpoint, metadata, new_versions):
        time.sleep(0.2)
        out = super().put(config, checkpoint, metadata, new_versions)
        self.stored += 1
        return out


def _builder(seen: list[int], saver: _SlowSaver) -> StateGraph:
    def act(state: _State) -> dict:
        return {"n": state["n"] + 1}  # the side effect (a click) happens here

    def next_step(state: _State) -> dict:
        seen.append(saver.stored)  # checkpoints stored when the next step starts
        return {"n": state["n"] + 1}

    builder = StateGraph(_State)
    builder.add_node("act", act)
    builder.add_node("next_step", next_step)
    builder.add_edge(START, "act")
    builder.add_edge("act", "next_step")
    builder.add_edge("next_step", END)
    return builder


def _memory(**checkpointer) -> CausalCacheMemory:
    config = CausalCacheConfig.model_validate({"checkpointer": {"kind": "memory", **checkpointer}})
    return CausalCacheMemory(config=config, warmup=False)


def test_memory_compile_stores_the_acting_step_before_the_next_one_starts():
    seen: list[int] = []
    saver = _SlowSaver()
    graph = _memory().compile(_builder(seen, saver), checkpointer=saver)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert seen == [3]  # input, start and the "act" step's checkpoint: all stored before next_step ran


def test_durability_is_configurable_and_checked():
    assert _memory().config.checkpointer.durability == "sync"
    seen: list[int] = []
    saver = _SlowSaver()
    graph = _memory(durability="exit").compile(_builder(seen, saver), checkpointer=saver)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert seen == [0] and saver.stored == 1  # exit: one checkpoint, at the end
    with pytest.raises(ConfigError, match="durability='later'"):
        with_durability(graph, "later")


def test_memory_compile_uses_the_checkpointer_that_waits_for_the_screenshot_writes():
    """Issue 56, finding 8: ``memory.compile(builder)`` built a plain saver, so every step flushed its
    writes itself (safe, but the screenshot write no longer overlapped the model call), against its
    docstring and docs/LANGGRAPH.md."""
    from causalcache_memory.integrations.langgraph.barrier import saver_waits

    memory = _memory()
    waits: list[bool] = []

    def step(state: _State) -> dict:
        waits.append(saver_waits(memory))
        return {"n": state["n"] + 1}

    builder = StateGraph(_State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    graph = memory.compile(builder)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert waits == [True]
