"""A computer-use agent with CausalCacheMemory, deployable with LangGraph's server (``langgraph dev``).

``langgraph.json`` names ``graph`` below; the server provides the checkpointer and runs one episode per
thread. The memory comes from ``causalcache.yaml`` next to this file (its relative paths resolve against
this folder, whatever directory the server starts in).

The desktop and the model are stand-ins so the example runs offline: ``screen(step)`` draws a 1920x1080
desktop and ``scripted_vlm`` replies with PyAutoGUI code in pixel coordinates. Replace them with your
screenshot function and your VLM (any LangChain chat model: ``{"messages": [vlm.invoke(...)]}``).

Run: ``pip install 'causalcache-memory[langgraph-server]' && cd examples/langgraph_deploy && langgraph dev``,
then start a run on a thread with input ``{"messages": [{"role": "user", "content": "Archive the invoices"}]}``
and see what the model was shown with ``causalcache report --config causalcache.yaml --archive
.causalcache/archive --thread <thread id>``.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from PIL import Image, ImageDraw
from typing_extensions import TypedDict

from causalcache_memory import CausalCacheMemory

HERE = Path(__file__).resolve().parent
WIDTH, HEIGHT = 1920, 1080
MAX_STEPS = 8
SCRIPT = (
    "pyautogui.click(412, 88)",
    "Thought: open the archive folder.\nAction: pyautogui.click(1650, 1040)",
    "pyautogui.write('invoice')",
    "pyautogui.press('enter')",
)


class AgentState(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    steps: int


def screen(step: int) -> bytes:
    """Stand-in desktop: the screen after ``step`` actions (a window moves as the agent acts)."""
    image = Image.new("L", (WIDTH, HEIGHT), 40)
    draw = ImageDraw.Draw(image)
    x0 = 100 + 150 * (step % 10)
    draw.rectangle([x0, 100, x0 + 500, 600], fill=200)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def scripted_vlm(messages: list[Any]) -> AIMessage:
    """Stand-in VLM: the reply for the step its prompt is at (one history line per past step)."""
    history = next(m for m in messages if m.type == "human").text.split("\n", 2)[-1]
    t = 1 if history == "(no steps yet)" else len(history.splitlines()) + 1
    return AIMessage(SCRIPT[(t - 1) % len(SCRIPT)])


def screenshot(state: AgentState) -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(screen(state.get("steps", 0))).decode()
    return {"messages": [HumanMessage([{"type": "image_url", "image_url": {"url": url}}])]}


def call_model(state: AgentState) -> dict[str, Any]:
    return {"messages": [scripted_vlm(state["messages"])]}


def execute(state: AgentState) -> dict[str, Any]:
    action = memory.action()  # the parsed decision (pixels: action.pixel(WIDTH, HEIGHT))
    print(f"step {state.get('steps', 0) + 1}: {action}")  # your executor runs it here
    return {"steps": state.get("steps", 0) + 1}


def route(state: AgentState) -> str:
    return END if state.get("steps", 0) >= MAX_STEPS else "model"


memory = CausalCacheMemory.from_yaml(HERE / "causalcache.yaml")
builder = StateGraph(AgentState)
builder.add_node("screenshot", memory.observe_node(screenshot))
builder.add_node("model", memory.decide_node(call_model))
builder.add_node("execute", execute)
builder.add_edge(START, "screenshot")
builder.add_conditional_edges("screenshot", route, ["model", END])
builder.add_edge("model", "execute")
builder.add_edge("execute", "screenshot")
graph = builder.compile()  # the server provides the checkpointer
