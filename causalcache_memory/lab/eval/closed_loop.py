"""Closed-loop evaluation: a LangGraph agent with ``CausalCacheMemory`` over the synthetic world.

Every arm runs the *same* agent graph — observe the screen, decide (through the memory's two-pass
controller), act in the world, observe the post-action screen — over the same tasks with a step cap; only
the allocation policy and the budget differ:

=================  ===============================================================================
arm                allocation
=================  ===============================================================================
``summary_only``   ``B = 0``: every past step as its one-line summary only
``recent``         Recent-B
``random``         seeded Random exact-B
``rgb``            RGB similarity of archived screenshots to the current screen
``causalcache``    the learned selector (bundled ONNX scorer) with the two-pass re-decision
=================  ===============================================================================

Success is the task's checker on the final world state. Contrasts are task-paired (every arm runs every
task) with task-bootstrap 95% intervals; the split × method interaction compares the memory-critical gain
with the control gain. Per arm we also report steps, wall time, the realized ``k`` profile, the pass-2
fire rate and the model time pass 2 adds per step.
"""

from __future__ import annotations

import platform as _platform
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from causalcache_memory._optional import require
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.config.loader import parse_config
from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.eval.showcase import showcase
from causalcache_memory.lab.eval.summary import SPLITS, split_rows, summarize

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.lab.world.tasks import Task
    from causalcache_memory.policy import Policy

__all__ = [
    "ARMS",
    "SPLITS",
    "ClosedLoopSettings",
    "EpisodeOutcome",
    "build_world_agent",
    "run_closed_loop",
    "run_world_episode",
    "summarize",
]

#: arm name -> allocation policy name (``summary_only`` runs Recent at B = 0)
ARMS: dict[str, str] = {
    "summary_only": "recent",
    "recent": "recent",
    "random": "random",
    "rgb": "rgb",
    "causalcache": "causalcache",
}


class WorldAgentState(TypedDict, total=False):
    """State of the evaluation agent (the memory adds its own ``cc_*`` keys)."""

    goal: str
    app: str
    steps: int
    done: bool


@dataclass(frozen=True)
class WorldContext:
    """Run context: the memory's objects under ``causalcache`` plus the world (the 'device')."""

    causalcache: Any
    world: Any
    max_steps: int = 30


@dataclass
class EpisodeOutcome:
    """One episode of one arm."""

    task_id: str
    split: str
    arm: str
    budget: int
    success: bool
    steps: int
    wall_s: float
    log: list[dict[str, Any]] = field(default_factory=list)
    thread_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "split": self.split,
            "arm": self.arm,
            "budget": self.budget,
            "success": self.success,
            "steps": self.steps,
            "wall_s": round(self.wall_s, 4),
            "k": [r.get("k", 0) for r in self.log],
            "second_pass": [bool(r.get("second_pass")) for r in self.log],
        }


@dataclass(frozen=True)
class ClosedLoopSettings:
    """What to run.

    Attributes:
        tasks: number of tasks (half memory-critical, half controls).
        seed: task-generation seed.
        budget: ``B`` for every arm except ``summary_only``.
        arms: arms to run (keys of :data:`ARMS`).
        platform: ``mobile``, ``desktop`` or ``mixed``.
        extra_steps: step cap = expert plan length + this.
        selector_path: a trained selector (None = the bundled scorer).
        min_gain: the selector's swap threshold (0 = the paper's rule).
        budget_curve: budgets for the budget sweep (empty = no sweep).
        curve_arms: arms swept over ``budget_curve``.
        policy_seed: seed of the simulated policy.
    """

    tasks: int = 40
    seed: int = 1234
    budget: int = 4
    arms: tuple[str, ...] = ("recent", "causalcache")
    platform: str = "mobile"
    extra_steps: int = 6
    selector_path: str | None = None
    min_gain: float = 0.0
    budget_curve: tuple[int, ...] = ()
    curve_arms: tuple[str, ...] = ("recent", "causalcache")
    policy_seed: int = 0

    def __post_init__(self) -> None:
        unknown = [a for a in (*self.arms, *self.curve_arms) if a not in ARMS]
        if unknown:
            raise ConfigError(f"unknown arm(s) {unknown}; choose from {', '.join(ARMS)}")
        if self.tasks < 1:
            raise ConfigError(f"tasks={self.tasks} must be >= 1")
        if not self.min_gain >= 0.0:
            raise ConfigError(f"min_gain={self.min_gain} must be >= 0 (0 = the paper's rule)")
        if self.budget < 0 or any(b < 0 for b in self.budget_curve):
            raise ConfigError(f"budgets must be >= 0, got {self.budget} and {self.budget_curve}")


# ---------------------------------------------------------------------------------------------- graph
def build_world_agent(memory: Any, checkpointer: Any = None) -> Any:
    """The evaluation agent: ``observe -> decide -> act(+record) -> decide ...`` until done or the cap.

    ``act`` executes ``memory.action(state)`` in the world held by the run context and returns the
    post-action screenshot, which the memory archives and records as the step's ``v_t``.
    """
    require("langgraph", purpose="the closed-loop harness")
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    def first_screen(state: WorldAgentState, runtime: Runtime[WorldContext]) -> dict[str, Any]:
        world = runtime.context.world
        return {"screenshot": world.screenshot(), "app": world.app, "steps": 0, "done": False}

    def act(state: WorldAgentState, runtime: Runtime[WorldContext]) -> dict[str, Any]:
        from causalcache_memory.actions.model import Action

        world = runtime.context.world
        raw = memory.action(state)
        action = Action.from_dict(raw) if isinstance(raw, dict) else (raw or Action("wait"))
        png, info = world.step(action)
        steps = int(state.get("steps", 0)) + 1
        done = info.done or steps >= runtime.context.max_steps
        return {"screenshot": png, "app": info.app_after, "steps": steps, "done": done}

    def route(state: WorldAgentState) -> str:
        return END if state.get("done") else "decide"

    builder = StateGraph(WorldAgentState, context_schema=WorldContext)
    builder.add_node("observe", memory.observe_node(first_screen, schema=WorldAgentState))
    builder.add_node("decide", memory.decide_node(schema=WorldAgentState))
    builder.add_node("act", memory.record_node(act, schema=WorldAgentState))
    builder.add_edge(START, "observe")
    builder.add_edge("observe", "decide")
    builder.add_edge("decide", "act")
    builder.add_conditional_edges("act", route, ["decide", END])
    return builder.compile(checkpointer=checkpointer)


def _memory_for(
    arm: str,
    budget: int,
    policy: Policy,
    archive: ScreenshotArchive,
    selector_path: str | None,
    min_gain: float = 0.0,
) -> Any:
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    effective = 0 if arm == "summary_only" else budget
    config = parse_config(
        {
            "budget": effective,
            "allocation": {
                "allocator": ARMS[arm],
                "selector": {"model_path": selector_path, "timeout_ms": 2000, "min_gain": min_gain},
            },
            "policy": {"kind": "simulated"},
        }
    )
    allocation = build_allocator(config.allocation)
    return CausalCacheMemory(config=config, policy=policy, archive=archive, allocation=allocation)


def run_world_episode(
    task: Task,
    memory: Any,
    graph: Any,
    *,
    arm: str,
    policy: Policy,
    archive: ScreenshotArchive,
    thread_id: str,
    max_steps: int,
) -> EpisodeOutcome:
    """Run ``task`` through the compiled agent ``graph`` and score it with the task's checker."""
    from causalcache_memory.integrations.langgraph import CausalCacheContext
    from causalcache_memory.lab.world.env import GuiWorld

    world = GuiWorld(task)
    context = WorldContext(
        causalcache=CausalCacheContext(policy=policy, archive=archive), world=world, max_steps=max_steps
    )
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 10_000}
    log: list[dict[str, Any]] = []
    start = time.perf_counter()
    for mode, chunk in graph.stream(
        {"goal": task.goal}, config, context=context, stream_mode=["custom"], subgraphs=False
    ):
        if mode == "custom" and isinstance(chunk, dict) and "t" in chunk:
            log.append(chunk)
    wall = time.perf_counter() - start
    return EpisodeOutcome(
        task_id=task.task_id,
        split=task.split,
        arm=arm,
        budget=memory.budget,
        success=bool(task.check(world.state())),
        steps=world.steps,
        wall_s=wall,
        log=log,
        thread_id=thread_id,
    )


# ------------------------------------------------------------------------------------------- driver
def _episode_jobs(settings: ClosedLoopSettings) -> list[tuple[str, int]]:
    jobs = [(arm, 0 if arm == "summary_only" else settings.budget) for arm in settings.arms]
    for budget in settings.budget_curve:
        for arm in settings.curve_arms:
            key = (arm, 0 if arm == "summary_only" else budget)
            if key not in jobs:
                jobs.append(key)
    return jobs


def run_closed_loop(
    settings: ClosedLoopSettings,
    out_dir: str | Path,
    *,
    policy: Policy | None = None,
    progress: bool = True,
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
) -> dict[str, Any]:
    """Run every arm on every task; returns the ``results.json`` dict (not written here)."""
    require("langgraph", purpose="the closed-loop harness")
    from langgraph.checkpoint.sqlite import SqliteSaver

    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.lab.world.sim_policy import SimulatedPolicy
    from causalcache_memory.lab.world.tasks import generate_tasks

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    archive = LocalArchive(out / "archive")
    policy = policy or SimulatedPolicy(seed=settings.policy_seed)
    tasks = generate_tasks(settings.tasks, settings.seed, platform=settings.platform)
    by_id = {t.task_id: t for t in tasks}
    jobs = _episode_jobs(settings)
    import sqlite3

    conn = sqlite3.connect(str(out / "checkpoints.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    graphs: dict[tuple[str, int], Any] = {}
    memories: dict[tuple[str, int], Any] = {}
    outcomes: list[EpisodeOutcome] = []
    bar = _progress(len(jobs) * len(tasks), progress)
    start = time.perf_counter()
    try:
        for arm, budget in jobs:
            memory = _memory_for(arm, budget, policy, archive, settings.selector_path, settings.min_gain)
            graph = build_world_agent(memory, saver)
            graphs[(arm, budget)], memories[(arm, budget)] = graph, memory
            for task in tasks:
                outcome = run_world_episode(
                    task,
                    memory,
                    graph,
                    arm=arm,
                    policy=policy,
                    archive=archive,
                    thread_id=f"{arm}-b{budget}-{task.task_id}",
                    max_steps=len(task.steps) + settings.extra_steps,
                )
                outcomes.append(outcome)
                if on_episode:
                    on_episode(outcome)
                bar.update(1)
                bar.set_postfix_str(f"{arm} B={budget}")
    finally:
        bar.close()
    wall = time.perf_counter() - start
    main = [o for o in outcomes if o.budget == settings.budget or o.arm == "summary_only"]
    results = summarize(main, settings.arms)
    results["meta"] = {
        "tasks": len(tasks),
        "budget": settings.budget,
        "seed": settings.seed,
        "arms": list(settings.arms),
        "platform": settings.platform,
        "wall_s": round(wall, 2),
        "machine": f"{_platform.machine()} {_platform.processor() or ''}".strip(),
        "python": _platform.python_version(),
        "policy": getattr(policy, "name", type(policy).__name__),
        "selector": settings.selector_path or "bundled",
        "min_gain": settings.min_gain,
        "step_cap": f"expert plan length + {settings.extra_steps}",
        "tasks_per_split": dict(Counter(t.split for t in tasks)),
    }
    if settings.budget_curve:
        curve: dict[str, Any] = {"budgets": list(settings.budget_curve), "arms": {}}
        for arm in settings.curve_arms:
            series: dict[str, list[float | None]] = {s: [] for s in SPLITS}
            for budget in settings.budget_curve:
                b = 0 if arm == "summary_only" else budget
                rows = [o for o in outcomes if o.arm == arm and o.budget == b]
                for split in SPLITS:
                    sel = split_rows(rows, split)
                    series[split].append(sum(o.success for o in sel) / len(sel) if sel else None)
            curve["arms"][arm] = series
        results["budget_curve"] = curve
    results["episodes"] = [o.to_dict() for o in outcomes]
    results["showcase"] = showcase(main, graphs, memories, by_id)
    results["_archive"] = str(archive.root)
    conn.close()
    return results


def _progress(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc="episodes", unit="ep", leave=False)
