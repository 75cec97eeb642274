"""A computer-use agent written the way a user writes one (not the example), with CausalCacheMemory added.

Its own state schema (no ``cc_*`` keys), 1920x1080 PNG screenshots sent as image blocks in a
``HumanMessage``, a model node replying with PyAutoGUI code in **pixel** coordinates (some above 1000,
some replies unparseable), an execute node that asks ``memory.action()`` what to do, and SQLite
checkpoints. Used by tests/integrations/test_user_agent.py, and runnable as a script so a test can
SIGKILL it mid-episode and resume it in a new process::

    python tests/integrations/user_agent.py --root DIR --thread T --steps N [--kill-at K] [--resume]
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import json
import os
import signal
import sys
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from PIL import Image, ImageDraw
from typing_extensions import TypedDict

from causalcache_memory.archive import LocalArchive
from causalcache_memory.config import parse_config
from causalcache_memory.integrations.langgraph import CausalCacheMemory

WIDTH, HEIGHT = 1920, 1080
USER_SYSTEM = "You operate a 1920x1080 Linux desktop. Answer with one pyautogui line."
GOAL = "Archive every invoice in the mail client"
UNPARSEABLE = "I am not sure what to do here, let me look at the screen again."
MALFORMED = "pyautogui.click(1650,"


@functools.lru_cache(maxsize=128)
def screen(index: int) -> bytes:
    """Screenshot ``index``: a solid 1920x1080 desktop with a few windows (cheap grayscale PNG)."""
    image = Image.new("L", (WIDTH, HEIGHT), 20 + index % 200)
    draw = ImageDraw.Draw(image)
    for k in range(4):
        x0 = (97 * index + 410 * k) % (WIDTH - 400)
        draw.rectangle([x0, 80 + 200 * k, x0 + 380, 260 + 200 * k], fill=(60 + 31 * k + index) % 256)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def reply_for(t: int) -> str:
    """The scripted model reply at step ``t`` (pixel coordinates; every 7th and 11th unparseable)."""
    if t % 7 == 3:
        return UNPARSEABLE
    if t % 11 == 5:
        return MALFORMED
    replies = (
        "pyautogui.click(412, 88)",
        "Thought: open the archive folder.\nAction: pyautogui.click(1650, 1040)",
        "pyautogui.doubleClick(1200, 700)",
        "pyautogui.write('invoice')",
        "```python\npyautogui.moveTo(10, 1070)\npyautogui.dragTo(1910, 20)\n```",
        "pyautogui.click(x=1919, y=1079)",
        "pyautogui.hotkey('ctrl', 'a')",
    )
    return replies[t % len(replies)]


def step_of(messages: list[Any]) -> int:
    """The decision index ``t`` the memory's prompt is for (from its one-line history)."""
    text = next(m for m in messages if m.type == "human").text
    history = text.split("\n", 2)[-1]
    return 1 if history == "(no steps yet)" else len(history.splitlines()) + 1


class AgentState(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    step: int
    executed: Annotated[list, lambda a, b: (a or []) + (b or [])]


class ScriptedModel:
    """A fake VLM: checks it sees one system message first and 1920x1080 images; replies by script."""

    def __init__(self) -> None:
        self.systems: list[list[str]] = []

    def __call__(self, messages: list[Any]) -> AIMessage:
        self.systems.append([m.text for m in messages if m.type == "system"])
        for message in messages:
            for block in message.content if isinstance(message.content, list) else []:
                if isinstance(block, dict) and block.get("type") == "image_url":
                    data = base64.b64decode(block["image_url"]["url"].split(",", 1)[1])
                    assert Image.open(io.BytesIO(data)).size == (WIDTH, HEIGHT)
        return AIMessage(content=reply_for(step_of(messages)))


def memory_for(root: str, *, allocation: Any = None, **kw: Any) -> CausalCacheMemory:
    config = parse_config(
        {
            "budget": 4,
            "allocation": {"selector": {"timeout_ms": 30_000}},  # a loaded CI box never falls back
            "checkpointer": {"kind": "sqlite", "path": os.path.join(root, "checkpoints.sqlite")},
        }
    )
    archive = LocalArchive(os.path.join(root, "archive"))
    return CausalCacheMemory(config=config, archive=archive, allocation=allocation, **kw)


def build_agent(
    memory: CausalCacheMemory,
    *,
    steps: int,
    checkpointer: Any,
    model: ScriptedModel | None = None,
    use_async: bool = False,
    kill_at: int | None = None,
) -> Any:
    model = model or ScriptedModel()

    def take_screenshot(state: AgentState) -> dict[str, Any]:
        data = base64.b64encode(screen(state.get("step", 0))).decode()
        block = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
        return {"messages": [HumanMessage(content=[block])]}

    def call_model(state: AgentState) -> dict[str, Any]:
        return {"messages": [model(state["messages"])]}

    def execute(state: AgentState) -> dict[str, Any]:
        step = state.get("step", 0) + 1
        if kill_at is not None and step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # the machine dies mid-step
        action = memory.action()  # from the user's own node: its schema has no cc_* keys
        point = action.pixel(WIDTH, HEIGHT) if action is not None else None
        return {"step": step, "executed": [[action.type, point] if action else None]}

    def route(state: AgentState) -> str:  # stop after observing the last step's screen: it is recorded
        return END if state.get("step", 0) >= steps else "decide"

    if use_async:
        sync_shot, sync_model, sync_exec = take_screenshot, call_model, execute

        async def take_screenshot(state: AgentState) -> dict[str, Any]:  # type: ignore[no-redef]
            return sync_shot(state)

        async def call_model(state: AgentState) -> dict[str, Any]:  # type: ignore[no-redef]
            return sync_model(state)

        async def execute(state: AgentState) -> dict[str, Any]:  # type: ignore[no-redef]
            return sync_exec(state)

    builder = StateGraph(AgentState)
    builder.add_node("observe", memory.observe_node(take_screenshot))
    builder.add_node("decide", memory.decide_node(call_model))
    builder.add_node("execute", execute)
    builder.add_edge(START, "observe")
    builder.add_conditional_edges("observe", route, ["decide", END])
    builder.add_edge("decide", "execute")
    builder.add_edge("execute", "observe")
    return builder.compile(checkpointer=checkpointer)


def first_input() -> dict[str, Any]:
    return {"messages": [SystemMessage(content=USER_SYSTEM), HumanMessage(content=GOAL)], "step": 0}


def run_config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 1000}


def summary(memory: CausalCacheMemory, graph: Any, thread: str) -> dict[str, Any]:
    """What a resume must reproduce: per-step allocations and the trace."""
    cfg = run_config(thread)
    trace = memory.trace(graph, cfg)
    log = memory.episode_log(graph, cfg)
    return {
        "selected": [r["selected"] for r in log],
        "fallback": [r["fallback"] for r in log],
        "second_pass": [r["second_pass"] for r in log],
        "events": [
            [e.summary, e.response, e.screenshot, e.pre_screenshot, dict(e.metadata)] for e in trace.events
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--thread", default="t1")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--kill-at", type=int, default=None)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    memory = memory_for(args.root)
    graph = build_agent(memory, steps=args.steps, checkpointer=memory.checkpointer(), kill_at=args.kill_at)
    graph.invoke(None if args.resume else first_input(), run_config(args.thread))
    json.dump(summary(memory, graph, args.thread), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
