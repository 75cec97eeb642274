"""The closed loop's agent: a LangGraph graph with ``CausalCacheMemory`` acting in the synthetic world.

``observe -> decide -> act(+record) -> decide ...`` until ``done`` or the step cap. Every arm runs this
same graph; only the memory's allocator differs (:func:`memory_for`). The ``oracle`` arm's allocator
reads the world's ground truth, which ``act`` writes into the run context's ``evidence`` map (no other
arm and no policy sees it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from causalcache_memory._optional import require
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.config.loader import parse_config
from causalcache_memory.selector.threshold import DEFAULT_SHARE_WINDOW

if TYPE_CHECKING:
    from causalcache_lab.world.tasks import Task
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = [
    "ARMS",
    "EpisodeOutcome",
    "WorldContext",
    "WorldOracle",
    "build_world_agent",
    "memory_for",
    "run_world_episode",
]

#: arm name -> allocator name (``summary_only`` runs Recent at B = 0; ``oracle`` is built here)
ARMS: dict[str, str] = {
    "summary_only": "recent",
    "recent": "recent",
    "random": "random",
    "first": "first",
    "evenly_spaced": "evenly_spaced",
    "rgb": "rgb",
    "oracle": "recent",
    "causalcache": "selector",  # the method's arm runs the learned selector
}


@dataclass
class EpisodeOutcome:
    """One episode of one arm under one policy seed."""

    task_id: str
    split: str
    arm: str
    budget: int
    success: bool
    steps: int
    wall_s: float
    log: list[dict[str, Any]] = field(default_factory=list)
    thread_id: str = ""
    seed: int = 0
    world: str = "v2"
    #: steps whose post-action screen showed a value the task needs (the world's ground truth; read only
    #: by the report's reliability table, never by an arm)
    evidence_steps: tuple[int, ...] = ()

    def with_log(self) -> dict[str, Any]:
        """The episode's identity, outcome and whole decision log (what the guard studies read)."""
        keys = ("task_id", "seed", "arm", "split", "success", "log")
        return {k: getattr(self, k) for k in keys}

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "world": self.world,
            "split": self.split,
            "arm": self.arm,
            "budget": self.budget,
            "seed": self.seed,
            "success": self.success,
            "steps": self.steps,
            "wall_s": round(self.wall_s, 4),
            "k": [r.get("k", 0) for r in self.log],
            "second_pass": [bool(r.get("second_pass")) for r in self.log],
            "evidence_steps": list(self.evidence_steps),
            "swaps": [
                {
                    "t": r["t"],
                    "predicted_gain": r.get("predicted_gain"),
                    "restored": sorted(set(r.get("selected", ())) - set(r.get("recent", ()))),
                }
                for r in self.log
                if r.get("k", 0) > 0
            ],
            "fallbacks": [r.get("fallback") for r in self.log],
            "ood_masked": [r.get("ood_masked") for r in self.log],
            # feature groups the selector reads that no event had (e.g. "text"), per decision
            "masked": [r.get("masked") for r in self.log],
        }


class WorldAgentState(TypedDict, total=False):
    """State of the evaluation agent (the memory adds its own ``cc_*`` keys)."""

    goal: str
    app: str
    steps: int
    done: bool


@dataclass(frozen=True)
class WorldContext:
    """Run context: the memory's objects under ``causalcache`` plus the world (the 'device').

    ``evidence`` (event index -> needed values shown), when given, receives the world's ground truth
    after each step; only the ``oracle`` arm's allocator reads it.
    """

    causalcache: Any
    world: Any
    max_steps: int = 30
    evidence: dict[int, tuple[int, ...]] | None = None


# ---------------------------------------------------------------------------------------------- graph
def build_world_agent(memory: Any, checkpointer: Any = None, *, screen_text: bool = False) -> Any:
    """The evaluation agent: ``observe -> decide -> act(+record) -> decide ...`` until done or the cap.

    ``act`` executes ``memory.action(state)`` in the world held by the run context and returns the
    post-action screenshot, which the memory archives and records as the step's ``v_t``. With
    ``screen_text=True`` both screenshot nodes also return the world's ``screen_text()`` under the key
    ``screen_text`` (what a team with an accessibility tree returns), which the memory stores beside the
    screenshot in the archive.
    """
    require("langgraph", purpose="the closed-loop harness")
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    def first_screen(state: WorldAgentState, runtime: Runtime[WorldContext]) -> dict[str, Any]:
        world = runtime.context.world
        out = {"screenshot": world.screenshot(), "app": world.app, "steps": 0, "done": False}
        return {**out, "screen_text": world.screen_text()} if screen_text else out

    def act(state: WorldAgentState, runtime: Runtime[WorldContext]) -> dict[str, Any]:
        from causalcache_memory.actions.model import Action

        world = runtime.context.world
        raw = memory.action(state)
        action = Action.from_dict(raw) if isinstance(raw, dict) else (raw or Action("wait"))
        png, info = world.step(action)
        steps = int(state.get("steps", 0)) + 1
        if runtime.context.evidence is not None and info.evidence:
            runtime.context.evidence[steps] = info.evidence  # event ``steps`` shows these values
        done = info.done or steps >= runtime.context.max_steps
        out = {"screenshot": png, "app": info.app_after, "steps": steps, "done": done}
        return {**out, "screen_text": world.screen_text()} if screen_text else out

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


class WorldOracle:
    """The ``oracle`` arm: the calibration's evidence oracle reading the closed loop's ground truth."""

    name = "evidence_oracle"
    uses_witness = False

    def __init__(self) -> None:
        from causalcache_lab.world.calibration import EvidenceOracleAllocator

        self.truth: dict[int, tuple[int, ...]] = {}
        self._oracle = EvidenceOracleAllocator()
        self._oracle.evidence = lambda ctx: self.truth  # type: ignore[method-assign]

    def allocate(self, ctx: Any) -> Any:
        return self._oracle.allocate(ctx)


def memory_for(
    arm: str,
    budget: int,
    policy: Policy,
    archive: ScreenshotArchive,
    selector_path: str | None,
    min_gain: float | str = "auto",
    allocation: Any = None,
    *,
    share_window: int | None = DEFAULT_SHARE_WINDOW,
    screen_text: bool = True,
    prompt_cost: Any = None,
) -> Any:
    """The memory of one arm: its allocator at ``budget`` (``summary_only``: B = 0) over ``archive``.

    The selector arm reads each screen's text with the world's exact OCR, as in training; with
    ``screen_text=False`` it reads none (not even the archive's own ``get_text``), so its ``text_*``
    features are masked on every decision -- a deployment with neither ``screen_text`` nor OCR.
    ``prompt_cost``: a :class:`~causalcache_memory.prompt_cost.PromptCostMeter` for the memory (None: none).
    """
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    effective = 0 if arm == "summary_only" else budget
    # at B = 0 every allocator shows nothing: the selector would only load its model (and be warned about)
    allocator = ARMS[arm] if effective else "recent"
    config = parse_config(
        {
            "budget": effective,
            "allocation": {
                "allocator": allocator,
                "selector": {
                    "model_path": selector_path,
                    "timeout_ms": 2000,
                    "min_gain": min_gain,
                    "share_window": share_window,
                },
                # withholding screen text is this run's point: the memory's warning about it is not news
                **({} if screen_text else {"idle_warning": {"missing_text_share": None}}),
            },
            "policy": {"kind": "simulated"},
        }
    )
    if allocation is None:
        allocation = build_allocator(config.allocation)
        if allocator == "selector":  # the screens' text, read as in training (the world's exact OCR)
            from causalcache_lab.selector.world_text import NoScreenText, WorldScreenText

            allocation.use_screen_text(WorldScreenText(archive) if screen_text else NoScreenText())
    return CausalCacheMemory(
        config=config, policy=policy, archive=archive, allocation=allocation, prompt_cost=prompt_cost
    )


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
    seed: int = 0,
    evidence: dict[int, tuple[int, ...]] | None = None,
) -> EpisodeOutcome:
    """Run ``task`` through the compiled agent ``graph`` and score it with the task's checker.

    ``evidence`` (the oracle arm's ground-truth map) is cleared and then filled as the world steps.
    """
    from causalcache_lab.world.env import GuiWorld
    from causalcache_memory.integrations.langgraph import CausalCacheContext

    world = GuiWorld(task)
    if evidence is not None:
        evidence.clear()
    else:
        evidence = {}  # the world's ground truth, for the report only (no allocator reads this map)
    context = WorldContext(
        causalcache=CausalCacheContext(policy=policy, archive=archive),
        world=world,
        max_steps=max_steps,
        evidence=evidence,
    )
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 10_000}
    log: list[dict[str, Any]] = []
    start = time.perf_counter()
    for mode, chunk in graph.stream(
        {"goal": task.goal}, config, context=context, stream_mode=["custom"], subgraphs=False
    ):
        if mode == "custom" and isinstance(chunk, dict) and "t" in chunk:
            log.append(chunk)
    success = bool(task.check(world.state()))
    wall = time.perf_counter() - start
    return EpisodeOutcome(
        task.task_id,
        task.split,
        arm,
        memory.budget,
        success,
        world.steps,
        wall,
        log,
        thread_id,
        seed,
        evidence_steps=tuple(sorted(evidence)),
    )
