"""Leave-one-generator-out evaluation: the allocators on one generator x policy pair (docs/GENERATORS.md).

Every arm runs the closed loop's agent graph (:func:`~causalcache_lab.eval.world_agent.
build_world_agent`: observe, decide through the memory's two-pass controller, act, observe) on the same
tasks of one generator, under one simulated policy at several seeds; only the memory's allocator
differs:

========================  =====================================================================
arm                       allocation (B = ``budget``)
========================  =====================================================================
``recent``                Recent-B
``random``                seeded Random exact-B
``first``                 First-B
``evenly_spaced``         B events at regular strides
``oracle``                Recent-B plus the latest screen showing the needed value (ground truth)
``causalcache``           the selector (bundled unless ``selector_path``) with the guard before try 2
                          (the model's OOD guard on every decision; pinned, not the library's default)
``causalcache_noguard``   the same selector with ``ood_guard: false`` (information: what the
                          scorer would do where the guard declines)
``causalcache_refit``     guard try 1: ``ood_refit: 64`` (docs/notebook/results/guard_rule.md)
``causalcache_try2``      guard try 2: ``witness_check``, ``ood_refit: 64``, ``ood_refit_warmup: open``
                          (docs/notebook/results/guard_rule_try2.md); the library's defaults since
                          2026-12-07, so this is the deployed selector
``causalcache_witness``   ``witness_check`` only: the selector's own guard kept, never refitted
========================  =====================================================================

The selector reads every screen's text in the generator's own format (accessibility dump, OCR lines,
view hierarchy) from :class:`ExtScreenText` -- the text an agent would pass as ``screen_text`` -- and
the text never enters a prompt. The numbers are those of the closed loop
(:func:`~causalcache_lab.eval.summary.summarize`: per split success with task-bootstrap
intervals, task-paired deltas with helped/harmed, non-inferiority on controls, pass-2 and OOD rates),
against Recent-B and against Random-B, plus the guard's decline rate on *could-swap* decisions (two-pass
decisions whose history is longer than B, so a swap was possible).

Sealed runs: the task seeds and policy seeds named in ``docs/sealed/generators-v1.yaml`` are refused
unless ``sealed=True`` (the final table, run once).
"""

from __future__ import annotations

import platform as _platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_lab.eval.summary import SPLITS, summarize
from causalcache_lab.eval.world_agent import (
    EpisodeOutcome,
    WorldContext,
    WorldOracle,
    build_world_agent,
)
from causalcache_lab.worlds_ext.generators import ALL_GENERATORS, generator
from causalcache_lab.worlds_ext.policies import POLICIES, policy
from causalcache_lab.worlds_ext.screen import REGISTRY, ScreenRegistry
from causalcache_lab.worlds_ext.tasks import ExtTask, generate_ext_tasks
from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = [
    "EXT_ARMS",
    "ExtEvalSettings",
    "ExtScreenText",
    "could_swap_decline",
    "run_ext_episode",
    "run_ext_eval",
    "sealed_set",
]

#: arm -> allocator name
EXT_ARMS: dict[str, str] = {
    "recent": "recent",
    "random": "random",
    "first": "first",
    "evenly_spaced": "evenly_spaced",
    "oracle": "recent",
    "causalcache": "selector",
    "causalcache_noguard": "selector",
    "causalcache_refit": "selector",
    "causalcache_try2": "selector",
    "causalcache_witness": "selector",
}
#: warm-up decisions of the ``causalcache_refit`` arm (``ood_refit``: docs/notebook/results/guard_rule.md)
REFIT_WARMUP = 64
SEALED_NAME = Path("docs") / "sealed" / "generators-v1.yaml"


def _sealed_file() -> Path:
    """``docs/sealed/generators-v1.yaml`` of the source tree this module sits in."""
    for parent in Path(__file__).resolve().parents:
        if (parent / SEALED_NAME).exists():
            return parent / SEALED_NAME
    raise ConfigError(
        f"{SEALED_NAME} was not found above {Path(__file__).parent}; the harness runs from a source checkout "
        "(the sealed set is committed there)"
    )


class ExtScreenText:
    """A screen-text source (``get_text(sha256)``) over the screen registry: the screen's text in its
    generator's format, None for a screen no generator rendered."""

    def __init__(self, registry: ScreenRegistry = REGISTRY) -> None:
        self.registry = registry

    def get_text(self, sha256: str) -> str | None:
        screen = self.registry.get(sha256)
        return None if screen is None else generator(screen.generator).serialize(screen)


def sealed_set(path: Path | None = None) -> dict[str, Any]:
    """The sealed set's definition (``generators``, ``policies``, ``task_seeds``, ``policy_seeds``)."""
    import yaml

    data = yaml.safe_load((path or _sealed_file()).read_text())
    return dict(data["sealed"])


@dataclass(frozen=True)
class ExtEvalSettings:
    """One generator x policy run.

    Attributes:
        generator: ``desktop``, ``web`` or ``mobile``.
        policy: ``same-line``, ``first-match`` or ``noisy``.
        tasks_per_split: memory-critical tasks (and as many controls).
        task_seed: the task-generation seed.
        policy_seeds: seeds of the simulated policy (a task's score is its mean over them).
        budget: B.
        arms: keys of :data:`EXT_ARMS`.
        extra_steps: step cap = plan length + this.
        selector_path: a trained selector (None = the bundled one).
        min_gain: the selector's swap threshold (``"auto"`` = calibrated with the model).
        ni_margin: non-inferiority margin on controls.
        screen_text: the selector arms read the screens' text (False: no text, ``text_*`` masked).
        sealed: allow the sealed set's seeds (the final run only).
    """

    generator: str
    policy: str
    tasks_per_split: int = 20
    task_seed: int = 0
    policy_seeds: tuple[int, ...] = (0, 1)
    budget: int = 4
    arms: tuple[str, ...] = (
        "recent",
        "random",
        "first",
        "evenly_spaced",
        "causalcache",
        "causalcache_noguard",
    )
    extra_steps: int = 6
    selector_path: str | None = None
    min_gain: float | str = "auto"
    ni_margin: float = 0.05
    screen_text: bool = True
    sealed: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.generator not in ALL_GENERATORS:
            raise ConfigError(
                f"generator={self.generator!r} is unknown; choose one of {', '.join(ALL_GENERATORS)}"
            )
        if self.policy not in POLICIES:
            raise ConfigError(f"policy={self.policy!r} is unknown; choose one of {', '.join(POLICIES)}")
        unknown = [a for a in self.arms if a not in EXT_ARMS]
        if unknown:
            raise ConfigError(f"arms {unknown} are unknown; choose from {', '.join(EXT_ARMS)}")
        if self.tasks_per_split < 1:
            raise ConfigError(f"tasks_per_split={self.tasks_per_split} must be >= 1")
        if not self.policy_seeds or len(set(self.policy_seeds)) != len(self.policy_seeds):
            raise ConfigError(f"policy_seeds={self.policy_seeds} must be distinct and non-empty, e.g. 0,1")
        if self.budget < 1:
            raise ConfigError(f"budget={self.budget} must be >= 1")
        if not self.sealed:
            sealed = sealed_set()
            whole = [x for x in (self.generator, self.policy) if x in sealed["whole"]]
            if whole:
                raise ConfigError(
                    f"{' and '.join(whole)} {'is' if len(whole) == 1 else 'are'} sealed as a whole ({SEALED_NAME}, "
                    "'whole'): never run before the final table, which passes sealed=True (--sealed)"
                )
            if self.task_seed in sealed["task_seeds"] or set(self.policy_seeds) & set(sealed["policy_seeds"]):
                raise ConfigError(
                    f"task_seed={self.task_seed} / policy_seeds={list(self.policy_seeds)} touch the sealed set "
                    f"({SEALED_NAME}: task seeds {sealed['task_seeds']}, policy seeds {sealed['policy_seeds']}); "
                    "development runs use other seeds (the sealed set is run once, for the final table)"
                )


def _memory(
    arm: str, budget: int, pol: Policy, archive: ScreenshotArchive, settings: ExtEvalSettings
) -> tuple[Any, Any]:
    """The memory of one arm and its allocator."""
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.config.loader import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    selector = EXT_ARMS[arm] == "selector"
    config = parse_config(
        {
            "budget": budget,
            "allocation": {
                "allocator": EXT_ARMS[arm],
                "selector": {
                    "model_path": settings.selector_path,
                    "timeout_ms": 2000,
                    "min_gain": settings.min_gain,
                    "ood_guard": arm != "causalcache_noguard",
                    "ood_refit": REFIT_WARMUP if arm in ("causalcache_refit", "causalcache_try2") else None,
                    # guard try 2 (docs/notebook/results/guard_rule_try2.md): the witness-source check,
                    # no covariate guard until the refit
                    "ood_refit_warmup": "open" if arm == "causalcache_try2" else "bundled",
                    "witness_check": arm in ("causalcache_try2", "causalcache_witness"),
                },
                # the harness measures the fallbacks itself (could_swap); the memory's warning is not news
                "idle_warning": {"enabled": False},
            },
            "policy": {"kind": "simulated"},
        }
    )
    allocation: Any = WorldOracle() if arm == "oracle" else build_allocator(config.allocation)
    if selector:
        from causalcache_lab.selector.world_text import NoScreenText

        allocation.use_screen_text(ExtScreenText() if settings.screen_text else NoScreenText())
    return CausalCacheMemory(config=config, policy=pol, archive=archive, allocation=allocation), allocation


def run_ext_episode(
    task: ExtTask,
    memory: Any,
    graph: Any,
    *,
    arm: str,
    pol: Policy,
    archive: ScreenshotArchive,
    seed: int,
    max_steps: int,
    evidence: dict[int, tuple[int, ...]] | None = None,
) -> EpisodeOutcome:
    """Run ``task`` through ``graph`` (the closed loop's agent) and score it with the task's checker."""
    from causalcache_lab.worlds_ext.env import ExtWorld
    from causalcache_memory.integrations.langgraph import CausalCacheContext

    world = ExtWorld(task)
    if evidence is None:
        evidence = {}
    evidence.clear()
    context = WorldContext(
        causalcache=CausalCacheContext(policy=pol, archive=archive),
        world=world,
        max_steps=max_steps,
        evidence=evidence,
    )
    thread = f"{arm}-s{seed}-{task.task_id}"
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 10_000}
    log: list[dict[str, Any]] = []
    start = time.perf_counter()
    for mode, chunk in graph.stream({"goal": task.goal}, config, context=context, stream_mode=["custom"]):
        if mode == "custom" and isinstance(chunk, dict) and "t" in chunk:
            log.append(chunk)
    success = bool(task.check(world.state()))
    return EpisodeOutcome(
        task.task_id, task.split, arm, memory.budget, success, world.steps, time.perf_counter() - start, log,
        thread, seed, world=task.generator, evidence_steps=tuple(sorted(evidence)),
    )  # fmt: skip


def could_swap_decline(outcomes: Sequence[EpisodeOutcome], budget: int) -> dict[str, Any]:
    """Per split: could-swap decisions (two-pass decisions with ``t - 1 > B``), the share the guard
    declined as out of distribution, and the share that swapped (``k > 0``)."""
    out: dict[str, Any] = {}
    for split in SPLITS:
        recs = [
            r
            for o in outcomes
            if split == "all" or o.split == split
            for r in o.log
            if "proposal" in r and int(r.get("t", 0)) - 1 > budget
        ]
        n = len(recs)
        out[split] = {
            "could_swap": n,
            "declined_ood": sum(r.get("fallback") == "ood" for r in recs),
            "decline_rate": (sum(r.get("fallback") == "ood" for r in recs) / n) if n else None,
            "after_refit": sum(r.get("ood_refit") == "refit" for r in recs),
            "declined_after_refit": sum(
                r.get("ood_refit") == "refit" and r.get("fallback") == "ood" for r in recs
            ),
            "swap_rate": (sum(int(r.get("k", 0)) > 0 for r in recs) / n) if n else None,
            # the witness-source check refused the first set (and how often the re-search kept Recent-B)
            "witness_refused": sum("witness_kept" in r for r in recs),
            "witness_refused_recent": sum("witness_kept" in r and int(r.get("k", 0)) == 0 for r in recs),
        }
    return out


def run_ext_eval(
    settings: ExtEvalSettings,
    out_dir: str | Path,
    *,
    progress: Callable[[EpisodeOutcome], None] | None = None,
) -> dict[str, Any]:
    """Every arm on every task under every policy seed; returns the results dict (not written)."""
    require("langgraph", purpose="the worlds_ext harness")
    from langgraph.checkpoint.memory import InMemorySaver

    from causalcache_memory.archive.local import LocalArchive

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = generate_ext_tasks(settings.generator, 2 * settings.tasks_per_split, settings.task_seed)
    start = time.perf_counter()
    outcomes: list[EpisodeOutcome] = []
    for seed in settings.policy_seeds:
        for arm in settings.arms:
            archive = LocalArchive(out / f"archive-{arm}-s{seed}")
            pol = policy(settings.policy, seed)
            memory, allocation = _memory(arm, settings.budget, pol, archive, settings)
            oracle = allocation if arm == "oracle" else None
            graph = build_world_agent(memory, InMemorySaver())
            for task in tasks:
                outcome = run_ext_episode(
                    task, memory, graph, arm=arm, pol=pol, archive=archive, seed=seed,
                    max_steps=len(task.steps) + settings.extra_steps,
                    evidence=oracle.truth if oracle is not None else None,
                )  # fmt: skip
                outcomes.append(outcome)
                if progress:
                    progress(outcome)
    arms = list(settings.arms)
    results = summarize(outcomes, arms, ni_margin=settings.ni_margin)
    if "random" in arms:
        vs_random = summarize(outcomes, arms, baseline="random", ni_margin=settings.ni_margin)
        results["contrasts_vs_random"] = vs_random["contrasts_by_arm"]
    results["could_swap"] = {
        arm: could_swap_decline([o for o in outcomes if o.arm == arm], settings.budget)
        for arm in arms
        if EXT_ARMS[arm] == "selector"
    }
    results["meta"] = {
        "generator": settings.generator,
        "text_format": generator(settings.generator).text_format,
        "policy": settings.policy,
        "tasks": len(tasks),
        "tasks_per_split": settings.tasks_per_split,
        "task_seed": settings.task_seed,
        "policy_seeds": list(settings.policy_seeds),
        "budget": settings.budget,
        "arms": arms,
        "selector": settings.selector_path or "bundled",
        "min_gain": settings.min_gain,
        "screen_text": settings.screen_text,
        "sealed": settings.sealed,
        "wall_s": round(time.perf_counter() - start, 2),
        "machine": f"{_platform.machine()} {_platform.processor() or ''}".strip(),
        "python": _platform.python_version(),
    }
    results["episodes"] = [o.to_dict() for o in outcomes]
    return results
