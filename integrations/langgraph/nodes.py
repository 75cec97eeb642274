"""StateGraph nodes of :class:`CausalCacheMemory`: observe/record a screenshot, decide the action.

Each node loads the trace at ``state['cc_head']`` through the memory's trace store (cached in process),
lets :class:`MemoryController` extend it, commits one small chain record (a compare-and-swap on the
thread's head) and returns the new head: the observe node commits the observation or the recorded step,
the decide node commits the step's log record.

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

from causalcache_memory.actions.mobile import parse_mobile_json
from causalcache_memory.actions.model import ACTION_TYPES, Action
from causalcache_memory.errors import ActionParseError, TraceError
from causalcache_memory.integrations.langgraph.context import episode_id_for
from causalcache_memory.integrations.langgraph.images import SCREENSHOT_REF, strip_images
from causalcache_memory.integrations.langgraph.policies import (
    ActionParser,
    generation_from_message,
    message_text,
    prompt_messages,
    prompt_screen_size,
    response_text,
)
from causalcache_memory.integrations.langgraph.state import head_of, load_trace, merge_schema, state_update
from causalcache_memory.policy import Generation
from causalcache_memory.trace import Trace

if TYPE_CHECKING:
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory
    from causalcache_memory.render.messages import BoundPrompt

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


def new_trace(memory: CausalCacheMemory, state: dict[str, Any], runtime: Any) -> Trace:
    """Start the episode's trace: goal from ``state[goal_key]`` or the first human message."""
    goal = state.get(memory.goal_key)
    if not goal:
        for message in state.get(memory.messages_key) or ():
            if getattr(message, "type", None) == "human":
                goal = SCREENSHOT_REF.sub("", message_text(message)).strip()
                break
    if not isinstance(goal, str) or not goal.strip():
        raise TraceError(
            f"no task instruction: set state[{memory.goal_key!r}] (or pass goal_key=...) or start the "
            "run with a human message holding the instruction"
        )
    platform = memory.config.policy.platform
    return Trace(
        goal, episode_id=episode_id_for(runtime), platform=platform if platform != "auto" else "desktop"
    )


def _observe_step(
    memory: CausalCacheMemory,
    state: dict[str, Any],
    runtime: Any,
    out: Any,
    label: str,
    require_pending: bool,
) -> dict[str, Any]:
    controller = memory.controller(runtime)  # recording only: archives (once) and sizes the screens
    if isinstance(out, str):
        update, shas = {}, [out]
    elif isinstance(out, dict):
        update, shas = strip_images(out, controller.put)
    else:
        update, shas = {}, strip_images(out, controller.put)[1]
    if not shas:
        raise TraceError(
            f"observe node {label!r} returned no screenshot: return the image (bytes/PIL) or a state "
            "update holding it (raw, or as an image block in a message)"
        )
    store = memory.trace_store(runtime)
    head = head_of(state)
    trace = load_trace(state, store)
    if trace is None:  # (test for None: an empty trace is still a trace)
        trace = new_trace(memory, state, runtime)
    pending = state.get("cc_pending")
    if require_pending and not pending:
        raise TraceError(f"record node {label!r} ran with no decided step pending; run decide first")
    if pending:
        if pending.get("t") != trace.t:
            raise TraceError(
                f"thread {trace.episode_id!r}: pending decision is for step {pending.get('t')} but the "
                f"trace is at step {trace.t}"
            )
        app = state.get(memory.app_key)
        controller.record(  # an unparsed reply is recorded too: the agent acted on it
            trace,
            Action.from_dict(pending["action"]) if pending.get("action") else None,
            shas[-1],
            response=pending.get("response") or "",
            app=app if isinstance(app, str) and app else None,
            parse_error=pending.get("parse_error"),
        )
    else:  # the first screen (or a new screen before any decision)
        controller.observe(trace, shas[-1])
    head = store.commit(head, trace)
    memory.note_pending(trace.episode_id, None)
    return {**update, **state_update(head, trace), "cc_pending": None}


def make_observe_node(
    memory: CausalCacheMemory,
    screenshot_node: Callable[..., Any],
    *,
    schema: type | None,
    require_pending: bool,
) -> Callable[..., Any]:
    merged = merge_schema(_user_schema(screenshot_node, schema))
    label = getattr(screenshot_node, "__name__", "screenshot_node")

    if is_async_callable(screenshot_node):

        async def aobserve(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
            out = await acall_node(screenshot_node, state, runtime)
            return await asyncio.to_thread(_observe_step, memory, state, runtime, out, label, require_pending)

        return _annotate(aobserve, merged, f"causalcache_observe[{label}]")

    def observe(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        out = call_node(screenshot_node, state, runtime)
        if inspect.isawaitable(out):
            raise TraceError(
                f"observe node {label!r} returned an awaitable from a plain function: declare it "
                "'async def' so the memory awaits it (and run the graph with ainvoke/astream)"
            )
        return _observe_step(memory, state, runtime, out, label, require_pending)

    return _annotate(observe, merged, f"causalcache_observe[{label}]")


def _system_texts(messages: Any) -> str:
    """The text of the system messages in the user's own conversation (merged into the prompt's)."""
    texts = [
        message_text(m)
        for m in (messages if isinstance(messages, list) else [])
        if getattr(m, "type", None) == "system"
    ]
    return "\n\n".join(t for t in texts if t.strip())


def _raw_action(raw: Any, screen_size: tuple[int, int] | None) -> Action:
    """An action a model node wrote to ``state[action_key]``: an Action, or a dict (own or JSON form)."""
    if isinstance(raw, Action):
        return raw
    if raw.get("type") in ACTION_TYPES and all(
        isinstance(raw.get(k), (int, float)) and 0 <= raw[k] <= 1 for k in ("x", "y", "x2", "y2") if k in raw
    ):
        return Action.from_dict(raw)
    data = dict(raw)
    if "action" not in data and "action_type" not in data and "type" in data:
        data["action"] = data.pop("type")
    return parse_mobile_json(data, screen_size=screen_size)


class NodePolicy:
    """The user's own model node as a :class:`~causalcache_memory.policy.Policy` for one step.

    ``call(state)`` runs the node (directly, or awaited on the graph's event loop for an async node).
    """

    def __init__(
        self,
        memory: CausalCacheMemory,
        node: Callable[..., Any],
        state: dict,
        runtime: Any,
        *,
        call: Callable[[dict[str, Any]], Any] | None = None,
        parse: ActionParser | None = None,
    ) -> None:
        self.memory, self.node, self.state, self.runtime = memory, node, state, runtime
        self.name = getattr(node, "__name__", "model_node")
        self.call = call or (lambda s: call_node(node, s, runtime))
        self.parse = parse
        self.user_system = _system_texts(state.get(memory.messages_key))
        self.last_update: dict[str, Any] = {}

    def generate(self, prompt: BoundPrompt) -> Generation:
        messages = prompt_messages(prompt, user_system=self.user_system or None)
        state = {**self.state, self.memory.messages_key: messages}
        update = self.call(state) or {}
        if not isinstance(update, dict):
            raise TraceError(
                f"model node {self.name!r} returned {type(update).__name__}; return a state update dict "
                f"(e.g. {{{self.memory.messages_key!r}: [reply]}})"
            )
        self.last_update = dict(update)
        replies = update.get(self.memory.messages_key) or []
        replies = replies if isinstance(replies, list) else [replies]
        reply = replies[-1] if replies else None
        raw = update.get(self.memory.action_key)
        size = prompt_screen_size(prompt)
        if isinstance(raw, (dict, Action)):
            text = response_text(reply) if reply is not None else str(raw)
            try:
                return Generation(response=text, action=_raw_action(raw, size))
            except (ActionParseError, ValueError, TypeError) as exc:
                return Generation(response=text, action=None, parse_error=f"{type(exc).__name__}: {exc}")
        if reply is None:
            return Generation(response="", action=None, parse_error="model node returned no reply")
        return generation_from_message(
            reply,
            parse=self.parse or self.memory.parse,
            screen_size=size,
            coords=self.memory.coords,
            platform=self.memory.config.policy.platform,
        )

    def score(self, prompts: Any, targets: Any) -> list[float]:  # pragma: no cover - not used by decide
        raise NotImplementedError("a model node cannot score targets")


def _decide_step(
    memory: CausalCacheMemory,
    model_node: Callable[..., Any] | None,
    state: dict[str, Any],
    runtime: Any,
    user_keys: set[str],
    call: Callable[[dict[str, Any]], Any] | None,
    parse: ActionParser | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One decision; returns the state update and the step record (streamed by the caller)."""
    store = memory.trace_store(runtime)
    head = head_of(state)
    trace = load_trace(state, store)
    if trace is None or trace.current_screenshot is None:
        raise TraceError("decide ran before any screenshot was observed; put the observe node first")
    if state.get("cc_pending"):
        raise TraceError(
            f"thread {trace.episode_id!r}: step {trace.t} was already decided and not recorded; observe "
            "the post-action screen before deciding again"
        )
    node_policy = (
        NodePolicy(memory, model_node, state, runtime, call=call, parse=parse) if model_node else None
    )
    policy = node_policy or memory.resolve_policy(runtime)
    memory.warm_trace(trace, runtime)  # a resumed thread: selector caches filled before the timed call
    controller = memory.controller(runtime, policy)
    try:
        decision = controller.decide(trace)
    finally:
        controller.close()
    record = memory.step_record(decision, trace)
    action = decision.action.to_dict() if decision.action else None
    if node_policy is not None:
        update, _ = strip_images(node_policy.last_update, memory.resolve_archive(runtime).put)
    else:
        update = {}
        if memory.action_key in user_keys:
            update[memory.action_key] = action
        if memory.messages_key in user_keys:
            from langchain_core.messages import AIMessage

            update[memory.messages_key] = [AIMessage(content=decision.response)]
    pending = {
        "t": trace.t,
        "response": decision.response,
        "action": action,
        "parse_error": decision.generation.parse_error,
    }
    head = store.commit(head, trace, [record])
    memory.note_pending(trace.episode_id, pending)
    return {**update, **state_update(head, trace), "cc_pending": pending}, record


def make_decide_node(
    memory: CausalCacheMemory,
    model_node: Callable[..., Any] | None,
    *,
    schema: type | None,
    parse: ActionParser | None = None,
) -> Callable[..., Any]:
    user_schema = _user_schema(model_node, schema)
    merged = merge_schema(user_schema)
    user_keys = set(getattr(user_schema, "__annotations__", {})) if user_schema else set()
    label = getattr(model_node, "__name__", "policy") if model_node else "policy"

    if model_node is not None and is_async_callable(model_node):

        async def adecide(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
            loop = asyncio.get_running_loop()

            def call(s: dict[str, Any]) -> Any:  # runs in the worker thread; the node runs on the loop
                return asyncio.run_coroutine_threadsafe(acall_node(model_node, s, runtime), loop).result()

            update, record = await asyncio.to_thread(
                _decide_step, memory, model_node, state, runtime, user_keys, call, parse
            )
            runtime.stream_writer(record)  # on the loop thread (stream_mode="custom")
            return update

        return _annotate(adecide, merged, f"causalcache_decide[{label}]")

    def decide(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        def call(s: dict[str, Any]) -> Any:
            out = call_node(model_node, s, runtime)  # type: ignore[arg-type]
            if inspect.isawaitable(out):
                raise TraceError(
                    f"model node {label!r} returned an awaitable from a plain function: declare it "
                    "'async def' so the memory awaits it (and run the graph with ainvoke/astream)"
                )
            return out

        update, record = _decide_step(memory, model_node, state, runtime, user_keys, call, parse)
        runtime.stream_writer(record)
        return update

    return _annotate(decide, merged, f"causalcache_decide[{label}]")
