"""``CausalCacheMiddleware``: the memory inside LangChain ``create_agent``'s model and tool calls.

* ``wrap_model_call`` archives any screenshot still in the conversation (replacing it by a reference),
  renders the memory's prompt from the trace and the archive, calls the model handler for pass 1 and,
  when the allocation displaces a recent step, a second time for pass 2. The final reply is returned
  with a ``Command`` (``ExtendedModelResponse``) writing the new trace-chain head (the step's log record
  and any new screen are one small record in the archive) and the pending step.
* ``wrap_tool_call`` archives the screenshot a GUI tool returns, replaces it by a reference in the
  ``ToolMessage`` and records the executed step with it as the post-action screen.

State stays O(1) in the episode length: only ``cc_head``/``cc_episode``/``cc_t``/``cc_screenshot``/``cc_pending`` (see
:mod:`.state`); the trace and log are read through the memory's trace store.

GUI agents act once per step: one tool call per model reply is recorded (the first). Tool arguments
are read in the memory's coordinate convention (``coords``) on the current screen's recorded size, so
``click(x=1650, y=1040)`` on a 1920x1080 screen is a pixel click. A tool call whose arguments cannot be
parsed is still executed by the agent and still recorded (verbatim, with its parse error) when its tool
returns the next screen.

The agent's own system prompt and the memory's become one system message (agent's text first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.types import Command

from causalcache_memory.actions.model import Action
from causalcache_memory.errors import TraceError
from causalcache_memory.integrations.langgraph.images import find_screenshot_refs, strip_images
from causalcache_memory.integrations.langgraph.nodes import new_trace
from causalcache_memory.integrations.langgraph.policies import (
    ActionParser,
    generation_from_message,
    prompt_messages,
    prompt_screen_size,
)
from causalcache_memory.integrations.langgraph.state import (
    CausalCacheState,
    head_of,
    load_trace,
    state_update,
)
from causalcache_memory.policy import Generation

if TYPE_CHECKING:
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["CausalCacheAgentState", "CausalCacheMiddleware"]


class CausalCacheAgentState(AgentState, CausalCacheState):  # type: ignore[misc]
    """``create_agent`` state with the memory's ``cc_*`` keys."""


class _HandlerPolicy:
    """The agent's model handler as a policy: each pass calls ``handler`` with the rendered prompt."""

    def __init__(
        self,
        request: ModelRequest,
        handler: Callable[..., Any],
        parse: ActionParser | None,
        memory: CausalCacheMemory,
    ) -> None:
        self.request, self.handler, self.parse, self.memory = request, handler, parse, memory
        self.name = getattr(request.model, "model_name", None) or type(request.model).__name__
        self.last: ModelResponse | AIMessage | None = None

    def generate(self, prompt: BoundPrompt) -> Generation:
        user = self.request.system_message.text if self.request.system_message is not None else None
        messages = prompt_messages(prompt, user_system=user)
        system = messages.pop(0).text if messages and isinstance(messages[0], SystemMessage) else ""
        request = self.request.override(messages=messages, system_message=SystemMessage(content=system))
        self.last = self.handler(request)
        return generation_from_message(
            _reply(self.last),
            parse=self.parse or self.memory.parse,
            screen_size=prompt_screen_size(prompt),
            coords=self.memory.coords,
            platform=self.memory.config.policy.platform,
        )

    def score(self, prompts: Any, targets: Any) -> list[float]:  # pragma: no cover - not used
        raise NotImplementedError("the agent's model handler cannot score targets")


def _reply(result: Any) -> AIMessage:
    if isinstance(result, AIMessage):
        return result
    for message in getattr(result, "result", []):
        if isinstance(message, AIMessage):
            return message
    raise TraceError(f"the model handler returned no AIMessage ({type(result).__name__})")


def _plain(result: Any, stripped_update: dict[str, Any], message: Any) -> Any:
    if isinstance(result, Command):
        return Command(update=stripped_update, goto=result.goto, graph=result.graph)
    return message


class CausalCacheMiddleware(AgentMiddleware):
    """Budgeted fidelity-restoration memory for ``create_agent`` (see the module docstring)."""

    state_schema = CausalCacheAgentState

    def __init__(self, memory: CausalCacheMemory, *, parse: ActionParser | None = None) -> None:
        super().__init__()
        self.memory = memory
        self.parse = parse

    def wrap_model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> Any:
        result, record = self._model_call(request, handler)
        request.runtime.stream_writer(record)
        return result

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> Any:
        """Async form: the controller runs in a worker thread; each pass awaits ``handler`` on this loop."""
        loop = asyncio.get_running_loop()

        def call(req: ModelRequest) -> Any:
            return asyncio.run_coroutine_threadsafe(handler(req), loop).result()

        result, record = await asyncio.to_thread(self._model_call, request, call)
        request.runtime.stream_writer(record)
        return result

    def _model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> tuple[Any, dict[str, Any]]:
        memory, runtime, state = self.memory, request.runtime, request.state
        controller = memory.controller(runtime, _HandlerPolicy(request, handler, self.parse, memory))
        messages, replaced = [], []  # replaced: stripped copies keeping their ids (add_messages swaps them)
        for message in request.messages:
            stripped, shas = strip_images(message, controller.put)
            messages.append(stripped)
            if shas:
                replaced.append(stripped)
        store = memory.trace_store(runtime)
        head = head_of(state)
        trace = load_trace(state, store)
        if trace is None:  # (test for None: an empty trace is still a trace)
            trace = new_trace(memory, {**state, "messages": messages}, runtime)
        last_ai = max((i for i, m in enumerate(messages) if m.type == "ai"), default=-1)
        refs = find_screenshot_refs([m for m in messages[last_ai + 1 :] if m.type == "human"])
        if refs and refs[-1] != trace.current_screenshot:
            controller.observe(trace, refs[-1])  # the user sent a new screen (tool screens are recorded)
        if trace.current_screenshot is None:
            raise TraceError(
                "no screenshot in the conversation: start the run with a message holding the current "
                "screen (an image block, or memory-archived '[screenshot sha256:...]' reference)"
            )
        memory.warm_trace(trace, runtime)  # a resumed thread: selector caches filled before the timed call
        try:
            decision = controller.decide(trace)
        finally:
            controller.close()
        record = memory.step_record(decision, trace)
        policy = controller.policy
        assert isinstance(policy, _HandlerPolicy) and policy.last is not None
        result = policy.last
        response = result if isinstance(result, ModelResponse) else ModelResponse(result=[result])
        action = decision.action.to_dict() if decision.action else None
        calls = _reply(result).tool_calls
        pending = {
            "t": trace.t,
            "response": decision.response,
            "action": action,
            "parse_error": decision.generation.parse_error,
            "tool_call_id": calls[0].get("id") if calls else None,
        }
        update = {**state_update(store.commit(head, trace, [record]), trace), "cc_pending": pending}
        memory.note_pending(trace.episode_id, pending)
        if replaced:
            update["messages"] = replaced
        return ExtendedModelResponse(model_response=response, command=Command(update=update)), record

    def wrap_tool_call(self, request: Any, handler: Callable[..., Any]) -> Any:
        return self._after_tool(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[..., Any]) -> Any:
        result = await handler(request)
        return await asyncio.to_thread(self._after_tool, request, result)

    def _after_tool(self, request: Any, result: Any) -> Any:
        """Archive the screenshot a tool returned and record the executed step with it."""
        controller = self.memory.controller(request.runtime)
        if isinstance(result, Command):
            update = result.update if isinstance(result.update, dict) else {}
            stripped_update, shas = strip_images(update, controller.put)
            message = None
        else:
            message, shas = strip_images(result, controller.put)
            stripped_update = {"messages": [message]}
        state = request.state if isinstance(request.state, dict) else {}
        pending = state.get("cc_pending") or {}
        call_id = (getattr(request, "tool_call", None) or {}).get("id")
        if not shas or (pending.get("tool_call_id") and call_id != pending["tool_call_id"]):
            # no screen, or a parallel tool call that is not the step's action: references only
            return (
                result
                if isinstance(result, Command) and not shas
                else _plain(result, stripped_update, message)
            )
        store = self.memory.trace_store(request.runtime)
        head = head_of(state)
        trace = load_trace(state, store)
        extra: dict[str, Any] = {"cc_screenshot": shas[-1]}
        if trace is not None:
            if pending and pending.get("t") == trace.t:  # the step's tool ran: record it, parsed or not
                action = Action.from_dict(pending["action"]) if pending.get("action") else None
                controller.record(
                    trace,
                    action,
                    shas[-1],
                    response=pending.get("response") or "",
                    parse_error=pending.get("parse_error"),
                )
                extra["cc_pending"] = None
                self.memory.note_pending(trace.episode_id, None)
            else:
                controller.observe(trace, shas[-1])
            extra.update(state_update(store.commit(head, trace), trace))
        if isinstance(result, Command):
            return Command(update={**stripped_update, **extra}, goto=result.goto, graph=result.graph)
        return Command(update={**stripped_update, **extra})
