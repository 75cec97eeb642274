"""Scenario: what the memory adds to a user-shaped LangGraph agent's step at real screenshot sizes.

The agent is the README's "use it in your agent" graph (``StateGraph`` with ``add_messages``, nodes
``screenshot -> model -> execute``, a screenshot node that puts a 1920x1080 PNG into a ``HumanMessage``
as a base64 ``image_url`` block, a model node that returns ``{"messages": [vlm.invoke(messages)]}``).
Two agents run it for ``steps`` steps on the same screenshots:

* ``plain``: the user's agent without memory or checkpointer. Its model node sends the current screen
  and the ``B`` previous ones (older image blocks are dropped from the request), as a user trims a
  context.
* ``memory``: the same nodes wrapped by :class:`CausalCacheMemory` (``observe_node``/``decide_node``)
  with the defaults: a local archive and SQLite checkpoints. The memory sends the same ``B + 1``
  images (its retained turns and the current screen).

The fake VLM decodes everything it is sent, as a server would: base64-decodes each image block and
decodes the PNG's pixels with Pillow, then replies with a PyAutoGUI line in pixel coordinates.

Two kinds of screenshots (``screens``), both about 2 MB of PNG, because what a PNG holds decides what
inflating it costs (the archive inflates every screenshot once to check that it decodes, on its writer
thread, and the fake VLM decodes it again):

* ``noise``: a flat desktop with a panel of random pixels (:func:`noise_screens`): random bytes barely
  compress, so most of the file is stored almost verbatim and inflates fast (~5 ms for the archive's
  check of a 2 MB file on the reference machine).
* ``photo``: a full-frame smooth gradient with one-level noise (:func:`photo_screens`), like a photo or
  wallpaper behind windows: the same size inflates about five times slower (~29 ms), as real 2 MB
  screens do.

A step is the wall time between two entries into the screenshot node, minus the time the screenshot
node itself spends producing the image (the same for both agents). Medians are over the last
``steps - warmup`` steps (the first ``warmup = B`` steps send fewer images). ``added_ms`` is the median
memory step minus the median plain step; ``ratio`` is their quotient. ``added_cpu_ms`` is the same
difference in process CPU time (all threads: the background screenshot writes and checkpoint writes
count), which a loaded machine disturbs less than wall time; ``added_step_thread_cpu_ms`` the difference
in the CPU time of the thread that runs the nodes (``time.thread_time``; a synchronous ``invoke`` runs a
superstep's single node on the caller's thread), the memory's work on the step's critical path.
``model_calls_per_step`` counts the policy's calls (``1 +`` the share of steps with a second pass: the
two-pass re-decision runs the model again after a swap, which moves the mean step and not a median
while fewer than half the steps swap). ``run_ms_per_step`` is what a user who times the whole
``graph.invoke`` sees: its wall time over the
steps, warm-up steps and first-use costs included; ``setup_ms`` the time to build the memory and compile
the graph, once per process.
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

__all__ = ["SCREEN_KINDS", "noise_screens", "photo_screens", "run_agent_overhead"]

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


def photo_screens(count: int, size: tuple[int, int] = SCREEN) -> list[bytes]:
    """``count`` distinct PNGs of ``size``: a smooth full-frame gradient with one-level noise.

    About 2.0 MB at 1920x1080 (``compress_level=6``, Pillow's default): a photo-like screen, whose
    deflate stream inflates about five times slower than :func:`noise_screens`' file of the same size.
    """
    import numpy as np
    from PIL import Image

    width, height = size
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width]
    out = []
    for index in range(count):
        base = np.stack(
            [xx * 255 // width, yy * 255 // height, (xx + yy) * 127 // (width + height) + index % 100], -1
        )
        pixels = np.clip(base + rng.integers(-1, 2, size=base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels, "RGB").save(buf, format="PNG", compress_level=6)
        out.append(buf.getvalue())
    return out


SCREEN_KINDS = ("noise", "photo")


def _screens(kind: str, count: int, size: tuple[int, int], target_bytes: int) -> list[bytes]:
    if kind == "noise":
        return noise_screens(count, size, target_bytes=target_bytes)
    if kind == "photo":
        return photo_screens(count, size)
    raise ValueError(f"screens={kind!r} is not one of {', '.join(SCREEN_KINDS)}")


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
    return HumanMessage([{"type": "image_url", "image_url": {"url": url}}])  # as in the README


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
        steps: int

    shot_s: list[float] = [0.0, 0.0, 0.0]  # wall, process CPU, thread CPU spent producing screenshots
    clocks = (time.perf_counter, time.process_time, time.thread_time)

    def screenshot(state: AgentState) -> dict[str, Any]:
        start = [clock() for clock in clocks]
        marks.append(tuple(t - s for t, s in zip(start, shot_s, strict=True)))  # screenshot excluded
        message = _image_message(screens[state.get("steps", 0) % len(screens)])
        for i, clock in enumerate(clocks):
            shot_s[i] += clock() - start[i]
        return {"messages": [message]}

    def call_model(state: AgentState) -> dict[str, Any]:
        messages = state["messages"] if memory is not None else _last_images(state["messages"], budget + 1)
        return {"messages": [model(messages)]}

    def execute(state: AgentState) -> dict[str, Any]:
        if memory is not None:
            memory.action()
        return {"steps": state.get("steps", 0) + 1}

    def route(state: AgentState) -> str:
        return END if state.get("steps", 0) >= steps else "model"

    builder = StateGraph(AgentState)  # the README's graph, node names included
    builder.add_node("screenshot", memory.observe_node(screenshot) if memory else screenshot)
    builder.add_node("model", memory.decide_node(call_model) if memory else call_model)
    builder.add_node("execute", execute)
    builder.add_edge(START, "screenshot")
    builder.add_conditional_edges("screenshot", route, ["model", END])
    builder.add_edge("model", "execute")
    builder.add_edge("execute", "screenshot")
    return builder.compile(checkpointer=memory.checkpointer() if memory else None)


def _episode(
    memory: Any,
    screens: Sequence[bytes],
    steps: int,
    budget: int,
    thread: str,
    clock: dict[str, float] | None = None,
) -> tuple[list[tuple[float, ...]], list[int]]:
    """Per step: ``(wall ms, process CPU ms, step-thread CPU ms)``, and the images the model decoded.

    ``clock``, when given, gets ``compile_ms`` (building the graph) and ``run_ms`` (the whole ``invoke``).
    """
    from langchain_core.messages import HumanMessage

    marks: list[tuple[float, float, float]] = []
    model = DecodingVLM()
    start = time.perf_counter()
    graph = _build(memory, screens, steps, budget, marks, model)
    compiled = time.perf_counter()
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 10 * steps + 10}
    graph.invoke({"messages": [HumanMessage("Archive every invoice")]}, config)
    if clock is not None:
        clock.update(compile_ms=(compiled - start) * 1e3, run_ms=(time.perf_counter() - compiled) * 1e3)
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
    screens: str = "noise",
    workdir: str | Path,
) -> dict[str, Any]:
    """Median step wall time of the plain and the memory agent, and what the memory adds (see module doc).

    ``repeats`` alternates plain and memory episodes (fresh archive and database each time) and pools
    their steps, so a change in the machine's load hits both agents alike. ``screens``: one of
    :data:`SCREEN_KINDS` (``target_bytes`` sizes the ``noise`` kind only).
    """
    root = Path(workdir)
    pngs = _screens(screens, steps + 1, screen, target_bytes)
    warmup = min(budget, max(0, steps - 1))
    plain: list[tuple[float, ...]] = []
    with_memory: list[tuple[float, ...]] = []
    images: dict[str, list[int]] = {"plain": [], "memory": []}
    calls: dict[str, list[float]] = {"plain": [], "memory": []}  # model calls per step (pass 2 adds one)
    runs: dict[str, list[float]] = {"plain": [], "memory": []}
    setup: dict[str, list[float]] = {"plain": [], "memory": []}
    for rep in range(repeats):
        clock: dict[str, float] = {}
        times, seen = _episode(None, pngs, steps, budget, f"plain-{rep}", clock)
        plain += times[warmup:]
        images["plain"] += seen[warmup:]
        calls["plain"].append(len(seen) / steps)
        runs["plain"].append(clock["run_ms"] / steps)
        setup["plain"].append(clock["compile_ms"])
        start = time.perf_counter()
        with _default_memory(root / f"memory-{rep}", budget) as memory:
            built_ms = (time.perf_counter() - start) * 1e3
            times, seen = _episode(memory, pngs, steps, budget, f"memory-{rep}", clock)
        checkpoint_kb = _checkpoint_kb(root / f"memory-{rep}" / "checkpoints.sqlite", f"memory-{rep}")
        with_memory += times[warmup:]
        images["memory"] += seen[warmup:]
        calls["memory"].append(len(seen) / steps)
        runs["memory"].append(clock["run_ms"] / steps)
        setup["memory"].append(built_ms + clock["compile_ms"])
    p_med, m_med = (statistics.median(s[0] for s in steps_) for steps_ in (plain, with_memory))
    p_cpu, m_cpu = (statistics.median(s[1] for s in steps_) for steps_ in (plain, with_memory))
    p_thr, m_thr = (statistics.median(s[2] for s in steps_) for steps_ in (plain, with_memory))
    p_run, m_run = (statistics.median(runs[k]) for k in ("plain", "memory"))
    return {
        "screens": screens,
        "plain_step_ms": percentiles([s[0] for s in plain]),
        "memory_step_ms": percentiles([s[0] for s in with_memory]),
        "added_ms": round(m_med - p_med, 3),
        "ratio": round(m_med / p_med, 4),
        "added_cpu_ms": round(m_cpu - p_cpu, 3),
        "cpu_step_ms": {"plain": round(p_cpu, 3), "memory": round(m_cpu, 3)},
        "added_step_thread_cpu_ms": round(m_thr - p_thr, 3),
        "step_thread_cpu_ms": {"plain": round(p_thr, 3), "memory": round(m_thr, 3)},
        "run_ms_per_step": {"plain": round(p_run, 3), "memory": round(m_run, 3)},
        "added_run_ms_per_step": round(m_run - p_run, 3),
        "setup_ms": {k: round(statistics.median(v), 3) for k, v in setup.items()},
        "images_per_call": {k: statistics.median(v) for k, v in images.items()},
        "model_calls_per_step": {k: round(statistics.mean(v), 3) for k, v in calls.items()},
        "checkpoint_kb_per_step": checkpoint_kb,
        "png_bytes": round(statistics.mean(len(s) for s in pngs)),
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
