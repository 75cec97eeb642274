"""Trajectories: successful (or not) episodes as sequences of steps, independent of any dataset.

A :class:`Trajectory` of ``T`` steps holds screens ``x_1 .. x_{T+1}`` (as archive hashes) and actions
``a_1 .. a_T``. Its decision state at ``t`` is the trace of events ``e_1 .. e_{t-1}`` with current screen
``x_t`` and the gold target ``a_t`` / ``r_t``. Loaders for real datasets (AgentNet/OpenCUA, OSWorld,
MobileWorld) produce this type; the synthetic world's expert produces it too.

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
        action: ``a_t``.
        response: the verbatim policy response ``r_t`` (for demonstrations: a canonical rendering).
        screenshot_before: sha256 of ``x_t``.
        screenshot_after: sha256 of ``x_{t+1}``.
        app: foreground application when the action was taken.
        instruction: the dataset's low-level instruction for this step, if any.
        metadata: small JSON-serializable extras.
    """

    action: Action
    response: str
    screenshot_before: str
    screenshot_after: str
    app: str | None = None
    instruction: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action.to_dict(),
            "response": self.response,
            "screenshot_before": self.screenshot_before,
            "screenshot_after": self.screenshot_after,
            "app": self.app,
            "instruction": self.instruction,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(
            action=Action.from_dict(data["action"]),
            response=str(data["response"]),
            screenshot_before=check_sha256(data["screenshot_before"], what="screenshot_before"),
            screenshot_after=check_sha256(data["screenshot_after"], what="screenshot_after"),
            app=data.get("app"),
            instruction=data.get("instruction"),
            metadata=dict(data.get("metadata") or {}),
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
        """The decision state at ``t`` (1-based): events ``1..t-1`` and current screen ``x_t``."""
        if not 1 <= t <= len(self.steps):
            raise TraceError(
                f"decision t={t} is outside 1..{len(self.steps)} of trajectory {self.trajectory_id}"
            )
        trace = Trace(self.goal, episode_id=self.trajectory_id, platform=self.platform, summarizer=summarizer)
        trace.observe(self.steps[0].screenshot_before)
        for step in self.steps[: t - 1]:
            trace.record(
                step.action,
                step.response,
                step.screenshot_after,
                app=step.app,
                screen_size=self.screen_size,
                instruction=step.instruction,
            )
        if self.steps[t - 1].screenshot_before != trace.current_screenshot:
            trace.observe(self.steps[t - 1].screenshot_before)
        return trace

    def screenshots(self) -> set[str]:
        refs = {s.screenshot_before for s in self.steps}
        refs.update(s.screenshot_after for s in self.steps)
        return refs

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
