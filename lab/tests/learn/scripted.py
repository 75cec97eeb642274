"""Recordings made by the live controller with a scripted LangChain chat model (a black-box agent).

:class:`ScriptedChatModel` answers each prompt with the reply its script holds for the episode (read from
the prompt's ``Task:`` line) and the decision ``t`` (one more than the highest summary index in the
history), so replaying a recorded thread through the agreement sampler asks the same model for the same
reply it gave live. :func:`record_scripted` runs episodes through :class:`~causalcache_memory.controller.
MemoryController` (Recent-B, the model wrapped as ``ChatModelPolicy`` with the given ``coords``), commits each
trace chain to the archive and writes each thread's latest state (``cc_head``, ``cc_episode``) to a SQLite
LangGraph checkpointer, as ``CausalCacheMemory`` does.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

_TASK = re.compile(r"^Task: (.+)$", re.M)
_SUMMARY = re.compile(r"^(\d+)\. ", re.M)


class ScriptedChatModel(BaseChatModel):
    """Replies ``script[goal][t - 1]`` (see the module doc); counts its calls."""

    script: dict[str, list[str]]
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        text = "\n".join(_text(m.content) for m in messages)
        goal = _TASK.search(text).group(1)  # type: ignore[union-attr]
        t = max((int(n) for n in _SUMMARY.findall(text)), default=0) + 1
        self.calls += 1
        reply = self.script[goal][t - 1]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


@dataclass
class Scripted:
    checkpointer: Path
    archive: str  # a folder or an fsspec URL
    model: ScriptedChatModel


def record_scripted(
    root: Path,
    script: dict[str, list[str]],
    *,
    size: tuple[int, int] = (1280, 800),
    coords: str = "auto",
    budget: int = 2,
    thread_prefix: str = "thread",
    archive_url: str | None = None,
    screen_text: Callable[[str, int], str] | None = None,
) -> Scripted:
    """One thread per goal of ``script``, each reply executed on a fresh ``size`` screen (module doc); the
    archive is ``root/archive`` or ``archive_url`` (e.g. ``s3://bucket/prefix``)."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver
    from PIL import Image

    from causalcache_memory.allocation.simple import RecentAllocator
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.integrations.langgraph.policies import ChatModelPolicy
    from causalcache_memory.trace import Trace
    from causalcache_memory.trace.store import TraceStore

    root.mkdir(parents=True, exist_ok=True)
    if archive_url is None:
        archive = LocalArchive(root / "archive")
    else:
        from causalcache_memory.archive import open_archive

        archive = open_archive(archive_url)
    model = ScriptedChatModel(script=script)
    policy = ChatModelPolicy(model, coords=coords)  # type: ignore[arg-type]
    controller = MemoryController(
        policy=policy, archive=archive, allocator=RecentAllocator(), budget=budget, selector_timeout_s=None
    )
    store = TraceStore(archive)
    conn = sqlite3.connect(str(root / "checkpoints.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    try:
        for e, (goal, replies) in enumerate(script.items()):
            tid = f"{thread_prefix}-{e}"
            trace = Trace(goal, episode_id=tid)
            sha = controller.observe(trace, Image.new("RGB", size, (e * 37 % 256, 0, 0)))
            if screen_text is not None:  # what the agent's screenshot node returns beside the pixels
                archive.put_text(sha, screen_text(goal, 0))
            log = []
            for step in range(len(replies)):
                decision = controller.decide(trace)
                assert decision.action is not None, decision.generation.parse_error
                log.append(
                    {"t": decision.t, "allocator": "recent", "selected": list(decision.allocation.selected)}
                )
                screen = Image.new("RGB", size, (e * 37 % 256, (step * 53 + 1) % 256, 90))
                event = controller.record(trace, decision, screen)
                if screen_text is not None:
                    archive.put_text(event.screenshot, screen_text(goal, step + 1))
            head = store.commit(None, trace, log)
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"cc_head": head, "cc_episode": tid}
            saver.put({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, checkpoint, {}, {})
    finally:
        controller.close()
        conn.close()
    model.calls = 0
    return Scripted(root / "checkpoints.sqlite", archive_url or str(root / "archive"), model)


_APPS = ("Tickets", "Bank", "Sheet", "Chat", "Files")
_WORDS = ("invoice", "amount", "due", "owner", "status", "ref", "total", "client", "note", "date")


def desktop_episodes(n: int, *, seed: int = 0, size: tuple[int, int] = (1280, 800)) -> dict[str, list[str]]:
    """``n`` black-box desktop episodes of 9-13 steps: pixel clicks, typing, hotkeys and scrolls."""
    rng = random.Random(seed)
    script = {}
    for e in range(n):
        replies = []
        for i in range(rng.randint(9, 13)):
            kind = rng.random()
            if kind < 0.55:
                action = f"pyautogui.click({rng.randint(5, size[0] - 5)}, {rng.randint(5, size[1] - 5)})"
            elif kind < 0.8:
                action = f"pyautogui.write('{rng.choice(_WORDS)} {rng.randint(100, 99999)}')"
            elif kind < 0.9:
                action = "pyautogui.hotkey('ctrl', 's')"
            else:
                action = f"pyautogui.scroll({rng.choice((-5, 5))})"
            replies.append(f"Thought: step {i} of {e}.\nAction: {action}")
        script[f"{rng.choice(_APPS)} task {seed}-{e}: copy the {rng.choice(_WORDS)} across apps"] = replies
    return script


def desktop_text(goal: str, step: int) -> str:
    """A desktop accessibility dump: one line per element, each ending with its position ``@(x,y)``."""
    rng = random.Random(f"{goal}#{step}")
    lines = [f"{rng.choice(_APPS)} - window {rng.randint(1, 9)}"]
    for _ in range(rng.randint(8, 30)):
        lines.append(
            f"{rng.choice(_WORDS)}: {rng.randint(1, 99999)} @({rng.randint(0, 1279)},{rng.randint(0, 799)})"
        )
    return "\n".join(lines)


def replay_labeller(script: str, coords: str = "auto"):  # type: ignore[no-untyped-def]
    """A labeller factory for learn configs: the scripted agent (its script a JSON file), wrapped with
    ``coords`` as a team would wrap its model."""
    import json

    from causalcache_memory.integrations.langgraph.policies import ChatModelPolicy

    model = ScriptedChatModel(script=json.loads(Path(script).read_text()))
    return ChatModelPolicy(model, coords=coords)  # type: ignore[arg-type]
