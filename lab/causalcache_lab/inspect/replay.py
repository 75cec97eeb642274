"""Replay recorded trajectories through the configured memory and keep each decision's facts.

Each trajectory is replayed from its first step with a pre-action screen (a dataset that stores no
``x_1``, such as OSWorld, starts at step 2). The policy emits the recorded action (the witness a deployed
policy would propose), so the controller's allocator, guard, threshold and two-pass re-decision run exactly
as deployed; only the selector's wall-clock timeout is off, so a loaded machine cannot change the answer.

Events (paper, Problem Formulation): event ``j`` is replayed step ``j``, its action and the screen after it
(``x_{j+1}``, what a restore shows); decision ``t`` sees events ``1 .. t-1`` and Recent-B is the last ``B`` of them. A decision *could swap* when some
event lies outside Recent-B (``B < t - 1``); it is *declined* when the allocator fell back to Recent-B for
a reason (``fallback``: ``ood`` = the guard found the decision far from its training data, ``ood_group``
the feature group that was farthest; ``timeout``; ...); its *swaps* ``k`` are the Recent-B events it
replaced, and *restored* the older events it brought back instead.
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from causalcache_lab.data.trajectory import Trajectory
from causalcache_memory import Generation, Trace
from causalcache_memory.config import CausalCacheConfig
from causalcache_memory.decisions.counts import swap_possible
from causalcache_memory.errors import ConfigError

__all__ = ["DecisionRow", "InspectReport", "TrajectoryReport", "inspect_dataset", "replay_trajectory"]


@dataclass(frozen=True)
class DecisionRow:
    """One decision of a replay (fields as in the module docstring)."""

    t: int
    budget: int
    could_swap: bool
    fallback: str | None
    ood_group: str | None
    swaps: int
    selected: tuple[int, ...]
    recent: tuple[int, ...]
    action: str
    top_gain: float | None = None
    min_gain: float | None = None

    @property
    def declined(self) -> bool:
        """The allocator could have swapped but fell back to Recent-B."""
        return self.could_swap and self.fallback is not None

    @property
    def restored(self) -> tuple[int, ...]:
        """Events outside Recent-B that this decision restored (the swaps' replacements)."""
        return tuple(e for e in self.selected if e not in self.recent)

    @property
    def why(self) -> str:
        """Plain words for the table: declined and why, swapped, kept Recent-B, or no choice."""
        if not self.could_swap:
            return "no choice (every event fits in B)"
        if self.fallback == "ood":
            return f"declined: guard, far group {self.ood_group or '?'}"
        if self.fallback:
            return f"declined: {self.fallback}"
        gain = (
            f"top gain {self.top_gain:.3f} vs threshold {self.min_gain:.3f}"
            if self.top_gain is not None and self.min_gain is not None
            else ""
        )
        if self.swaps:
            return f"swapped {self.swaps}" + (f" ({gain})" if gain else "")
        return f"kept Recent-B ({gain or 'no gain above the threshold'})"


@dataclass(frozen=True)
class TrajectoryReport:
    """One replayed trajectory: its decisions; ``screens[0]`` is the first screen ``x_1`` and
    ``screens[j]`` the screen of event ``j`` (``x_{j+1}``), as sha256."""

    trajectory_id: str
    platform: str
    goal: str
    decisions: tuple[DecisionRow, ...]
    screens: tuple[str, ...]

    @property
    def could_swap(self) -> int:
        return sum(d.could_swap for d in self.decisions)

    @property
    def declined(self) -> int:
        return sum(d.declined for d in self.decisions)

    @property
    def swapped(self) -> int:
        """Decisions that restored at least one older event."""
        return sum(d.swaps > 0 for d in self.decisions)

    @property
    def far_groups(self) -> dict[str, int]:
        return dict(Counter(d.ood_group or "?" for d in self.decisions if d.declined and d.fallback == "ood"))


@dataclass(frozen=True)
class InspectReport:
    """The replay of a whole dataset: per trajectory, totals, and the memory's own warnings."""

    dataset: str
    budget: int
    allocator: str
    trajectories: tuple[TrajectoryReport, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def decisions(self) -> int:
        return sum(len(t.decisions) for t in self.trajectories)

    @property
    def could_swap(self) -> int:
        return sum(t.could_swap for t in self.trajectories)

    @property
    def declined(self) -> int:
        return sum(t.declined for t in self.trajectories)

    @property
    def declined_share(self) -> float:
        """Declined / could-swap decisions (0 when none could swap)."""
        return self.declined / self.could_swap if self.could_swap else 0.0

    @property
    def swapped(self) -> int:
        return sum(t.swapped for t in self.trajectories)

    @property
    def far_groups(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for t in self.trajectories:
            total.update(t.far_groups)
        return dict(total)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable: totals plus every decision (``causalcache inspect --json``)."""
        return {
            "dataset": self.dataset,
            "budget": self.budget,
            "allocator": self.allocator,
            "decisions": self.decisions,
            "could_swap": self.could_swap,
            "declined": self.declined,
            "declined_share": round(self.declined_share, 4),
            "swapped": self.swapped,
            "far_groups": self.far_groups,
            "warnings": list(self.warnings),
            "trajectories": [
                {
                    "id": t.trajectory_id,
                    "platform": t.platform,
                    "could_swap": t.could_swap,
                    "declined": t.declined,
                    "swapped": t.swapped,
                    "far_groups": t.far_groups,
                    "decisions": [
                        {
                            "t": d.t,
                            "could_swap": d.could_swap,
                            "declined": d.declined,
                            "fallback": d.fallback,
                            "ood_group": d.ood_group,
                            "swaps": d.swaps,
                            "top_gain": d.top_gain,
                            "min_gain": d.min_gain,
                            "restored": list(d.restored),
                            "selected": list(d.selected),
                            "action": d.action,
                        }
                        for d in t.decisions
                    ],
                }
                for t in self.trajectories
            ],
        }


class _ReplayPolicy:
    """Emits the recorded action of the decision at hand."""

    name = "replay"

    def __init__(self, steps: list[Any], trace: Trace) -> None:
        self.steps, self.trace = steps, trace

    def generate(self, prompt: Any) -> Generation:
        step = self.steps[self.trace.t - 1]
        return Generation(response=step.response, action=step.action)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _short_action(action: Any) -> str:
    d = {k: v for k, v in action.to_dict().items() if v not in (None, "", [], {})}
    kind = d.pop("type", "?")
    parts = [f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v!r}" for k, v in d.items()]
    return f"{kind}({', '.join(parts)})"


def replay_trajectory(traj: Trajectory, ctl: Any) -> TrajectoryReport:
    """Replay one trajectory through the controller ``ctl`` (one memory's controller, shared by every
    trajectory of a dataset as a deployed memory is shared by its threads; its archive holds the
    trajectory's screenshots and, when the dataset has it, their screen text)."""
    steps = [s for s in traj.steps if s.screenshot_before is not None]
    if not steps:
        raise ConfigError(f"trajectory {traj.trajectory_id!r} has no step with a pre-action screenshot")
    trace = Trace(traj.goal, episode_id=f"inspect-{traj.trajectory_id}", platform=traj.platform)
    trace.observe(steps[0].screenshot_before, size=traj.screen_size)
    policy = _ReplayPolicy(steps, trace)
    rows: list[DecisionRow] = []
    screens = [steps[0].screenshot_before]
    for step in steps:
        decision = ctl.decide(trace, policy=policy)
        r = decision.to_record()
        rows.append(
            DecisionRow(
                t=int(r["t"]),
                budget=int(r["budget"]),
                could_swap=swap_possible(int(r["t"]), int(r["budget"])),
                fallback=r.get("fallback"),
                ood_group=r.get("ood_group"),
                swaps=int(r["k"]),
                selected=tuple(int(e) for e in r["selected"]),
                recent=tuple(int(e) for e in r["recent"]),
                action=_short_action(step.action),
                top_gain=_number(r.get("top_gain")),
                min_gain=_number(r.get("min_gain")),
            )
        )
        if step.screenshot_after is None:  # the last step's screen is not stored by every dataset
            break
        ctl.record(trace, decision, step.screenshot_after, screen_size=traj.screen_size)
        screens.append(step.screenshot_after)
    return TrajectoryReport(traj.trajectory_id, traj.platform, traj.goal, tuple(rows), tuple(screens))


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def inspect_dataset(
    root: str,
    config: CausalCacheConfig,
    *,
    screen_text: dict[str, str] | None = None,
    limit: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> InspectReport:
    """Replay the imported dataset at ``root`` (``causalcache data import``) through ``config``'s memory.

    ``screen_text`` (sha256 -> text: OCR or accessibility text) is stored beside the screens in the
    dataset's archive first, where the memory reads it as it would an agent's ``screen_text``. The
    memory's warnings (the idle warning, the pilot summary at close) are collected, not printed.
    """
    from causalcache_lab.data.dataset import open_dataset
    from causalcache_memory.factory import build_allocator, build_controller
    from causalcache_memory.selector import SelectorAllocator
    from causalcache_memory.selector.screen_text import ScreenTextCache

    dataset = open_dataset(root)
    archive = dataset.archive()
    for sha, text in (screen_text or {}).items():
        if sha in archive:
            archive.put_text(sha, text)
    trajectories: Iterable[Trajectory] = dataset.trajectories[:limit] if limit else dataset.trajectories
    trajectories = [t for t in trajectories if any(s.screenshot_before for s in t.steps)]

    allocator = build_allocator(config.allocation)
    if isinstance(allocator, SelectorAllocator):
        allocator.use_screen_text(ScreenTextCache(archive))  # normalised, as the deployed memory reads it
    handler = _Collect()
    logger = logging.getLogger("causalcache_memory")
    logger.addHandler(handler)
    reports = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctl = build_controller(config, archive=archive, allocator=allocator)
            ctl.selector_timeout_s = None  # a replay's answer must not depend on the machine's load
            try:
                for i, traj in enumerate(trajectories, 1):
                    if progress is not None:
                        progress(i, len(trajectories), traj.trajectory_id)
                    reports.append(replay_trajectory(traj, ctl))
            finally:
                ctl.close()  # the monitor's pilot rule speaks here
    finally:
        logger.removeHandler(handler)
    messages = list(dict.fromkeys([str(w.message) for w in caught] + handler.messages))
    return InspectReport(
        str(root), config.budget, config.allocation.allocator, tuple(reports), tuple(messages)
    )
