"""A user-shaped 1920x1080 computer-use agent whose screenshot node also returns the screen's text.

The agent is written the way a user writes one: its own state schema (no ``cc_*`` keys), full-HD
screenshots drawn with PIL (a shop back-office, a mail client, a calendar, a settings page, a refund
form), sent to the model as image blocks in a ``HumanMessage``, a model replying with one PyAutoGUI line
in **pixel** coordinates, an execute node that asks ``memory.action()`` what to do, SQLite checkpoints.

The one addition for the selector is ``screen_text``: the screenshot node returns the text on the screen
beside the image (here the labels it drew, as an accessibility-tree dump would give them)::

    return {"messages": [HumanMessage(content=[image_block])], "screen_text": "\\n".join(labels)}

The memory stores that text in the archive beside the screenshot, off the decision path, and the learned
selector reads it from there; no prompt ever shows it. ``--no-screen-text`` runs the same agent without
it (``--ocr rapidocr`` lets the memory OCR the screens instead; needs ``causalcache-memory[ocr]``).

The task needs the order number shown on the orders screen near the start; by the time the refund form
asks for it, that screen is far outside the recent window. The scripted model is not a VLM: it only
makes the run reproducible. What the example measures is the memory's side: ``memory.stats()`` (decisions,
swaps, pass-2 calls, fallbacks by reason) and, per run, the share of decisions that fell back because the
state was out of the selector's distribution (``ood``).

Run: ``python examples/langgraph_screen_text_agent.py [--steps 40] [--no-screen-text] [--ocr rapidocr]``
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import json
import os
import tempfile
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from PIL import Image, ImageDraw, ImageFont
from typing_extensions import TypedDict

from causalcache_memory.archive import LocalArchive
from causalcache_memory.config import parse_config
from causalcache_memory.integrations.langgraph import CausalCacheMemory

WIDTH, HEIGHT = 1920, 1080
ORDER = "A-1042"
GOAL = "Refund the Desk Lamp order: find its order number, check mail and calendar, then type it in the refund form."
USER_SYSTEM = "You operate a 1920x1080 desktop. Answer with one pyautogui line."
APPS = ("Orders", "Mail", "Calendar", "Settings")


# ----------------------------------------------------------------------------- the desktop
def labels_of(step: int, steps: int) -> list[str]:
    """The text on screen ``step`` (what the screenshot shows and ``screen_text`` reports)."""
    if step >= steps - 1:
        return ["Refunds", "New refund", "Order number:", "Reason: damaged in transit", "Submit"]
    if step == 0:
        return ["Back office", "Orders", "Mail", "Calendar", "Settings"]
    if step in (1, 2):
        rows = [f"Order {ORDER}  Desk Lamp  1 x 19.90 EUR  Shipped", "Order B-2210  Office Chair  Pending"]
        return ["Orders", "Search orders", *rows, f"Page {step} of 2"]
    app = APPS[1 + step % 3]
    if app == "Mail":
        return [
            "Mail",
            "Inbox (12)",
            f"From: Dana Ortiz  Re: delivery {step}",
            "Subject: weekly report",
            "Reply",
        ]
    if app == "Calendar":
        return ["Calendar", f"Thursday {step} November", "10:00 Stand-up", "14:30 Supplier call", "Today"]
    return ["Settings", "Notifications", f"Language: English ({step})", "Dark mode: off", "Save"]


@functools.lru_cache(maxsize=64)
def render(step: int, steps: int) -> bytes:
    """Screenshot ``step``: a window with the labels of :func:`labels_of` drawn in it (PNG)."""
    labels = labels_of(step, steps)
    image = Image.new("RGB", (WIDTH, HEIGHT), (222, 226, 232))
    draw = ImageDraw.Draw(image)
    title, body = ImageFont.load_default(size=40), ImageFont.load_default(size=30)
    draw.rectangle([0, 0, WIDTH, 56], fill=(40, 44, 52))
    for i, app in enumerate(APPS):
        draw.text((30 + 220 * i, 10), app, fill=(230, 230, 230), font=body)
    x0, y0 = 160 + 37 * (step % 5), 140 + 23 * (step % 3)
    draw.rectangle([x0, y0, x0 + 1400, y0 + 760], fill=(255, 255, 255), outline=(120, 120, 120), width=2)
    draw.text((x0 + 40, y0 + 30), labels[0], fill=(20, 20, 20), font=title)
    for i, label in enumerate(labels[1:]):
        draw.text((x0 + 40, y0 + 120 + 90 * i), label, fill=(30, 30, 30), font=body)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def reply_for(step: int, steps: int) -> str:
    """The scripted model's reply at ``step`` (pixel coordinates on 1920x1080)."""
    if step >= steps - 1:
        return f"pyautogui.click(900, 520)\npyautogui.write('{ORDER}')"
    if step == 0:
        return "pyautogui.click(250, 30)"  # open Orders
    if step in (1, 2):
        return "pyautogui.scroll(-5, x=900, y=600)"
    return f"pyautogui.click({250 + 220 * (1 + (step + 1) % 3)}, 30)"


# ----------------------------------------------------------------------------- the agent
class AgentState(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    step: int
    executed: Annotated[list, lambda a, b: (a or []) + (b or [])]


def build_agent(memory: CausalCacheMemory, *, steps: int, screen_text: bool, checkpointer: Any) -> Any:
    def take_screenshot(state: AgentState) -> dict[str, Any]:
        step = state.get("step", 0)
        data = base64.b64encode(render(step, steps)).decode()
        block = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
        update: dict[str, Any] = {"messages": [HumanMessage(content=[block])]}
        if screen_text:
            update["screen_text"] = "\n".join(labels_of(step, steps))  # the screen's accessibility text
        return update

    def call_model(state: AgentState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=reply_for(state.get("step", 0), steps))]}

    def execute(state: AgentState) -> dict[str, Any]:
        action = memory.action()  # the decided action, from the user's own node
        point = action.pixel(WIDTH, HEIGHT) if action is not None and action.x is not None else None
        return {"step": state.get("step", 0) + 1, "executed": [[action.type, point] if action else None]}

    def route(state: AgentState) -> str:
        return END if state.get("step", 0) >= steps else "decide"

    builder = StateGraph(AgentState)
    builder.add_node("observe", memory.observe_node(take_screenshot))
    builder.add_node("decide", memory.decide_node(call_model))
    builder.add_node("execute", execute)
    builder.add_edge(START, "observe")
    builder.add_conditional_edges("observe", route, ["decide", END])
    builder.add_edge("decide", "execute")
    builder.add_edge("execute", "observe")
    return builder.compile(checkpointer=checkpointer)


def memory_for(root: str, *, ocr: str = "none", allocation: Any = None) -> CausalCacheMemory:
    config = parse_config(
        {
            "budget": 4,
            "archive": {"ocr": {"engine": ocr}},
            "allocation": {"selector": {"timeout_ms": 30_000}},  # a loaded machine never times out
            "checkpointer": {"kind": "sqlite", "path": os.path.join(root, "checkpoints.sqlite")},
        }
    )
    return CausalCacheMemory(
        config=config, archive=LocalArchive(os.path.join(root, "archive")), allocation=allocation
    )


def main(
    root: str | None = None,
    *,
    steps: int = 40,
    screen_text: bool = True,
    ocr: str = "none",
    allocation: Any = None,
) -> dict[str, Any]:
    root = root or tempfile.mkdtemp(prefix="causalcache-screen-text-")
    memory = memory_for(root, ocr=ocr, allocation=allocation)
    graph = build_agent(memory, steps=steps, screen_text=screen_text, checkpointer=memory.checkpointer())
    config = {"configurable": {"thread_id": "screen-text"}, "recursion_limit": 10 * steps + 20}
    first = {"messages": [SystemMessage(content=USER_SYSTEM), HumanMessage(content=GOAL)], "step": 0}
    graph.invoke(first, config)
    memory.flush_writes()
    memory.screen_texts.drain(600)  # OCR (if any) finishes in the background
    memory.flush_writes()
    stats = memory.stats(graph, config)
    log = memory.episode_log(graph, config)
    ood = sum(1 for r in log if r.get("fallback") == "ood")
    summary = {
        "steps": steps,
        "screen_text": screen_text,
        "ocr": ocr,
        "stats": stats.to_dict(),
        "ood_share": round(ood / max(1, len(log)), 3),
        "texts": dict(memory.screen_texts.counts),
        "ocr_seconds": round(memory.screen_texts.ocr_seconds, 3),
    }
    return {"memory": memory, "graph": graph, "config": config, "summary": summary, "root": root}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--root", default=None)
    parser.add_argument("--no-screen-text", action="store_true")
    parser.add_argument("--ocr", default="none", choices=["none", "rapidocr", "tesseract"])
    args = parser.parse_args()
    run = main(args.root, steps=args.steps, screen_text=not args.no_screen_text, ocr=args.ocr)
    print(json.dumps(run["summary"], indent=2))
    run["memory"].close()
