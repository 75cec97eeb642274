"""Scenario: two-pass accounting in closed loop (added model time, its share of step time, fire rate).

Each episode runs the synthetic world (:class:`~causalcache_lab.world.env.GuiWorld`) with a policy
runtime behind :class:`~causalcache_memory.controller.MemoryController` and the learned selector: pass 1
on Recent-B, the selector with ``a_1`` as witness, pass 2 only when ``S* != Recent-B``. Per budget ``B``:

* ``added_model_ms``: pass-2 model time per step, averaged over *all* steps (0 where it did not fire);
* ``added_share``: ``sum(pass-2 time) / sum(step wall time)``, the share of the measured step wall time
  (decide + environment + record) spent in pass 2, as the paper reports it;
* ``fire_rate``: share of steps where pass 2 ran; ``selector_ms``: mean allocation time per step;
* ``added_with_selector_share``: the same share counting the selector's time as added too (a Recent-B
  agent runs neither);
* ``cache_write_per_step``, ``cache_read_per_step``, ``cache_cost_per_step``: the predicted prompt-cache
  writes and reads of both passes under the hosted Anthropic cache model, in the paper's layout
  (:func:`~causalcache_lab.eval.prompt_price.make_meter`; counting runs before each model call, so the
  step wall time includes it, not the model time).

The default runtime is the world's :class:`~causalcache_lab.world.sim_policy.SimulatedPolicy`, which
is not a VLM: its "model" time is OCR of cached screenshots, so shares are not comparable to a real
policy. ``policy="transformers"`` with ``model_path`` runs a local Qwen-VL directory instead.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_lab.bench.stats import owns_workdir
from causalcache_memory.errors import CausalCacheWarning

__all__ = ["POLICY_RUNTIMES", "run_two_pass"]

POLICY_RUNTIMES = ("simulated", "transformers")


def _policy(kind: str, model_path: str | Path | None) -> Any:
    if kind.endswith((".yaml", ".yml")):  # any runtime: the `policy` section of a CausalCache config
        from causalcache_memory.config import load_config
        from causalcache_memory.runtime.registry import build_policy

        return build_policy(load_config(kind).policy)
    if kind == "simulated":
        from causalcache_lab.world.sim_policy import SimulatedPolicy

        return SimulatedPolicy(seed=0)
    if kind == "transformers":
        if model_path is None:
            from causalcache_memory.errors import ConfigError

            raise ConfigError(
                "--policy transformers needs --model-path DIR (a local Qwen-VL model directory)"
            )
        from causalcache_memory.runtime.transformers_policy import TransformersPolicy

        return TransformersPolicy.from_pretrained(model_path)
    from causalcache_memory.errors import ConfigError

    raise ConfigError(
        f"--policy {kind!r} is not supported; choose from {list(POLICY_RUNTIMES)} or pass a config YAML "
        "whose `policy` section names any runtime (sglang, openai, transformers)"
    )


def _episode(task: Any, controller: Any, max_steps: int, index: int) -> list[dict[str, float]]:
    from causalcache_lab.world.env import GuiWorld
    from causalcache_memory.trace import Trace

    world = GuiWorld(task)
    trace = Trace(task.goal, episode_id=f"two-pass-{index}", platform=world.platform)
    controller.observe(trace, world.reset())
    rows = []
    for _ in range(max_steps):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalCacheWarning)
            decision = controller.decide(trace)
        action = decision.action
        if action is None or action.type == "done":
            rows.append(_row(decision, time.perf_counter() - start))
            break
        png, info = world.step(action)
        controller.record(trace, decision, png, app=info.app, screen_size=world.size)
        rows.append(_row(decision, time.perf_counter() - start))
        if info.done:
            break
    return rows


def _row(decision: Any, wall_s: float) -> dict[str, float]:
    passes = decision.pass_latency_s
    return {
        "wall": wall_s,
        "pass2": passes[1] if decision.second_pass and len(passes) > 1 else 0.0,
        "model": sum(passes),
        "selector": decision.selector_latency_s,
        "fired": float(decision.second_pass),
        **{
            key: float(sum(c.get(key) or 0 for c in decision.extra.get("prompt_cost") or () if c))
            for key in ("cache_write_tokens", "cache_read_tokens", "cost")
        },
    }


@owns_workdir
def run_two_pass(
    *,
    budgets: Sequence[int] = (1, 2, 4),
    episodes: int = 6,
    max_steps: int = 30,
    policy: str = "simulated",
    model_path: str | Path | None = None,
    selector_model: str | Path | None = None,
    workdir: str | Path | None = None,
    platform: str = "mobile",
) -> dict[str, Any]:
    """``{"two_pass": {"B<b>": {"added_model_ms", "added_share", "fire_rate", ...}}}``."""
    from causalcache_lab.eval.prompt_price import make_meter
    from causalcache_lab.world.tasks import generate_tasks
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.selector.allocator import SelectorAllocator

    root = Path(workdir)  # type: ignore[arg-type]  # set by owns_workdir
    runtime = _policy(policy, model_path)
    tasks = generate_tasks(episodes, seed=7, platform=platform)
    out: dict[str, Any] = {}
    for budget in budgets:
        archive = LocalArchive(root / f"two-pass-B{budget}")
        selector = SelectorAllocator(selector_model, threads=1)
        controller = MemoryController(
            policy=runtime, archive=archive, allocator=selector, budget=budget, prompt_cost=make_meter()
        )
        rows: list[dict[str, float]] = []
        try:
            for index, task in enumerate(tasks):
                rows.extend(_episode(task, controller, max_steps, index))
        finally:
            controller.close()
        wall = sum(r["wall"] for r in rows)
        pass2 = sum(r["pass2"] for r in rows)
        selector = sum(r["selector"] for r in rows)
        n = max(len(rows), 1)
        out[f"B{budget}"] = {
            "added_model_ms": round(pass2 * 1000.0 / n, 3),
            "added_share": round(pass2 / max(wall, 1e-12), 4),
            "fire_rate": round(sum(r["fired"] for r in rows) / n, 4),
            "added_with_selector_share": round((pass2 + selector) / max(wall, 1e-12), 4),
            "model_ms": round(sum(r["model"] for r in rows) * 1000.0 / n, 3),
            "selector_ms": round(sum(r["selector"] for r in rows) * 1000.0 / n, 3),
            "step_wall_ms": round(wall * 1000.0 / n, 3),
            "steps": len(rows),
            "cache_write_per_step": round(sum(r["cache_write_tokens"] for r in rows) / n, 1),
            "cache_read_per_step": round(sum(r["cache_read_tokens"] for r in rows) / n, 1),
            "cache_cost_per_step": round(sum(r["cost"] for r in rows) / n, 6),
        }
    return {"two_pass": out, "two_pass_info": {"policy": policy, "episodes": episodes, "platform": platform}}
