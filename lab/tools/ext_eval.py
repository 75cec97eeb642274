"""Leave-one-generator-out evaluation on one external-style generator x policy pair (docs/GENERATORS.md).

    python lab/tools/ext_eval.py desktop noisy --tasks-per-split 20 --policy-seeds 0,1 --out runs/ext_desktop_noisy

Runs Recent-4, Random-4, First-4, evenly spaced, the evidence oracle and the bundled selector with the OOD
guard on and off (``--arms`` picks) on the generator's tasks under the policy's seeds, writes
``<out>/results.json`` and prints, per split: success, the delta vs Recent-4 and vs Random-4 with the
task-paired bootstrap 95% interval and helped/harmed, the guard's decline rate on could-swap decisions,
the swap rate and the pass-2 rate. Task seeds and policy seeds of ``docs/sealed/generators-v1.yaml`` are
refused unless ``--sealed`` (the final table, run once).

    python lab/tools/ext_eval.py summary runs/ext_*/results.json

prints one compact table over several runs (a row per run and arm: memory-critical success and deltas,
control success and non-inferiority, the guard's could-swap decline rate, pass 2).

    python lab/tools/ext_eval.py pool runs/a/results.json runs/b/results.json --out pooled.json

pools runs of one generator x policy over their task seeds (distinct tasks, the same arms and policy
seeds; ``--across-policies``: runs of one generator whose task seeds ran different policies): success and task-paired deltas over every task, could-swap declines and swaps summed, pass 2 the
mean of the runs' rates weighted by their two-pass decisions; prints the run table for the pool.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from causalcache_lab.worlds_ext.harness import EXT_ARMS, ExtEvalSettings, run_ext_eval

DEFAULT_ARMS = "recent,random,first,evenly_spaced,oracle,causalcache,causalcache_noguard"


def _fmt_delta(c: dict | None) -> str:
    if not c:
        return "-"
    lo, hi = c["ci95"]
    return f"{c['delta']:+.2f} [{lo:+.2f}, {hi:+.2f}] ({c['helped']}/{c['harmed']})"


def table(results: dict) -> str:
    """The markdown table of one run: a row per arm, per split."""
    arms = results["meta"]["arms"]
    rows = [
        "| arm | split | success | Δ vs Recent-4 [95% CI] (helped/harmed) | Δ vs Random-4 [95% CI] (helped/harmed) "
        "| guard declines (could-swap) | swaps (could-swap) | pass 2 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        for split in ("memory_critical", "control"):
            cell = results["arms"][arm][split]
            vs_recent = results["contrasts_by_arm"].get(arm, {}).get(split)
            vs_random = results.get("contrasts_vs_random", {}).get(arm, {}).get(split)
            cs = results.get("could_swap", {}).get(arm, {}).get(split)
            decline = f"{cs['decline_rate']:.0%} of {cs['could_swap']}" if cs and cs["could_swap"] else "-"
            swaps = f"{cs['swap_rate']:.0%}" if cs and cs["could_swap"] else "-"
            fire = f"{cell['fire_rate']:.0%}" if cell.get("fire_rate") is not None else "-"
            rows.append(
                f"| {arm} | {split} | {cell['success']:.2f} | {_fmt_delta(vs_recent)} | {_fmt_delta(vs_random)} "
                f"| {decline} | {swaps} | {fire} |"
            )
    return "\n".join(rows)


def summary(paths: list[str]) -> str:
    """One row per run and arm (memory-critical and control side by side)."""
    rows = [
        "| generator x policy | arm | memory-critical | Δ vs Recent-4 [95% CI] (h/h) | Δ vs Random-4 [95% CI] (h/h) "
        "| control | control Δ vs Recent-4 (NI at 0.05) | guard declines (could-swap) | pass 2 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        r = json.loads(Path(path).read_text())
        meta = r["meta"]
        for arm in meta["arms"]:
            mc, ctl = r["arms"][arm]["memory_critical"], r["arms"][arm]["control"]
            vs = r["contrasts_by_arm"].get(arm, {})
            vr = r.get("contrasts_vs_random", {}).get(arm, {})
            c = vs.get("control")
            ni = f"{_fmt_delta(c)} {'yes' if c['non_inferior'] else 'no'}" if c else "-"
            cs = r.get("could_swap", {}).get(arm, {}).get("all")
            decline = f"{cs['decline_rate']:.0%} of {cs['could_swap']}" if cs and cs["could_swap"] else "-"
            fire = r["arms"][arm].get("fire_rate")
            rows.append(
                f"| {meta['generator']} x {meta['policy']} | {arm} | {mc['success']:.2f} "
                f"| {_fmt_delta(vs.get('memory_critical'))} | {_fmt_delta(vr.get('memory_critical'))} "
                f"| {ctl['success']:.2f} | {ni} | {decline} | {'-' if fire is None else f'{fire:.0%}'} |"
            )
    return "\n".join(rows)


def pool(runs: list[dict], *, across_policies: bool = False) -> dict:
    """The results of ``runs`` (``results.json`` dicts with their episodes) as one run over all their tasks.

    Runs must share one design; ``across_policies`` lets their policies differ (a generator's row whose
    task seeds each ran another policy: the pool's ``meta.policy`` is then ``"a+b+c"`` in run order).
    """
    from causalcache_lab.eval.summary import summarize
    from causalcache_lab.eval.world_agent import EpisodeOutcome

    keys: tuple[str, ...] = ("generator", "policy", "arms", "budget", "policy_seeds", "tasks_per_split")
    if across_policies:
        keys = tuple(k for k in keys if k != "policy")
    first = runs[0]["meta"]
    for run in runs[1:]:
        differs = [k for k in keys if run["meta"][k] != first[k]]
        if differs:
            raise SystemExit(f"pool: runs differ in {', '.join(differs)}; pool runs of one design only")
    task_seeds = [run["meta"]["task_seed"] for run in runs]
    if len(set(task_seeds)) != len(task_seeds):
        raise SystemExit(f"pool: task seeds {task_seeds} repeat; each task may count once")
    fields = ("task_id", "split", "arm", "budget", "success", "steps", "wall_s", "seed", "world")
    outcomes = [EpisodeOutcome(**{k: e[k] for k in fields}) for run in runs for e in run["episodes"]]
    arms = list(first["arms"])
    results = summarize(outcomes, arms, ni_margin=0.05)
    if "random" in arms:
        results["contrasts_vs_random"] = summarize(outcomes, arms, baseline="random")["contrasts_by_arm"]
    results["could_swap"] = {}
    for arm in {a for run in runs for a in run.get("could_swap", {})}:
        results["could_swap"][arm] = {}
        for split in ("all", "memory_critical", "control"):
            cells = [run["could_swap"][arm][split] for run in runs]
            n = sum(c["could_swap"] for c in cells)
            declined = sum(c["declined_ood"] for c in cells)
            swaps = sum(c["swap_rate"] * c["could_swap"] for c in cells)
            results["could_swap"][arm][split] = {
                "could_swap": n, "declined_ood": declined,
                "decline_rate": declined / n if n else 0.0, "swap_rate": swaps / n if n else 0.0,
            }  # fmt: skip
    for arm in arms:
        for split in ("all", "memory_critical", "control"):
            cells = [run["arms"][arm][split] for run in runs]
            rates = [
                (c.get("fire_rate"), c.get("episodes", 0)) for c in cells if c.get("fire_rate") is not None
            ]
            weight = sum(w for _, w in rates)
            results["arms"][arm][split]["fire_rate"] = (
                sum(r * w for r, w in rates) / weight if weight else None
            )
    results["meta"] = {**first, "task_seed": task_seeds, "tasks": sum(r["meta"]["tasks"] for r in runs)}
    if across_policies:
        results["meta"]["policy"] = "+".join(dict.fromkeys(r["meta"]["policy"] for r in runs))
    return results


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "summary":
        print(summary(argv[1:]))
        return 0
    if argv and argv[0] == "pool":
        args = argparse.ArgumentParser(prog="ext_eval.py pool")
        args.add_argument("results", nargs="+")
        args.add_argument("--out", default=None)
        args.add_argument(
            "--across-policies",
            action="store_true",
            help="pool runs whose policies differ (one generator's row)",
        )
        parsed = args.parse_args(argv[1:])
        pooled = pool(
            [json.loads(Path(p).read_text()) for p in parsed.results], across_policies=parsed.across_policies
        )
        if parsed.out:
            Path(parsed.out).write_text(json.dumps(pooled, indent=1))
        print(table(pooled))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("generator", help="desktop, web or mobile")
    parser.add_argument("policy", help="same-line, first-match or noisy")
    parser.add_argument("--tasks-per-split", type=int, default=20)
    parser.add_argument("--task-seed", type=int, default=0)
    parser.add_argument("--policy-seeds", default="0,1", help="comma-separated, e.g. 0,1")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--arms", default=DEFAULT_ARMS, help=f"comma-separated from {', '.join(EXT_ARMS)}")
    parser.add_argument("--selector", default=None, help="a trained selector (default: the bundled one)")
    parser.add_argument("--no-screen-text", action="store_true", help="the selector reads no screen text")
    parser.add_argument("--sealed", action="store_true", help="allow the sealed set's seeds (final run only)")
    parser.add_argument("--out", default=None, help="folder for results.json (default: a temporary folder)")
    args = parser.parse_args(argv)
    settings = ExtEvalSettings(
        args.generator,
        args.policy,
        tasks_per_split=args.tasks_per_split,
        task_seed=args.task_seed,
        policy_seeds=tuple(int(s) for s in args.policy_seeds.split(",") if s),
        budget=args.budget,
        arms=tuple(a for a in args.arms.split(",") if a),
        selector_path=args.selector,
        screen_text=not args.no_screen_text,
        sealed=args.sealed,
    )
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ext_eval_"))
    results = run_ext_eval(settings, out / "work")
    (out / "results.json").write_text(json.dumps(results, indent=1))
    meta = results["meta"]
    print(
        f"{meta['generator']} ({meta['text_format']}) x {meta['policy']}: {meta['tasks']} tasks, "
        f"task seed {meta['task_seed']}, policy seeds {meta['policy_seeds']}, B = {meta['budget']}, "
        f"{meta['wall_s']} s; results in {out / 'results.json'}"
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
