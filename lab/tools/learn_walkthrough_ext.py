"""The black-box-agent walkthrough of docs/LEARN.md on a generator the bundle never trained on (issue 55).

One command per generator (``web``: the bundled guard idle; ``desktop``: partly idle)::

    nice -n 10 .venv/bin/python lab/tools/learn_walkthrough_ext.py web --out runs/walk_web --witness-only
    nice -n 10 .venv/bin/python lab/tools/learn_walkthrough_ext.py desktop --out runs/walk_desktop --witness-only

and a replication on fresh tasks, reusing the recording and the learned models, pooled with the first::

    nice -n 10 .venv/bin/python lab/tools/learn_walkthrough_ext.py web --out runs/walk_web --witness-only --eval-seed 300
    nice -n 10 .venv/bin/python lab/tools/learn_walkthrough_ext.py web --out runs/walk_web --pool-seeds 200,300

What a team does, step by step (docs/LEARN.md, "A black-box agent, end to end"), with the worlds_ext
generator's simulated policy (``--policy``, ``noisy`` by default) as the team's agent:

1. **Record** ``--record`` episodes (at most 300; task seed ``--record-seed``, policy seed 0) through
   ``CausalCacheMemory`` with the documented exploration, ``allocation: {allocator: selector, explore:
   {share: 0.6, allocator: random, seed: 0}}`` (the bundled selector deployed, reading the screens' text
   in the generator's own format), a SQLite checkpointer and a local archive; the screenshot nodes return
   each screen's text in the generator's format (``screen_text``, what a team with an accessibility tree
   returns), which the memory stores beside the screenshot, so ``learn`` and the prompt cap read it from
   the archive; ``success.json`` is the task checker's verdict per thread (what the team writes down).
2. **Guard-only refit** (``causalcache learn --guard-only``, no labels), timed in CPU seconds
   (``time.process_time`` of this process around the call: trajectories + guard stages).
3. **Full learn** with agreement labels only: the labeller is the documented factory form, the team's
   agent as a black box that only acts (:func:`agent_labeller`: the agent under ``k`` seeds, no
   likelihoods), ``sources: {agreement: 1.0}``, ``agreement: {k: 4}``, ``labels: {budgets: [4],
   prompt_cap: {}}``, ``deploy: {budget: 4}`` (the guide's learn.yaml; learn's other defaults).
4. **Deploy** each learned model with the witness-source check (:data:`WITNESS`: ``witness_check: true,
   ood_refit: 64, ood_refit_warmup: open``, docs/notebook/results/guard_rule_try2.md) set explicitly:
   ``<out>/deploy-guard.yaml`` and ``<out>/deploy-full.yaml`` are learn's deploy YAMLs with those keys
   added to ``allocation.selector``.
5. **Evaluate** the two deployments (the harness's ``causalcache_try2`` arm with their ``model_path`` and
   ``min_gain``) against Recent-4, Random-4, the bundle and the bundle with the same witness deployment
   on fresh tasks (task seed ``--eval-seed``, ``--eval`` per split, policy seeds 0,1) with the worlds_ext
   harness, and task-paired contrasts with bootstrap 95% intervals and helped/harmed
   (lab/tools/paired_contrast.py).

The screen registry the simulated agent "sees" through is this process's, so recording and learning run
in one process (a rerun records again unless both learn runs finished); the learn stages' timings and
every evaluated configuration are reused by a rerun. Only
development seeds are used (the harness refuses the sealed set, docs/sealed/generators-v1.yaml). Writes
``<out>/report.json`` (``report-s<seed>.json`` and ``eval-s<seed>-*`` folders for an ``--eval-seed`` other
than 200, so a replication on fresh tasks reuses the recording and the learn runs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the documented exploration (docs/LEARN.md section 1)
EXPLORE = {"share": 0.6, "allocator": "random", "seed": 0}
#: the deployment's guard settings (guard try 2, docs/notebook/results/guard_rule_try2.md), set explicitly
#: so the result does not depend on the library's defaults; the harness's ``causalcache_try2`` arm
WITNESS = {"witness_check": True, "ood_refit": 64, "ood_refit_warmup": "open"}
#: the harness arm that deploys :data:`WITNESS`
WITNESS_ARM = "causalcache_try2"
#: ``--witness-only``: the witness check with the deployed model's own guard kept (no online refit)
WITNESS_ONLY = {"witness_check": True, "ood_refit": None, "ood_refit_warmup": "bundled"}
#: harness arm -> the guard settings it deploys
ARM_SETTINGS = {WITNESS_ARM: WITNESS, "causalcache_witness": WITNESS_ONLY}
TOOL = Path(__file__).stem
#: the evaluation's default task seed (another seed gets its own eval folders and report)
EVAL_SEED = 200


def agent_labeller(policy: str, k: int) -> list[Any]:
    """The labeller factory: the team's agent as a black box that only acts, under seeds ``0..k-1``."""
    from causalcache_lab.worlds_ext.policies import policy as ext_policy

    return [ext_policy(policy, s) for s in range(k)]


def ext_screen_text(archive: Any = None) -> Any:
    """The screen text the memory stored beside each screenshot (the generator's own text format)."""
    from causalcache_lab.worlds_ext.harness import ExtScreenText

    return ExtScreenText()


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


def record(out: Path, generator: str, policy: str, n: int, seed: int) -> dict[str, Any]:
    """Step 1: ``n`` episodes through the memory with the documented exploration."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from causalcache_lab.eval.world_agent import build_world_agent
    from causalcache_lab.worlds_ext.harness import ExtScreenText, run_ext_episode
    from causalcache_lab.worlds_ext.policies import policy as ext_policy
    from causalcache_lab.worlds_ext.tasks import generate_ext_tasks
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.config import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    done = out / "record.json"
    later = [out.parent / "guard-run.json", out.parent / "full-run.json"]
    if done.exists() and all(p.exists() for p in later):
        return dict(json.loads(done.read_text()))
    # the simulated agent and the screen text see the screens through this process's registry, which a
    # new process lacks: a recording is reused only when nothing after it needs to see its screens
    if out.exists():
        import shutil

        shutil.rmtree(out)  # an interrupted recording: threads would resume their old checkpoints
    out.mkdir(parents=True)
    wall, cpu = time.perf_counter(), _cpu()
    config = parse_config(
        {
            "budget": 4,
            # the harness's time limit (lab/causalcache_lab/worlds_ext/harness.py): on the shared machine the
            # default 250 ms would turn some of the bundle's decisions into Recent-B fall-backs
            "allocation": {"allocator": "selector", "explore": EXPLORE, "selector": {"timeout_ms": 2000}},
            "policy": {"kind": "simulated"},
        }
    )
    agent = ext_policy(policy, 0)
    archive = LocalArchive(out / "archive")
    conn = sqlite3.connect(str(out / "checkpoints.sqlite"), check_same_thread=False)
    success: dict[str, bool] = {}
    allocators: dict[str, str] = {}
    splits: dict[str, str] = {}
    try:
        allocator = build_allocator(config.allocation)
        for part in (allocator, getattr(allocator, "base", None)):  # the selector reads the screens' text
            if hasattr(part, "use_screen_text"):
                part.use_screen_text(ExtScreenText())
        memory = CausalCacheMemory(config=config, policy=agent, archive=archive, allocation=allocator)
        # the screenshot nodes return the screen's text, stored beside each screenshot in the archive
        graph = build_world_agent(memory, SqliteSaver(conn), screen_text=True)
        try:
            for task in generate_ext_tasks(generator, n, seed):
                o = run_ext_episode(
                    task, memory, graph, arm="team", pol=agent, archive=archive, seed=0,
                    max_steps=len(task.steps) + 6,
                )  # fmt: skip
                success[o.thread_id] = bool(o.success)
                allocators[o.thread_id] = ",".join(sorted({str(r.get("allocator")) for r in o.log}))
                splits[o.thread_id] = task.split
        finally:
            memory.close()  # the stored screen texts are written before learn reads the archive
    finally:
        conn.close()
    (out / "success.json").write_text(json.dumps(success, indent=1))
    explored = {t for t, a in allocators.items() if "random" in a}
    by = {
        group: {
            split: {
                "episodes": sum(1 for t in ts if splits[t] == split),
                "successes": sum(success[t] for t in ts if splits[t] == split),
            }
            for split in ("memory_critical", "control")
        }
        for group, ts in (("explored", explored), ("selector", set(success) - explored))
    }
    summary = {
        "episodes": n,
        "task_seed": seed,
        "explore": EXPLORE,
        "by_allocator": by,
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(_cpu() - cpu, 1),
    }
    done.write_text(json.dumps(summary, indent=1))
    return summary


def _threads(rec: Path, success: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"checkpointer": str(rec / "checkpoints.sqlite"), "archive": str(rec / "archive")}
    if success:
        spec["success"] = str(rec / "success.json")
    return spec


def guard_only(out: Path, rec: Path) -> dict[str, Any]:
    """Step 2: ``causalcache learn --guard-only`` (no labeller, no success labels)."""
    from causalcache_lab.learn import load_learn_config
    from causalcache_lab.learn.guard_refit import run_guard_refit

    done = out.parent / "guard-run.json"  # the first run's timing (a rerun finds the stage up to date)
    if done.exists():
        return dict(json.loads(done.read_text()))
    config = load_learn_config(
        output=str(out), data={"threads": _threads(rec, False)}, deploy={"budget": 4}, trusted=(TOOL,),
    )  # fmt: skip
    wall, cpu = time.perf_counter(), _cpu()
    summary = run_guard_refit(config, log=print)
    g = summary["guard"]
    result = {
        "deploy": summary["deploy"],
        "states": g.get("states"),
        "base_flagged": g.get("base_flagged"),
        "flagged": g.get("flagged"),
        "up_to_date": g.get("up_to_date"),
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(_cpu() - cpu, 1),
    }
    done.write_text(json.dumps(result, indent=1))
    return result


def full_learn(out: Path, rec: Path, policy: str, k: int) -> dict[str, Any]:
    """Step 3: ``causalcache learn`` with agreement labels only (the guide's learn.yaml)."""
    from causalcache_lab.learn import load_learn_config, run_learn

    done = out.parent / "full-run.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    config = load_learn_config(
        output=str(out),
        data={"threads": _threads(rec, True)},
        labeller={"factory": f"{TOOL}:agent_labeller", "kwargs": {"policy": policy, "k": k}},
        sources={"agreement": 1.0},
        agreement={"k": k, "temperature": None},
        labels={"budgets": [4], "prompt_cap": {}},
        deploy={"budget": 4},
        trusted=(TOOL,),
    )
    wall, cpu = time.perf_counter(), _cpu()
    summary = run_learn(config, progress=False, log=print)
    stages = summary.get("stages", {})
    result = {
        "deploy": summary["deploy"],
        "stages": {
            name: {k2: v for k2, v in s.items() if isinstance(v, (int, float, str, bool)) or k2 == "warnings"}
            for name, s in stages.items()
        },
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(_cpu() - cpu, 1),
    }
    done.write_text(json.dumps(result, indent=1, default=str))
    return result


def witness_deploy(src: str, dst: Path, settings: dict[str, Any] = WITNESS) -> str:
    """Step 4: learn's deploy YAML ``src`` with ``settings`` added to ``allocation.selector``, at ``dst``."""
    import yaml

    data = yaml.safe_load(Path(src).read_text())
    data["allocation"].setdefault("selector", {}).update(settings)
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(dst)


def _deployed(path: str, arm: str) -> tuple[str, float | str]:
    """``model_path`` and ``min_gain`` of a deployed YAML whose guard settings are those the harness's
    ``arm`` deploys (:data:`ARM_SETTINGS`; anything else is refused)."""
    import yaml

    from causalcache_lab.worlds_ext.harness import REFIT_WARMUP

    want = ARM_SETTINGS[arm]
    sel = yaml.safe_load(Path(path).read_text())["allocation"]["selector"]
    mine = {k: sel.get(k) for k in want}
    if mine != want or WITNESS["ood_refit"] != REFIT_WARMUP:
        raise ValueError(f"{path}: guard settings {mine} are not the evaluated arm {arm}'s {want}")
    return str(sel["model_path"]), sel.get("min_gain", "auto")


def evaluate(
    out: Path, generator: str, policy: str, tasks: int, seed: int, arms: tuple[str, ...], deploy: str | None
) -> dict[str, Any]:
    """Step 5: the harness on fresh tasks; one results.json per evaluated configuration."""
    from causalcache_lab.worlds_ext.harness import ExtEvalSettings, run_ext_eval

    done = out / "results.json"
    if not done.exists():
        model, gain = _deployed(deploy, arms[0]) if deploy else (None, "auto")
        settings = ExtEvalSettings(
            generator, policy, tasks_per_split=tasks, task_seed=seed, policy_seeds=(0, 1), budget=4,
            arms=arms, selector_path=model, min_gain=gain,
        )  # fmt: skip
        wall, cpu = time.perf_counter(), _cpu()
        results = run_ext_eval(settings, out / "work")
        results["meta"]["cpu_s"] = round(_cpu() - cpu, 1)
        results["meta"]["wall_s_total"] = round(time.perf_counter() - wall, 1)
        results["meta"]["deploy"] = deploy
        done.write_text(json.dumps(results, indent=1))
    results = json.loads(done.read_text())
    return {
        "arms": {
            a: {s: results["arms"][a][s]["success"] for s in ("memory_critical", "control")} for a in arms
        },
        "could_swap": {a: v["all"] for a, v in results.get("could_swap", {}).items()},
        "wall_s": results["meta"].get("wall_s_total"),
        "cpu_s": results["meta"].get("cpu_s"),
    }


def _contrasts(out: Path, prefix: str = "eval") -> dict[str, Any]:
    from paired_contrast import contrast

    base = out / f"{prefix}-baselines/results.json"
    pairs = {"bundle_vs_recent": (f"{base}:causalcache", f"{base}:recent")}
    pairs["random_vs_recent"] = (f"{base}:random", f"{base}:recent")
    pairs["bundle_witness_vs_recent"] = (f"{base}:{WITNESS_ARM}", f"{base}:recent")
    pairs["bundle_witness_vs_bundle"] = (f"{base}:{WITNESS_ARM}", f"{base}:causalcache")
    for name in ("guard", "full"):
        mine = out / f"{prefix}-{name}/results.json"
        if mine.exists():
            pairs[f"{name}_vs_recent"] = (f"{mine}:{WITNESS_ARM}", f"{base}:recent")
            pairs[f"{name}_vs_random"] = (f"{mine}:{WITNESS_ARM}", f"{base}:random")
            pairs[f"{name}_vs_bundle"] = (f"{mine}:{WITNESS_ARM}", f"{base}:causalcache")
            pairs[f"{name}_vs_bundle_witness"] = (f"{mine}:{WITNESS_ARM}", f"{base}:{WITNESS_ARM}")
    for name in ("guard", "full"):
        mine = out / f"{prefix}-{name}-witness-only/results.json"
        if mine.exists():
            arm = f"{mine}:causalcache_witness"
            pairs[f"{name}_witness_only_vs_recent"] = (arm, f"{base}:recent")
            pairs[f"{name}_witness_only_vs_random"] = (arm, f"{base}:random")
            pairs[f"{name}_witness_only_vs_bundle"] = (arm, f"{base}:causalcache")
            pairs[f"{name}_witness_only_vs_bundle_witness"] = (arm, f"{base}:{WITNESS_ARM}")
    return {name: contrast(t, c) for name, (t, c) in pairs.items()}


def pool(out: Path, seeds: list[int]) -> dict[str, Any]:
    """Every contrast over the tasks of several evaluation seeds at once (their task ids differ): each
    evaluated configuration's episodes concatenated into ``<out>/eval-pooled-*/results.json``."""
    prefixes = ["eval" if s == EVAL_SEED else f"eval-s{s}" for s in seeds]
    for name in ("baselines", "guard", "full", "guard-witness-only", "full-witness-only"):
        if not all((out / f"{p}-{name}/results.json").exists() for p in prefixes):
            continue
        parts = [json.loads((out / f"{p}-{name}/results.json").read_text()) for p in prefixes]
        merged = {"meta": parts[0]["meta"], "episodes": [e for d in parts for e in d["episodes"]]}
        (out / f"eval-pooled-{name}").mkdir(exist_ok=True)
        (out / f"eval-pooled-{name}/results.json").write_text(json.dumps(merged))
    return {"seeds": seeds, "contrasts": _contrasts(out, "eval-pooled")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("generator", help="desktop, web or mobile (worlds_ext)")
    p.add_argument("--policy", default="noisy", help="the team's agent: same-line, first-match or noisy")
    p.add_argument("--out", default=None)
    p.add_argument("--record", type=int, default=300, help="recorded episodes (the done-when: at most 300)")
    p.add_argument("--record-seed", type=int, default=100, help="task seed of the recording (dev seeds only)")
    p.add_argument("--eval", type=int, default=20, help="fresh tasks per split")
    p.add_argument(
        "--eval-seed", type=int, default=EVAL_SEED, help="task seed of the evaluation (dev seeds only)"
    )
    p.add_argument("--k", type=int, default=4, help="agreement samples per prompt")
    p.add_argument(
        "--witness-only", action="store_true",
        help="also evaluate both learned models with witness_check alone (their fitted guards kept)",
    )  # fmt: skip
    p.add_argument(
        "--pool-seeds", default=None,
        help="only pool the finished evaluations of these task seeds (e.g. 200,300) into report-pooled.json",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.record > 300:
        p.error(f"--record={args.record}: the walkthrough records at most 300 episodes")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(args.out or f"runs/walk_{args.generator}")
    out.mkdir(parents=True, exist_ok=True)
    if args.pool_seeds:
        pooled = pool(out, [int(x) for x in args.pool_seeds.split(",")])
        (out / "report-pooled.json").write_text(json.dumps(pooled, indent=1))
        _print(pooled["contrasts"])
        return 0
    report: dict[str, Any] = {
        "generator": args.generator,
        "policy": args.policy,
        "command": " ".join(["lab/tools/learn_walkthrough_ext.py", *(argv or sys.argv[1:])]),
        "load_start": os.getloadavg(),
    }
    rec = out / "record"
    report["record"] = record(rec, args.generator, args.policy, args.record, args.record_seed)
    print(f"[1] recorded: {json.dumps(report['record'])}", flush=True)
    report["guard_only"] = guard_only(out / "learn-guard", rec)
    print(f"[2] guard-only: {json.dumps(report['guard_only'])}", flush=True)
    report["full"] = full_learn(out / "learn-full", rec, args.policy, args.k)
    print(f"[3] full learn: {json.dumps(report['full'], default=str)}", flush=True)
    report["deploy"] = {
        "witness": WITNESS,
        "guard": witness_deploy(report["guard_only"]["deploy"], out / "deploy-guard.yaml"),
        "full": witness_deploy(report["full"]["deploy"], out / "deploy-full.yaml"),
    }
    print(f"[4] deployed: {json.dumps(report['deploy'])}", flush=True)
    ev = {"generator": args.generator, "policy": args.policy, "tasks": args.eval, "seed": args.eval_seed}
    prefix = "eval" if args.eval_seed == EVAL_SEED else f"eval-s{args.eval_seed}"
    baselines = ("recent", "random", "causalcache", WITNESS_ARM)
    report["eval"] = {
        "baselines": evaluate(out / f"{prefix}-baselines", **ev, arms=baselines, deploy=None),
        "guard": evaluate(
            out / f"{prefix}-guard", **ev, arms=(WITNESS_ARM,), deploy=report["deploy"]["guard"]
        ),
        "full": evaluate(out / f"{prefix}-full", **ev, arms=(WITNESS_ARM,), deploy=report["deploy"]["full"]),
    }
    if args.witness_only:  # each learned model with its own guard as fitted, the witness check on
        for name, src in (("guard", report["guard_only"]["deploy"]), ("full", report["full"]["deploy"])):
            path = witness_deploy(src, out / f"deploy-{name}-witness-only.yaml", WITNESS_ONLY)
            report["deploy"][f"{name}_witness_only"] = path
            report["eval"][f"{name}_witness_only"] = evaluate(
                out / f"{prefix}-{name}-witness-only", **ev, arms=("causalcache_witness",), deploy=path
            )
    report["contrasts"] = _contrasts(out, prefix)
    report["load_end"] = os.getloadavg()
    name = "report.json" if args.eval_seed == EVAL_SEED else f"report-s{args.eval_seed}.json"
    (out / name).write_text(json.dumps(report, indent=1, default=str))
    _print(report["contrasts"])
    return 0


def _print(contrasts: dict[str, Any]) -> None:
    for name, c in contrasts.items():
        mc, ctl = c["memory_critical"], c["control"]
        print(
            f"{name}: MC {mc['delta']:+.2f} [{mc['ci95'][0]:+.2f}, {mc['ci95'][1]:+.2f}] ({mc['helped']}/{mc['harmed']})"
            f"  control {ctl['delta']:+.2f} [{ctl['ci95'][0]:+.2f}, {ctl['ci95'][1]:+.2f}] ({ctl['helped']}/{ctl['harmed']})"
        )


if __name__ == "__main__":
    raise SystemExit(main())
