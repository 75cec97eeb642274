"""Fakes for the LangGraph integration tests: a screen sequence, a screen-reading policy and chat model,
a witness-taking allocator, and checkpointer factories (InMemorySaver, SqliteSaver, Postgres)."""

from __future__ import annotations

import base64
import io
import os
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain")

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from PIL import Image
from pydantic import ConfigDict, Field

from causalcache_memory.actions import Action
from causalcache_memory.allocation import AllocationContext, make_allocation, recent_b
from causalcache_memory.archive import LocalArchive
from causalcache_memory.policy import Generation

KEY_COLOR = (250, 10, 10)


def screen_png(index: int, *, key: bool = False) -> bytes:
    color = KEY_COLOR if key else (20 + 7 * index, 120, 200 - 5 * index)
    image = Image.new("RGB", (48, 32), color)
    image.putpixel((0, 0), (index, 0, 0))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def is_key_png(data: bytes) -> bool:
    return Image.open(io.BytesIO(data)).convert("RGB").getpixel((5, 5)) == KEY_COLOR


class Screens:
    """A fake GUI: screenshot ``i`` is shown after ``i`` actions; the one after the first action is the key."""

    def __init__(self, key_index: int = 1) -> None:
        self.index = 0
        self.key_index = key_index
        self.actions: list[dict[str, Any]] = []
        self.fail_at: int | None = None

    def screenshot(self) -> bytes:
        return screen_png(self.index, key=self.index == self.key_index)

    def act(self, action: dict[str, Any] | None) -> None:
        if self.fail_at is not None and len(self.actions) + 1 == self.fail_at:
            self.fail_at = None
            raise ConnectionError("the VM went away")
        self.actions.append(dict(action or {}))
        self.index += 1


class KeyPolicy:
    """Answers ``found-key`` when the key screenshot is among the *history* images, else ``want-key``."""

    name = "key-policy"

    def __init__(self) -> None:
        self.calls: list[tuple[int | None, ...]] = []

    def generate(self, prompt: Any) -> Generation:
        history = [i for i, ref in enumerate(prompt.images) if ref.role == "history"]
        data = [prompt.image_bytes(i) for i in range(len(prompt.images))]  # resolves pixels like a VLM
        self.calls.append(tuple(prompt.images[i].event_index for i in history))
        seen = any(is_key_png(data[i]) for i in history)
        target = "found-key" if seen else "want-key"
        action = Action("click", x=0.9 if seen else 0.1, y=0.5, target=target)
        return Generation(response=f"thought: {target}", action=action)

    def score(self, prompts: Any, targets: Any) -> list[float]:
        raise NotImplementedError


class PromoteKeyOnWitness:
    """Witness-taking allocator: when the proposal wants the key, promote the key event over the oldest recent one."""

    name = "promote_key"
    uses_witness = True

    def __init__(self, key_sha: Callable[[], str]) -> None:
        self.key_sha = key_sha
        self.witnesses: list[Action | None] = []

    def allocate(self, ctx: AllocationContext) -> Any:
        self.witnesses.append(ctx.witness)
        recent = list(recent_b(ctx.t, ctx.budget))
        key = [e.index for e in ctx.trace.events if e.screenshot == self.key_sha()]
        if ctx.witness is not None and ctx.witness.target == "want-key" and key and key[0] not in recent:
            recent = [key[0], *recent[1:]]
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)


class FailingAllocation:
    name = "broken_selector"
    uses_witness = True

    def allocate(self, ctx: AllocationContext) -> Any:
        raise RuntimeError("selector weights missing")


def _data_urls(messages: list[BaseMessage]) -> list[str]:
    urls = []
    for message in messages:
        for block in message.content if isinstance(message.content, list) else []:
            if isinstance(block, dict) and block.get("type") == "image_url":
                urls.append(block["image_url"]["url"])
    return urls


class KeyChatModel(BaseChatModel):
    """Chat model that clicks ``found-key`` only when the key screen is among its history images."""

    screens: Any
    steps: int = 6
    calls: list = Field(default_factory=list)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "key-chat"

    def bind_tools(self, tools: Any, **kwargs: Any) -> KeyChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        images = [base64.b64decode(u.split(",", 1)[1]) for u in _data_urls(messages)]
        seen = any(is_key_png(b) for b in images[:-1])
        self.calls.append(len(images))
        if self.screens.index >= self.steps:
            reply = AIMessage(content="finished")
        else:
            target = "found-key" if seen else "want-key"
            call = {
                "name": "click",
                "args": {"x": 0.5, "y": 0.5, "target": target},
                "id": f"c{len(self.calls)}",
            }
            reply = AIMessage(content=f"clicking {target}", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.fixture
def archive(tmp_path) -> LocalArchive:
    return LocalArchive(tmp_path / "archive")


def _postgres_uri() -> str | None:
    return os.environ.get("CAUSALCACHE_POSTGRES_URI")


@pytest.fixture(params=["memory", "sqlite"])
def saver_factory(request, tmp_path) -> Callable[[], Any]:
    """A factory of checkpointers sharing one storage (a rebuilt graph sees the same checkpoints)."""
    if request.param == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        shared = InMemorySaver()
        yield lambda: shared
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "checkpoints.sqlite"
    conns: list[sqlite3.Connection] = []

    def make() -> Any:
        conns.append(sqlite3.connect(str(path), check_same_thread=False))
        return SqliteSaver(conns[-1])

    yield make
    for conn in conns:
        conn.close()


def relaxed_config(**overrides: Any) -> Any:
    """Config with a generous selector time limit, so a loaded CI machine never triggers the fallback."""
    from causalcache_memory.config import CausalCacheConfig

    return CausalCacheConfig(**{"allocation": {"selector": {"timeout_ms": 10_000}}, **overrides})
