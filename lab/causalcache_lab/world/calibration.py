"""A minimal single-process closed loop over the synthetic world, and the simulator's calibration.

:func:`run_episode` runs one task: the world renders a screenshot, the archive stores it, an allocation
policy picks the exact-B set of history events, :func:`~causalcache_memory.render.render_prompt` builds
the prompt, the policy generates an action, the world steps. It is deliberately small and public; richer
harnesses (LangGraph agent, two-pass re-decision, reports) build on the same pieces.

:class:`EvidenceOracleAllocator` is Recent-B that always holds, for each value the task needs, the latest
event whose screenshot showed it (ground truth from the world, recorded in each event's
``metadata["world_evidence_visible"]`` as the list of needed-value indices by :func:`run_episode`; only the
oracle reads it), displacing the oldest recent events when needed.

:func:`calibrate` reports success per split for summary-only (B = 0), Recent-B and the oracle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from causalcache_lab.world.env import GuiWorld
from causalcache_lab.world.tasks import Task
from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    Allocator,
    make_allocation,
    recent_b,
)
from causalcache_memory.allocation.simple import RecentAllocator, SummaryOnlyAllocator
from causalcache_memory.render.prompt import render_prompt
from causalcache_memory.trace import Trace

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["AGE_BINS", "EVIDENCE_KEY", "EpisodeResult", "EvidenceOracleAllocator", "calibrate", "run_episode"]

#: event metadata key holding the world's ground truth "the remembered value is on this screenshot"
EVIDENCE_KEY = "world_evidence_visible"


@dataclass
class EpisodeResult:
    """Outcome of one closed-loop episode.

    Attributes:
        task_id, split: the task.
        success: the task's checker on the final world state.
        steps: actions taken.
        trace: the full event trace.
        allocations: the allocation used at each decision.
        wall_s: wall time of the episode.
        typed: texts the agent typed, in order.
    """

    task_id: str
    split: str
    success: bool
    steps: int
    trace: Trace
    allocations: list[Allocation] = field(default_factory=list)
    wall_s: float = 0.0
    typed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "split": self.split,
            "success": self.success,
            "steps": self.steps,
            "wall_s": self.wall_s,
            "typed": list(self.typed),
            "k": [a.k for a in self.allocations],
        }


class EvidenceOracleAllocator:
    """Recent-B plus the latest evidence event of each needed value (world ground truth); see the module
    docstring."""

    name = "evidence_oracle"
    uses_witness = False

    def evidence(self, ctx: AllocationContext) -> dict[int, Sequence[int]]:
        """Event index -> indices of the needed values its screenshot shows (from event metadata)."""
        return {e.index: e.metadata.get(EVIDENCE_KEY) or () for e in ctx.trace}

    def allocate(self, ctx: AllocationContext) -> Allocation:
        recent = list(recent_b(ctx.t, ctx.budget))
        latest: dict[int, int] = {}
        for index, needs in sorted(self.evidence(ctx).items()):
            for need in needs:
                if index < ctx.t:
                    latest[int(need)] = index
        keep = sorted(set(latest.values()))[-len(recent) :] if recent else []
        others = [j for j in recent if j not in keep]
        chosen = [*others[len(others) - (len(recent) - len(keep)) :], *keep] if recent else []
        return make_allocation(chosen, t=ctx.t, budget=ctx.budget, allocator=self.name)


def run_episode(
    task: Task,
    allocator: Allocator,
    policy: Policy,
    archive: ScreenshotArchive,
    *,
    budget: int = 4,
    max_steps: int | None = None,
    episode_seed: int = 0,
) -> EpisodeResult:
    """Run ``task`` in closed loop; stops at ``done`` or after ``max_steps`` (default: plan length + 6)."""
    start = time.perf_counter()
    world = GuiWorld(task)
    trace = Trace(task.goal, episode_id=task.task_id, platform=task.platform)
    trace.observe(archive.put(world.screenshot()).sha256)
    cap = max_steps if max_steps is not None else len(task.steps) + 6
    allocations: list[Allocation] = []
    typed: list[str] = []
    for _ in range(cap):
        ctx = AllocationContext(trace=trace, budget=budget, archive=archive, episode_seed=episode_seed)
        allocation = allocator.allocate(ctx)
        allocations.append(allocation)
        prompt = render_prompt(trace, allocation).bind(archive)
        generation = policy.generate(prompt)
        action = generation.action or Action("wait")
        if action.type == "type" and action.text:
            typed.append(action.text)
        png, info = world.step(action)
        trace.record(
            action,
            generation.response,
            archive.put(png).sha256,
            app=info.app,
            screen_size=world.size,
            metadata={EVIDENCE_KEY: list(info.evidence)},
        )
        if info.done:
            break
    return EpisodeResult(
        task.task_id,
        task.split,
        task.check(world.state()),
        len(trace),
        trace,
        allocations,
        time.perf_counter() - start,
        typed,
    )


#: evidence-age bins of the calibration table (inclusive ranges)
AGE_BINS: tuple[tuple[int, int], ...] = ((1, 4), (5, 8), (9, 12), (13, 99))


def _age_key(age: int) -> str:
    low, high = next(b for b in AGE_BINS if b[0] <= age <= b[1])
    return f"age_{low}_{high}" if high < 99 else f"age_{low}_plus"


def calibrate(
    tasks: Sequence[Task],
    policy: Policy,
    archive: ScreenshotArchive,
    *,
    budget: int = 4,
    arms: dict[str, Callable[[], Allocator]] | None = None,
) -> dict[str, dict[str, float]]:
    """Success rate per arm and split (``all``, ``memory_critical``, ``control``), plus counts.

    Memory-critical tasks are also split by whether the (oldest) evidence age is within the budget
    window (``memory_in_window``: ``age <= B``) or not (``memory_out_of_window``), and by age bins
    (:data:`AGE_BINS`: ``age_1_4``, ``age_5_8``, ``age_9_12``, ``age_13_plus``). Counts are under
    ``n_<key>``. Default arms: ``summary_only`` (B = 0), ``recent`` (Recent-B) and ``oracle``.
    """
    arms = arms or {
        "summary_only": SummaryOnlyAllocator,
        "recent": RecentAllocator,
        "oracle": EvidenceOracleAllocator,
    }
    report: dict[str, dict[str, float]] = {}
    for arm, make in arms.items():
        wins: dict[str, list[bool]] = {
            k: [] for k in ("all", "memory_critical", "control", "memory_in_window", "memory_out_of_window")
        }
        wins.update({_age_key(low): [] for low, _ in AGE_BINS})
        for task in tasks:
            ok = run_episode(task, make(), policy, archive, budget=budget).success
            wins["all"].append(ok)
            wins[task.split].append(ok)
            if task.split == "memory_critical" and task.evidence_age is not None:
                wins["memory_in_window" if task.evidence_age <= budget else "memory_out_of_window"].append(ok)
                wins[_age_key(task.evidence_age)].append(ok)
        report[arm] = {k: (sum(v) / len(v) if v else float("nan")) for k, v in wins.items()}
        report[arm].update({f"n_{k}": float(len(v)) for k, v in wins.items()})
    return report
