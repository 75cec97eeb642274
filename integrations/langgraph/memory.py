"""``CausalCacheMemory``: the LangGraph drop-in (StateGraph nodes, create_agent middleware, checkpointer).

One object configures the memory (budget ``B``, allocator, archive, prompt text) and hands out:

* nodes for a hand-written ``StateGraph`` (:meth:`observe_node`, :meth:`decide_node`, :meth:`record_node`);
* :meth:`middleware` for LangChain ``create_agent``;
* :meth:`checkpointer`, the configured LangGraph saver (SQLite by default);
* :meth:`episode_log` / :meth:`trace`, to read an episode back from a checkpoint.

Graph state holds O(1) data per episode (see :mod:`.state`): the trace and the decision log are a hash
chain of small JSON records in the archive (:class:`~causalcache_memory.trace_store.TraceStore`), and
state keeps the chain's head hash. One :class:`TraceStore` (with its in-process cache) is kept per archive
object, so a step appends to a cached head without reading the archive.

The archive and policy come from the constructor, from LangGraph's runtime context
(:class:`CausalCacheContext`), or from the config, in that order of precedence (context first); never
from graph state, which holds only text and content hashes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_memory._optional import require
from causalcache_memory.allocation.base import AllocationContext, Allocator
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.config import CausalCacheConfig, load_config, parse_config
from causalcache_memory.controller import MemoryController, StepDecision
from causalcache_memory.errors import ConfigError, PolicyError
from causalcache_memory.factory import build_archive, build_policy, render_options
from causalcache_memory.integrations.langgraph.context import context_from_runtime
from causalcache_memory.integrations.langgraph.state import head_of, load_trace
from causalcache_memory.trace import Trace
from causalcache_memory.trace_store import TraceStore

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.allocation.base import Allocation
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["STEP_EVENT", "CausalCacheMemory"]

#: ``event`` field of the custom stream events and episode-log records.
STEP_EVENT = "causalcache.step"


def _has_record(archive: Any, sha: str) -> bool:
    has = getattr(archive, "has_record", None)
    return bool(has(sha)) if callable(has) else False


class _UnavailablePolicy:
    """Stands in for an allocator that could not be built: every step falls back to Recent-B."""

    uses_witness = True

    def __init__(self, name: str, error: Exception) -> None:
        self.name = name
        self.error = error

    def allocate(self, ctx: AllocationContext) -> Allocation:
        raise PolicyError(f"could not be built: {type(self.error).__name__}: {self.error}") from self.error


class _NoPolicy:
    name = "none"

    def generate(self, prompt: Any) -> Any:  # pragma: no cover - observe/record never generate
        raise PolicyError("this controller only records steps")

    score = generate


class CausalCacheMemory:
    """Budgeted fidelity-restoration memory for LangGraph agents.

    Args:
        budget: ``B``, history steps shown at high fidelity (overrides ``config.budget``).
        config: full configuration (default :class:`CausalCacheConfig`); see :meth:`from_yaml`.
        policy: the GUI policy (else the runtime context's, else built from ``config.policy``).
        archive: the screenshot archive (else the runtime context's, else opened from ``config.archive``).
        allocation: the allocator (else built from ``config.allocation``; a policy that cannot be
            built makes every step fall back to Recent-B with a warning).
        goal_key: state key holding the task instruction (else the first human message's text is used).
        messages_key: state key of the chat messages (prompts are passed to a wrapped model node there).
        action_key: state key of the decided action dict (read from a wrapped model node's update, or
            written by :meth:`decide_node` when the user's schema has that key).
        app_key: state key naming the foreground app (optional); the value in state when a step is
            recorded becomes the event's ``app`` (the app the action was taken in), which summaries show
            as ``[App]`` and the selector reads as app markers.
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        config: CausalCacheConfig | None = None,
        policy: Policy | None = None,
        archive: ScreenshotArchive | None = None,
        allocation: Allocator | None = None,
        goal_key: str = "goal",
        messages_key: str = "messages",
        action_key: str = "action",
        app_key: str = "app",
    ) -> None:
        require("langgraph", purpose="CausalCacheMemory")
        config = config or CausalCacheConfig()
        if not isinstance(config, CausalCacheConfig):
            raise ConfigError(f"config must be a CausalCacheConfig, got {type(config).__name__}")
        if budget is not None:
            config = parse_config({**config.model_dump(), "budget": budget}, source="CausalCacheMemory")
        self.config = config
        self._policy = policy
        self._archive = archive
        self._allocation = allocation
        self.goal_key = goal_key
        self.messages_key = messages_key
        self.action_key = action_key
        self.app_key = app_key
        self._screen_sizes: dict[str, tuple[int, int]] = {}
        self._stores: dict[int, tuple[ScreenshotArchive, TraceStore]] = {}

    @classmethod
    def from_yaml(cls, path: str | Path, **kwargs: Any) -> CausalCacheMemory:
        """Build from a YAML config file (validated; every problem reported at once)."""
        return cls(config=load_config(path), **kwargs)

    @property
    def budget(self) -> int:
        return self.config.budget

    def screen_size(self, archive: ScreenshotArchive, sha256: str | None) -> tuple[int, int] | None:
        """Pixel size of an archived screenshot (header only, cached per hash)."""
        if sha256 is None:
            return None
        size = self._screen_sizes.get(sha256)
        if size is None:
            with archive.open_image(sha256) as image:
                size = (int(image.width), int(image.height))
            if len(self._screen_sizes) > 4096:
                self._screen_sizes.clear()
            self._screen_sizes[sha256] = size
        return size

    # ------------------------------------------------------------------ resolution
    def resolve_archive(self, runtime: Any = None) -> ScreenshotArchive:
        ctx = context_from_runtime(runtime)
        if ctx is not None and ctx.archive is not None:
            return ctx.archive
        if self._archive is None:
            self._archive = build_archive(self.config.archive)
        return self._archive

    def resolve_policy(self, runtime: Any = None) -> Policy:
        ctx = context_from_runtime(runtime)
        if ctx is not None and ctx.policy is not None:
            return ctx.policy
        if self._policy is None:
            self._policy = build_policy(self.config.policy)
        return self._policy

    def trace_store(self, runtime: Any = None) -> TraceStore:
        """The :class:`TraceStore` over the resolved archive (one per archive object, cache kept)."""
        return self._store_for(self.resolve_archive(runtime))

    def _store_for(self, archive: ScreenshotArchive) -> TraceStore:
        entry = self._stores.get(id(archive))
        if entry is None or entry[0] is not archive:
            entry = (archive, TraceStore(archive))
            self._stores[id(archive)] = entry
            while len(self._stores) > 8:  # run-context archives come and go; keep the newest stores
                self._stores.pop(next(iter(self._stores)))
        return entry[1]

    @property
    def allocation(self) -> Allocator:
        if self._allocation is None:
            name = self.config.allocation.allocator
            try:
                self._allocation = build_allocator(self.config.allocation)
            except Exception as exc:  # surfaced per step as a Recent-B fallback warning
                self._allocation = _UnavailablePolicy(name, exc)
        return self._allocation

    def controller(self, runtime: Any = None, policy: Policy | None = None) -> MemoryController:
        """A :class:`MemoryController` for one step (``policy=None``: recording only)."""
        cfg = self.config
        return MemoryController(
            policy=policy if policy is not None else _NoPolicy(),  # type: ignore[arg-type]
            archive=self.resolve_archive(runtime),
            allocator=self.allocation,
            budget=cfg.budget,
            two_pass=cfg.two_pass,
            render_options=render_options(cfg),
            selector_timeout_s=cfg.allocation.selector.timeout_ms / 1000.0,
        )

    @staticmethod
    def step_record(decision: StepDecision, trace: Trace) -> dict[str, Any]:
        """The small JSON record of one decision (stream event and episode-log entry)."""
        return {"event": STEP_EVENT, "episode": trace.episode_id, **decision.to_record()}

    # ------------------------------------------------------------------ StateGraph nodes
    def observe_node(self, screenshot_node: Callable[..., Any], *, schema: type | None = None) -> Any:
        """Wrap the node that takes a screenshot: archive it, keep its hash, record a pending step.

        ``screenshot_node(state[, runtime])`` may return a state update holding the screenshot anywhere
        (raw bytes, a PIL image, image blocks in messages) or the screenshot itself. The image is archived
        and replaced by its hash; the newest one becomes the current screen. If a decided step is pending,
        it is recorded with this screenshot as its post-action screen.
        """
        from causalcache_memory.integrations.langgraph.nodes import make_observe_node

        return make_observe_node(self, screenshot_node, schema=schema, require_pending=False)

    def record_node(self, screenshot_node: Callable[..., Any], *, schema: type | None = None) -> Any:
        """Like :meth:`observe_node`, but a pending decided step is required (graphs that split the two)."""
        from causalcache_memory.integrations.langgraph.nodes import make_observe_node

        return make_observe_node(self, screenshot_node, schema=schema, require_pending=True)

    def decide_node(self, model_node: Callable[..., Any] | None = None, *, schema: type | None = None) -> Any:
        """The decision node: two-pass re-decision through :class:`MemoryController`.

        With ``model_node`` (the user's own model node), each pass calls it with ``state[messages_key]``
        replaced by the memory's prompt (pixels exist only for that call) and takes the action from its
        update; the final pass's update is returned. Without it, the configured policy is called.
        """
        from causalcache_memory.integrations.langgraph.nodes import make_decide_node

        return make_decide_node(self, model_node, schema=schema)

    # ------------------------------------------------------------------ create_agent
    def middleware(self, *, parse: Callable[[Any], Action | None] | None = None) -> Any:
        """An ``AgentMiddleware`` for LangChain ``create_agent`` (see :mod:`.middleware`).

        ``parse`` reads the action from the model's reply (default: first tool call, named after its
        action type, else the reply text).
        """
        from causalcache_memory.integrations.langgraph.middleware import CausalCacheMiddleware

        return CausalCacheMiddleware(self, parse=parse)

    def screenshot_message(self, screenshot: Any, text: str = "", *, runtime: Any = None) -> Any:
        """A ``HumanMessage`` with ``text`` and a reference to ``screenshot`` (archived now).

        Use it for the first message of a ``create_agent`` run, so not even the input checkpoint holds
        pixels.
        """
        from langchain_core.messages import HumanMessage

        from causalcache_memory.integrations.langgraph.images import screenshot_ref

        sha = self.resolve_archive(runtime).put(screenshot)
        blocks = [{"type": "text", "text": text}] if text else []
        return HumanMessage(content=[*blocks, {"type": "text", "text": screenshot_ref(sha)}])

    # ------------------------------------------------------------------ persistence
    def checkpointer(self) -> Any:
        """The LangGraph checkpointer named by ``config.checkpointer`` (SQLite file by default)."""
        cfg = self.config.checkpointer
        if cfg.kind == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            return InMemorySaver()
        if cfg.kind == "sqlite":
            sqlite_mod = require("langgraph.checkpoint.sqlite", purpose="the SQLite checkpointer")
            if cfg.path != ":memory:":
                Path(cfg.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(cfg.path, check_same_thread=False)
            return sqlite_mod.SqliteSaver(conn)
        postgres = require("langgraph.checkpoint.postgres", purpose="the PostgreSQL checkpointer")
        psycopg = require("psycopg", purpose="the PostgreSQL checkpointer")
        rows = require("psycopg.rows", purpose="the PostgreSQL checkpointer")
        conn = psycopg.connect(cfg.uri, autocommit=True, prepare_threshold=0, row_factory=rows.dict_row)
        saver = postgres.PostgresSaver(conn)
        saver.setup()
        return saver

    @staticmethod
    def _values(graph_or_state: Any, config: dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(graph_or_state, dict):
            return graph_or_state
        if config is None:
            raise ConfigError("pass the run config (with configurable.thread_id) to read a graph's state")
        return dict(graph_or_state.get_state(config).values)

    def episode_log(
        self, graph_or_state: Any, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> list[dict[str, Any]]:
        """Per-decision records (S*, k, second_pass, pass latencies) of a thread, oldest first.

        Reads ``cc_head`` from a graph's checkpoint (``graph, config``) or from a state dict, then walks
        the trace chain in the archive: ``archive=`` if given, else one this memory has written to
        (including a run-context archive), else the constructor's/config's archive.
        """
        state = self._values(graph_or_state, config)
        head = head_of(state)
        if head is None:
            return []
        return self._reader(head, archive).load_log(head, episode_id=state.get("cc_episode"))

    def trace(
        self, graph_or_state: Any, config: dict[str, Any] | None = None, *, archive: Any = None
    ) -> Trace | None:
        """The episode trace at a thread's checkpoint or a state dict (None before the first observation)."""
        state = self._values(graph_or_state, config)
        head = head_of(state)
        return None if head is None else load_trace(state, self._reader(head, archive))

    def _reader(self, head: str, archive: ScreenshotArchive | None) -> TraceStore:
        """The store holding ``head``: ``archive`` if given, else an archive this memory wrote to (a
        run-context archive included), else the constructor's/config's archive."""
        if archive is not None:
            return self._store_for(archive)
        for known, store in reversed(list(self._stores.values())):
            if store.cached(head) or _has_record(known, head):
                return store
        return self.trace_store()

    @staticmethod
    def action(state: dict[str, Any]) -> Action | None:
        """The decided action awaiting execution (from ``state['cc_pending']``)."""
        from causalcache_memory.actions.model import Action

        pending = state.get("cc_pending") or {}
        return Action.from_dict(pending["action"]) if pending.get("action") else None
