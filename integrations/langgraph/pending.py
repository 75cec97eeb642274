"""The decided, not yet recorded step of the running thread, for ``memory.action()`` in any node.

LangGraph passes a node only the keys of its own schema, so a user's node whose schema lacks the memory's
``cc_pending`` cannot read the decision from its state. Inside a running graph the thread is known
(``get_config()``): the decision is taken from the memory's in-process record (written by the decide
node), else from the thread's latest checkpoint (a run resumed in a new process).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from causalcache_memory.errors import TraceError
from causalcache_memory.integrations.langgraph.context import episode_id_for

__all__ = ["apending_in_run", "pending_in_run"]

_MISSING = object()
_NO_RUN = (
    "memory.action(state): the state has no 'cc_pending' key and no graph is running. Call it inside a "
    "node of the graph (any node works), or pass a state that holds the memory's keys (add "
    "CausalCacheState to your schema: class State(MyState, CausalCacheState))"
)


def _run_config() -> dict[str, Any]:
    from langgraph.config import get_config

    try:
        return dict(get_config())
    except RuntimeError:
        raise TraceError(_NO_RUN) from None


def _recorded(pending: Mapping[str, Any], lock: threading.Lock, episode: str) -> Any:
    with lock:
        return pending.get(episode, _MISSING)


def _saver_and_thread(config: Mapping[str, Any], episode: str) -> tuple[Any, Any]:
    configurable = config.get("configurable", {})
    saver, thread = configurable.get("__pregel_checkpointer"), configurable.get("thread_id")
    if saver is None or thread is None:
        raise TraceError(
            f"memory.action(): thread {episode!r} has no decision recorded in this process and the graph "
            "has no checkpointer to read it from; pass a state holding 'cc_pending' (add CausalCacheState "
            "to your schema) or compile the graph with a checkpointer"
        )
    return saver, thread


def _pending_of(tup: Any) -> dict[str, Any] | None:
    values = tup.checkpoint.get("channel_values", {}) if tup is not None else {}
    pending = values.get("cc_pending")
    return pending if isinstance(pending, dict) else None


def pending_in_run(pending: Mapping[str, Any], lock: threading.Lock) -> dict[str, Any] | None:
    """The running thread's pending decision: recorded in this process, else from its checkpoint."""
    config = _run_config()
    episode = episode_id_for(None)
    found = _recorded(pending, lock, episode)
    if found is not _MISSING:
        return found
    saver, thread = _saver_and_thread(config, episode)
    return _pending_of(saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}))


async def apending_in_run(pending: Mapping[str, Any], lock: threading.Lock) -> dict[str, Any] | None:
    """:func:`pending_in_run` reading the checkpoint through the saver's async API."""
    config = _run_config()
    episode = episode_id_for(None)
    found = _recorded(pending, lock, episode)
    if found is not _MISSING:
        return found
    saver, thread = _saver_and_thread(config, episode)
    query = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    aget = getattr(saver, "aget_tuple", None)
    return _pending_of(await aget(query) if callable(aget) else saver.get_tuple(query))
