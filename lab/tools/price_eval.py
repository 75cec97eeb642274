"""Priced vs unpriced memory under two prompt layouts: success and predicted prompt-cache writes (issue 50).

    nice -n 10 python lab/tools/price_eval.py --world-tasks 24 --ext-tasks 8 --out docs/results/price_eval.json

Arms (B = 4): ``recent`` (Recent-4), ``recent_batch`` (Recent-4 with batch eviction, chunk 2),
``causalcache`` (the bundled selector, two passes), ``causalcache_priced`` (the same selector inside
the priced decision, ``allocation.priced`` at its defaults, priced with the Anthropic cache model) and
``causalcache_priced_s3`` (the same with ``slide_every: 3``: a fresher window, more writes), each in
the ``retained_turns`` and ``cache_friendly`` layouts. Tasks: the world family's development worlds
(``worlds=dev``) and the left-out generators desktop, web and mobile (development task seed 0, never the
sealed seeds of docs/sealed/generators-v1.yaml), under policy seeds 0, 1, 2.

Every model call (pass 1 and pass 2) is counted by one account of the rendered prompt (Qwen2.5-VL image
rule at each screenshot's recorded size; text tokens from a deterministic word-piece stand-in tokenizer,
so text counts are approximate and image counts exact) and fed to two caches: Anthropic-style breakpoints
(hosted ``anthropic-claude`` prices and TTL, anchors ``summaries``, ``turn:-1``, ``end``) and OpenAI-style
automatic prefix caching (hosted ``openai-gpt-4o`` prices, blocks of 128). Calls are 5 s apart.

Prints one markdown table (per arm and layout: memory-critical and control success with task-bootstrap
95% intervals, cache-write and cache-read tokens per step and cost per step under both caches, pass-2
share) and writes the raw numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_lab.eval.prompt_price import MultiMeter

ARMS = {
    "recent": {"allocator": "recent"},
    "recent_batch": {"allocator": "recent_batch", "batch_chunk": 2},
    "causalcache": {"allocator": "selector"},
    "causalcache_priced": {"allocator": "selector", "priced": {}},
    "causalcache_priced_s3": {"allocator": "selector", "priced": {"slide_every": 3}},
    # the mean-B contract (allocation/mean_b.py; docs/notebook/results/price_replan.md), chunk 3; the
    # priced arm at the rate chosen on the dev worlds (try 3; tries 1-2 ran it at 30000: --exchange-rate)
    "recent_mean_b": {"allocator": "recent", "mean_b": {"chunk": 3}},
    "causalcache_mean_b": {"allocator": "selector", "mean_b": {"chunk": 3}},
    "causalcache_mean_b_priced": {
        "allocator": "selector",
        "mean_b": {"chunk": 3},
        "priced": {"exchange_rate": 100000},
    },
}
LAYOUTS = ("retained_turns", "cache_friendly", "conversation")
MEAN_B: dict[str, Any] = {}  # allocation.mean_b overrides (--chunk)
EXT_GENERATORS = {"desktop": "noisy", "web": "noisy", "mobile": "noisy"}
PRICED: dict[str, Any] = {}  # allocation.priced overrides (--exchange-rate, --recent-value, --slide-every)


def _config(arm: str, layout: str, selector_text: bool) -> dict[str, Any]:
    spec = {k: dict(v) if k in ("priced", "mean_b") else v for k, v in ARMS[arm].items()}
    if "priced" in spec:
        spec["priced"].update(PRICED)
    if "mean_b" in spec:
        spec["mean_b"].update(MEAN_B)
    allocation: dict[str, Any] = {
        "allocator": spec.pop("allocator"),
        **spec,
        "idle_warning": {"enabled": False},
    }
    allocation["selector"] = {"timeout_ms": 2000}
    return {
        "budget": 4,
        "allocation": allocation,
        "policy": {"kind": "simulated"},
        "render": {"layout": layout},
    }


def _memory(arm: str, layout: str, pol: Any, archive: Any, meter: MultiMeter, text_source: Any) -> Any:
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.config.loader import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    config = parse_config(_config(arm, layout, True))
    allocation = build_allocator(config.allocation)
    inner = getattr(allocation, "inner", allocation)
    if hasattr(inner, "use_screen_text"):
        inner.use_screen_text(text_source(archive))
    return CausalCacheMemory(
        config=config, policy=pol, archive=archive, allocation=allocation, prompt_cost=meter
    )


def _episode_row(family: str, world: str, task: Any, arm: str, layout: str, seed: int, outcome: Any,
                 calls: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    steps = max(1, len(outcome.log))
    row: dict[str, Any] = {
        "family": family, "world": world, "task": task.task_id, "split": task.split, "arm": arm,
        "layout": layout, "seed": seed, "success": bool(outcome.success), "decisions": len(outcome.log),
        "pass2": sum(1 for d in outcome.log if d.get("second_pass")), "calls": len(calls),
        "images_per_call": sum(c["images"] for c in calls) / max(1, len(calls)),
        "images_max": max((c["images"] for c in calls), default=0),
        "retained_per_call": sum(c["retained"] for c in calls) / max(1, len(calls)),
        "prompt_per_call": sum(c["anthropic"].prompt_tokens for c in calls) / max(1, len(calls)),
    }  # fmt: skip
    for name in ("anthropic", "automatic"):
        costs = [c[name] for c in calls]
        row[name] = {
            "write_per_step": sum(c.cache_write_tokens for c in costs) / steps,
            "read_per_step": sum(c.cache_read_tokens for c in costs) / steps,
            "prompt_per_step": sum(c.prompt_tokens for c in costs) / steps,
            "cost_per_step": sum(c.cost for c in costs) / steps,
        }
    return row


def run_world(args: argparse.Namespace, out: Path, rows: list[dict[str, Any]]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from causalcache_lab.eval.world_agent import build_world_agent, run_world_episode
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_lab.world.family import policy_for_world
    from causalcache_lab.world.family_tasks import generate_world_tasks, world_of
    from causalcache_memory.archive.local import LocalArchive

    tasks = generate_world_tasks(args.world_tasks, args.task_seed, worlds="dev", purpose="evaluate")
    for seed in args.seeds:
        for arm in args.arms:
            for layout in args.layouts:
                archive = LocalArchive(out / f"world-{arm}-{layout}-s{seed}")
                for world in dict.fromkeys(world_of(t) for t in tasks):
                    pol = policy_for_world(world, seed)
                    meter = MultiMeter()
                    memory = _memory(arm, layout, pol, archive, meter, WorldScreenText)
                    graph = build_world_agent(memory, InMemorySaver())
                    for task in (t for t in tasks if world_of(t) == world):
                        meter.take()
                        thread = f"{arm}-{layout}-s{seed}-{task.task_id}"
                        outcome = run_world_episode(task, memory, graph, arm=arm, policy=pol, archive=archive,
                                                    thread_id=thread, max_steps=len(task.steps) + 6, seed=seed)  # fmt: skip
                        rows.append(_episode_row("world", world, task, arm, layout, seed, outcome,
                                                 meter.take()))  # fmt: skip
                _progress(rows)


def run_ext(args: argparse.Namespace, out: Path, rows: list[dict[str, Any]]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from causalcache_lab.eval.world_agent import build_world_agent
    from causalcache_lab.worlds_ext.harness import ExtScreenText, run_ext_episode, sealed_set
    from causalcache_lab.worlds_ext.policies import policy
    from causalcache_lab.worlds_ext.tasks import generate_ext_tasks
    from causalcache_memory.archive.local import LocalArchive

    sealed = sealed_set()
    if args.task_seed in sealed["task_seeds"] or set(args.seeds) & set(sealed["policy_seeds"]):
        sys.exit(f"seeds {args.task_seed}/{args.seeds} touch the sealed set {sealed}; use development seeds")
    for gen, pol_name in ((g, EXT_GENERATORS[g]) for g in args.generators):
        tasks = generate_ext_tasks(gen, 2 * args.ext_tasks, args.task_seed)
        for seed in args.seeds:
            for arm in args.arms:
                for layout in args.layouts:
                    archive = LocalArchive(out / f"ext-{gen}-{arm}-{layout}-s{seed}")
                    pol = policy(pol_name, seed)
                    meter = MultiMeter()
                    memory = _memory(arm, layout, pol, archive, meter, lambda _a: ExtScreenText())
                    graph = build_world_agent(memory, InMemorySaver())
                    for task in tasks:
                        meter.take()
                        outcome = run_ext_episode(task, memory, graph, arm=f"{arm}-{layout}", pol=pol,
                                                  archive=archive, seed=seed, max_steps=len(task.steps) + 6)  # fmt: skip
                        rows.append(_episode_row("ext", gen, task, arm, layout, seed, outcome,
                                                 meter.take()))  # fmt: skip
                    _progress(rows)


def _progress(rows: list[dict[str, Any]]) -> None:
    print(f"  {len(rows)} episodes, {time.process_time():.0f} s CPU", file=sys.stderr, flush=True)


def _ci(task_means: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    if len(task_means) == 0:
        return float("nan"), float("nan"), float("nan")
    boots = rng.choice(task_means, size=(2000, len(task_means))).mean(axis=1)
    return float(task_means.mean()), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def summarize(rows: list[dict[str, Any]], family: str | None = None) -> dict[str, Any]:
    """Per (arm, layout): success per split with task-bootstrap intervals, cache tokens and cost per step."""
    rng = np.random.default_rng(0)
    chosen = [r for r in rows if family is None or r["family"] == family]
    table: dict[str, Any] = {}
    for arm in ARMS:
        for layout in LAYOUTS:
            mine = [r for r in chosen if r["arm"] == arm and r["layout"] == layout]
            if not mine:
                continue
            cell: dict[str, Any] = {"episodes": len(mine)}
            for split in ("memory_critical", "control"):
                per_task: dict[tuple[str, str], list[float]] = defaultdict(list)
                for r in mine:
                    if r["split"] == split:
                        per_task[(r["world"], r["task"])].append(float(r["success"]))
                mean, lo, hi = _ci(np.array([np.mean(v) for v in per_task.values()]), rng)
                cell[split] = {"success": mean, "ci95": [lo, hi], "tasks": len(per_task)}
            decisions = sum(r["decisions"] for r in mine)
            cell["pass2_share"] = sum(r["pass2"] for r in mine) / max(1, decisions)
            calls = sum(r["calls"] for r in mine)
            if all("images_per_call" in r for r in mine):  # runs before the re-plan lack them
                for key in ("images_per_call", "retained_per_call", "prompt_per_call"):
                    cell[key] = sum(r[key] * r["calls"] for r in mine) / max(1, calls)
                cell["images_max"] = max(r["images_max"] for r in mine)
            for name in ("anthropic", "automatic"):
                cell[name] = {k: float(np.mean([r[name][k] for r in mine])) for k in mine[0][name]}
            table[f"{arm}/{layout}"] = cell
    return table


def markdown(table: dict[str, Any]) -> str:
    base = table.get("recent/retained_turns")
    lines = [
        "| arm | layout | memory-critical [95% CI] | control [95% CI] | write/step A (vs Recent-4 today) | "
        "read/step A | $/step A | write/step auto | read/step auto | $/step auto | pass 2 | "
        "images/call mean (max) | prompt tokens/call |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, c in table.items():
        arm, layout = key.split("/")
        mc, ct, a, o = c["memory_critical"], c["control"], c["anthropic"], c["automatic"]
        cut = f" ({a['write_per_step'] / base['anthropic']['write_per_step'] - 1:+.0%})" if base else ""
        cut_o = f" ({o['write_per_step'] / base['automatic']['write_per_step'] - 1:+.0%})" if base else ""
        lines.append(
            f"| {arm} | {layout} | {mc['success']:.2f} [{mc['ci95'][0]:.2f}, {mc['ci95'][1]:.2f}] "
            f"| {ct['success']:.2f} [{ct['ci95'][0]:.2f}, {ct['ci95'][1]:.2f}] "
            f"| {a['write_per_step']:.0f}{cut} | {a['read_per_step']:.0f} | {a['cost_per_step']:.4f} "
            f"| {o['write_per_step']:.0f}{cut_o} | {o['read_per_step']:.0f} | {o['cost_per_step']:.4f} "
            f"| {c['pass2_share']:.0%} | {c.get('images_per_call', float('nan')):.2f} ({c.get('images_max', '-')}) "
            f"| {c.get('prompt_per_call', float('nan')):.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world-tasks", type=int, default=24, help="tasks over the development worlds (0: none)")
    ap.add_argument(
        "--ext-tasks", type=int, default=8, help="tasks per split per left-out generator (0: none)"
    )
    ap.add_argument("--task-seed", type=int, default=0)
    ap.add_argument("--seeds", default="0,1,2", help="policy seeds")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="prompt layouts to run")
    ap.add_argument("--out", default="docs/results/price_eval.json")
    ap.add_argument("--generators", default=",".join(EXT_GENERATORS), help="left-out generators to run")
    ap.add_argument(
        "--merge", nargs="+", metavar="JSON", help="summarize the episodes of earlier runs' JSON files"
    )
    ap.add_argument("--exchange-rate", type=float, default=None, help="allocation.priced.exchange_rate")
    ap.add_argument("--recent-value", type=float, default=None, help="allocation.priced.recent_value")
    ap.add_argument("--slide-every", type=int, default=None, help="allocation.priced.slide_every")
    ap.add_argument("--chunk", type=int, default=None, help="allocation.mean_b.chunk")
    args = ap.parse_args(argv)
    if args.chunk is not None:
        MEAN_B["chunk"] = args.chunk
    for key in ("exchange_rate", "recent_value", "slide_every"):
        if getattr(args, key) is not None:
            PRICED[key] = getattr(args, key)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.arms = [a for a in args.arms.split(",") if a]
    args.layouts = [x for x in args.layouts.split(",") if x in LAYOUTS]
    args.generators = [g for g in args.generators.split(",") if g]
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    commands = ["python lab/tools/price_eval.py " + " ".join(argv if argv is not None else sys.argv[1:])]
    parts: list[dict[str, Any]] = []
    if args.merge:
        for path in args.merge:
            earlier = json.loads(Path(path).read_text())
            rows.extend(earlier["episodes"])
            commands.extend(earlier["commands"])
            parts.append(earlier["meta"])
    else:
        with tempfile.TemporaryDirectory(prefix="price_eval-") as tmp:
            if args.world_tasks:
                run_world(args, Path(tmp), rows)
            if args.ext_tasks:
                run_ext(args, Path(tmp), rows)
    result = {
        "commands": commands,
        "world": summarize(rows, "world"),
        "ext": summarize(rows, "ext"),
        "all": summarize(rows),
        "meta": {
            "wall_s": round(time.perf_counter() - start, 1),
            "cpu_s": round(time.process_time(), 1),
            "load_avg": os.getloadavg(),
            "machine": f"{platform.machine()} {os.cpu_count()} cores",
            "world_tasks": args.world_tasks,
            "ext_tasks_per_split": args.ext_tasks,
            "task_seed": args.task_seed,
            "policy_seeds": args.seeds,
            "budget": 4,
            "priced": PRICED,
            "mean_b": MEAN_B,
            **({"merged_runs": parts} if parts else {}),  # the merged runs' own settings and machine load
        },
        "episodes": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for part in ("world", "ext", "all"):
        if result[part]:
            print(f"\n{part}:\n{markdown(result[part])}")


if __name__ == "__main__":
    main()
