"""``causalcache learn``: recorded threads or an imported dataset -> a trained, deployable selector.

    causalcache learn --config learn.yaml
    causalcache learn --threads .causalcache/checkpoints.sqlite --archive .causalcache/archive \\
        --success success.json --labeller mypkg.models:labeller --out runs/learn
    causalcache learn --guard-only --threads ... --archive ... --out runs/learn   # no labeller, no labels

Flags override the config file's values. Stages are resumable: rerunning skips every stage whose inputs
did not change (docs/LEARN.md).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from causalcache_lab.trust import add_trust_module_argument


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.out:
        out["output"] = args.out
    if args.threads or args.dataset:
        data: dict[str, Any] = {"dataset": args.dataset} if args.dataset else {}
        if args.threads:
            if not args.archive:
                from causalcache_memory.errors import ConfigError

                raise ConfigError("--threads needs --archive (the memory's archive URL or folder)")
            data["threads"] = {"checkpointer": args.threads, "archive": args.archive, "success": args.success}
        out["data"] = data
    if args.labeller:
        out["labeller"] = {"factory": args.labeller}
    if args.source:
        out["sources"] = {name: 1.0 for name in args.source.split(",")}
    return out


def _learn(args: argparse.Namespace) -> int:
    from causalcache_lab.learn import load_learn_config, run_learn
    from causalcache_memory._jsonl import dumps_json

    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    config = load_learn_config(args.config, trusted=args.trust_module, **_overrides(args))
    if args.guard_only:  # no labeller, no labels: the OOD guard refitted on the team's states
        from causalcache_lab.learn.guard_refit import print_guard_summary, run_guard_refit

        summary = run_guard_refit(config, log=print)
        print_guard_summary(summary)
        if args.json:
            print(dumps_json(summary))
        return 0
    summary = run_learn(config, stop_after=args.stop_after, progress=not args.no_progress, log=print)
    _print_summary(summary)
    if args.json:
        print(dumps_json(summary))  # as summary.json
    return 0


def _headroom_line(room: dict[str, Any] | None) -> str:
    """The headroom gate's part of the fine-tuning line (``train.fine_tune_headroom``), "" when it is off."""
    if not room:
        return ""
    line = f"; the base realizes {room['share']:.0%}"
    if "ci" in room:  # the gate acts on the interval's lower end
        line += f" [{room['ci'][0]:.0%}, {room['ci'][1]:.0%}] of the label oracle's budgeted value"
        line += f" (gate: lower end >= {room['limit']:.0%}"
    else:  # a model stage learned before the share had an interval (session 16) gated on the point share
        line += f" of the label oracle's budgeted value (gate {room['limit']:.0%}"
    return line + ("; no room, so the base ships)" if room.get("no_room") else ")")


def _num(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``; a figure that does not exist (null in summary.json, which
    :func:`~causalcache_memory._jsonl.write_json` writes for NaN, e.g. a gate without dev groups) as nan."""
    return format(float("nan") if value is None else value, spec)


def _print_summary(summary: dict[str, Any]) -> None:
    stages = summary["stages"]
    traj = stages["trajectories"]
    print(f"\nsummary ({summary['seconds']:.1f} s, {summary['output']}/summary.json)")
    by = traj.get("kept_by_allocator") or {}
    shown = f" (by allocator: {', '.join(f'{k} {v}' for k, v in by.items())})" if len(by) > 1 else ""
    print(f"  trajectories: {traj['kept']} kept of {traj['read']} read{shown}")
    if "plan" in summary:
        plan = summary["plan"]
        print(f"  states planned: {plan['states']} (trajectories {plan['trajectories']})")
    if "splits_folded" in summary:
        folded = summary["splits_folded"]
        print(f"  splits {folded['from']} -> {folded['to']}: the test split went to dev (no test metric)")
    for name, st in stages.items():
        line = f"  {name}: {st['seconds']:.1f} s{' (up to date: skipped)' if st['up_to_date'] else ''}"
        if name.startswith("labels-"):
            src = st["source"]
            line += (
                f"; source {src['source']} (model {src.get('model')}, k {src.get('k')}, temperature "
                f"{src.get('temperature')}); {st['prompts']} prompts scored, {st['prompts_per_state']} per state"
            )
        print(line)
    model = stages.get("model")
    if model:
        dev = model.get("dev") or {}
        print(
            f"  dev: value {_num(dev.get('value'), '.4f')} (oracle {_num(dev.get('oracle'), '.4f')}), "
            f"top-1 {_num(dev.get('top1'), '.3f')}; min_gain {_num(model['calibration']['min_gain'], '.4f')} "
            f"on {model['calibration']['split']}; OOD dev flagged {_num(model['ood'].get('dev_flagged'), '.3f')}"
        )
        if "text_coverage" in model:
            print(f"  screen text: known for {model['text_coverage']:.0%} of the training states")
        if "states_with_gain" in model:
            total = sum(model["states"].values())
            print(
                f"  labels: {model['states_with_gain']} of {total} states have a swap that raises the label"
            )
        init = model.get("init_from")
        if init:
            kept = (init.get("base_calibration") or {}).get("kept")
            base = "the base with its own threshold and guard" if kept else "the base, recalibrated"
            how = f" with loss {init['loss']} at lr {init['lr']:g}" if init.get("loss") else ""
            if init.get("cross_fit"):
                gate = init.get("gate") or {}
                lo, hi = gate.get("ci") or [None, None]
                length = (
                    f"a fixed {init['cross_fit_epochs']} epochs, " if init.get("cross_fit_epochs") else ""
                )
                how += (
                    f", cross-fitted over {init['cross_fit']} folds ({length}out-of-fold budgeted gain over "
                    f"the base {_num(gate.get('delta'), '+.4f')} [{_num(lo, '+.4f')}, {_num(hi, '+.4f')}]"
                    + ("; shown harmful, so the base ships" if gate.get("harmful") else "")
                    + _headroom_line(gate.get("headroom"))
                    + ")"
                )
            print(
                f"  fine-tuned from {init['spec']} (sha256 {init['sha256'][:12]}…){how}: "
                f"{init['epochs_fine_tuned']} epochs kept (0: {base})"
            )
            if init["epochs_fine_tuned"]:
                print(
                    "  note: the out-of-fold check scores each recorded decision alone and has missed "
                    "closed-loop losses to the base (RESULTS.md 9j; where the base was already strong, "
                    "shipped fine-tunes ranged from -0.06 to +0.10 against it, 9p); compare the two on live "
                    "episodes before switching for good (the snippet's compare block, `causalcache compare`)"
                )
        else:
            print("  trained from scratch (train.init_from: null)")
        for msg in filter(None, [summary.get("recording_warning"), *model.get("warnings", [])]):
            print(f"  warning: {msg}")
        print(f"  trained selector: {summary['model']}\n  deploy snippet: {summary['deploy']}\n")
        print(summary["deploy_yaml"])


#: ``--stop-after`` choices: the pipeline's stage names (``lab.learn.pipeline.STAGES``, kept equal by a
#: test; not imported here so that registering the command stays cheap)
STAGES = ("trajectories", "labels", "model")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "learn",
        help="train a selector on your own recorded agent: threads/dataset -> labels -> model -> deploy YAML",
    )
    p.add_argument("--config", help="learn config YAML (docs/LEARN.md); flags below override it")
    p.add_argument("--out", help="output folder (config: output)")
    p.add_argument("--threads", help="checkpointer of the recorded threads: SQLite path or postgresql:// URI")
    p.add_argument("--archive", help="the memory's archive (folder or URL) holding the threads' traces")
    p.add_argument(
        "--success", default="all", help="JSON/CSV of thread id -> success, or 'all' (default all)"
    )
    p.add_argument("--dataset", help="a `causalcache data import` folder instead of threads")
    p.add_argument("--labeller", help="labeller factory 'pkg.module:callable' (config: labeller.factory)")
    p.add_argument(
        "--source", help="comma-separated label sources, weight 1 each: teacher_forced, agreement, evidence"
    )
    p.add_argument(
        "--stop-after", choices=STAGES, help="stop after this stage (e.g. trajectories = export only)"
    )
    p.add_argument(
        "--guard-only",
        action="store_true",
        help="no labeller: refit the OOD guard on every recorded episode, keep the base's scorer and "
        "threshold, write guard-deploy.yaml (try this first when the idle warning says 'ood')",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the labelling progress bar")
    p.add_argument("--json", action="store_true", help="also print the summary as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="log every stage decision")
    add_trust_module_argument(p)
    p.set_defaults(handler=_learn)
