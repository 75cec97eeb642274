"""The complete, append-only event trace of one episode.

At decision ``t`` the history is ``H_t = {e_1, ..., e_{t-1}}`` with ``e_j = (x_j, a_j, x_{j+1})``
(paper, Problem Formulation). Each :class:`Event` keeps its low-fidelity form (the one-line summary) and
the references needed for its high-fidelity form ``(r_j, v_j)``: the verbatim policy response and the
content hash of the archived post-action screenshot ``v_j = x_{j+1}``. Pixels never live in the trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from causalcache_memory.actions.model import Action
from causalcache_memory.errors import TraceError
from causalcache_memory.summarize import Summarizer, default_summarizer

__all__ = ["Event", "Trace", "check_sha256"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
TRACE_FORMAT_VERSION = 1


def check_sha256(value: object, *, what: str = "screenshot") -> str:
    """Return ``value`` if it is a lower-case sha256 hex digest, else raise :class:`TraceError`."""
    if not isinstance(value, str) or not _SHA256.match(value):
        raise TraceError(
            f"{what}={value!r} is not a sha256 content hash (64 lower-case hex characters); "
            "store the screenshot with ScreenshotArchive.put() and pass the hash it returns"
        )
    return value


@dataclass(frozen=True, slots=True)
class Event:
    """One past step ``e_j = (x_j, a_j, x_{j+1})``.

    Attributes:
        index: ``j``, 1-based and contiguous within a trace.
        action: the structured action ``a_j``.
        response: the verbatim policy response ``r_j`` that produced the action.
        summary: the one-line low-fidelity form, always rendered.
        screenshot: sha256 of the archived post-action screenshot ``v_j = x_{j+1}``.
        pre_screenshot: sha256 of ``x_j``, the screen the action was taken on (None if unknown).
        app: application in the foreground when the action was taken (metadata, may be None).
        platform: ``desktop`` or ``mobile``.
        screen_size: ``(width, height)`` in pixels of the screen the action refers to.
        metadata: small JSON-serializable extras (dataset ids, timings). An executed step whose reply
            could not be parsed carries ``{"unparsed": True, "parse_error": ...}`` (see :meth:`Trace.record`).
        screenshot_size: ``(width, height)`` of the post-action screenshot ``v_j``, recorded when it was
            archived (None in records written before this field existed).
    """

    index: int
    action: Action
    response: str
    summary: str
    screenshot: str
    pre_screenshot: str | None = None
    app: str | None = None
    platform: str = "desktop"
    screen_size: tuple[int, int] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    screenshot_size: tuple[int, int] | None = None

    @property
    def unparsed(self) -> bool:
        """Whether this executed step's reply held no parsable action (its ``action`` is a placeholder)."""
        return bool(self.metadata.get("unparsed"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "action": self.action.to_dict(),
            "response": self.response,
            "summary": self.summary,
            "screenshot": self.screenshot,
            "pre_screenshot": self.pre_screenshot,
            "app": self.app,
            "platform": self.platform,
            "screen_size": list(self.screen_size) if self.screen_size else None,
            "metadata": dict(self.metadata),
        }
        if self.screenshot_size is not None:  # omitted when unknown: older records hash the same
            out["screenshot_size"] = list(self.screenshot_size)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        try:
            size = data.get("screen_size")
            post = data.get("screenshot_size")
            return cls(
                index=int(data["index"]),
                action=Action.from_dict(data["action"]),
                response=str(data["response"]),
                summary=str(data["summary"]),
                screenshot=check_sha256(data["screenshot"]),
                pre_screenshot=(
                    check_sha256(data["pre_screenshot"], what="pre_screenshot")
                    if data.get("pre_screenshot")
                    else None
                ),
                app=data.get("app"),
                platform=str(data.get("platform", "desktop")),
                screen_size=(int(size[0]), int(size[1])) if size else None,
                metadata=dict(data.get("metadata") or {}),
                screenshot_size=_size(post, "screenshot_size"),
            )
        except KeyError as exc:
            raise TraceError(f"event record is missing field {exc.args[0]!r}: {dict(data)!r}") from exc


def _size(value: Any, what: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        width, height = (int(v) for v in value)
    except (TypeError, ValueError):
        raise TraceError(f"{what}={value!r} must be (width, height) in pixels") from None
    if width < 1 or height < 1:
        raise TraceError(f"{what}={value!r} must be (width, height) in pixels, both >= 1")
    return width, height


class Trace:
    """Complete append-only history of one episode plus its current screen.

    ``t`` is the index of the *next* decision: with ``n`` recorded events, ``t = n + 1``.
    The current observation ``x_t`` is tracked separately (:meth:`observe`), because the first decision
    has a screen but no event yet.
    """

    def __init__(
        self,
        goal: str,
        *,
        episode_id: str = "episode",
        platform: str = "desktop",
        summarizer: Summarizer | None = None,
    ) -> None:
        if not isinstance(goal, str) or not goal.strip():
            raise TraceError(f"goal={goal!r} must be a non-empty instruction string")
        self.goal = goal
        self.episode_id = episode_id
        self.platform = platform
        self.summarizer: Summarizer = summarizer or default_summarizer
        self._events: list[Event] = []
        self.current_screenshot: str | None = None
        #: ``(width, height)`` of the current screen when known (recorded when it was archived)
        self.current_screen_size: tuple[int, int] | None = None

    # ------------------------------------------------------------------ access
    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(self._events)

    @property
    def t(self) -> int:
        """Index of the next decision (``len(events) + 1``)."""
        return len(self._events) + 1

    def __len__(self) -> int:
        return len(self._events)

    def __bool__(self) -> bool:
        """A trace is always truthy, even before its first event (``trace or new`` must not replace it)."""
        return True

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def event(self, index: int) -> Event:
        """The event with 1-based ``index``."""
        if not 1 <= index <= len(self._events):
            raise TraceError(f"event index {index} is outside 1..{len(self._events)} of this trace")
        return self._events[index - 1]

    def summaries(self) -> list[str]:
        return [e.summary for e in self._events]

    def screenshots(self) -> set[str]:
        """Every content hash this trace references (for archive retention)."""
        refs = {e.screenshot for e in self._events}
        refs.update(e.pre_screenshot for e in self._events if e.pre_screenshot)
        if self.current_screenshot:
            refs.add(self.current_screenshot)
        return refs

    # ------------------------------------------------------------------ mutation (append-only)
    def observe(self, screenshot: str, *, size: tuple[int, int] | None = None) -> None:
        """Set the current observation ``x_t`` (a content hash) and, when known, its pixel size."""
        self.current_screenshot = check_sha256(screenshot, what="current screenshot")
        self.current_screen_size = _size(size, "current screen size")

    def record(
        self,
        action: Action,
        response: str,
        screenshot: str,
        *,
        app: str | None = None,
        screen_size: tuple[int, int] | None = None,
        summary: str | None = None,
        instruction: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        screenshot_size: tuple[int, int] | None = None,
    ) -> Event:
        """Append event ``e_t``: ``action`` was taken on the current screen and produced ``screenshot``.

        The new screenshot becomes the current observation (``screenshot_size`` its pixel size). The
        summary is written by the trace's summarizer unless given. ``screen_size`` defaults to the
        current screen's recorded size (the screen the action was taken on).
        """
        if not isinstance(action, Action):
            raise TraceError(f"action must be an Action, got {type(action).__name__}")
        check_sha256(screenshot, what="post-action screenshot")
        index = len(self._events) + 1
        if screen_size is None:
            screen_size = self.current_screen_size
        post_size = _size(screenshot_size, "screenshot_size")
        if summary is None:
            summary = self.summarizer(
                index, action, app=app, screen_size=screen_size, instruction=instruction
            )
        if "\n" in summary:
            raise TraceError(f"summary of event {index} must be one line, got {summary!r}")
        event = Event(
            index=index,
            action=action,
            response=str(response),
            summary=summary,
            screenshot=screenshot,
            pre_screenshot=self.current_screenshot,
            app=app,
            platform=self.platform,
            screen_size=screen_size,
            metadata=dict(metadata or {}),
            screenshot_size=post_size,
        )
        self._events.append(event)
        self.current_screenshot = screenshot
        self.current_screen_size = post_size
        return event

    def append(self, event: Event) -> Event:
        """Append an already-built event; its index must be the next one."""
        if event.index != len(self._events) + 1:
            raise TraceError(
                f"trace is append-only with contiguous indices: expected event {len(self._events) + 1}, "
                f"got {event.index}"
            )
        check_sha256(event.screenshot)
        self._events.append(event)
        self.current_screenshot = event.screenshot
        self.current_screen_size = event.screenshot_size
        return event

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": TRACE_FORMAT_VERSION,
            "episode_id": self.episode_id,
            "goal": self.goal,
            "platform": self.platform,
            "current_screenshot": self.current_screenshot,
            "events": [e.to_dict() for e in self._events],
        }
        if self.current_screen_size is not None:
            out["current_screen_size"] = list(self.current_screen_size)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, summarizer: Summarizer | None = None) -> Trace:
        version = data.get("version", TRACE_FORMAT_VERSION)
        if version != TRACE_FORMAT_VERSION:
            raise TraceError(
                f"trace format version {version!r} is not supported (expected {TRACE_FORMAT_VERSION})"
            )
        trace = cls(
            str(data.get("goal", "")),
            episode_id=str(data.get("episode_id", "episode")),
            platform=str(data.get("platform", "desktop")),
            summarizer=summarizer,
        )
        for raw in data.get("events", []):
            trace.append(Event.from_dict(raw))
        if data.get("current_screenshot"):
            trace.observe(data["current_screenshot"], size=data.get("current_screen_size"))
        return trace

    @classmethod
    def from_events(cls, goal: str, events: Sequence[Event], **kwargs: Any) -> Trace:
        trace = cls(goal, **kwargs)
        for event in events:
            trace.append(event)
        return trace
