"""Scenario: SQLite checkpoint growth per agent step, CausalCache (LangGraph integration) vs naive.

Both graphs have the shape of ``examples/langgraph_agent_baseline.py``: ``screenshot -> model ->
execute`` in a loop, with an instant scripted model and a new 1920x1080 PNG each step, checkpointed by
``SqliteSaver``. The CausalCache graph wraps the screenshot and model nodes with
:class:`~causalcache_memory.integrations.langgraph.CausalCacheMemory` (Recent-4 allocation); the naive
graph keeps base64 screenshots in ``messages`` and trims the stored history to the last four past
screenshots plus the current one (its best case: without trimming the state, every checkpoint holds every
screenshot and growth is quadratic).

Bytes are the checkpoint, metadata and pending-write blobs in the database, attributed to the agent
step (three supersteps) that wrote them; ``db_file_kb`` is the SQLite file size at the end.

``causalcache`` is the example-shaped CausalCache graph as a CausalCache agent should write it: the
screenshot node returns the image for the memory's observe node to archive (no screenshot message) and
the model node keeps only its latest reply in ``messages`` (the previous one is removed), since the
memory renders prompts from its trace. ``causalcache_memory_only`` has no ``messages`` at all, so its
growth is exactly what the memory's state keys add.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_lab.bench.episode import GOAL, step_action
from causalcache_lab.bench.screens import screenshot_pool, unique_variant
from causalcache_lab.bench.stats import owns_workdir
from causalcache_memory._optional import require

__all__ = ["VARIANTS", "run_checkpoint_growth"]

VARIANTS = ("causalcache", "causalcache_memory_only", "naive")
_NODES_PER_STEP = 3


def _state_type() -> Any:
    from typing import Annotated, TypedDict

    from langgraph.graph.message import add_messages

    fields = {
        "messages": Annotated[list[Any], add_messages],
        "goal": str,
        "action": dict | None,
        "steps": int,
    }
    return TypedDict("AgentState", fields, total=False)  # type: ignore[operator]


def _build(variant: str, steps: int, pool: Sequence[bytes], counter: itertools.count, root: Path) -> Any:
    from langchain_core.messages import AIMessage, RemoveMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    from causalcache_lab.bench.naive import keep_last_images, screenshot_message

    state_type = _state_type()
    memory = None

    def screenshot(state: dict[str, Any]) -> dict[str, Any]:
        png = unique_variant(pool[state.get("steps", 0) % len(pool)], next(counter))
        if variant.startswith("causalcache"):
            return png  # the observe node archives it; the memory's trace, not `messages`, holds it
        message = screenshot_message(png)
        if variant == "naive":
            old = list(state.get("messages", []))
            trimmed = keep_last_images([*old, message], 4)
            changed = [new for new, before in zip(trimmed, old, strict=False) if new is not before]
            return {"messages": [*changed, message]}
        return {"messages": [message]}

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        t = state.get("steps", 0) + 1
        action = step_action(t)
        if variant == "causalcache_memory_only":
            return {"action": action.to_dict()}
        reply = AIMessage(content=f"Step {t}: acting. {json.dumps(action.to_dict())}")
        if variant == "causalcache":
            # the memory builds prompts from its trace (and passes this node the prompt as `messages`):
            # the graph keeps only the latest reply
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), reply], "action": action.to_dict()}
        return {"messages": [reply], "action": action.to_dict()}

    def execute(state: dict[str, Any]) -> dict[str, Any]:
        return {"steps": state.get("steps", 0) + 1}

    def route(state: dict[str, Any]) -> str:
        return END if state.get("steps", 0) >= steps else "screenshot"

    builder = StateGraph(state_type)
    if variant.startswith("causalcache"):
        from causalcache_memory.allocation import RecentAllocator
        from causalcache_memory.archive import LocalArchive
        from causalcache_memory.integrations.langgraph import CausalCacheMemory

        memory = CausalCacheMemory(
            budget=4, archive=LocalArchive(root / "archive"), allocation=RecentAllocator()
        )
        builder.add_node("screenshot", memory.observe_node(screenshot, schema=state_type))
        builder.add_node("model", memory.decide_node(call_model, schema=state_type))
    else:
        builder.add_node("screenshot", screenshot)
        builder.add_node("model", call_model)
    builder.add_node("execute", execute)
    builder.add_edge(START, "screenshot")
    builder.add_edge("screenshot", "model")
    builder.add_edge("model", "execute")
    builder.add_conditional_edges("execute", route, ["screenshot", END])
    return builder


def _bytes_by_step(conn: sqlite3.Connection, saver: Any, config: dict[str, Any]) -> dict[int, int]:
    sizes = {
        cid: n
        for cid, n in conn.execute(
            "SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints WHERE thread_id = ?",
            (config["configurable"]["thread_id"],),
        )
    }
    for cid, n in conn.execute(
        "SELECT checkpoint_id, sum(length(value)) FROM writes WHERE thread_id = ? GROUP BY checkpoint_id",
        (config["configurable"]["thread_id"],),
    ):
        sizes[cid] = sizes.get(cid, 0) + int(n or 0)
    per_step: dict[int, int] = {}
    for item in saver.list(config):
        superstep = int(item.metadata.get("step", -1))
        agent_step = max(0, superstep) // _NODES_PER_STEP + 1
        cid = item.config["configurable"]["checkpoint_id"]
        per_step[agent_step] = per_step.get(agent_step, 0) + sizes.get(cid, 0)
    return per_step


#: PNG/JPEG/WEBP signatures, raw and base64-encoded
_IMAGE_MARKERS = (b"\x89PNG\r\n\x1a\n", b"iVBORw0KGgo", b"\xff\xd8\xff", b"/9j/", b"UklGR")


def _db_image_blobs(conn: sqlite3.Connection) -> int:
    """How many checkpoint/write blobs in the database contain image bytes (raw or base64)."""
    found = 0
    for query in (
        "SELECT checkpoint FROM checkpoints",
        "SELECT metadata FROM checkpoints",
        "SELECT value FROM writes",
    ):
        for (blob,) in conn.execute(query):
            data = bytes(blob or b"")
            found += any(marker in data for marker in _IMAGE_MARKERS)
    return found


def _run_variant(
    variant: str, steps: int, pool: Sequence[bytes], counter: itertools.count, root: Path
) -> dict:
    sqlite_mod = require("langgraph.checkpoint.sqlite", purpose="the checkpoint-growth benchmark")
    folder = root / f"ckpt-{variant}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    db = folder / "checkpoints.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        saver = sqlite_mod.SqliteSaver(conn)
        graph = _build(variant, steps, pool, counter, folder).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": variant}, "recursion_limit": _NODES_PER_STEP * steps + 10}
        graph.invoke({"goal": GOAL, "steps": 0}, config)
        per_step = _bytes_by_step(conn, saver, config)
        final = graph.get_state(config).values
        has_image = any("base64," in json.dumps(m.content) for m in final.get("messages", []))
        db_images = _db_image_blobs(conn)
        by_key = {k: round(len(saver.serde.dumps_typed(v)[1]) / 1024.0, 2) for k, v in sorted(final.items())}
    finally:
        conn.close()
    total = sum(per_step.values())
    series = [round(per_step.get(t, 0) / 1024.0, 2) for t in range(1, steps + 1)]
    return {
        "kb_per_step": round(total / 1024.0 / steps, 2),
        "series_kb": series,
        "db_file_kb": round(db.stat().st_size / 1024.0, 1),
        "final_state_has_image_bytes": has_image,
        "db_blobs_with_image_bytes": db_images,
        "final_state_kb_by_key": by_key,
    }


@owns_workdir
def run_checkpoint_growth(
    *,
    steps: int = 50,
    variants: Sequence[str] = VARIANTS,
    workdir: str | Path | None = None,
    sample_ts: Sequence[int] = (1, 10, 25, 50),
    screen: tuple[int, int] = (1920, 1080),
) -> dict[str, Any]:
    """``{"checkpoint_kb_per_step": {variant: kb}, "checkpoint_kb_series": {variant: {"t<t>": kb}}, ...}``."""
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"variants={unknown!r} are not benchmarked; choose from {list(VARIANTS)}")
    root = Path(workdir)  # type: ignore[arg-type]  # set by owns_workdir
    pool = screenshot_pool(6, tuple(screen))
    counter = itertools.count(20_000_000)
    out: dict[str, Any] = {"checkpoint_kb_per_step": {}, "checkpoint_kb_series": {}, "checkpoint_info": {}}
    for variant in variants:
        result = _run_variant(variant, steps, pool, counter, root)
        out["checkpoint_kb_per_step"][variant] = result["kb_per_step"]
        out["checkpoint_kb_series"][variant] = {
            f"t{t}": result["series_kb"][t - 1] for t in sample_ts if 1 <= t <= steps
        }
        out["checkpoint_info"][variant] = {
            "steps": steps,
            "db_file_kb": result["db_file_kb"],
            "final_state_has_image_bytes": result["final_state_has_image_bytes"],
            "db_blobs_with_image_bytes": result["db_blobs_with_image_bytes"],
            "final_state_kb_by_key": result["final_state_kb_by_key"],
            "series_kb": result["series_kb"],
        }
    return out
