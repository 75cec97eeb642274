"""Scenario: what the memory adds to a user-shaped LangGraph agent's step at real screenshot sizes.

Two agents run the same loop ``screenshot -> model -> execute`` for ``steps`` steps on the same
1920x1080 PNG screenshots (noise-filled, so each PNG is about 2 MB like a busy real screen):

* ``plain``: the user's agent without memory or checkpointer. The screenshot node base64-encodes each
  screen once into an image block of a ``HumanMessage``; the model node sends the current screen and
  the ``B`` previous ones (older image blocks are dropped from the request), as a user trims a context.
* ``memory``: the same nodes wrapped by :class:`CausalCacheMemory` (``observe_node``/``decide_node``,
  Recent-``B``) with the defaults: a local archive and SQLite checkpoints. The memory sends the same
  ``B + 1`` images (its Recent-B retained turns and the current screen).

The fake VLM decodes everything it is sent, as a server would: base64-decodes each image block and
decodes the PNG's pixels with Pillow, then replies with a PyAutoGUI line in pixel coordinates.

A step is the wall time between two entries into the screenshot node, minus the time the screenshot
node itself spends producing the image (the same for both agents). Medians are over the last
``steps - warmup`` steps (the first ``warmup = B`` steps send fewer images). ``added_ms`` is the median
memory step minus the median plain step; ``ratio`` is their quotient. ``added_cpu_ms`` is the same
difference in process CPU time (all threads: the background screenshot writes and checkpoint writes
count), which a loaded machine disturbs less than wall time; ``added_step_thread_cpu_ms`` the difference
in the CPU time of the thread that runs the nodes (``time.thread_time``; a synchronous ``invoke`` runs a
superstep's single node on the caller's thread), the memory's work on the step's critical path.
"""

import base64
import io
import itertools
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_lab.bench.stats import owns_workdir, percentiles

__all__ = ["noise_screens", "run_agent_overhead"]

SCREEN = (1920, 1080)
TARGET_BYTES = 2_000_000


def noise_screens(
    count: int, size: tuple[int, int] = SCREEN, *, target_bytes: int = TARGET_BYTES
) -> list[bytes]:
    """``count`` distinct PNGs of ``size``: a flat desktop with a noise panel sized for ``target_bytes``.

    Random pixels do not compress, so the PNG is about ``panel pixels * 3`` bytes (RGB).
    """
    import numpy as np
    from PIL import Image

    width, height = size
    rng = np.random.default_rng(0)
    rows = max(1, min(height, target_bytes // (3 * width)))
    out = []
    for index in range(count):
        pixels = np.full((height, width, 3), 30 + (index * 7) % 200, dtype=np.uint8)
        pixels[:rows] = rng.integers(0, 256, size=(rows, width, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels, "RGB").save(buf, format="PNG", compress_level=1)
        out.append(buf.getvalue())
    return out


class DecodingVLM:
    """A fake VLM that decodes every image it is sent (base64, then the PNG's pixels) and replies."""

    def __init__(self) -> None:
        self.images_seen: list[int] = []

    def __call__(self, messages: Sequence[Any]) -> Any:
        from langchain_core.messages import AIMessage
        from PIL import Image

        count = 0
        for message in messages:
            for block in message.content if isinstance(message.content, list) else ():
                if isinstance(block, dict) and block.get("type") == "image_url":
                    data = base64.b64decode(block["image_url"]["url"].split(",", 1)[1])
                    with Image.open(io.BytesIO(data)) as image:
                        image.load()
                    count += 1
        self.images_seen.append(count)
        step = len(self.images_seen)
        return AIMessage(content=f"pyautogui.click({100 + 37 * step % 1700}, {90 + 53 * step % 950})")


def _image_message(png: bytes) -> Any:
    from langchain_core.messages import HumanMessage

    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return HumanMessage(content=[{"type": "image_url", "image_url": {"url": url}}])


def _last_images(messages: Sequence[Any], keep: int) -> list[Any]:
    """The plain agent's request: every message, with image blocks only in the last ``keep`` of them."""
    with_images = [i for i, m in enumerate(messages) if isinstance(m.content, list)]
    drop = set(with_images[: max(0, len(with_images) - keep)])
    return [m for i, m in enumerate(messages) if i not in drop]


def _build(
    memory: Any,
    screens: Sequence[bytes],
    steps: int,
    budget: int,
    marks: list[tuple[float, float, float]],
    model: DecodingVLM,
) -> Any:
    from typing import Annotated

    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    class AgentState(TypedDict, total=False):  # annotations evaluated now: no __future__ import here
        messages: Annotated[list, add_messages]
        step: int

    shot_s: list[float] = [0.0, 0.0, 0.0]  # wall, process CPU, thread CPU spent producing screenshots
    clocks = (time.perf_counter, time.process_time, time.thread_time)

    def take_screenshot(state: AgentState) -> dict[str, Any]:
        start = [clock() for clock in clocks]
        marks.append(tuple(t - s for t, s in zip(start, shot_s, strict=True)))  # screenshot excluded
        message = _image_message(screens[state.get("step", 0) % len(screens)])
        for i, clock in enumerate(clocks):
            shot_s[i] += clock() - start[i]
        return {"messages": [message]}

    def call_model(state: AgentState) -> dict[str, Any]:
        messages = state["messages"] if memory is not None else _last_images(state["messages"], budget + 1)
        return {"messages": [model(messages)]}

    def execute(state: AgentState) -> dict[str, Any]:
        if memory is not None:
            memory.action()
        return {"step": state.get("step", 0) + 1}

    def route(state: AgentState) -> str:
        return END if state.get("step", 0) >= steps else "decide"

    builder = StateGraph(AgentState)
    builder.add_node("observe", memory.observe_node(take_screenshot) if memory else take_screenshot)
    builder.add_node("decide", memory.decide_node(call_model) if memory else call_model)
    builder.add_node("execute", execute)
    builder.add_edge(START, "observe")
    builder.add_conditional_edges("observe", route, ["decide", END])
    builder.add_edge("decide", "execute")
    builder.add_edge("execute", "observe")
    return builder.compile(checkpointer=memory.checkpointer() if memory else None)


def _episode(
    memory: Any, screens: Sequence[bytes], steps: int, budget: int, thread: str
) -> tuple[list[tuple[float, ...]], list[int]]:
    """Per step: ``(wall ms, process CPU ms, step-thread CPU ms)``, and the images the model decoded."""
    from langchain_core.messages import HumanMessage

    marks: list[tuple[float, float, float]] = []
    model = DecodingVLM()
    graph = _build(memory, screens, steps, budget, marks, model)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 10 * steps + 10}
    graph.invoke({"messages": [HumanMessage(content="Archive every invoice in the mail client")]}, config)
    return [
        tuple((y - x) * 1e3 for x, y in zip(a, b, strict=True)) for a, b in itertools.pairwise(marks)
    ], model.images_seen


@owns_workdir
def run_agent_overhead(
    *,
    steps: int = 44,
    budget: int = 4,
    repeats: int = 1,
    screen: tuple[int, int] = SCREEN,
    target_bytes: int = TARGET_BYTES,
    workdir: str | Path,
) -> dict[str, Any]:
    """Median step wall time of the plain and the memory agent, and what the memory adds (see module doc).

    ``repeats`` alternates plain and memory episodes (fresh archive and database each time) and pools
    their steps, so a change in the machine's load hits both agents alike.
    """
    root = Path(workdir)
    screens = noise_screens(steps + 1, screen, target_bytes=target_bytes)
    warmup = min(budget, max(0, steps - 1))
    plain: list[tuple[float, ...]] = []
    with_memory: list[tuple[float, ...]] = []
    images: dict[str, list[int]] = {"plain": [], "memory": []}
    for rep in range(repeats):
        times, seen = _episode(None, screens, steps, budget, f"plain-{rep}")
        plain += times[warmup:]
        images["plain"] += seen[warmup:]
        with _default_memory(root / f"memory-{rep}", budget) as memory:
            times, seen = _episode(memory, screens, steps, budget, f"memory-{rep}")
        checkpoint_kb = _checkpoint_kb(root / f"memory-{rep}" / "checkpoints.sqlite", f"memory-{rep}")
        with_memory += times[warmup:]
        images["memory"] += seen[warmup:]
    p_med, m_med = (statistics.median(s[0] for s in steps_) for steps_ in (plain, with_memory))
    p_cpu, m_cpu = (statistics.median(s[1] for s in steps_) for steps_ in (plain, with_memory))
    p_thr, m_thr = (statistics.median(s[2] for s in steps_) for steps_ in (plain, with_memory))
    return {
        "plain_step_ms": percentiles([s[0] for s in plain]),
        "memory_step_ms": percentiles([s[0] for s in with_memory]),
        "added_ms": round(m_med - p_med, 3),
        "ratio": round(m_med / p_med, 4),
        "added_cpu_ms": round(m_cpu - p_cpu, 3),
        "cpu_step_ms": {"plain": round(p_cpu, 3), "memory": round(m_cpu, 3)},
        "added_step_thread_cpu_ms": round(m_thr - p_thr, 3),
        "step_thread_cpu_ms": {"plain": round(p_thr, 3), "memory": round(m_thr, 3)},
        "images_per_call": {k: statistics.median(v) for k, v in images.items()},
        "checkpoint_kb_per_step": checkpoint_kb,
        "png_bytes": round(statistics.mean(len(s) for s in screens)),
        "screen": list(screen),
        "budget": budget,
        "steps_measured": len(with_memory),
    }


def _checkpoint_kb(db: Path, thread: str, supersteps: int = 3) -> dict[str, float]:
    """KB the SQLite checkpointer wrote per agent step (checkpoints, metadata and pending writes).

    ``first``/``last``: the first and the last complete step; ``mean`` over all complete steps.
    """
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints "
            "WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread,),
        ).fetchall()
        writes = dict(
            conn.execute(
                "SELECT checkpoint_id, sum(length(value)) FROM writes WHERE thread_id = ? GROUP BY checkpoint_id",
                (thread,),
            ).fetchall()
        )
    sizes = [size + (writes.get(cid) or 0) for cid, size in rows[1:]]  # after the input checkpoint
    steps = [sum(sizes[i : i + supersteps]) / 1024 for i in range(0, len(sizes) - supersteps + 1, supersteps)]
    if not steps:
        return {"first": math.nan, "last": math.nan, "mean": math.nan}
    return {
        "first": round(steps[0], 2),
        "last": round(steps[-1], 2),
        "mean": round(statistics.mean(steps), 2),
    }


def _default_memory(home: Path, budget: int) -> Any:
    """The memory with its defaults: a local archive and SQLite checkpoints, under ``home``."""
    from causalcache_memory.config import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    home.mkdir(parents=True, exist_ok=True)
    config = {
        "budget": budget,
        "archive": {"url": str(home / "archive")},
        "checkpointer": {"kind": "sqlite", "path": str(home / "checkpoints.sqlite")},
    }
    return CausalCacheMemory(config=parse_config(config))
