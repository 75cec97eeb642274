"""``causalcache demo``: the closed loop on embedded defaults (the main job of the README Quickstart).

By default it runs the synthetic world family's four held-out worlds (--worlds heldout: heldout-00 to
heldout-03, each a mobile or desktop world that nothing was trained or tuned on, with an action vocabulary,
a layout family and evidence ages no training world has; docs/WORLD.md), the simulated policy (a CPU
stand-in for a VLM), a local archive, SQLite checkpoints and the bundled selector: 120 tasks under
Recent-4 and CausalCache. It prints a table (also one row per world) and writes DIR/results.json and
DIR/report.html. It takes one to two minutes on two CPU cores with one policy seed; figures follow the
protocol (--seeds 0,1,2; causalcache eval closed-loop defaults to it). --worlds none runs the previous
default, world v2's evaluation templates on --platform."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from causalcache_memory._jsonl import dumps_json
from causalcache_memory.selector.threshold import DEFAULT_SHARE_WINDOW, check_window


def _arms(text: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in text.split(",") if a.strip())


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds wants comma-separated integers, got {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("--seeds wants at least one seed, e.g. 0,1,2")
    return seeds


def _budgets(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--budget-curve wants comma-separated integers, got {text!r}"
        ) from None


def write_results(results: dict[str, Any], out: Path, *, plots: bool = True) -> tuple[Path, Path]:
    """Write ``results.json`` and ``report.html`` into ``out``."""
    from causalcache_lab.eval.report import write_report
    from causalcache_memory.archive.local import LocalArchive

    archive_path = results.pop("_archive", None)
    path = out / "results.json"
    path.write_text(dumps_json(results, indent=2) + "\n", encoding="utf-8")  # strict: null, never NaN
    archive = LocalArchive(archive_path) if archive_path else None
    report = write_report(results, out, archive, plots=None if plots else [])
    return path, report


def run_demo(args: argparse.Namespace) -> int:
    from causalcache_lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop
    from causalcache_lab.eval.report import format_table
    from causalcache_lab.world.splits import resolve_worlds

    settings = ClosedLoopSettings(
        tasks=args.tasks,
        seed=args.seed,
        budget=args.budget,
        arms=args.arms,
        platform=args.platform,
        selector_path=args.selector,
        min_gain=args.min_gain,
        share_window=args.share_window,
        screen_text=not args.no_screen_text,
        budget_curve=args.budget_curve,
        policy_seeds=args.seeds,
        templates=args.templates,
        ni_margin=args.ni_margin,
        workers=args.workers,
        worlds=None if args.worlds in (None, "none") else args.worlds,
        prompt_cost=not getattr(args, "no_prompt_cost", False),
    )
    out = Path(args.out)
    where = (
        f"worlds {settings.worlds}: {', '.join(resolve_worlds(settings.worlds))}"
        if settings.worlds is not None
        else f"{settings.platform}, {settings.templates} templates"
    )
    print(
        f"causalcache demo: {settings.tasks} tasks ({where}), "
        f"arms {', '.join(settings.arms)}, B={settings.budget}, policy seeds "
        f"{','.join(map(str, settings.policy_seeds))}; writing to {out}/",
        flush=True,
    )
    if len(settings.policy_seeds) < 3:
        print("note: fewer than 3 policy seeds; the evaluation protocol uses --seeds 0,1,2", flush=True)
    results = run_closed_loop(settings, out, progress=not args.quiet)
    results["meta"]["command"] = "causalcache " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    print(format_table(results))
    results_path, report = write_results(results, out, plots=not args.no_plots)
    print(f"\nwrote {results_path} and {report} ({results['meta']['wall_s']:.0f} s)")
    return 0


ALL_ARMS = ("summary_only", "recent", "random", "first", "evenly_spaced", "rgb", "oracle", "causalcache")


def add_closed_loop_arguments(
    parser: argparse.ArgumentParser,
    *,
    tasks: int,
    out: str,
    arms: tuple[str, ...],
    budget_curve: tuple[int, ...],
    seeds: tuple[int, ...] = (0, 1, 2),
    worlds: str | None = None,
) -> None:
    """Options shared by ``causalcache demo`` and ``causalcache eval closed-loop``."""
    parser.add_argument(
        "--tasks", type=int, default=tasks, help=f"number of tasks, half memory-critical (default {tasks})"
    )
    parser.add_argument("--out", default=out, help=f"output directory (default {out})")
    parser.add_argument("--budget", type=int, default=4, help="B, history screenshots per prompt (default 4)")
    parser.add_argument(
        "--arms",
        type=_arms,
        default=arms,
        help=f"comma-separated arms out of {','.join(ALL_ARMS)} (default {','.join(arms)})",
    )
    parser.add_argument("--seed", type=int, default=1234, help="task seed (default 1234)")
    parser.add_argument("--platform", choices=("mobile", "desktop", "mixed"), default="mobile")
    parser.add_argument(
        "--seeds",
        type=_seeds,
        default=seeds,
        help=f"simulated-policy seeds; figures are means over them (default {','.join(map(str, seeds))})",
    )
    parser.add_argument(
        "--templates",
        choices=("eval", "dev", "train", "all"),
        default="eval",
        help="task templates to draw from (default eval: never used for training or choosing knobs)",
    )
    parser.add_argument(
        "--worlds",
        type=_worlds,
        default=worlds,
        help="worlds of the family: train, dev, heldout, v2 or comma-separated ids (e.g. heldout-00,dev-01); "
        f"'none' = world v2 on --templates/--platform (default {worlds or 'none'})",
    )
    parser.add_argument(
        "--ni-margin",
        type=float,
        default=0.05,
        help="non-inferiority margin on controls vs Recent-B (default 0.05)",
    )
    parser.add_argument("--workers", type=int, default=1, help="parallel processes (default 1)")
    parser.add_argument(
        "--selector", default=None, help="trained selector (.onnx or directory); default: bundled"
    )
    parser.add_argument(
        "--min-gain",
        type=_min_gain,
        default="auto",
        help="selector swap threshold: 'auto' (default: calibrated on dev data, stored with the model) "
        "or a number (0 = the paper's rule)",
    )
    parser.add_argument(
        "--share-window",
        type=_share_window,
        default=DEFAULT_SHARE_WINDOW,
        help="selector: hold the pass-2 share on each memory's latest N decisions (default "
        f"{DEFAULT_SHARE_WINDOW}); 'off' = the dev-calibrated threshold only",
    )
    parser.add_argument(
        "--no-screen-text",
        action="store_true",
        help="selector: read no screen text (its text features masked, as a deployment without "
        "screen_text or OCR); default: the world's exact OCR, as in training",
    )
    parser.add_argument(
        "--budget-curve",
        type=_budgets,
        default=budget_curve,
        help="also sweep these budgets, e.g. 0,1,2,4,8 (slower)",
    )
    parser.add_argument(
        "--no-prompt-cost",
        action="store_true",
        help="do not predict prompt-cache writes and reads per step (default: predicted with the hosted "
        "Anthropic cache model, docs/PROMPT_COST.md; the table's last column)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip matplotlib plots")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run_demo)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="closed-loop demo on embedded defaults: Recent-4 vs CausalCache on the held-out synthetic worlds",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_closed_loop_arguments(
        parser,
        tasks=120,
        out="runs/demo",
        arms=("recent", "causalcache"),
        budget_curve=(),
        seeds=(0,),
        worlds="heldout",
    )


def register_closed_loop(eval_subparsers: argparse._SubParsersAction) -> None:
    """``causalcache eval closed-loop``: every arm and the budget sweep (the full closed-loop evaluation)."""
    parser = eval_subparsers.add_parser(
        "closed-loop",
        help="closed loop over all arms (summary-only, Recent-B, Random, First-B, evenly spaced, RGB, "
        "evidence oracle, CausalCache) and a budget sweep, 3 policy seeds",
    )
    add_closed_loop_arguments(
        parser, tasks=120, out="runs/closed_loop", arms=ALL_ARMS, budget_curve=(0, 1, 2, 4, 8)
    )


def _worlds(text: str) -> str:
    """``--worlds``: validated world ids or split names (``none`` = the v2 protocol)."""
    if text == "none":
        return text
    from causalcache_lab.world.splits import resolve_worlds
    from causalcache_memory.errors import ConfigError

    try:
        resolve_worlds(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _share_window(text: str) -> int | None:
    """``--share-window``: ``off`` or an integer >= 1 (the allocator's rule, ``check_window``)."""
    from causalcache_memory.errors import SelectorError

    if text == "off":
        return None
    try:
        return check_window(int(text), field="--share-window")
    except (ValueError, SelectorError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'off' or an integer >= 1 ({exc})") from None


def _min_gain(text: str) -> float | str:
    """``--min-gain``: ``auto`` or a non-negative number."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'auto' or a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0 (0 = the paper's rule)")
    return value
