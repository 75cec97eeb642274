"""Reading a thread back: checkpointers, the episode log, the trace, and the pending action.

:class:`ThreadReading` is a mixin of :class:`~causalcache_memory.integrations.langgraph.memory.CausalCacheMemory`;
it uses the memory's ``config``, ``trace_store()``, ``_store_for(archive)``, ``_stores`` and pending-decision
registry (``_pending``, ``_pending_lock``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from causalcache_memory.decisions.stats import DecisionMonitor, DecisionStats
from causalcache_memory.errors import ConfigError
from causalcache_memory.integrations.langgraph.state import head_of, load_trace

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.trace import Trace
    from causalcache_memory.trace.store import TraceStore

__all__ = ["ThreadReading"]


@contextlib.asynccontextmanager
async def _waiting(opened: Any, memory: Any) -> Any:
    """An async saver context whose saver waits for ``memory``'s screenshot writes (:mod:`.barrier`)."""
    from causalcache_memory.integrations.langgraph.barrier import waiting_saver

    async with opened as saver:
        yield waiting_saver(saver, memory)


def _has_record(archive: Any, sha: str) -> bool:
    has = getattr(archive, "has_record", None)
    return bool(has(sha)) if callable(has) else False


class ThreadReading:
    """Checkpointer factories and readers of a recorded thread (mixed into ``CausalCacheMemory``)."""

    config: Any
    _stores: dict[int, Any]
    _pending: Any
    _pending_lock: Any
    _monitor: DecisionMonitor
    # provided by CausalCacheMemory, the class this mixin is part of
    _store_for: Callable[[ScreenshotArchive], TraceStore]
    trace_store: Callable[..., TraceStore]

    def checkpointer(self) -> Any:
        """The LangGraph checkpointer named by ``config.checkpointer`` (SQLite file by default).

        The SQLite and in-memory savers serve both ``invoke``/``stream`` and ``ainvoke``/``astream`` (the
        SQLite one runs its async methods in a worker thread). For PostgreSQL under asyncio, or for
        LangGraph's native ``AsyncSqliteSaver``, use :meth:`acheckpointer`.

        Run graphs with ``durability="sync"`` (or build them with :meth:`compile`, which makes
        ``config.checkpointer.durability``, ``"sync"`` by default, their default) when the agent's actions
        have side effects (docs/LANGGRAPH.md, "Durability").
        """
        from causalcache_memory.integrations.langgraph.barrier import waiting_saver
        from causalcache_memory.integrations.langgraph.savers import build_checkpointer

        return waiting_saver(build_checkpointer(self.config.checkpointer), self)

    def flush_writes(self) -> None:  # pragma: no cover - implemented by CausalCacheMemory
        raise NotImplementedError

    def compile(self, builder: Any, **kwargs: Any) -> Any:
        """``builder.compile(checkpointer=self.checkpointer(), **kwargs)`` whose runs default to
        ``config.checkpointer.durability`` (``"sync"``: each step's checkpoint is stored before the next
        step starts). The saver is :meth:`checkpointer`'s, which waits for the screenshot writes before
        it stores a checkpoint, so a step hands its writes to the writer thread and calls the model
        meanwhile. ``checkpointer=`` in ``kwargs`` replaces this memory's saver."""
        from causalcache_memory.integrations.langgraph.savers import with_durability

        if kwargs.get("checkpointer") is None:
            kwargs["checkpointer"] = self.checkpointer()
        return with_durability(builder.compile(**kwargs), self.config.checkpointer.durability)

    def acheckpointer(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """``async with memory.acheckpointer() as saver``: LangGraph's native async saver for the config.

        ``AsyncSqliteSaver`` (needs ``aiosqlite``) for ``kind: sqlite``, ``AsyncPostgresSaver`` for
        ``kind: postgres``, ``InMemorySaver`` for ``kind: memory``; the connection closes on exit.
        """
        from causalcache_memory.integrations.langgraph.savers import open_async_checkpointer

        return _waiting(open_async_checkpointer(self.config.checkpointer), self)

    @staticmethod
    def _values(graph_or_state: Any, config: dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(graph_or_state, Mapping):
            return dict(graph_or_state)
        if config is None:
            raise ConfigError("pass the run config (with configurable.thread_id) to read a graph's state")
        try:
            return dict(graph_or_state.get_state(config).values)
        except (asyncio.InvalidStateError, NotImplementedError) as exc:
            raise ConfigError(
                f"this graph's checkpointer cannot be read synchronously here ({type(exc).__name__}); "
                "use 'await memory.atrace(graph, config)' / 'await memory.aepisode_log(graph, config)'"
            ) from exc

    @staticmethod
    async def _avalues(graph_or_state: Any, config: dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(graph_or_state, Mapping):
            return dict(graph_or_state)
        if config is None:
            raise ConfigError("pass the run config (with configurable.thread_id) to read a graph's state")
        return dict((await graph_or_state.aget_state(config)).values)

    def episode_log(
        self, graph_or_state: Any, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> list[dict[str, Any]]:
        """Per-decision records (S*, k, second_pass, pass latencies) of a thread, oldest first.

        Reads ``cc_head`` from a graph's checkpoint (``graph, config``) or from a state dict, then walks
        the trace chain in the archive: ``archive=`` if given, else one this memory has written to
        (including a run-context archive), else the constructor's/config's archive.
        """
        return self._log_of(self._values(graph_or_state, config), archive, config)

    async def aepisode_log(
        self, graph_or_state: Any, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> list[dict[str, Any]]:
        """:meth:`episode_log` for graphs with an async checkpointer (``aget_state``)."""
        state = await self._avalues(graph_or_state, config)
        return await asyncio.to_thread(self._log_of, state, archive, config)

    def stats(
        self, graph_or_state: Any = None, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> DecisionStats | dict[str, DecisionStats]:
        """Decision counts: decisions, swaps (``k > 0``), pass-2 calls, Recent-B fallbacks by reason.

        * ``memory.stats(graph, config)`` (or ``memory.stats(state)``): one thread's counts, read from its
          decision log in the archive (the trace chain at the thread's checkpoint) — durable, the same in
          any process and after a restart, and what ``causalcache report`` prints. Returns a
          :class:`~causalcache_memory.decisions.stats.DecisionStats`.
        * ``memory.stats()``: ``{episode_id: DecisionStats}`` for every thread this memory decided in
          *this process* (in-memory counters, no archive read; the newest 4,096 threads).

        Both count with :class:`DecisionStats`; the idle warning (``allocation.idle_warning``) uses the
        in-process counts of the whole memory (docs/SELECTOR.md, "When the selector is idle").
        """
        if graph_or_state is None:
            return self._monitor.stats()
        return DecisionStats.from_records(self.episode_log(graph_or_state, config, archive=archive))

    def screen_text_stats(self) -> dict[str, Any]:
        """Screen-text counts of this process: texts given and OCR'd, full and incremental reads, screens
        dropped from the OCR queue, and at decisions whether earlier screens' texts were ready, late or
        missing (``ready_share``, ``decisions_text_ready``); see
        :class:`~causalcache_memory.archive.text_writer.ScreenTextWriter`."""
        return self.screen_texts.stats()  # type: ignore[attr-defined]

    def trace(
        self, graph_or_state: Any, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> Trace | None:
        """The episode trace at a thread's checkpoint or a state dict (None before the first observation)."""
        return self._trace_of(self._values(graph_or_state, config), archive, config)

    async def atrace(
        self, graph_or_state: Any, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> Trace | None:
        """:meth:`trace` for graphs with an async checkpointer (``aget_state``)."""
        state = await self._avalues(graph_or_state, config)
        return await asyncio.to_thread(self._trace_of, state, archive, config)

    def _log_of(self, state: dict[str, Any], archive: Any, config: Any = None) -> list[dict[str, Any]]:
        head = head_of(state)
        if head is None:
            return []
        return self._reader(head, archive, config).load_log(head, episode_id=state.get("cc_episode"))

    def _trace_of(self, state: dict[str, Any], archive: Any, config: Any = None) -> Trace | None:
        head = head_of(state)
        return None if head is None else load_trace(state, self._reader(head, archive, config))

    def _reader(self, head: str, archive: ScreenshotArchive | None, config: Any = None) -> TraceStore:
        """The store holding ``head``: ``archive`` if given; with namespaces, the tenant's archive of
        ``config`` (never another tenant's); else an archive this memory wrote to (a run-context archive
        included), else the constructor's/config's archive."""
        if archive is not None:
            return self._store_for(archive)
        if self.config.archive.namespace_keys:
            return self._store_for(self.resolve_archive(config=config))  # type: ignore[attr-defined]
        for known, store, *_ in reversed(list(self._stores.values())):
            if store.cached(head) or _has_record(known, head):
                return store
        return self.trace_store()

    def action(self, state: Mapping[str, Any] | None = None) -> Action | None:
        """The decided action awaiting execution, from any node of the user's graph.

        Reads ``state['cc_pending']`` when the state holds that key (nodes whose schema includes the
        memory's keys); otherwise, inside a running node, the pending decision of the current thread
        (recorded by the decide node in this process, else read from the thread's latest checkpoint).
        Returns None when no action is pending or the reply had no parsable action. Outside a running
        graph, with a state lacking ``cc_pending``, it raises :class:`TraceError` naming the fix.
        """
        from causalcache_memory.actions.model import Action

        if isinstance(state, Mapping) and "cc_pending" in state:
            pending = state.get("cc_pending")
        else:
            pending = self._pending_in_run(state)
        return Action.from_dict(pending["action"]) if pending and pending.get("action") else None

    async def aaction(self, state: Mapping[str, Any] | None = None) -> Action | None:
        """:meth:`action` for async nodes: reads a checkpoint with the saver's async API when needed."""
        from causalcache_memory.actions.model import Action
        from causalcache_memory.integrations.langgraph.pending import apending_in_run

        if isinstance(state, Mapping) and "cc_pending" in state:
            pending = state.get("cc_pending")
        else:
            pending = await apending_in_run(self._pending, self._pending_lock)
        return Action.from_dict(pending["action"]) if pending and pending.get("action") else None

    def _pending_in_run(self, state: Mapping[str, Any] | None) -> dict[str, Any] | None:
        from causalcache_memory.integrations.langgraph.pending import pending_in_run

        return pending_in_run(self._pending, self._pending_lock)
