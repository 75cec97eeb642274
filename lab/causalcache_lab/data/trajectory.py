"""Trajectories: successful (or not) episodes as sequences of steps, independent of any dataset.

A :class:`Trajectory` of ``T`` steps holds screens ``x_1 .. x_{T+1}`` (as archive hashes) and actions
``a_1 .. a_T``. Event ``e_j = (x_j, a_j, x_{j+1})``; its retained-turn image is the post-action screenshot
``v_j = x_{j+1}``. The decision state at ``t`` is the trace of events ``e_1 .. e_{t-1}`` with current
screen ``x_t`` and the gold target ``a_t`` / ``r_t``. The loaders of :mod:`causalcache_lab.data.
loaders` (AgentNet/OpenCUA, OSWorld, MobileWorld, AndroidControl, recorded CausalCache threads, generic
JSONL; docs/DATA.md) produce this type; the synthetic world's expert produces it too.

Datasets that store only pre-action screens have no ``x_{T+1}`` (the last step's ``screenshot_after`` is
None); datasets that store only post-action screens have no ``x_1`` (the first step's
``screenshot_before`` is None). Neither screen is ever needed: ``e_T`` is never history of a decision of
the same trajectory, and decision ``t = 1`` has no history. An action the loader could not parse is kept
as a step with ``unparsed`` set to the raw text and a ``wait`` placeholder ``action``; mining and the
selector labels never use such a step as a target or as a recurrence.

Stored as JSON Lines (one trajectory per line) with a format version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causalcache_memory._jsonl import read_jsonl, write_jsonl
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import TraceError
from causalcache_memory.summarize import Summarizer
from causalcache_memory.trace import Trace, check_sha256

__all__ = ["TRAJECTORY_FORMAT_VERSION", "Step", "Trajectory", "load_trajectories", "save_trajectories"]

TRAJECTORY_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Step:
    """Step ``t``: ``action`` taken on ``screenshot_before`` (``x_t``) produced ``screenshot_after``.

    Attributes:
        action: ``a_t`` (a ``wait`` placeholder when ``unparsed`` is set).
        response: the verbatim policy response ``r_t`` (for demonstrations: a canonical rendering).
        screenshot_before: sha256 of ``x_t`` (None only for ``t = 1`` of a post-action-screen dataset).
        screenshot_after: sha256 of ``x_{t+1}`` (None only for ``t = T`` of a pre-action-screen dataset).
        app: foreground application when the action was taken (None when the data does not say).
        instruction: the dataset's low-level instruction for this step, if any.
        metadata: small JSON-serializable extras.
        step_id: the dataset's own id of this step (e.g. ``"3"``; ids may have gaps).
        unparsed: the raw action text when the loader could not parse it (the step is kept, not dropped).
    """

    action: Action
    response: str
    screenshot_before: str | None
    screenshot_after: str | None
    app: str | None = None
    instruction: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    step_id: str | None = None
    unparsed: str | None = None

    @property
    def parsed(self) -> bool:
        return self.unparsed is None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "action": self.action.to_dict(),
            "response": self.response,
            "screenshot_before": self.screenshot_before,
            "screenshot_after": self.screenshot_after,
            "app": self.app,
            "instruction": self.instruction,
            "metadata": dict(self.metadata),
        }
        if self.step_id is not None:
            out["step_id"] = self.step_id
        if self.unparsed is not None:
            out["unparsed"] = self.unparsed
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        before, after = data["screenshot_before"], data["screenshot_after"]
        step_id = data.get("step_id")
        return cls(
            action=Action.from_dict(data["action"]),
            response=str(data["response"]),
            screenshot_before=None if before is None else check_sha256(before, what="screenshot_before"),
            screenshot_after=None if after is None else check_sha256(after, what="screenshot_after"),
            app=data.get("app"),
            instruction=data.get("instruction"),
            metadata=dict(data.get("metadata") or {}),
            step_id=None if step_id is None else str(step_id),
            unparsed=data.get("unparsed"),
        )


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One episode.

    Attributes:
        trajectory_id: unique id (also the unit of train/dev/test splits).
        goal: the task instruction ``g``.
        platform: ``desktop`` or ``mobile``.
        screen_size: ``(width, height)`` in pixels.
        steps: the steps in order.
        success: whether the episode achieved its goal.
        metadata: e.g. ``{"split": "memory_critical", "task_id": ...}``.
    """

    trajectory_id: str
    goal: str
    platform: str
    screen_size: tuple[int, int]
    steps: tuple[Step, ...]
    success: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.steps)

    def trace_at(self, t: int, *, summarizer: Summarizer | None = None) -> Trace:
        """The decision state at ``t`` (1-based): events ``1..t-1`` and current screen ``x_t``.

        The trace carries what the live prompt carried where the data recorded it (threads recorded by
        ``CausalCacheMemory``: :mod:`causalcache_memory.lab.learn.threads`): each step's
        ``metadata["screen_size"]`` (the pixel size of ``x_t``, so pixel coordinates parse as they did
        live; default: the trajectory's ``screen_size`` when it is known, i.e. not the ``(1, 1)``
        placeholder), ``metadata["screenshot_size"]`` (of ``x_{t+1}``) and ``metadata["summary"]`` (the
        one-line summary the live prompt showed; used unless ``summarizer`` is given).
        """
        if not 1 <= t <= len(self.steps):
            raise TraceError(
                f"decision t={t} is outside 1..{len(self.steps)} of trajectory {self.trajectory_id}"
            )
        current = self.steps[t - 1].screenshot_before
        if current is None:
            raise TraceError(
                f"decision t={t} of trajectory {self.trajectory_id} has no current screen (the dataset "
                "does not store the screen before the first action)"
            )
        trace = Trace(self.goal, episode_id=self.trajectory_id, platform=self.platform, summarizer=summarizer)
        if self.steps[0].screenshot_before is not None:
            trace.observe(self.steps[0].screenshot_before, size=self._size(0, "screen_size"))
        for i, step in enumerate(self.steps[: t - 1]):
            if step.screenshot_after is None:
                raise TraceError(f"step {step.step_id} of {self.trajectory_id} has no post-action screen")
            summary = step.metadata.get("summary") if summarizer is None else None
            if step.unparsed is not None and summary is None:
                summary = "unparsed action: " + " ".join(step.unparsed.split())[:80]
            trace.record(
                step.action,
                step.response,
                step.screenshot_after,
                app=step.app,
                screen_size=self._size(i, "screen_size"),
                instruction=step.instruction,
                summary=summary,
                screenshot_size=self._size(i, "screenshot_size"),
            )
        trace.observe(current, size=self._size(t - 1, "screen_size"))
        return trace

    def _size(self, index: int, key: str) -> tuple[int, int] | None:
        """Step ``index``'s recorded ``key`` size (``screenshot_size``: else the next step's screen size),
        else the trajectory's ``screen_size`` when known (not the ``(1, 1)`` placeholder), else None."""
        size = self.steps[index].metadata.get(key)
        if not size and key == "screenshot_size" and index + 1 < len(self.steps):
            size = self.steps[index + 1].metadata.get("screen_size")
        if size:
            return (int(size[0]), int(size[1]))
        return self.screen_size if min(self.screen_size) > 1 else None

    def screenshots(self) -> set[str]:
        refs = {s.screenshot_before for s in self.steps} | {s.screenshot_after for s in self.steps}
        refs.discard(None)
        return refs  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": TRAJECTORY_FORMAT_VERSION,
            "trajectory_id": self.trajectory_id,
            "goal": self.goal,
            "platform": self.platform,
            "screen_size": list(self.screen_size),
            "success": self.success,
            "metadata": dict(self.metadata),
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trajectory:
        version = data.get("version", TRAJECTORY_FORMAT_VERSION)
        if version != TRAJECTORY_FORMAT_VERSION:
            raise TraceError(
                f"trajectory format version {version!r} is not supported (expected {TRAJECTORY_FORMAT_VERSION})"
            )
        size = data["screen_size"]
        return cls(
            trajectory_id=str(data["trajectory_id"]),
            goal=str(data["goal"]),
            platform=str(data.get("platform", "desktop")),
            screen_size=(int(size[0]), int(size[1])),
            steps=tuple(Step.from_dict(s) for s in data["steps"]),
            success=bool(data.get("success", True)),
            metadata=dict(data.get("metadata") or {}),
        )


def save_trajectories(path: str | Path, trajectories: Iterable[Trajectory]) -> int:
    """Write trajectories as JSON Lines; returns how many were written."""
    return write_jsonl(path, (traj.to_dict() for traj in trajectories))


def load_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """Read trajectories written by :func:`save_trajectories`."""
    return read_jsonl(path, Trajectory.from_dict, what="trajectory record", error=TraceError)
