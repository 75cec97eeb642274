"""StateGraph nodes of :class:`CausalCacheMemory`: observe/record a screenshot, decide the action.

Each node is wiring around one :class:`~.session.StepSession` (the lifecycle shared with the
middleware): the observe node archives the screenshot, observes it or records the pending step with it,
and commits; the decide node decides through the user's model node (a :class:`~.session.ReplyPolicy`)
or the configured policy and commits the step's log record.

Every executed step is recorded: when the observe node sees a new screen after a decision, the step is
an event whether or not its reply could be parsed (an unparsed reply is kept verbatim with its parse
error, see :meth:`MemoryController.record`).

User functions may be plain or ``async``: an async screenshot or model node makes the memory's node
async too (use ``ainvoke``/``astream``); the controller then runs in a worker thread and each model call
is awaited on the graph's event loop.

Each node's first parameter is annotated with the user's schema merged with
:class:`~.state.CausalCacheState`, so ``StateGraph.add_node`` registers the ``cc_*`` channels itself.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_type_hints

from causalcache_memory.errors import TraceError
from causalcache_memory.integrations.langgraph.images import strip_images
from causalcache_memory.integrations.langgraph.policies import ActionParser, message_text
from causalcache_memory.integrations.langgraph.session import Reply, ReplyPolicy, StepSession, new_trace
from causalcache_memory.integrations.langgraph.state import merge_schema
from causalcache_memory.integrations.langgraph.text_intake import take_screen_text

if TYPE_CHECKING:
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory

__all__ = ["is_async_callable", "make_decide_node", "make_observe_node", "new_trace"]


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a coroutine (``async def`` functions and callables)."""
    call = type(fn).__dict__.get("__call__") if not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))


def call_node(fn: Callable[..., Any], state: dict[str, Any], runtime: Any) -> Any:
    """Call a user node with the arguments it declares (``state`` and optionally ``runtime``/``config``)."""
    params = inspect.signature(fn).parameters
    if "runtime" in params:
        return fn(state, runtime=runtime)
    if "config" in params:
        from langgraph.config import get_config

        return fn(state, config=get_config())
    return fn(state)


async def acall_node(fn: Callable[..., Any], state: dict[str, Any], runtime: Any) -> Any:
    out = call_node(fn, state, runtime)
    return await out if inspect.isawaitable(out) else out


def _sync_only(label: str, kind: str, out: Any) -> Any:
    if inspect.isawaitable(out):
        raise TraceError(
            f"{kind} node {label!r} returned an awaitable from a plain function: declare it "
            "'async def' so the memory awaits it (and run the graph with ainvoke/astream)"
        )
    return out


def _user_schema(fn: Callable[..., Any] | None, schema: type | None) -> type | None:
    if schema is not None or fn is None:
        return schema
    try:
        hints = get_type_hints(fn)
        first = next(iter(inspect.signature(fn).parameters))
    except (NameError, TypeError, StopIteration, ValueError):
        return None
    hint = hints.get(first)
    return hint if isinstance(hint, type) and getattr(hint, "__annotations__", None) else None


def _annotate(node: Callable[..., Any], schema: type, name: str) -> Callable[..., Any]:
    from langgraph.runtime import Runtime

    node.__annotations__ = {"state": schema, "runtime": Runtime, "return": dict}
    node.__name__ = node.__qualname__ = name
    return node


def _observe_step(
    memory: CausalCacheMemory, state: dict[str, Any], runtime: Any, out: Any, spec: tuple[str, bool, bool]
) -> dict[str, Any]:
    """Archive the screenshot the user's node returned; observe it or record the pending step; commit."""
    label, require_pending, unannotated = spec
    session = StepSession(memory, runtime, state)
    out, text = take_screen_text(out, label)  # kept out of state; stored beside the screenshot
    found: list[Any]  # StoredImage from strip_images, or the sha256 reference the node returned
    update: Any
    if isinstance(out, str):
        update, found = {}, [out]
    else:
        update, found = strip_images(out, session.put)
    update = update if isinstance(update, dict) else {}
    if not found:
        raise TraceError(
            f"observe node {label!r} returned no screenshot: return the image (bytes/PIL) or a state "
            "update holding it (raw, or as an image block in a message)"
        )
    session.begin(state, unannotated=label if unannotated else None)
    if require_pending and session.pending is None:
        raise TraceError(f"record node {label!r} ran with no decided step pending; run decide first")
    app = state.get(memory.app_key)
    session.screen(found[-1], app=app if isinstance(app, str) and app else None)
    session.screen_text(found[-1], text)
    return {**update, **session.commit()[0]}


def make_observe_node(
    memory: CausalCacheMemory,
    screenshot_node: Callable[..., Any],
    *,
    schema: type | None,
    require_pending: bool,
) -> Callable[..., Any]:
    user_schema = _user_schema(screenshot_node, schema)
    label = getattr(screenshot_node, "__name__", "screenshot_node")
    spec = (label, require_pending, user_schema is None)

    if is_async_callable(screenshot_node):

        async def aobserve(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
            out = await acall_node(screenshot_node, state, runtime)
            return await asyncio.to_thread(_observe_step, memory, state, runtime, out, spec)

        return _annotate(aobserve, merge_schema(user_schema), f"causalcache_observe[{label}]")

    def observe(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        out = _sync_only(label, "observe", call_node(screenshot_node, state, runtime))
        return _observe_step(memory, state, runtime, out, spec)

    return _annotate(observe, merge_schema(user_schema), f"causalcache_observe[{label}]")


def _system_texts(messages: Any) -> str:
    """The text of the system messages in the user's own conversation (merged into the prompt's)."""
    texts = [
        message_text(m)
        for m in (messages if isinstance(messages, list) else [])
        if getattr(m, "type", None) == "system"
    ]
    return "\n\n".join(t for t in texts if t.strip())


def _node_reply(memory: CausalCacheMemory, label: str, update: Any) -> Reply:
    """A model node's update as a :class:`Reply`: its last message and any ``state[action_key]``."""
    update = update or {}
    if not isinstance(update, dict):
        raise TraceError(
            f"model node {label!r} returned {type(update).__name__}; return a state update dict "
            f"(e.g. {{{memory.messages_key!r}: [reply]}})"
        )
    replies = update.get(memory.messages_key) or []
    replies = replies if isinstance(replies, list) else [replies]
    return Reply(replies[-1] if replies else None, update.get(memory.action_key), dict(update))


def _node_policy(
    memory: CausalCacheMemory,
    state: dict[str, Any],
    label: str,
    call: Callable[..., Any],
    parse: ActionParser | None,
) -> ReplyPolicy:
    def reply(messages: list[Any]) -> Reply:
        return _node_reply(memory, label, call({**state, memory.messages_key: messages}))

    user_system = _system_texts(state.get(memory.messages_key))
    return ReplyPolicy(memory, reply, name=label, user_system=user_system, parse=parse)


def _policy_update(memory: CausalCacheMemory, decision: Any, user_keys: set[str]) -> dict[str, Any]:
    """Without a model node: the decided action and reply, under the user's keys that exist."""
    update: dict[str, Any] = {}
    if memory.action_key in user_keys:
        update[memory.action_key] = decision.action.to_dict() if decision.action else None
    if memory.messages_key in user_keys:
        from langchain_core.messages import AIMessage

        update[memory.messages_key] = [AIMessage(content=decision.response)]
    return update


def _decide_step(
    memory: CausalCacheMemory,
    state: dict[str, Any],
    runtime: Any,
    call: Callable[[dict[str, Any]], Any] | None,
    spec: tuple[str, set[str], ActionParser | None],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One decision; returns the state update and the step record (streamed by the caller)."""
    label, user_keys, parse = spec
    session = StepSession(memory, runtime, state)
    if session.trace is None:
        raise TraceError("decide ran before any screenshot was observed; put the observe node first")
    node = _node_policy(memory, state, label, call, parse) if call is not None else None
    decision = session.decide(node or memory._resolve_policy(runtime))
    if node is not None and node.last is not None:
        update = strip_images(node.last.payload, session.put)[0]
    else:
        update = _policy_update(memory, decision, user_keys)
    cc_update, record = session.commit(decision)
    return {**update, **cc_update}, record  # type: ignore[return-value]


def make_decide_node(
    memory: CausalCacheMemory,
    model_node: Callable[..., Any] | None,
    *,
    schema: type | None,
    parse: ActionParser | None = None,
) -> Callable[..., Any]:
    user_schema = _user_schema(model_node, schema)
    user_keys = set(getattr(user_schema, "__annotations__", {})) if user_schema else set()
    label = getattr(model_node, "__name__", "policy") if model_node else "policy"
    spec = (label, user_keys, parse)
    name = f"causalcache_decide[{label}]"

    if model_node is not None and is_async_callable(model_node):

        async def adecide(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
            loop = asyncio.get_running_loop()

            def call(s: dict[str, Any]) -> Any:  # runs in the worker thread; the node runs on the loop
                return asyncio.run_coroutine_threadsafe(acall_node(model_node, s, runtime), loop).result()

            update, record = await asyncio.to_thread(_decide_step, memory, state, runtime, call, spec)
            runtime.stream_writer(record)  # on the loop thread (stream_mode="custom")
            return update

        return _annotate(adecide, merge_schema(user_schema), name)

    def decide(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        def call(s: dict[str, Any]) -> Any:
            return _sync_only(label, "model", call_node(model_node, s, runtime))  # type: ignore[arg-type]

        update, record = _decide_step(memory, state, runtime, call if model_node else None, spec)
        runtime.stream_writer(record)
        return update

    return _annotate(decide, merge_schema(user_schema), name)
