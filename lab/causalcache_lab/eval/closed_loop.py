"""Closed-loop evaluation: a LangGraph agent with ``CausalCacheMemory`` over the synthetic world.

Every arm runs the *same* agent graph — observe the screen, decide (through the memory's two-pass
controller), act in the world, observe the post-action screen — over the same tasks with a step cap; only
the allocator and the budget differ:

=================  ===============================================================================
arm                allocation
=================  ===============================================================================
``summary_only``   ``B = 0``: every past step as its one-line summary only
``recent``         Recent-B
``random``         seeded Random exact-B
``first``          First-B: the B earliest events (position only)
``evenly_spaced``  B events at regular strides over the history (position only)
``rgb``            RGB similarity of archived screenshots to the current screen
``oracle``         Recent-B plus the latest screen showing each needed value (world ground truth; a ceiling)
``causalcache``    the learned selector (bundled ONNX scorer) with the two-pass re-decision
=================  ===============================================================================

Protocol: tasks come from the world's *evaluation* templates (``templates="eval"``, mobile by default);
every arm runs every task under each of several simulated-policy seeds (default 0, 1, 2). Success is the
task's checker on the final world state; a task's score is its mean over seeds. Contrasts are
task-paired with task-bootstrap 95% intervals, per split, with counts of tasks helped and harmed; on
controls a non-inferiority check at a stated margin replaces "no detectable difference"
(:mod:`~causalcache_lab.eval.summary`). Per arm we also report steps, wall time, the realized
``k`` profile and the pass-2 fire rate per split. ``workers > 1`` runs the (arm, budget, seed) jobs in
parallel processes; results do not depend on it.
"""

from __future__ import annotations

import math
import platform as _platform
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_lab.eval.prompt_price import make_meter
from causalcache_lab.eval.showcase import showcase
from causalcache_lab.eval.summary import SPLITS, budget_curve, summarize
from causalcache_lab.eval.world_agent import (
    ARMS,
    EpisodeOutcome,
    WorldOracle,
    build_world_agent,
    memory_for,
    run_world_episode,
)
from causalcache_lab.eval.worlds import summarize_worlds
from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.threshold import DEFAULT_SHARE_WINDOW

if TYPE_CHECKING:
    from causalcache_lab.world.tasks import Task
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


@dataclass(frozen=True)
class ClosedLoopSettings:
    """What to run.

    Attributes:
        tasks: number of tasks (half memory-critical, half controls).
        seed: task-generation seed.
        budget: ``B`` for every arm except ``summary_only``.
        arms: arms to run (keys of :data:`ARMS`).
        platform: ``mobile``, ``desktop`` or ``mixed``.
        templates: which templates tasks come from (``eval`` for evaluation; see the world's templates).
        extra_steps: step cap = expert plan length + this.
        selector_path: a trained selector (None = the bundled scorer).
        min_gain: the selector's swap threshold: ``"auto"`` (default) = the threshold calibrated on dev data
            and stored with the model; 0 = the paper's rule.
        share_window: the selector's ``share_window`` (the pass-2 share held on each memory's own
            decisions; None = the dev threshold only).
        screen_text: the selector reads each screen's text (the world's exact OCR, as in training);
            False = it reads none, so its ``text_*`` features are masked on every decision (a deployment
            with neither ``screen_text`` nor OCR). Other arms read no text either way.
        budget_curve: budgets for the budget sweep (empty = no sweep).
        curve_arms: arms swept over ``budget_curve``.
        policy_seeds: seeds of the simulated policy; every figure is a mean over them.
        ni_margin: non-inferiority margin on controls (success difference vs Recent-B).
        workers: parallel processes for the (arm, budget, seed) jobs (1 = in this process).
        worlds: None = world v2 on ``templates`` and ``platform`` (the v2 protocol); else ``train``,
            ``dev``, ``heldout``, ``v2`` or comma-separated world ids: tasks are spread evenly over them,
            each world's simulated policy speaks its vocabulary, and results add a row per world and an
            aggregate per world split (:mod:`~causalcache_lab.world.splits`).
        prompt_cost: meter every memory (:func:`~causalcache_lab.eval.prompt_price.make_meter`): each arm
            then reports its predicted prompt-cache writes and reads per step (``prompt_cache``).
    """

    tasks: int = 40
    seed: int = 1234
    budget: int = 4
    arms: tuple[str, ...] = ("recent", "causalcache")
    platform: str = "mobile"
    templates: str = "eval"
    extra_steps: int = 6
    selector_path: str | None = None
    min_gain: float | str = "auto"
    share_window: int | None = DEFAULT_SHARE_WINDOW
    screen_text: bool = True
    budget_curve: tuple[int, ...] = ()
    curve_arms: tuple[str, ...] = ("recent", "causalcache")
    policy_seeds: tuple[int, ...] = (0, 1, 2)
    ni_margin: float = 0.05
    workers: int = 1
    worlds: str | None = None
    prompt_cost: bool = False

    def __post_init__(self) -> None:
        if self.worlds is not None:
            from causalcache_lab.world.splits import resolve_worlds

            ids = resolve_worlds(self.worlds)
            if self.tasks < len(ids):
                raise ConfigError(
                    f"tasks={self.tasks} is fewer than the {len(ids)} worlds in worlds={self.worlds!r}"
                )
        unknown = [a for a in (*self.arms, *self.curve_arms) if a not in ARMS]
        if unknown:
            raise ConfigError(f"unknown arm(s) {unknown}; choose from {', '.join(ARMS)}")
        if self.tasks < 1:
            raise ConfigError(f"tasks={self.tasks} must be >= 1")
        if self.min_gain != "auto" and (
            isinstance(self.min_gain, (bool, str)) or not math.isfinite(self.min_gain) or self.min_gain < 0
        ):
            raise ConfigError(
                f"min_gain={self.min_gain!r} must be 'auto' (the model's calibrated threshold) or a number >= 0 "
                "(0 = the paper's rule)"
            )
        if self.budget < 0 or any(b < 0 for b in self.budget_curve):
            raise ConfigError(f"budgets must be >= 0, got {self.budget} and {self.budget_curve}")
        if not self.policy_seeds or len(set(self.policy_seeds)) != len(self.policy_seeds):
            raise ConfigError(f"policy_seeds={self.policy_seeds} must be distinct and non-empty, e.g. 0,1,2")
        if not 0.0 <= self.ni_margin < 1.0:
            raise ConfigError(f"ni_margin={self.ni_margin} must be in [0, 1), e.g. 0.05")
        if self.workers < 1:
            raise ConfigError(f"workers={self.workers} must be >= 1")


# ------------------------------------------------------------------------------------------- driver
def _episode_jobs(settings: ClosedLoopSettings) -> list[tuple[str, int, int]]:
    """``(arm, budget, policy seed)`` for the main budget and the budget sweep, without duplicates."""
    pairs = [(arm, 0 if arm == "summary_only" else settings.budget) for arm in settings.arms]
    for budget in settings.budget_curve:
        for arm in settings.curve_arms:
            key = (arm, 0 if arm == "summary_only" else budget)
            if key not in pairs:
                pairs.append(key)
    return [(arm, budget, seed) for seed in settings.policy_seeds for arm, budget in pairs]


def _tasks(settings: ClosedLoopSettings) -> list[Task]:
    from causalcache_lab.world.tasks import generate_tasks

    if settings.worlds is None:
        return generate_tasks(
            settings.tasks, settings.seed, platform=settings.platform, templates=settings.templates
        )
    from causalcache_lab.world.family_tasks import generate_world_tasks

    return generate_world_tasks(
        settings.tasks,
        settings.seed,
        worlds=settings.worlds,
        purpose="evaluate",
        v2_platform=settings.platform,
        v2_templates=settings.templates,
    )


def run_job(
    settings: ClosedLoopSettings,
    out: Path,
    job: tuple[str, int, int],
    policy: Policy | None = None,
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
) -> tuple[list[EpisodeOutcome], dict[str, Any] | None]:
    """One arm at one budget under one policy seed over every task; returns the outcomes and, for the
    CausalCache arm at the main budget and first seed, the report's showcase episode."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from causalcache_lab.world.family import policy_for_world
    from causalcache_lab.world.family_tasks import world_of
    from causalcache_lab.world.sim_policy import SimulatedPolicy
    from causalcache_memory.archive.local import LocalArchive

    arm, budget, seed = job
    tasks = _tasks(settings)
    archive = LocalArchive(out / _archive_dir(job))  # one per job: parallel jobs never share blob files
    import sqlite3

    conn = sqlite3.connect(str(out / f"checkpoints-{arm}-b{budget}-s{seed}.sqlite"), check_same_thread=False)
    try:
        outcomes = []
        graphs: dict[str, Any] = {}
        memories: dict[str, Any] = {}
        for world in dict.fromkeys(world_of(t) for t in tasks):  # each world's policy speaks its vocabulary
            if policy is not None:
                world_policy: Any = policy
            elif world == "v2":
                world_policy = SimulatedPolicy(seed=seed)
            else:
                world_policy = policy_for_world(world, seed)
            oracle = WorldOracle() if arm == "oracle" else None
            memory = memory_for(
                arm,
                budget,
                world_policy,
                archive,
                settings.selector_path,
                settings.min_gain,
                oracle,
                share_window=settings.share_window,
                screen_text=settings.screen_text,
                prompt_cost=make_meter() if settings.prompt_cost else None,
            )
            graph = build_world_agent(memory, SqliteSaver(conn))
            graphs.setdefault("first", graph)
            memories.setdefault("first", memory)
            for task in (t for t in tasks if world_of(t) == world):
                outcome = run_world_episode(
                    task, memory, graph, arm=arm, policy=world_policy, archive=archive, seed=seed,
                    thread_id=f"{arm}-b{budget}-s{seed}-{task.task_id}",
                    max_steps=len(task.steps) + settings.extra_steps,
                    evidence=oracle.truth if oracle is not None else None,
                )  # fmt: skip
                outcome.world = world
                outcomes.append(outcome)
                if on_episode:
                    on_episode(outcome)
        show = None
        if arm == "causalcache" and budget == settings.budget and seed == settings.policy_seeds[0]:
            first = world_of(tasks[0])
            show = showcase(
                [o for o in outcomes if o.world == first],
                {(arm, budget): graphs["first"]},
                {(arm, budget): memories["first"]},
                {t.task_id: t for t in tasks},
            )
        return outcomes, show
    finally:
        conn.close()


def _archive_dir(job: tuple[str, int, int]) -> str:
    arm, budget, seed = job
    return f"archive-{arm}-b{budget}-s{seed}"


def _job_entry(
    args: tuple[ClosedLoopSettings, str, tuple[str, int, int]],
) -> tuple[list[EpisodeOutcome], Any]:
    settings, out, job = args
    return run_job(settings, Path(out), job)


def _run_jobs(
    settings: ClosedLoopSettings,
    out: Path,
    jobs: Sequence[tuple[str, int, int]],
    policy: Policy | None,
    bar: Any,
    on_episode: Callable[[EpisodeOutcome], None] | None,
) -> tuple[list[EpisodeOutcome], dict[str, Any] | None]:
    outcomes: list[EpisodeOutcome] = []
    shows: list[dict[str, Any]] = []

    def running(job: tuple[str, int, int]) -> None:
        """The bar names the job whose episodes it waits for (not the one that just finished)."""
        bar.set_postfix_str(f"running {job[0]} B={job[1]} seed={job[2]}")

    def collect(result: tuple[list[EpisodeOutcome], Any]) -> None:
        outcomes.extend(result[0])
        shows.extend([result[1]] if result[1] else [])
        bar.update(len(result[0]))

    if settings.workers > 1 and policy is None:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=settings.workers) as pool:
            results = pool.map(_job_entry, [(settings, str(out), j) for j in jobs])
            for job in jobs:  # results come back in job order
                running(job)
                collect(next(results))
    else:
        for job in jobs:
            running(job)
            collect(run_job(settings, out, job, policy, on_episode))
    return outcomes, (shows[0] if shows else None)


def run_closed_loop(
    settings: ClosedLoopSettings,
    out_dir: str | Path,
    *,
    policy: Policy | None = None,
    progress: bool = True,
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
) -> dict[str, Any]:
    """Run every arm on every task under every policy seed; returns the ``results.json`` dict (not written).

    ``policy`` (optional) replaces the simulated policy for every job (then ``policy_seeds`` only label
    the repeats, and jobs run in this process).
    """
    require("langgraph", purpose="the closed-loop harness")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = _tasks(settings)
    jobs = _episode_jobs(settings)
    bar = _progress(len(jobs) * len(tasks), progress)
    start = time.perf_counter()
    try:
        outcomes, show = _run_jobs(settings, out, jobs, policy, bar, on_episode)
    finally:
        bar.close()
    main = [o for o in outcomes if o.budget == settings.budget or o.arm == "summary_only"]
    results = summarize(main, settings.arms, ni_margin=settings.ni_margin)
    if settings.worlds is not None:
        results.update(summarize_worlds(main, settings.arms, ni_margin=settings.ni_margin))
    results["meta"] = _meta(settings, tasks, policy, time.perf_counter() - start)
    if settings.budget_curve:
        results["budget_curve"] = budget_curve(outcomes, settings.budget_curve, settings.curve_arms)
    results["episodes"] = [o.to_dict() for o in outcomes]
    results["showcase"] = show
    shown = (show or {}).get("arm"), settings.budget, settings.policy_seeds[0]
    results["_archive"] = str(out / _archive_dir(shown)) if show else None  # where the showcase's shots are
    return results


def _meta(
    settings: ClosedLoopSettings, tasks: Sequence[Task], policy: Policy | None, wall: float
) -> dict[str, Any]:
    return {
        "tasks": len(tasks),
        "budget": settings.budget,
        "seed": settings.seed,
        "policy_seeds": list(settings.policy_seeds),
        "arms": list(settings.arms),
        "platform": settings.platform,
        "platforms": _platforms(tasks),
        "templates": settings.templates,
        "world": "v2" if settings.worlds is None else settings.worlds,
        "worlds": list(dict.fromkeys(str(t.metadata.get("world", "v2")) for t in tasks)),
        "wall_s": round(wall, 2),
        "machine": f"{_platform.machine()} {_platform.processor() or ''}".strip(),
        "python": _platform.python_version(),
        "policy": getattr(policy, "name", "simulated-world-policy"),
        "selector": settings.selector_path or "bundled",
        "min_gain": settings.min_gain,
        "share_window": settings.share_window,
        "screen_text": settings.screen_text,
        "ni_margin": settings.ni_margin,
        "step_cap": f"expert plan length + {settings.extra_steps}",
        "tasks_per_split": dict(Counter(t.split for t in tasks)),
    }


def _platforms(tasks: Sequence[Task]) -> dict[str, str]:
    """Each world's platform as its tasks say (``mixed`` when they differ): the report's header."""
    found: dict[str, set[str]] = {}
    for task in tasks:
        found.setdefault(str(task.metadata.get("world", "v2")), set()).add(str(task.platform))
    return {world: next(iter(p)) if len(p) == 1 else "mixed" for world, p in found.items()}


def _progress(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc="episodes", unit="ep", leave=False)
