"""``CausalCacheMemory``: the LangGraph drop-in (StateGraph nodes, create_agent middleware, checkpointer).

One object configures the memory (budget ``B``, allocator, archive, prompt text) and hands out:

* nodes for a hand-written ``StateGraph`` (:meth:`observe_node`, :meth:`decide_node`, :meth:`record_node`);
* :meth:`middleware` for LangChain ``create_agent``;
* :meth:`checkpointer`, the configured LangGraph saver (SQLite by default; it serves ``invoke`` and
  ``ainvoke``/``astream``), and :meth:`acheckpointer` for the native async savers;
* :meth:`episode_log` / :meth:`trace` (async: :meth:`aepisode_log` / :meth:`atrace`): an episode back;
* :meth:`action`, the decided action from any node of the user's graph.

Arguments are validated when given (an allocator name is resolved through the registry at once); the
allocator is built and warmed at construction (:meth:`warmup`), so a run's first timed decision (a resumed
run's too) makes the same allocation as any later one. Screen text: :mod:`.text_intake`.

Graph state holds O(1) data per episode (see :mod:`.state`): the trace and the decision log are a hash
chain of small JSON records in the archive (:class:`~causalcache_memory.trace.store.TraceStore`), and
state keeps the chain's head hash. One :class:`TraceStore` (with its in-process cache) is kept per archive
object, so a step appends to a cached head without reading the archive.

The archive and policy come from the constructor, from LangGraph's runtime context
(:class:`CausalCacheContext`), or from the config, context first; never from graph state.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from causalcache_memory._optional import require
from causalcache_memory.actions.coords import CoordMode
from causalcache_memory.allocation.base import Allocator
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.archive.deferred import DeferredArchive, can_defer
from causalcache_memory.archive.text_writer import ScreenTextWriter
from causalcache_memory.config import CausalCacheConfig, load_config
from causalcache_memory.controller import MemoryController
from causalcache_memory.decisions.stats import DecisionMonitor
from causalcache_memory.errors import warn
from causalcache_memory.factory import build_archive, build_controller
from causalcache_memory.integrations.langgraph.context import context_from_runtime
from causalcache_memory.integrations.langgraph.namespaces import NamespacedArchives
from causalcache_memory.integrations.langgraph.reading import ThreadReading
from causalcache_memory.integrations.langgraph.session import STEP_EVENT
from causalcache_memory.integrations.langgraph.state import head_of, load_trace
from causalcache_memory.integrations.langgraph.validation import (
    UnavailableAllocator,
    check_allocator,
    check_arguments,
    check_coords,
    check_object,
    memory_config,
)
from causalcache_memory.runtime.registry import build_policy
from causalcache_memory.trace import Trace
from causalcache_memory.trace.store import TraceStore

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy
    from causalcache_memory.prompt_cost import PromptCostMeter

__all__ = ["STEP_EVENT", "CausalCacheMemory"]


def _close_controllers(stores: dict[int, tuple[Any, Any, MemoryController]], wait: bool = True) -> None:
    """Close every controller and deferred archive; ``wait=False`` (finalizers) joins no thread (P16)."""
    for _, _, controller in list(stores.values()):
        controller.close(wait=wait)
        if isinstance(controller.archive, DeferredArchive):
            controller.archive.close(wait=wait)
    stores.clear()


class CausalCacheMemory(ThreadReading):
    """Budgeted fidelity-restoration memory for LangGraph agents.

    Args:
        budget: ``B``, history steps shown at high fidelity (overrides ``config.budget``).
        config: full configuration (default :class:`CausalCacheConfig`); see :meth:`from_yaml`.
        policy: the GUI policy (else the runtime context's, else built from ``config.policy``).
        archive: the screenshot archive (else the runtime context's, else opened from ``config.archive``).
        allocation: the allocator (else built from ``config.allocation``; an allocator that cannot be
            built makes every step fall back to Recent-B with a warning).
        goal_key: state key holding the task instruction (else the first human message's text is used).
        messages_key: state key of the chat messages (prompts are passed to a wrapped model node there).
        action_key: state key of the decided action dict (read from a wrapped model node's update, or
            written by :meth:`decide_node` when the user's schema has that key).
        app_key: state key naming the foreground app (optional); the value in state when a step is
            recorded becomes the event's ``app`` (the app the action was taken in), which summaries show
            as ``[App]`` and the selector reads as app markers.
        prompt_cost: a :class:`~causalcache_memory.prompt_cost.PromptCostMeter`: every step's decision
            record then carries ``prompt_cost``, the predicted cache reads and writes of each model call
            (docs/PROMPT_COST.md); None (the default) counts nothing.
        trace_images: let LangSmith / LangChain traces record screenshots as image data. False (the
            default): the middleware's spans, the model call's span and ``trace_policy()`` record
            ``[screenshot sha256:...]`` references instead (:mod:`.tracing`).
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        config: CausalCacheConfig | None = None,
        policy: Policy | None = None,
        archive: ScreenshotArchive | None = None,
        allocation: Allocator | str | None = None,
        goal_key: str = "goal",
        messages_key: str = "messages",
        action_key: str = "action",
        app_key: str = "app",
        coords: CoordMode | None = None,
        parse: Callable[..., Any] | None = None,
        dedupe_current_screen: bool | None = None,
        warmup: bool = True,
        prompt_cost: PromptCostMeter | None = None,
        trace_images: bool = False,
    ) -> None:
        require("langgraph", purpose="CausalCacheMemory")
        self.config = memory_config(config, budget, dedupe_current_screen)
        keys = {"goal_key": goal_key, "messages_key": messages_key, "action_key": action_key}
        check_arguments({**keys, "app_key": app_key}, parse)
        coords = coords if coords is not None else getattr(self.config.policy, "coords", "auto")
        check_coords(coords)
        check_object("policy", policy, ("generate",), "pass a Policy (or use decide_node(model_node))")
        check_object("archive", archive, ("put", "get_bytes"), "pass a ScreenshotArchive (open_archive)")
        self._policy = policy
        self._archive = archive
        self._prompt_cost = prompt_cost
        self._allocation = check_allocator(allocation) if allocation is not None else None
        self.goal_key, self.messages_key, self.action_key, self.app_key = (*keys.values(), app_key)
        self.coords: CoordMode = coords  # type: ignore[assignment]
        self.parse = parse
        self.dedupe_current_screen = bool(self.config.render.dedupe_current_screen)
        self.trace_images = bool(trace_images)
        self._init_registries()
        if warmup:
            self.warmup()

    def _init_registries(self) -> None:
        # per archive object: the archive, its trace store, the one controller (and worker) steps use
        self._stores: dict[int, tuple[ScreenshotArchive, TraceStore, MemoryController]] = {}
        self._pending: dict[str, dict[str, Any] | None] = {}
        self._pending_lock = threading.Lock()
        self._lock = threading.Lock()
        self._warm = False
        self._namespaces = NamespacedArchives()
        self._lines_wired = False
        self._monitor = DecisionMonitor.from_config(
            self.config.allocation.idle_warning, ocr_engine=self.config.archive.ocr.engine
        )  # stats(), idle rule
        self.screen_texts = ScreenTextWriter.from_config(self.config.archive.ocr)  # a missing engine raises
        weakref.finalize(self, _close_controllers, self._stores, False)  # finalizers never join threads
        weakref.finalize(self, self.screen_texts.close, wait=False)

    @classmethod
    def from_yaml(cls, path: str | Path, **kwargs: Any) -> CausalCacheMemory:
        """Build from a YAML config file (validated; every problem reported at once).

        Relative paths in the file (archive, checkpointer, selector model) are resolved against the
        file's folder. Keyword arguments (``budget=2``, ``allocation="recent"``, ``policy=...``) override
        it and are validated the same way as the constructor's.
        """
        return cls(config=load_config(path), **kwargs)

    def warmup(self) -> CausalCacheMemory:
        """Build the allocator and have the controller load it before any timed decision (idempotent).

        Loads a learned selector's model and initializes its inference session
        (:meth:`MemoryController.warm_allocator`), so no decision (the first one of a resumed run included)
        hits the allocation time limit because of a cold start. Called by the constructor unless
        ``warmup=False``.
        """
        if not self._warm:
            self._warm = True
            MemoryController.warm_allocator(self.allocation, self.budget)
        return self

    @property
    def budget(self) -> int:
        return self.config.budget

    def screen_size(self, trace_or_state: Trace | Mapping[str, Any] | None = None) -> tuple[int, int] | None:
        """``(width, height)`` of the current screen, as recorded when it was archived (no image read).

        Takes a :class:`Trace`, or a state dict holding ``cc_head``; None when the size is unknown.
        """
        trace = trace_or_state
        if isinstance(trace_or_state, Mapping):
            head = head_of(trace_or_state)
            trace = None if head is None else load_trace(trace_or_state, self._reader(head, None))
        return trace.current_screen_size if isinstance(trace, Trace) else None

    # ------------------------------------------------------------------ resolution
    def resolve_archive(
        self, runtime: Any = None, *, config: Mapping[str, Any] | None = None
    ) -> ScreenshotArchive:
        """The run context's archive, else the constructor's, else opened from ``config.archive`` once;
        with ``archive.namespace_keys``, its sub-archive of the tenant named by ``config['configurable']``
        (the running graph's config when ``config`` is None; :mod:`.namespaces`)."""
        archive = self._resolve(runtime, "archive", lambda: build_archive(self.config.archive))
        keys = self.config.archive.namespace_keys
        return self._namespaces.archive(archive, keys, config) if keys else archive

    def _resolve_policy(self, runtime: Any = None) -> Policy:
        """The run context's policy, else the constructor's, else built from ``config.policy`` once."""
        return self._resolve(runtime, "policy", lambda: build_policy(self.config.policy))

    def _resolve(self, runtime: Any, name: str, build: Callable[[], Any]) -> Any:
        """The one precedence of the archive and the policy: run context, then this memory's (built once)."""
        given = getattr(context_from_runtime(runtime), name, None)
        if given is not None:
            return given
        if getattr(self, f"_{name}") is None:
            setattr(self, f"_{name}", build())
        return getattr(self, f"_{name}")

    def trace_store(self, runtime: Any = None) -> TraceStore:
        """The :class:`TraceStore` over the resolved archive (one per archive object, cache kept)."""
        return self._store_for(self.resolve_archive(runtime))

    def _store_for(self, archive: ScreenshotArchive) -> TraceStore:
        return self._entry(archive)[1]

    def _entry(self, archive: ScreenshotArchive) -> tuple[ScreenshotArchive, TraceStore, MemoryController]:
        """The trace store and the controller of ``archive``, built once (the newest 8 archives kept)."""
        with self._lock:
            entry = self._stores.get(id(archive))
            if entry is None or entry[0] is not archive:
                # writes overlap the model call; the deferred view is an archive by its methods (Protocol)
                view = cast("ScreenshotArchive", DeferredArchive(archive)) if can_defer(archive) else archive
                controller = build_controller(  # the step's model is passed to each decide()
                    self.config,
                    archive=view,
                    allocator=self.allocation,
                    monitor=self._monitor,
                    prompt_cost=self._prompt_cost,
                )  # one monitor per memory, whatever the archive
                entry = (archive, TraceStore(view), controller)  # records behind the barrier too
                self._stores[id(archive)] = entry
                while len(self._stores) > 8:  # run-context archives come and go; keep the newest
                    old = self._stores.pop(next(iter(self._stores)))
                    _close_controllers({0: old})
            return entry

    def flush_writes(self) -> None:
        """Return once every screenshot this memory archived is durable (see :mod:`.barrier`)."""
        with self._lock:
            views = [entry[2].archive for entry in self._stores.values()]
        for view in views:
            if isinstance(view, DeferredArchive):
                view.flush()

    def close(self) -> None:
        """Finish the screenshot writes and stop the allocator workers (idempotent; steps restart them)."""
        self.screen_texts.close()  # waits <= archive.ocr.close_timeout_s; OCR still waiting is dropped
        with self._lock:
            _close_controllers(self._stores)

    def __enter__(self) -> CausalCacheMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def allocation(self) -> Allocator:
        if self._allocation is None:
            name = self.config.allocation.allocator
            try:
                self._allocation = build_allocator(self.config.allocation)
            except Exception as exc:  # warned now, and per step as a Recent-B fallback
                warn(
                    f"allocation.allocator {name!r} could not be built ({type(exc).__name__}: {exc}); every "
                    "step will fall back to Recent-B",
                    logger=logging.getLogger(__name__),
                    stacklevel=3,
                )
                self._allocation = UnavailableAllocator(name, exc)
        if not self._lines_wired:
            self._lines_wired = True
            wire = getattr(self._allocation, "use_line_boxes", None)
            if callable(wire):
                wire(self.screen_texts.get_lines)  # OCR'd screens' line boxes for the witness's label lookup
        return self._allocation

    def _controller(self, runtime: Any = None) -> MemoryController:
        """The memory's :class:`MemoryController` for the resolved archive (one per archive, built once
        by :func:`~causalcache_memory.factory.build_controller`; every step of every thread uses it, the
        step's model passed to :meth:`MemoryController.decide`). :meth:`close` stops its worker."""
        return self._entry(self.resolve_archive(runtime))[2]

    def _note_pending(self, episode_id: str, pending: dict[str, Any] | None) -> None:
        """Remember the thread's decided, not yet recorded step (read by :meth:`action` in any node)."""
        with self._pending_lock:
            self._pending[episode_id] = pending
            while len(self._pending) > 4096:
                self._pending.pop(next(iter(self._pending)))

    def reset_head(self, thread_id: str, *, runtime: Any = None) -> None:
        """Let the next step of ``thread_id`` extend any head (branching from an older checkpoint).

        The trace store refuses, per thread, a commit that does not extend the head it last wrote
        (:class:`~causalcache_memory.errors.TraceConflictError`), in this process and, through claims in the
        archive, across processes; call this before replaying a thread from an older checkpoint, or to take
        over a thread whose run died on another machine.
        """
        self.trace_store(runtime).reset_head(thread_id)

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

    def decide_node(
        self,
        model_node: Callable[..., Any] | None = None,
        *,
        schema: type | None = None,
        parse: Callable[..., Any] | None = None,
    ) -> Any:
        """The decision node: two-pass re-decision through :class:`MemoryController`.

        With ``model_node`` (the user's own model node), each pass calls it with ``state[messages_key]``
        replaced by the memory's prompt (pixels exist only for that call) and takes the action from its
        update; the final pass's update is returned. Without it, the configured policy is called.
        ``model_node`` may be ``async def`` (the node is then async: run the graph with ``ainvoke``).

        The action is read from the update's ``action_key`` (an Action or a dict) or from the reply:
        ``parse`` (else the memory's ``parse``) or the default parser with ``coords`` on the current
        screen's recorded size. A reply that cannot be parsed is still recorded when the next screen
        is observed (verbatim, with its parse error).
        """
        from causalcache_memory.integrations.langgraph.nodes import make_decide_node

        return make_decide_node(self, model_node, schema=schema, parse=parse)

    # ------------------------------------------------------------------ create_agent
    def middleware(self, *, parse: Callable[..., Any] | None = None) -> Any:
        """An ``AgentMiddleware`` for LangChain ``create_agent`` (see :mod:`.middleware`).

        ``parse`` reads the action from the model's reply (default: the memory's ``parse``, else the first
        tool call, with its coordinates read in ``coords`` on the current screen's recorded size, else
        the reply text). A hook declaring ``screen_size`` receives the current screen's size.
        """
        from causalcache_memory.integrations.langgraph.middleware import CausalCacheMiddleware

        return CausalCacheMiddleware(self, parse=parse)

    def trace_policy(self) -> Any:
        """A LangGraph ``TracePolicy`` recording screenshot references instead of image data, for
        ``builder.add_node(name, node, trace_policy=memory.trace_policy())`` (None with
        ``trace_images=True``, or a langgraph without ``TracePolicy``). See :mod:`.tracing`."""
        from causalcache_memory.integrations.langgraph.tracing import trace_policy

        return None if self.trace_images else trace_policy()

    def tool_screenshot(
        self, screenshot: Any, text: str = "", *, runtime: Any = None, config: Any = None
    ) -> list[dict[str, Any]]:
        """Content blocks for a GUI tool to return: ``text`` and a reference to ``screenshot`` (archived
        now). The tool's own trace span then holds no pixels; the middleware takes the reference as the
        tool's new screen, as it would an image block."""
        from causalcache_memory.integrations.langgraph.images import screenshot_ref

        sha = self.resolve_archive(runtime, config=config).put(screenshot).sha256
        blocks = [{"type": "text", "text": text}] if text else []
        return [*blocks, {"type": "text", "text": screenshot_ref(sha)}]

    def screenshot_message(
        self, screenshot: Any, text: str = "", *, runtime: Any = None, config: Any = None
    ) -> Any:
        """A ``HumanMessage`` with ``text`` and a reference to ``screenshot`` (archived now): the first
        message of a ``create_agent`` run, so not even the input checkpoint holds pixels. With
        ``archive.namespace_keys``, pass the run's ``config`` (the tenant's archive stores it)."""
        from langchain_core.messages import HumanMessage

        from causalcache_memory.integrations.langgraph.images import screenshot_ref

        sha = self.resolve_archive(runtime, config=config).put(screenshot).sha256
        blocks = [{"type": "text", "text": text}] if text else []
        return HumanMessage(content=[*blocks, {"type": "text", "text": screenshot_ref(sha)}])
