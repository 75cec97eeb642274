"""``CausalCacheMiddleware``: the memory inside LangChain ``create_agent``'s model and tool calls.

* ``wrap_model_call`` archives any screenshot still in the conversation (replacing it by a reference),
  renders the memory's prompt from the trace and the archive, calls the model handler for pass 1 and,
  when the allocation displaces a recent step, a second time for pass 2. The final reply is returned
  with a ``Command`` (``ExtendedModelResponse``) writing the new trace-chain head (the step's log record
  and any new screen are one small record in the archive) and the pending step.
* ``wrap_tool_call`` archives the screenshot a GUI tool returns, replaces it by a reference in the
  ``ToolMessage`` and records the executed step with it as the post-action screen. The screen's text,
  when the tool gives it (``Command`` update key ``screen_text``, or ``ToolMessage.artifact=
  {"screen_text": ...}``), is taken out and stored beside the screenshot (:mod:`.text_intake`).

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

from causalcache_memory.errors import TraceError
from causalcache_memory.integrations.langgraph.images import find_screenshot_refs, strip_images
from causalcache_memory.integrations.langgraph.policies import ActionParser
from causalcache_memory.integrations.langgraph.session import Reply, ReplyPolicy, StepSession
from causalcache_memory.integrations.langgraph.state import CausalCacheState
from causalcache_memory.integrations.langgraph.text_intake import take_tool_screen_text

if TYPE_CHECKING:
    from causalcache_memory.archive.base import StoredImage
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory

__all__ = ["CausalCacheAgentState", "CausalCacheMiddleware"]


class CausalCacheAgentState(AgentState, CausalCacheState):
    """``create_agent`` state with the memory's ``cc_*`` keys."""


def _reply(result: Any) -> AIMessage:
    if isinstance(result, AIMessage):
        return result
    for message in getattr(result, "result", []):
        if isinstance(message, AIMessage):
            return message
    raise TraceError(f"the model handler returned no AIMessage ({type(result).__name__})")


def _handler_policy(
    memory: CausalCacheMemory, request: ModelRequest, handler: Callable[..., Any], parse: ActionParser | None
) -> ReplyPolicy:
    """The agent's model handler as the step's policy: each pass calls it with the memory's prompt."""

    def call(messages: list[Any]) -> Reply:
        system = messages.pop(0).text if messages and isinstance(messages[0], SystemMessage) else ""
        result = handler(request.override(messages=messages, system_message=SystemMessage(content=system)))
        return Reply(_reply(result), payload=result)

    user = request.system_message.text if request.system_message is not None else None
    name = getattr(request.model, "model_name", None) or type(request.model).__name__
    return ReplyPolicy(memory, call, name=name, user_system=user, parse=parse)


def _strip_request(messages: list[Any], session: StepSession) -> tuple[list[Any], list[Any], dict]:
    """Messages with screenshots archived; the stripped copies (to write back); what put returned."""
    stripped_all, replaced, stored = [], [], {}
    for message in messages:
        stripped, found = strip_images(message, session.put)
        stripped_all.append(stripped)
        if found:
            replaced.append(stripped)  # keeps its id: add_messages swaps it in place
            stored.update({s.sha256: s for s in found})
    return stripped_all, replaced, stored


def _summary(message: Any) -> bool:
    """A ``SummarizationMiddleware`` summary: text about old steps (it may quote their references), never
    a screen the user sent."""
    return (getattr(message, "additional_kwargs", None) or {}).get("lc_source") == "summarization"


def _new_screen(
    state: Any, messages: list[Any], session: StepSession, stored: dict[str, StoredImage]
) -> None:
    """Observe the newest screen the user sent since the last reply (tool screens are recorded)."""
    last_ai = max((i for i, m in enumerate(messages) if m.type == "ai"), default=-1)
    refs = find_screenshot_refs([m for m in messages[last_ai + 1 :] if m.type == "human" and not _summary(m)])
    trace = session.begin({**state, "messages": messages})
    if refs and refs[-1] != trace.current_screenshot:  # an observation, never a post-action screen
        session.observe(stored.get(refs[-1], refs[-1]))
        session.screen_text(refs[-1], None)  # a message has no screen_text: OCR when configured
    if trace.current_screenshot is None:
        raise TraceError(
            "no screenshot in the conversation: start the run with a message holding the current "
            "screen (an image block, or memory-archived '[screenshot sha256:...]' reference)"
        )


_MEMORY: Any = object()  # trace_policy not given: the memory's (references unless trace_images=True)


class CausalCacheMiddleware(AgentMiddleware):
    """Budgeted fidelity-restoration memory for ``create_agent`` (see the module docstring)."""

    state_schema = CausalCacheAgentState

    def __init__(
        self, memory: CausalCacheMemory, *, parse: ActionParser | None = None, trace_policy: Any = _MEMORY
    ) -> None:
        super().__init__()
        self.memory = memory
        self.parse = parse
        # LangGraph's per-middleware convention: what this middleware's hook spans record (:mod:`.tracing`)
        self.trace_policy = memory.trace_policy() if trace_policy is _MEMORY else trace_policy

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

    def _model_call(
        self, request: ModelRequest, handler: Callable[..., Any]
    ) -> tuple[Any, dict[str, Any] | None]:
        session = StepSession(self.memory, request.runtime, request.state)
        messages, replaced, stored = _strip_request(list(request.messages), session)
        _new_screen(request.state, messages, session, stored)
        policy = _handler_policy(self.memory, request, handler, self.parse)
        session.discard_pending()  # the model is called again: the reply it gives now is the step's action
        decision = session.decide(policy)
        assert policy.last is not None
        result = policy.last.payload
        calls = policy.last.message.tool_calls
        update, record = session.commit(decision, tool_call_id=calls[0].get("id") if calls else None)
        if replaced:
            update["messages"] = replaced
        response = result if isinstance(result, ModelResponse) else ModelResponse(result=[result])
        return ExtendedModelResponse(model_response=response, command=Command(update=update)), record

    def wrap_tool_call(self, request: Any, handler: Callable[..., Any]) -> Any:
        self._reserve(request)
        return self._after_tool(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[..., Any]) -> Any:
        await asyncio.to_thread(self._reserve, request)
        result = await handler(request)
        return await asyncio.to_thread(self._after_tool, request, result)

    def _reserve(self, request: Any) -> None:
        """Claim the thread's next step before the step's tool runs (:meth:`StepSession.reserve`): of
        several processes resuming a dead run, only the one that wins executes the action."""
        state = request.state if isinstance(request.state, dict) else {}
        call_id = (getattr(request, "tool_call", None) or {}).get("id")
        StepSession(self.memory, request.runtime, state).reserve(call_id)

    def _after_tool(self, request: Any, result: Any) -> Any:
        """Archive the screenshot a tool returned and record the executed step with it."""
        state = request.state if isinstance(request.state, dict) else {}
        session = StepSession(self.memory, request.runtime, state)
        label = (getattr(request, "tool_call", None) or {}).get("name", "tool")
        result, text = take_tool_screen_text(result, label)  # kept out of state; stored beside the screen
        if isinstance(result, Command):
            update = result.update if isinstance(result.update, dict) else {}
            stripped_update, found = strip_images(update, session.put)
        else:
            message, found = strip_images(result, session.put)
            stripped_update = {"messages": [message]}
        call_id = (getattr(request, "tool_call", None) or {}).get("id")
        screen = found[-1] if found else _tool_ref(stripped_update)
        if screen is None or not session.awaits(call_id):
            # no screen, or a parallel tool call that is not the step's action: references only
            return result if isinstance(result, Command) and not found else _plain(result, stripped_update)
        sha = screen if isinstance(screen, str) else screen.sha256
        extra: dict[str, Any] = {"cc_screenshot": sha}
        session.screen_text(screen, text)
        if session.trace is not None:
            session.tool_screen(screen)  # records the step (a stale decision: observed only)
            extra.update(session.commit()[0])
        update = {**stripped_update, **extra}
        if isinstance(result, Command):  # the tool's own routing is kept
            return Command(update=update, goto=result.goto, graph=result.graph)
        return Command(update=update)


def _tool_ref(update: dict[str, Any]) -> str | None:
    """The newest ``[screenshot sha256:...]`` reference a tool returned (``memory.tool_screenshot``)."""
    messages = update.get("messages")
    refs = find_screenshot_refs(messages if isinstance(messages, list) else [])
    return refs[-1] if refs else None


def _plain(result: Any, stripped_update: dict[str, Any]) -> Any:
    if isinstance(result, Command):
        return Command(update=stripped_update, goto=result.goto, graph=result.graph)
    return stripped_update["messages"][0]
