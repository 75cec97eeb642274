"""StateGraph nodes of :class:`CausalCacheMemory`: observe/record a screenshot, decide the action.

Each node loads the trace at ``state['cc_head']`` through the memory's trace store (cached in process),
lets :class:`MemoryController` extend it, commits one small chain record and returns the new head: the
observe node commits the observation or the recorded step, the decide node commits the step's log record.

Each node's first parameter is annotated with the user's schema merged with
:class:`~.state.CausalCacheState`, so ``StateGraph.add_node`` registers the ``cc_*`` channels itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_type_hints

from causalcache_memory.actions.model import Action
from causalcache_memory.errors import TraceError
from causalcache_memory.integrations.langgraph.context import episode_id_for
from causalcache_memory.integrations.langgraph.images import SCREENSHOT_REF, strip_images
from causalcache_memory.integrations.langgraph.policies import (
    generation_from_message,
    message_text,
    prompt_messages,
    response_text,
)
from causalcache_memory.integrations.langgraph.state import head_of, load_trace, merge_schema, state_update
from causalcache_memory.policy import Generation
from causalcache_memory.trace import Trace

if TYPE_CHECKING:
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["make_decide_node", "make_observe_node"]


def call_node(fn: Callable[..., Any], state: dict[str, Any], runtime: Any) -> Any:
    """Call a user node with the arguments it declares (``state`` and optionally ``runtime``/``config``)."""
    params = inspect.signature(fn).parameters
    if "runtime" in params:
        return fn(state, runtime=runtime)
    if "config" in params:
        from langgraph.config import get_config

        return fn(state, config=get_config())
    return fn(state)


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


def make_observe_node(
    memory: CausalCacheMemory,
    screenshot_node: Callable[..., Any],
    *,
    schema: type | None,
    require_pending: bool,
) -> Callable[..., Any]:
    merged = merge_schema(_user_schema(screenshot_node, schema))
    label = getattr(screenshot_node, "__name__", "screenshot_node")

    def observe(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        archive = memory.resolve_archive(runtime)
        out = call_node(screenshot_node, state, runtime)
        if isinstance(out, str):
            update, shas = {}, [out]
        elif isinstance(out, dict):
            update, shas = strip_images(out, archive.put)
        else:
            update, shas = {}, strip_images(out, archive.put)[1]
        if not shas:
            raise TraceError(
                f"observe node {label!r} returned no screenshot: return the image (bytes/PIL) or a state "
                "update holding it (raw, or as an image block in a message)"
            )
        store = memory.trace_store(runtime)
        head = head_of(state)
        trace = load_trace(state, store)
        if trace is None:  # (a Trace with no events is falsy: test for None)
            trace = new_trace(memory, state, runtime)
        controller = memory.controller(runtime)
        pending = state.get("cc_pending")
        if require_pending and not pending:
            raise TraceError(f"record node {label!r} ran with no decided step pending; run decide first")
        if pending and pending.get("action"):
            if pending.get("t") != trace.t:
                raise TraceError(
                    f"pending decision is for step {pending.get('t')} but the trace is at step {trace.t}"
                )
            app = state.get(memory.app_key)
            controller.record(
                trace,
                Action.from_dict(pending["action"]),
                shas[-1],
                response=pending["response"],
                app=app if isinstance(app, str) and app else None,
                screen_size=memory.screen_size(archive, trace.current_screenshot),
            )
        else:  # first screen, or the reply had no executable action: nothing was done
            controller.observe(trace, shas[-1])
        head = store.commit(head, trace)
        return {**update, **state_update(head, trace), "cc_pending": None}

    return _annotate(observe, merged, f"causalcache_observe[{label}]")


class NodePolicy:
    """The user's own model node as a :class:`~causalcache_memory.policy.Policy` for one step."""

    def __init__(
        self, memory: CausalCacheMemory, node: Callable[..., Any], state: dict, runtime: Any
    ) -> None:
        self.memory, self.node, self.state, self.runtime = memory, node, state, runtime
        self.name = getattr(node, "__name__", "model_node")
        self.last_update: dict[str, Any] = {}

    def generate(self, prompt: BoundPrompt) -> Generation:
        state = {**self.state, self.memory.messages_key: prompt_messages(prompt)}
        update = call_node(self.node, state, self.runtime) or {}
        self.last_update = dict(update)
        replies = update.get(self.memory.messages_key) or []
        replies = replies if isinstance(replies, list) else [replies]
        reply = replies[-1] if replies else None
        raw = update.get(self.memory.action_key)
        if isinstance(raw, dict):
            text = response_text(reply) if reply is not None else str(raw)
            return Generation(response=text, action=Action.from_dict(raw))
        if isinstance(raw, Action):
            return Generation(response=response_text(reply) if reply is not None else str(raw), action=raw)
        if reply is None:
            return Generation(response="", action=None, parse_error="model node returned no reply")
        return generation_from_message(reply)

    def score(self, prompts: Any, targets: Any) -> list[float]:  # pragma: no cover - not used by decide
        raise NotImplementedError("a model node cannot score targets")


def make_decide_node(
    memory: CausalCacheMemory, model_node: Callable[..., Any] | None, *, schema: type | None
) -> Callable[..., Any]:
    user_schema = _user_schema(model_node, schema)
    merged = merge_schema(user_schema)
    user_keys = set(getattr(user_schema, "__annotations__", {})) if user_schema else set()
    label = getattr(model_node, "__name__", "policy") if model_node else "policy"

    def decide(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        store = memory.trace_store(runtime)
        head = head_of(state)
        trace = load_trace(state, store)
        if trace is None or trace.current_screenshot is None:
            raise TraceError("decide ran before any screenshot was observed; put the observe node first")
        if state.get("cc_pending"):
            raise TraceError(
                f"step {trace.t} was already decided and not recorded; observe the post-action screen "
                "before deciding again"
            )
        node_policy = NodePolicy(memory, model_node, state, runtime) if model_node else None
        policy = node_policy or memory.resolve_policy(runtime)
        controller = memory.controller(runtime, policy)
        try:
            decision = controller.decide(trace)
        finally:
            controller.close()
        record = memory.step_record(decision, trace)
        runtime.stream_writer(record)
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
        pending = {"t": trace.t, "response": decision.response, "action": action}
        head = store.commit(head, trace, [record])
        return {**update, **state_update(head, trace), "cc_pending": pending}

    return _annotate(decide, merged, f"causalcache_decide[{label}]")
