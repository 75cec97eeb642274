"""`causalcache learn` on a held-out world: record threads, learn, deploy, evaluate (RESULTS.md 9).

This is the "train on your own agent" scenario: the recorded episodes of the held-out world are the
*user's* data, so labelling and training on them is what a team does with its own agent. Nothing of the
method is chosen on this world (knobs, thresholds rules and the learn defaults were fixed before; the
exploration share on a dev world).

    python lab/tools/learn_heldout.py --out runs/learn_heldout --world heldout-02 --record 200 --eval 100
    python lab/tools/learn_heldout.py --out runs/explore --world heldout-02 --record 600 --explore 0.6
    python lab/tools/learn_heldout.py --out runs/ft --record-dir runs/explore/record --init-from bundled

``learn`` fine-tunes the bundled selector by default (RESULTS.md 9c); sections 9 and 9b trained from
scratch: rerun them with ``--init-from null``.

Steps: (1) record ``--record`` episodes through the LangGraph world agent (SQLite checkpointer, local
archive; policy seed 0; task seed 7001) with Recent-4, or with ``allocation.explore: {share: --explore,
allocator: --explore-allocator}`` (RESULTS.md 9b), and write the success labels the harness observed
(``success.json``) and the allocator each thread ran (``explored.json``);
(2) ``causalcache learn`` on those threads with each ``--sources`` entry (teacher-forced scoring by the
simulated policy; agreement labels with the simulated policy as a black box under seeds 0..k-1);
(3) closed loop on ``--eval`` fresh tasks of the world (task seed 9001, policy seeds 0,1,2): Recent-4,
the bundled selector (unless ``--skip-bundled``) and each learned selector; task-paired contrasts
(lab/tools/paired_contrast.py) and the share of selector decisions the OOD guard declined. Every step is
resumable: a recording, a learn stage or an evaluated arm already on disk is reused.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _record(
    out: Path, world: str, tasks: int, explore: dict | None, seed: int = 7001, allocator: str = "recent"
) -> tuple[Path, float]:
    """Record ``tasks`` episodes (task seed ``seed``, 7001 by default; policy seed 0) with ``allocator``
    (Recent-4 by default; ``selector``: the bundled selector deployed), with ``allocation.explore`` when
    given (config only, as a user would); writes ``success.json`` and ``explored.json``."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from causalcache_lab.eval.world_agent import build_world_agent, run_world_episode
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_lab.world.family import policy_for_world
    from causalcache_lab.world.family_tasks import generate_world_tasks
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.config import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    start = time.perf_counter()
    _clear_partial(out)
    out.mkdir(parents=True, exist_ok=True)
    allocation: dict = {"allocator": allocator}
    if explore:
        allocation["explore"] = explore
    config = parse_config({"budget": 4, "allocation": allocation, "policy": {"kind": "simulated"}})
    policy = policy_for_world(world, 0)
    archive = LocalArchive(out / "archive-recent-b4-s0")
    conn = sqlite3.connect(str(out / "checkpoints-recent-b4-s0.sqlite"), check_same_thread=False)
    success: dict[str, bool] = {}
    explored: dict[str, str] = {}
    try:
        allocator = build_allocator(config.allocation)
        for part in (allocator, getattr(allocator, "base", None)):  # the selector reads the screens' text
            if hasattr(part, "use_screen_text"):
                part.use_screen_text(WorldScreenText(archive))
        memory = CausalCacheMemory(config=config, policy=policy, archive=archive, allocation=allocator)
        graph = build_world_agent(memory, SqliteSaver(conn))
        for task in generate_world_tasks(tasks, seed, worlds=world, purpose="evaluate"):
            thread = f"recent-b4-s0-{task.task_id}"
            outcome = run_world_episode(
                task, memory, graph, arm="recent", policy=policy, archive=archive, seed=0,
                thread_id=thread, max_steps=len(task.steps) + 6,
            )  # fmt: skip
            success[thread] = bool(outcome.success)
            used = {str(r.get("allocator")) for r in outcome.log}
            explored[thread] = ",".join(sorted(used))
    finally:
        conn.close()
    (out / "success.json").write_text(json.dumps(success, indent=1))
    (out / "explored.json").write_text(json.dumps(explored, indent=1))
    return out / "success.json", time.perf_counter() - start


#: what :func:`_record` writes before its ``success.json``
_PARTIAL = ("archive-recent-b4-s0", "checkpoints-recent-b4-s0.sqlite", "explored.json", "record.json")


def _clear_partial(out: Path) -> list[str]:
    """Remove what an interrupted :func:`_record` left in ``out`` (no ``success.json``), and return its names.

    Recording again on top of it would resume every thread from its old checkpoint (the same thread ids),
    so the episodes would continue the interrupted ones: a devshift-00 recording resumed that way had 31
    successes where a clean one has 89 (RESULTS.md 9o)."""
    if (out / "success.json").exists():
        raise FileExistsError(
            f"{out} holds a finished recording (success.json); use --record-dir to reuse it"
        )
    removed = []
    for path in sorted(p for name in _PARTIAL for p in out.glob(name + "*")):  # with SQLite's side files
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        removed.append(path.name)
    if removed:
        print(f"an interrupted recording in {out} was removed ({', '.join(removed)}); recording again")
    return removed


def _learn(
    out: Path, record: Path, world: str, source: str, k: int, train: dict, labels: dict, all_episodes: bool
) -> dict:
    from causalcache_lab.learn import load_learn_config, run_learn

    raw = {
        "output": str(out),
        "data": {
            "threads": {
                "checkpointer": str(record / "checkpoints-recent-b4-s0.sqlite"),
                "archive": str(record / "archive-recent-b4-s0"),
                "success": str(record / "success.json"),
                "source": "synthetic-world",
            }
        },
        "labels": {"budgets": [4], **labels},
        # the screens' text as the deployed selector reads it (the world's exact OCR over the archive): a
        # team's memory stores it with the screenshots or OCRs them; learn read none before RESULTS.md 9f
        "screen_text": {"factory": "causalcache_lab.selector.world_text:world_screen_text"},
        "sources": {source: 1.0},
        "deploy": {"budget": 4},
    }
    if all_episodes:  # failed episodes too (with labels.reference: full_history, RESULTS.md 9g)
        raw["data"]["successful_only"] = False
    if train:  # else learn's defaults (init_from: LEARN_INIT_FROM)
        raw["train"] = train
    if source == "teacher_forced":
        raw["labeller"] = {"factory": "learn_heldout:world_policy", "kwargs": {"world": world}}
    else:
        raw["labeller"] = {"factory": "learn_heldout:world_policies", "kwargs": {"world": world, "k": k}}
        raw["agreement"] = {"k": k, "temperature": None}
    return run_learn(load_learn_config(**raw), progress=False, log=print)


def world_policy(world: str):  # type: ignore[no-untyped-def]
    from causalcache_lab.world.family import policy_for_world

    return policy_for_world(world, 0)


def world_policies(world: str, k: int):  # type: ignore[no-untyped-def]
    from causalcache_lab.world.family import policy_for_world

    return [policy_for_world(world, s) for s in range(k)]


def _evaluate(
    out: Path, world: str, tasks: int, selector: str | None, arms: tuple[str, ...], seed: int = 9001
) -> dict:
    from causalcache_lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop

    counts = {"decisions": 0, "ood": 0}

    def count(outcome) -> None:  # type: ignore[no-untyped-def]
        if outcome.arm != "causalcache":
            return
        for rec in outcome.log:
            if int(rec.get("t", 0)) > outcome.budget + 1:  # a swap is possible: the selector decides
                counts["decisions"] += 1
                counts["ood"] += rec.get("fallback") == "ood"

    done = out / "eval.json"
    if done.exists():  # resumable: an arm already evaluated is not rerun
        return json.loads(done.read_text())
    settings = ClosedLoopSettings(
        tasks=tasks, seed=seed, arms=arms, worlds=world, policy_seeds=(0, 1, 2), budget_curve=(),
        budget=4, selector_path=selector,
    )  # fmt: skip
    start = time.perf_counter()
    results = run_closed_loop(settings, out, progress=False, on_episode=count)
    results.pop("showcase", None)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    summary = {
        "ood_rate": counts["ood"] / max(counts["decisions"], 1),
        **counts,
        "seconds": time.perf_counter() - start,
    }
    done.write_text(json.dumps(summary, indent=1))
    return summary


def main(argv: list[str] | None = None) -> int:
    from paired_contrast import contrast

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/learn_heldout")
    p.add_argument("--world", default="heldout-02")
    p.add_argument("--record", type=int, default=200)
    p.add_argument("--eval", type=int, default=100)
    p.add_argument("--sources", default="teacher_forced,agreement")
    p.add_argument("--k", type=int, default=4)
    p.add_argument(
        "--explore",
        type=float,
        default=0.0,
        help="record this share of episodes with allocation.explore (0 = Recent-4 only)",
    )
    p.add_argument("--explore-allocator", default="random")
    p.add_argument(
        "--record-allocator",
        default="recent",
        help="allocator the recorded episodes run (recent: Recent-4; selector: the bundled selector deployed)",
    )
    p.add_argument(
        "--skip-bundled", action="store_true", help="evaluate Recent-4 only, not the bundled selector"
    )
    p.add_argument(
        "--bundled", help="results.json of an earlier bundled-selector run on the same --eval tasks"
    )
    p.add_argument("--recent", help="results.json of an earlier Recent-4 run on the same --eval tasks")
    p.add_argument(
        "--record-dir", help="learn from this earlier recording (read only) instead of recording into --out"
    )
    p.add_argument(
        "--init-from",
        help="train.init_from for learn: bundled | a model dir | .onnx | null (from scratch); "
        "default: learn's own default",
    )
    p.add_argument("--record-seed", type=int, default=7001, help="task seed of the recorded episodes")
    p.add_argument("--eval-seed", type=int, default=9001, help="task seed of the evaluation tasks")
    p.add_argument("--train", default="{}", help="learn's train section as JSON (e.g. '{\"lr\": 0.001}')")
    p.add_argument(
        "--labels",
        default="{}",
        help='added to learn\'s labels section, JSON (e.g. \'{"reference": "full_history"}\')',
    )
    p.add_argument(
        "--all-episodes", action="store_true", help="data.successful_only: false (label failed episodes)"
    )
    args = p.parse_args(argv)
    out = Path(args.out)
    train = json.loads(args.train)
    if args.init_from is not None:
        train["init_from"] = None if args.init_from == "null" else args.init_from
    report: dict = {
        "world": args.world,
        "train": train or "learn defaults",
        "labels": json.loads(args.labels) or "learn defaults",
        "all_episodes": args.all_episodes,
    }
    rec = Path(args.record_dir) if args.record_dir else out / "record"
    if not (rec / "success.json").exists():
        explore = {"share": args.explore, "allocator": args.explore_allocator} if args.explore else None
        _, secs = _record(rec, args.world, args.record, explore, args.record_seed, args.record_allocator)
        meta = {"seconds": round(secs, 1), "explore": explore, "allocator": args.record_allocator}
        (rec / "record.json").write_text(json.dumps(meta))
    if (rec / "record.json").exists():
        report["record"] = json.loads((rec / "record.json").read_text())
    success = json.loads((rec / "success.json").read_text())
    report["recorded"] = {"episodes": len(success), "successes": sum(success.values())}
    sources = [x for x in args.sources.split(",") if x]
    recent = Path(args.recent) if args.recent else out / "eval-recent/results.json"
    bundled = Path(args.bundled) if args.bundled else out / "eval-bundled/results.json"
    evals = {}
    if not args.recent:
        evals["recent"] = _evaluate(
            out / "eval-recent", args.world, args.eval, None, ("recent",), args.eval_seed
        )
    if not args.bundled and not args.skip_bundled:
        evals["bundled"] = _evaluate(
            out / "eval-bundled", args.world, args.eval, None, ("causalcache",), args.eval_seed
        )
    for source in sources:
        summary = _learn(
            out / f"learn-{source}",
            rec,
            args.world,
            source,
            args.k,
            train,
            json.loads(args.labels),
            args.all_episodes,
        )
        report[f"learn-{source}"] = {
            "seconds": summary["seconds"],
            "plan": summary["plan"],
            "stages": {
                n: {k: v for k, v in s.items() if k != "report"} for n, s in summary["stages"].items()
            },
        }
        evals[source] = _evaluate(
            out / f"eval-{source}", args.world, args.eval, summary["model"], ("causalcache",), args.eval_seed
        )
    report["eval"] = evals
    report["contrasts"] = {}
    arms = {source: out / f"eval-{source}/results.json" for source in sources}
    if bundled.exists():
        arms = {"bundled": bundled, **arms}
    for name, mine in arms.items():
        report["contrasts"][f"{name}_vs_recent"] = contrast(f"{mine}:causalcache", f"{recent}:recent")
        if name != "bundled" and bundled.exists():
            report["contrasts"][f"{name}_vs_bundled"] = contrast(
                f"{mine}:causalcache", f"{bundled}:causalcache"
            )
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report["contrasts"], indent=1))
    print(json.dumps(report["eval"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
