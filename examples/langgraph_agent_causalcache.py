"""The baseline agent of ``langgraph_agent_baseline.py`` with CausalCacheMemory added.

The graph, nodes, model and environment are unchanged; the differences are marked ``# CausalCache``:
one line creates the memory and two ``add_node`` lines wrap the screenshot and model nodes. The wrapped
screenshot node archives each screenshot and keeps only its sha256 in state; the wrapped model node is
called with the memory's prompt (every past step as a one-line summary, ``B = 4`` past steps in full,
the current screen) and, when the allocator displaces a recent step for an older one, a second
time with the re-allocated prompt, whose answer replaces the first.

The allocator is the default one, the learned selector with the scorer bundled in the package
(trained on the synthetic world, used here zero-shot on this toy desktop); configure everything from YAML
with ``CausalCacheMemory.from_yaml("examples/causalcache.yaml")``.

Run: ``python examples/langgraph_agent_causalcache.py``
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langgraph.graph import END, START, StateGraph

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph_agent_baseline import (
    GOAL,
    KEEP_PAST_SCREENSHOTS,
    MAX_STEPS,
    AgentState,
    FakeDesktop,
    ScriptedVisionModel,
    parse_action,
)

from causalcache_memory.config import CausalCacheConfig
from causalcache_memory.integrations.langgraph import CausalCacheMemory
from causalcache_memory.integrations.langgraph.baseline import data_url_message, keep_last_images


def build_agent(
    env: FakeDesktop, model: BaseChatModel, memory: CausalCacheMemory, *, checkpointer: Any = None
) -> Any:
    def screenshot(state: AgentState) -> dict[str, Any]:
        return {"messages": [data_url_message(env.screenshot())]}

    def call_model(state: AgentState) -> dict[str, Any]:
        prompt = [
            SystemMessage(f"Task: {state['goal']}"),
            *keep_last_images(state["messages"], KEEP_PAST_SCREENSHOTS),
        ]
        reply = model.invoke(prompt)
        return {"messages": [reply], "action": parse_action(reply.text)}

    def execute(state: AgentState) -> dict[str, Any]:
        env.step(state.get("action"))
        return {"steps": state.get("steps", 0) + 1}

    def route(state: AgentState) -> str:
        return END if env.finished or state.get("steps", 0) >= MAX_STEPS else "screenshot"

    builder = StateGraph(AgentState)
    builder.add_node("screenshot", memory.observe_node(screenshot))  # CausalCache
    builder.add_node("model", memory.decide_node(call_model))  # CausalCache
    builder.add_node("execute", execute)
    builder.add_edge(START, "screenshot")
    builder.add_edge("screenshot", "model")
    builder.add_edge("model", "execute")
    builder.add_conditional_edges("execute", route, ["screenshot", END])
    return builder.compile(checkpointer=checkpointer)


def main(workdir: str | None = None) -> dict[str, Any]:
    root = Path(workdir or tempfile.mkdtemp(prefix="causalcache-example-"))
    config = CausalCacheConfig(
        archive={"url": str(root / "archive")},
        checkpointer={"kind": "sqlite", "path": str(root / "checkpoints.sqlite")},
    )
    memory = CausalCacheMemory(budget=4, config=config)  # CausalCache
    env = FakeDesktop()
    graph = build_agent(env, ScriptedVisionModel(), memory, checkpointer=memory.checkpointer())
    config = {"configurable": {"thread_id": "causalcache"}, "recursion_limit": 100}
    for mode, chunk in graph.stream({"goal": GOAL, "steps": 0}, config, stream_mode=["custom", "updates"]):
        if mode == "custom":
            print(
                f"step {chunk['t']}: S*={chunk['selected']} k={chunk['k']} second_pass={chunk['second_pass']}"
            )
    print(f"causalcache: final screen={env.screen}, steps={graph.get_state(config).values['steps']}")
    return {"screen": env.screen, "graph": graph, "config": config, "memory": memory}


if __name__ == "__main__":
    main()
