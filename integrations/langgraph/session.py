"""One agent step of one thread, shared by the StateGraph nodes and the ``create_agent`` middleware.

Both doors run the same lifecycle::

    session = StepSession(memory, runtime, state)   # load the trace at state['cc_head'], the pending step
    stored = session.put(screenshot)                 # archive once: hash + the header's size (StoredImage)
    session.screen_text(stored, text)                # its text beside it, off the decision path
    session.begin(state)                             # a new thread: the trace starts with the goal
    session.screen(stored)                           # observe, or record the pending step with it
    decision = session.decide(policy)                # warm a resumed thread, then decide (two-pass)
    update, record = session.commit(decision)        # one chain record, the new head, the pending step

The middleware adds three calls of its own: ``session.observe(stored)`` (a screen the user sent: never a
post-action screen), ``session.discard_pending()`` (the model is called again before a tool returned a
screen) and ``session.awaits(tool_call_id)`` / ``session.tool_screen(stored)`` (a tool's screen records
the step that tool call executed). The session drives the memory's controller, which makes every
allocation (warm-up included); neither door touches the controller or the pending step itself.

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
from causalcache_memory.integrations.langgraph.state import head_of, load_trace, state_update
from causalcache_memory.integrations.langgraph.text_intake import text_for_archive
from causalcache_memory.policy import Generation
from causalcache_memory.trace import Trace

if TYPE_CHECKING:
    from causalcache_memory.archive.base import StoredImage
    from causalcache_memory.controller import StepDecision
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["STEP_EVENT", "PendingStep", "Reply", "ReplyPolicy", "StepSession", "new_trace", "step_record"]

#: ``event`` field of the custom stream events and episode-log records.
STEP_EVENT = "causalcache.step"


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


def step_record(decision: StepDecision, trace: Trace) -> dict[str, Any]:
    """The small JSON record of one decision (stream event and episode-log entry)."""
    return {"event": STEP_EVENT, "episode": trace.episode_id, **decision.to_record()}


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
        self._controller = memory._controller(runtime)
        self._store = memory.trace_store(runtime)
        self.head = head_of(dict(state))
        self.trace: Trace | None = load_trace(dict(state), self._store)
        self._pending = PendingStep.from_state(state.get("cc_pending"))

    @property
    def pending(self) -> PendingStep | None:
        """The decided step awaiting its post-action screen (read-only: :meth:`screen` records it)."""
        return self._pending

    def put(self, screenshot: Any) -> StoredImage:
        """Archive a screenshot once (the ``put`` of :func:`~.images.strip_images`)."""
        return self._controller.put(screenshot)

    def screen_text(self, screenshot: StoredImage | str, text: str | None) -> None:
        """Store the screen's text beside its blob, off the decision path (OCR'd in the background when
        ``text`` is None and ``archive.ocr`` is set; :mod:`.text_intake`). Never part of a prompt."""
        sha = screenshot if isinstance(screenshot, str) else screenshot.sha256
        text = text_for_archive(text, self.memory.screen_texts.warned)
        thread = self.trace.episode_id if self.trace is not None else None
        self.memory.screen_texts.submit(self._controller.archive, sha, text, thread=thread)

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
        pending = self._pending
        if pending is None:  # the first screen (or a new screen before any decision)
            self._controller.observe(trace, screenshot)
            return
        if pending.t != trace.t:
            raise TraceError(
                f"thread {trace.episode_id!r}: pending decision is for step {pending.t} but the trace "
                f"is at step {trace.t}"
            )
        self._controller.record(  # an unparsed reply is recorded too: the agent acted on it
            trace,
            pending.parsed_action(),
            screenshot,
            response=pending.response,
            app=app,
            parse_error=pending.parse_error,
        )
        self._pending = None

    def observe(self, screenshot: StoredImage | str) -> None:
        """Make ``screenshot`` the current screen as an observation, never as a post-action screen (a
        screen the user sent in a message; a pending step stays pending)."""
        self._controller.observe(self._trace(), screenshot)

    def discard_pending(self) -> None:
        """Forget the decided, unrecorded step: the model is called again before any screen came back,
        so the reply it gives now is the step's action (``create_agent``)."""
        self._pending = None

    def awaits(self, tool_call_id: str | None) -> bool:
        """Whether a tool call's screen may be the pending step's post-action screen: False only when the
        pending step was executed by another tool call (a parallel call that is not the step's action)."""
        pending = self._pending
        return not (pending and pending.tool_call_id and tool_call_id != pending.tool_call_id)

    def tool_screen(self, screenshot: StoredImage | str) -> None:
        """A tool's screen: records the pending step with it (:meth:`screen`); a pending decision made at
        another step than the trace's (stale: a resumed thread's tool ran again) is kept and the screen
        only observed."""
        pending, trace = self._pending, self._trace()
        if pending is not None and pending.t != trace.t:
            self.observe(screenshot)
        else:
            self.screen(screenshot)  # the step's tool ran: recorded, parsed or not

    def decide(self, policy: Any) -> StepDecision:
        """Decide step ``t`` with ``policy`` (warming a resumed thread's allocator caches first)."""
        trace = self._trace()
        if trace.current_screenshot is None:
            raise TraceError("decide ran before any screenshot was observed; put the observe node first")
        if self._pending is not None:
            raise TraceError(
                f"thread {trace.episode_id!r}: step {trace.t} was already decided and not recorded; "
                "observe the post-action screen before deciding again"
            )
        self._controller.warm(trace)  # untimed allocation before a resumed thread's first timed one
        self.memory.screen_texts.at_decision(trace.episode_id)  # counts texts ready / late (stats only)
        return self._controller.decide(trace, policy=policy)

    def reserve(self, tool_call_id: str | None = None) -> None:
        """Before the pending step's action runs (its tool call ``tool_call_id``): claim the successor of
        the thread's head for this process (:meth:`TraceStore.reserve`), so that of several processes
        resuming a dead run from one checkpoint only one executes the action; the others raise
        :class:`~causalcache_memory.errors.TraceConflictError` first. Nothing to do without a pending
        step, or for a parallel tool call that is not the step's action."""
        pending = self.pending
        if self.trace is None or pending is None:
            return
        if pending.tool_call_id and tool_call_id and tool_call_id != pending.tool_call_id:
            return
        self._store.reserve(self.trace.episode_id, self.head)

    def commit(
        self, decision: StepDecision | None = None, *, tool_call_id: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Append the step to the thread's chain; the ``cc_*`` state update and the decision's record."""
        trace = self._trace()
        record = None
        if decision is not None:
            record = step_record(decision, trace)
            self._pending = PendingStep(
                t=trace.t,
                response=decision.response,
                action=decision.action.to_dict() if decision.action else None,
                parse_error=decision.generation.parse_error,
                tool_call_id=tool_call_id,
            )
        waits = saver_waits(self.memory)  # else the memory's checkpointer flushes before persisting
        if not waits:
            self.memory.flush_writes()
        self.head = self._store.commit(self.head, trace, [record] if record else [])
        if not waits:  # the chain records and references just handed to the writer
            self.memory.flush_writes()
        pending = self._pending.to_state() if self._pending is not None else None
        self.memory._note_pending(trace.episode_id, pending)
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
        traced = not self.memory.trace_images
        reply = self.last = self.call(prompt_messages(prompt, user_system=self.user_system, traced=traced))
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
