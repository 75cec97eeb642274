"""A small computer-use agent written the usual way: screenshot -> model -> action -> execute, in a loop.

Screenshots travel in ``messages`` as base64 image blocks and the model sees the current screen plus the
last four past ones (older screenshots are trimmed before each call), like most public computer-use
agents (the two helpers, ``data_url_message`` and ``keep_last_images``, are the library's statement of
this baseline, which its benchmarks measure against). The environment is a tiny fake desktop and the model a scripted "vision" chat model that reads
the screens it is shown, so the example runs anywhere in well under a second.

The task needs a code shown early in the episode; by the time the form asks for it, that screen has been
trimmed away, so this agent types a wrong code. ``langgraph_agent_causalcache.py`` is the same graph with
the memory added.

Run: ``python examples/langgraph_agent_baseline.py``
"""

from __future__ import annotations

import base64
import io
import json
import re
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from PIL import Image, ImageDraw
from typing_extensions import TypedDict

from causalcache_memory.integrations.langgraph.baseline import data_url_message, keep_last_images

GOAL = "Open Codes and remember the code, read the six news pages, then type the code into the form."
KEEP_PAST_SCREENSHOTS = 4
MAX_STEPS = 14
SCREENS = {"home": 1, "codes": 2, "news": 3, "form": 4, "success": 5, "failure": 6}


# ----------------------------------------------------------------------------- a tiny fake desktop
class FakeDesktop:
    """Screens are small PNGs; pixel (0, 0) encodes the screen and (1, 0) the code shown on ``codes``."""

    def __init__(self, code: str = "4711", news_pages: int = 6) -> None:
        self.code, self.news_pages = code, news_pages
        self.screen, self.page, self.finished = "home", 0, False

    def screenshot(self) -> bytes:
        image = Image.new("RGB", (160, 100), (40 * SCREENS[self.screen], 90, 140))
        digits = self.code if self.screen == "codes" else "0000"
        image.putpixel((0, 0), (SCREENS[self.screen], self.page, 0))
        image.putpixel((1, 0), (int(digits[:2]), int(digits[2:]), 0))
        label = f"{self.screen} {self.page or ''} {self.code if self.screen == 'codes' else ''}"
        ImageDraw.Draw(image).text((8, 40), label, fill=(255, 255, 255))
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()

    def step(self, action: dict[str, Any] | None) -> None:
        action = action or {}
        target = action.get("target")
        if action.get("type") == "click" and target in ("codes", "news", "next", "form"):
            if target == "next" and self.page < self.news_pages:
                self.page += 1
            else:
                self.screen = "news" if target in ("news", "next") else target
                self.page = 1 if target == "news" else 0
        elif action.get("type") == "type" and self.screen == "form":
            self.screen = "success" if action.get("text") == self.code else "failure"
        elif action.get("type") == "done":
            self.finished = True


# ----------------------------------------------------------------------------- a scripted vision model
def read_screen(data_url: str) -> tuple[str, int, str]:
    """(screen name, page, code) encoded in a screenshot data URL."""
    png = base64.b64decode(data_url.split(",", 1)[1])
    image = Image.open(io.BytesIO(png)).convert("RGB")
    kind, page, _ = image.getpixel((0, 0))
    hi, lo, _ = image.getpixel((1, 0))
    name = next(n for n, i in SCREENS.items() if i == kind)
    return name, page, f"{hi:02d}{lo:02d}"


def image_urls(messages: list[BaseMessage]) -> list[str]:
    urls = []
    for message in messages:
        for block in message.content if isinstance(message.content, list) else []:
            if isinstance(block, dict) and block.get("type") == "image_url":
                url = block["image_url"]
                urls.append(url["url"] if isinstance(url, dict) else url)
    return urls


class ScriptedVisionModel(BaseChatModel):
    """Acts on the last image it is shown; types the code only if a ``codes`` screen is in its input."""

    @property
    def _llm_type(self) -> str:
        return "scripted-vision"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        screens = [read_screen(u) for u in image_urls(messages)]
        name, page, _ = screens[-1]
        codes = [code for n, _, code in screens if n == "codes"]
        if name == "home":
            action = {"type": "click", "x": 0.2, "y": 0.3, "target": "codes"}
        elif name == "codes":
            action = {"type": "click", "x": 0.5, "y": 0.9, "target": "news"}
        elif name == "news":
            target = "next" if page < 6 else "form"
            action = {"type": "click", "x": 0.9, "y": 0.9, "target": target}
        elif name == "form":
            action = {"type": "type", "text": codes[-1] if codes else "0000", "target": "code field"}
        else:
            action = {"type": "done", "status": "success" if name == "success" else "failure"}
        text = f"I see the {name} screen. {json.dumps(action)}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def parse_action(text: str) -> dict[str, Any] | None:
    match = re.search(r"\{.*\}", text)
    return json.loads(match.group(0)) if match else None


# ----------------------------------------------------------------------------- the agent graph
class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    goal: str
    action: dict[str, Any] | None
    steps: int


def build_agent(env: FakeDesktop, model: BaseChatModel, *, checkpointer: Any = None) -> Any:
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
    builder.add_node("screenshot", screenshot)
    builder.add_node("model", call_model)
    builder.add_node("execute", execute)
    builder.add_edge(START, "screenshot")
    builder.add_edge("screenshot", "model")
    builder.add_edge("model", "execute")
    builder.add_conditional_edges("execute", route, ["screenshot", END])
    return builder.compile(checkpointer=checkpointer)


def main() -> dict[str, Any]:
    env = FakeDesktop()
    graph = build_agent(env, ScriptedVisionModel(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "baseline"}, "recursion_limit": 100}
    graph.invoke({"goal": GOAL, "steps": 0}, config)
    print(f"baseline: final screen={env.screen}, steps={graph.get_state(config).values['steps']}")
    return {"screen": env.screen, "graph": graph, "config": config}


if __name__ == "__main__":
    main()
