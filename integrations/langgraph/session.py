"""One agent step of one thread, shared by the StateGraph nodes and the ``create_agent`` middleware.

Both doors run the same lifecycle::

    session = StepSession(memory, runtime, state)   # load the trace at state['cc_head'], the pending step
    stored = session.put(screenshot)                 # archive once: hash + the header's size (StoredImage)
    session.screen_text(stored, text)                # its text beside it, off the decision path
    session.begin(state)                             # a new thread: the trace starts with the goal
    session.screen(stored)                           # observe, or record the pending step with it
    decision = session.decide(policy)                # warm a resumed thread, then decide (two-pass)
    update, record = session.commit(decision)        # one chain record, the new head, the pending step

The nodes (:mod:`.nodes`) and the middleware (:mod:`.middleware`) only translate between LangGraph's
shapes (node updates, model requests, tool results) and these calls. The model they call is wrapped by
one adapter, :class:`ReplyPolicy`, whatever calls it (a user's model node or the agent's model handler).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from causalcache_memory.actions.mobile import parse_mobile_json
from causalcache_memory.actions.model import ACTION_TYPES, Action
from causalcache_memory.errors import ActionParseError, TraceError
from causalcache_memory.integrations.langgraph.barrier import saver_waits
from causalcache_memory.integrations.langgraph.context import episode_id_for
from causalcache_memory.integrations.langgraph.images import SCREENSHOT_REF
from causalcache_memory.integrations.langgraph.policies import (
    ActionParser,
    generation_from_message,
    message_text,
    prompt_messages,
    prompt_screen_size,
    response_text,
)
from causalcache_memory.integrations.langgraph.screen_text import text_for_archive
from causalcache_memory.integrations.langgraph.state import head_of, load_trace, state_update
from causalcache_memory.policy import Generation
from causalcache_memory.trace import Trace

if TYPE_CHECKING:
    from causalcache_memory.archive.base import StoredImage
    from causalcache_memory.controller import StepDecision
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["PendingStep", "Reply", "ReplyPolicy", "StepSession", "new_trace"]


@dataclass(frozen=True, slots=True)
class PendingStep:
    """The decided step awaiting its post-action screenshot (kept in state as a plain dict)."""

    t: int
    """The decision index the step was decided at (the trace's ``t`` when it is recorded)."""
    response: str
    """The verbatim reply the action was read from."""
    action: dict[str, Any] | None
    """The action (:meth:`Action.to_dict`), None when the reply held no parsable action."""
    parse_error: str | None = None
    """Why no action could be read from the reply (None when one was)."""
    tool_call_id: str | None = None
    """``create_agent``: id of the tool call that executes the step (its result is the next screen)."""

    @classmethod
    def from_state(cls, value: Any) -> PendingStep | None:
        """From ``state['cc_pending']`` (None, or the dict :meth:`to_state` wrote)."""
        if not value:
            return None
        if not isinstance(value, Mapping) or not isinstance(value.get("t"), int):
            raise TraceError(
                f"state['cc_pending'] = {value!r} is not a pending step written by the memory; do not "
                "overwrite the memory's cc_* keys"
            )
        return cls(
            t=value["t"],
            response=value.get("response") or "",
            action=value.get("action"),
            parse_error=value.get("parse_error"),
            tool_call_id=value.get("tool_call_id"),
        )

    def to_state(self) -> dict[str, Any]:
        """The dict stored in ``state['cc_pending']`` (``tool_call_id`` only when set)."""
        out = asdict(self)
        if out["tool_call_id"] is None:
            del out["tool_call_id"]
        return out

    def parsed_action(self) -> Action | None:
        return Action.from_dict(self.action) if self.action else None


def new_trace(
    memory: CausalCacheMemory, state: Mapping[str, Any], runtime: Any, *, unannotated: str | None = None
) -> Trace:
    """Start the episode's trace: goal from ``state[goal_key]`` or the first human message.

    ``unannotated``: name of a user node whose state parameter has no type annotation (LangGraph then
    hands the memory's wrapper only the memory's own keys), named in the error as its cause.
    """
    goal = state.get(memory.goal_key)
    if not goal:
        for message in state.get(memory.messages_key) or ():
            if getattr(message, "type", None) == "human":
                goal = SCREENSHOT_REF.sub("", message_text(message)).strip()
                break
    if isinstance(goal, str) and goal.strip():
        platform = memory.config.policy.platform
        return Trace(
            goal, episode_id=episode_id_for(runtime), platform=platform if platform != "auto" else "desktop"
        )
    if unannotated is not None:
        raise TraceError(
            f"node {unannotated!r} has no type annotation on its state parameter, so LangGraph passes the "
            f"memory's node only the memory's cc_* keys and it cannot see state[{memory.goal_key!r}] or "
            f"state[{memory.messages_key!r}]: annotate it with your graph's state type (def "
            f"{unannotated}(state: State)) or pass schema=State to the memory's node"
        )
    raise TraceError(
        f"no task instruction: set state[{memory.goal_key!r}] (or pass goal_key=...) or start the "
        "run with a human message holding the instruction"
    )


class StepSession:
    """One step of one thread: load, observe or record, warm, decide, commit (see the module docstring).

    Built per node call (or model/tool call) from the graph state; the controller it drives is the
    memory's, one per archive, built once.
    """

    def __init__(self, memory: CausalCacheMemory, runtime: Any, state: Mapping[str, Any]) -> None:
        self.memory, self.runtime = memory, runtime
        self.controller = memory.controller(runtime)
        self.store = memory.trace_store(runtime)
        self.head = head_of(dict(state))
        self.trace: Trace | None = load_trace(dict(state), self.store)
        self.pending = PendingStep.from_state(state.get("cc_pending"))

    def put(self, screenshot: Any) -> StoredImage:
        """Archive a screenshot once (the ``put`` of :func:`~.images.strip_images`)."""
        return self.controller.put(screenshot)

    def screen_text(self, screenshot: StoredImage | str, text: str | None) -> None:
        """Store the screen's text beside its blob, off the decision path (OCR'd in the background when
        ``text`` is None and ``archive.ocr`` is set; :mod:`.screen_text`). Never part of a prompt."""
        sha = screenshot if isinstance(screenshot, str) else screenshot.sha256
        text = text_for_archive(text, self.memory.screen_texts.warned)
        thread = self.trace.episode_id if self.trace is not None else None
        self.memory.screen_texts.submit(self.controller.archive, sha, text, thread=thread)

    def begin(self, state: Mapping[str, Any], *, unannotated: str | None = None) -> Trace:
        """The loaded trace, or a new one started from ``state`` (goal) on a thread's first step."""
        if self.trace is None:  # (test for None: an empty trace is still a trace)
            self.trace = new_trace(self.memory, state, self.runtime, unannotated=unannotated)
        return self.trace

    def screen(self, screenshot: StoredImage | str, *, app: str | None = None) -> None:
        """The new screen: records the pending step with it as the post-action screen, else observes it.

        A pending step decided at another ``t`` than the trace's is refused (:class:`TraceError`).
        """
        trace = self._trace()
        pending = self.pending
        if pending is None:  # the first screen (or a new screen before any decision)
            self.controller.observe(trace, screenshot)
            return
        if pending.t != trace.t:
            raise TraceError(
                f"thread {trace.episode_id!r}: pending decision is for step {pending.t} but the trace "
                f"is at step {trace.t}"
            )
        self.controller.record(  # an unparsed reply is recorded too: the agent acted on it
            trace,
            pending.parsed_action(),
            screenshot,
            response=pending.response,
            app=app,
            parse_error=pending.parse_error,
        )
        self.pending = None

    def decide(self, policy: Any) -> StepDecision:
        """Decide step ``t`` with ``policy`` (warming a resumed thread's allocator caches first)."""
        trace = self._trace()
        if trace.current_screenshot is None:
            raise TraceError("decide ran before any screenshot was observed; put the observe node first")
        if self.pending is not None:
            raise TraceError(
                f"thread {trace.episode_id!r}: step {trace.t} was already decided and not recorded; "
                "observe the post-action screen before deciding again"
            )
        self.memory.warm_trace(trace, self.runtime)  # untimed allocation before a resumed thread's first
        self.memory.screen_texts.at_decision(trace.episode_id)  # counts texts ready / late (stats only)
        return self.controller.decide(trace, policy=policy)

    def commit(
        self, decision: StepDecision | None = None, *, tool_call_id: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Append the step to the thread's chain; the ``cc_*`` state update and the decision's record."""
        trace = self._trace()
        record = None
        if decision is not None:
            record = self.memory.step_record(decision, trace)
            self.pending = PendingStep(
                t=trace.t,
                response=decision.response,
                action=decision.action.to_dict() if decision.action else None,
                parse_error=decision.generation.parse_error,
                tool_call_id=tool_call_id,
            )
        waits = saver_waits(self.memory)  # else the memory's checkpointer flushes before persisting
        if not waits:
            self.memory.flush_writes()
        self.head = self.store.commit(self.head, trace, [record] if record else [])
        if not waits:  # the chain records and references just handed to the writer
            self.memory.flush_writes()
        pending = self.pending.to_state() if self.pending is not None else None
        self.memory.note_pending(trace.episode_id, pending)
        return {**state_update(self.head, trace), "cc_pending": pending}, record

    def _trace(self) -> Trace:
        if self.trace is None:
            raise TraceError("no trace yet: a screenshot must be observed before this step")
        return self.trace


@dataclass(frozen=True, slots=True)
class Reply:
    """What the model callback of :class:`ReplyPolicy` returned for one pass."""

    message: Any
    """The model's reply (an ``AIMessage``), None when there was none."""
    raw_action: Any = None
    """An action the caller read elsewhere (a model node's ``state[action_key]``: Action or dict)."""
    payload: Any = None
    """The callback's own result (a node's update, the handler's response), kept for the caller."""


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


class ReplyPolicy:
    """The user's model (a model node, the agent's model handler) as a one-step Policy.

    Each pass renders the memory's prompt as LangChain messages (the user's system text merged into
    the memory's), calls ``call(messages) -> Reply`` and reads the action: ``reply.raw_action`` if the
    caller found one, else from the reply (``parse``, else the memory's ``parse``, else the default
    parser with ``coords`` on the current screen's recorded size). :attr:`last` is the final pass's reply.
    """

    def __init__(
        self,
        memory: CausalCacheMemory,
        call: Callable[[list[Any]], Reply],
        *,
        name: str,
        user_system: str | None = None,
        parse: ActionParser | None = None,
    ) -> None:
        self.memory, self.call, self.name = memory, call, name
        self.user_system = user_system or None
        self.parse = parse or memory.parse
        self.last: Reply | None = None

    def generate(self, prompt: BoundPrompt) -> Generation:
        reply = self.last = self.call(prompt_messages(prompt, user_system=self.user_system))
        size = prompt_screen_size(prompt)
        if isinstance(reply.raw_action, (dict, Action)):
            text = response_text(reply.message) if reply.message is not None else str(reply.raw_action)
            try:
                return Generation(response=text, action=_raw_action(reply.raw_action, size))
            except (ActionParseError, ValueError, TypeError) as exc:
                return Generation(response=text, action=None, parse_error=f"{type(exc).__name__}: {exc}")
        if reply.message is None:
            return Generation(response="", action=None, parse_error="model node returned no reply")
        return generation_from_message(
            reply.message,
            parse=self.parse,
            screen_size=size,
            coords=self.memory.coords,
            platform=self.memory.config.policy.platform,
        )

    def score(self, prompts: Any, targets: Any) -> list[float]:  # pragma: no cover - not used by decide
        raise NotImplementedError(f"{self.name}: a model callback cannot score targets")
