"""The documented API fails loudly or works: argument validation, memory.action() from any node, warm-up,
the lazy top-level import, and parsing with the recorded screen size in every coordinate convention."""

from __future__ import annotations

import subprocess
import sys

import pytest
import user_agent as ua
from langchain_core.messages import AIMessage

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.errors import ConfigError, TraceError
from causalcache_memory.integrations.langgraph import CausalCacheMemory, parse_message_action


def test_from_yaml_with_an_allocator_name_resolves_it_at_once(tmp_path):
    (tmp_path / "c.yaml").write_text("budget: 2\n")
    memory = CausalCacheMemory.from_yaml(tmp_path / "c.yaml", allocation="recent")
    assert isinstance(memory.allocation, RecentAllocator) and memory.allocation.uses_witness is False
    with pytest.raises(ConfigError, match=r"allocation='recnt'.*causalcache.*recent"):
        CausalCacheMemory.from_yaml(tmp_path / "c.yaml", allocation="recnt")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"coords": "pixels"}, "coords='pixels'"),
        ({"policy": object()}, "policy=.*generate"),
        ({"archive": "dir"}, "archive='dir'.*put"),
        ({"goal_key": ""}, "goal_key"),
        ({"parse": "json"}, "parse='json'"),
        ({"budget": -1}, "budget"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        CausalCacheMemory(allocation="recent", **kwargs)


def test_learned_allocator_is_warmed_before_the_first_decision():
    class Spy:
        name, uses_witness = "spy", True

        def __init__(self) -> None:
            self.calls = 0

        def allocate(self, ctx):
            self.calls += 1
            return make_allocation(recent_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator="spy")

    spy = Spy()
    memory = CausalCacheMemory(budget=3, allocation=spy)
    assert spy.calls == 1  # at construction, before any timed decision
    memory.warmup()
    assert spy.calls == 1  # idempotent
    lazy = Spy()
    memory = CausalCacheMemory(budget=3, allocation=lazy, warmup=False)
    assert lazy.calls == 0 and memory.warmup() is memory and lazy.calls == 1


def test_action_outside_a_graph_without_cc_pending_names_the_fix():
    memory = CausalCacheMemory(allocation="recent")
    with pytest.raises(TraceError, match="CausalCacheState"):
        memory.action({"goal": "x"})
    assert memory.action({"cc_pending": None}) is None
    pending = {"cc_pending": {"t": 1, "action": {"type": "click", "x": 0.5, "y": 0.25}}}
    assert memory.action(pending) == Action("click", x=0.5, y=0.25)


def test_top_level_import_is_lazy_and_light():
    code = (
        "import sys, causalcache_memory as c\n"
        "assert 'langgraph' not in sys.modules\n"
        "from causalcache_memory import CausalCacheMemory\n"
        "assert CausalCacheMemory.__name__ == 'CausalCacheMemory'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("message", "coords", "pixel"),
    [
        (AIMessage("pyautogui.click(200, 1055)"), "auto", (200, 1055)),  # > 1000: pixels on 1920x1080
        (AIMessage("pyautogui.click(412, 88)"), "absolute", (412, 88)),  # explicit pixels
        (AIMessage("pyautogui.click(500, 500)"), "thousand", (960, 540)),  # Qwen-VL / UI-TARS grid
        (AIMessage("pyautogui.click(0.5, 0.25)"), "auto", (960, 270)),  # relative floats
        (AIMessage('{"action": "click", "coordinate": [1650, 1040]}'), "auto", (1650, 1040)),  # mobile JSON
        (
            AIMessage("", tool_calls=[{"name": "click", "args": {"x": 1919, "y": 1079}, "id": "1"}]),
            "auto",
            (1919, 1079),
        ),
        (
            AIMessage("", tool_calls=[{"name": "tap", "args": {"x": 0.5, "y": 0.5}, "id": "1"}]),
            "relative",
            (960, 540),
        ),
        (
            AIMessage(
                "",
                tool_calls=[
                    {"name": "computer", "id": "1", "args": {"action": "left_click", "coordinate": [10, 20]}}
                ],
            ),
            "auto",
            (10, 20),
        ),
    ],
)
def test_every_coordinate_convention_parses_on_the_recorded_screen(message, coords, pixel):
    action = parse_message_action(message, screen_size=(1920, 1080), coords=coords)
    assert action.pixel(1920, 1080) == pixel


def test_without_the_screen_size_pixels_above_the_grid_fail_loudly():
    from causalcache_memory.errors import ActionParseError

    with pytest.raises(ActionParseError, match="screen_size"):
        parse_message_action(AIMessage("pyautogui.click(200, 1055)"))


def test_coords_and_dedupe_come_from_the_yaml(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "policy: {coords: thousand}\nrender: {dedupe_current_screen: true}\nallocation: {allocator: recent}\n"
    )
    memory = CausalCacheMemory.from_yaml(tmp_path / "c.yaml")
    assert memory.coords == "thousand" and memory.dedupe_current_screen
    assert memory._controller().render_options.dedupe_current_screen
    assert CausalCacheMemory.from_yaml(tmp_path / "c.yaml", coords="absolute").coords == "absolute"
    plain = CausalCacheMemory(allocation="recent")
    assert plain.coords == "auto" and not plain._controller().render_options.dedupe_current_screen


def test_aaction_reads_the_pending_decision_from_an_async_checkpoint_after_a_restart(tmp_path):
    import asyncio

    from langgraph.graph import END, START, StateGraph

    seen: list[object] = []

    def build(memory, saver):
        async def shoot(state: ua.AgentState) -> bytes:
            return ua.screen(state.get("step", 0))  # the screenshot itself

        async def model(state: ua.AgentState) -> dict:
            return {"messages": [ua.AIMessage("pyautogui.click(1650, 1040)")]}

        async def execute(state: ua.AgentState) -> dict:  # own schema: no cc_* keys
            seen.append(await memory.aaction())
            return {"step": state.get("step", 0) + 1}

        builder = StateGraph(ua.AgentState)
        builder.add_node("observe", memory.observe_node(shoot))
        builder.add_node("decide", memory.decide_node(model))
        builder.add_node("execute", execute)
        builder.add_edge(START, "observe")
        builder.add_edge("observe", "decide")
        builder.add_edge("decide", "execute")
        builder.add_edge("execute", END)
        return builder.compile(checkpointer=saver, interrupt_before=["execute"])

    async def main():
        first = ua.memory_for(str(tmp_path), allocation="recent")
        async with first.acheckpointer() as saver:
            await build(first, saver).ainvoke(ua.first_input(), ua.run_config("aa"))
        fresh = ua.memory_for(str(tmp_path), allocation="recent")  # a new process: nothing in memory
        async with fresh.acheckpointer() as saver:
            await build(fresh, saver).ainvoke(None, ua.run_config("aa"))

    asyncio.run(main())
    assert len(seen) == 1 and seen[0].pixel(1920, 1080) == (1650, 1040)


def test_a_resumed_thread_is_allocated_once_untimed_before_its_first_timed_decision(tmp_path):
    class Spy:
        name, uses_witness = "spy", True

        def __init__(self) -> None:
            self.contexts: list[tuple[str, int, bool]] = []

        def allocate(self, ctx):
            self.contexts.append((ctx.trace.goal, len(ctx.trace), ctx.witness is not None))
            return make_allocation(recent_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator="spy")

    first = ua.memory_for(str(tmp_path), allocation=Spy())
    graph = ua.build_agent(first, steps=3, checkpointer=first.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("w1"))
    assert len(first.allocation.contexts) == 1 + 3  # construction + one per decision: no extra call
    spy = Spy()
    resumed = ua.memory_for(str(tmp_path), allocation=spy)  # a new process
    graph = ua.build_agent(resumed, steps=5, checkpointer=resumed.checkpointer())
    graph.invoke({}, ua.run_config("w1"))
    assert spy.contexts[0] == ("warm-up", spy.contexts[0][1], True)  # construction
    assert spy.contexts[1] == (ua.GOAL, 3, False)  # untimed, on the resumed trace, before any timed call
    parsed = [ua.reply_for(t) not in (ua.UNPARSEABLE, ua.MALFORMED) for t in (4, 5)]
    assert [c[2] for c in spy.contexts[2:]] == parsed  # then one timed allocation per step (witness a_1)


def test_node_form_parse_hook_reads_a_custom_format_with_the_screen_size(tmp_path):
    from langgraph.graph import END, START, StateGraph

    sizes: list[object] = []

    def parse(message, screen_size):
        sizes.append(screen_size)
        x, y = map(int, message.text.split()[1:3])
        return {"type": "click", "x": x / (screen_size[0] - 1), "y": y / (screen_size[1] - 1)}

    memory = ua.memory_for(str(tmp_path), allocation="recent")

    def shoot(state: ua.AgentState) -> bytes:
        return ua.screen(state.get("step", 0))

    def model(state: ua.AgentState) -> dict:
        return {"messages": [AIMessage("CLICK 1650 1040")]}

    def execute(state: ua.AgentState) -> dict:
        return {"step": state.get("step", 0) + 1}

    builder = StateGraph(ua.AgentState)
    builder.add_node("observe", memory.observe_node(shoot))
    builder.add_node("decide", memory.decide_node(model, parse=parse))
    builder.add_node("execute", execute)
    builder.add_edge(START, "observe")
    builder.add_conditional_edges("observe", lambda s: END if s.get("step", 0) >= 3 else "decide")
    builder.add_edge("decide", "execute")
    builder.add_edge("execute", "observe")
    graph = builder.compile(checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("p1"))
    trace = memory.trace(graph, ua.run_config("p1"))
    assert len(trace) == 3 and all(e.summary.endswith("click (1650, 1040)") for e in trace.events)
    assert sizes == [(1920, 1080)] * 3
