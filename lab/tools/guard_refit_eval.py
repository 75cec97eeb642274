"""The refit guard (``ood_refit``, docs/notebook/results/guard_rule.md) and guard try 2 (the witness-source
check, docs/notebook/results/guard_rule_try2.md) on one development generator x policy.

    python lab/tools/guard_refit_eval.py web noisy --tasks-per-split 10 --policy-seeds 0,1 --out runs/refit_web

Runs the leave-one-generator-out harness (``causalcache_lab.worlds_ext.harness``) with the arms
``recent``, ``random``, ``causalcache`` (the bundled guard), ``causalcache_refit`` (the bundled selector, guard refitted after
``REFIT_WARMUP`` decisions) and ``causalcache_noguard`` (guard off). On the guard-off arm every decision
also gets, without acting on it, the verdict of (a) the bundled guard (``ood_group`` set when it would
refuse, as ``guard_harm_rate.py`` records it) and (b) a shadow refit guard of that allocator
(``ood_refit``: ``warmup`` / ``refit``, suffixed ``-refuse`` when it would refuse). Writes
``<out>/results.json`` (the harness's results) and ``<out>/harm.json``: per guard, episodes with a swap
split into ``refused`` (the guard would refuse one of its swaps) and ``accepted``, with harmed/helped vs
the paired Recent-4 episode and the rates (the criterion's item 3).

Guard try 2 (``--arms`` with ``causalcache_try2``): on the guard-off arm every decision also gets the
witness-source check's verdict (``witness_kept`` when the guard-off set displaces a witness source: the
swap the check would refuse; the decision itself is not changed). ``harm.json`` then also tallies
``witness`` (those refusals), and ``try2`` (a witness refusal, or a refit-guard refusal after its
warm-up: try 2's rule, whose covariate guard is open during the warm-up).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from causalcache_lab.eval.stats import count_harm, harm_rates
from causalcache_lab.worlds_ext.harness import REFIT_WARMUP, ExtEvalSettings, run_ext_eval
from causalcache_memory.allocation.base import exact_b_size
from causalcache_memory.selector.allocator import SelectorAllocator
from causalcache_memory.selector.ood import RobustGuard, state_summary
from causalcache_memory.selector.ood_refit import RefitGuard
from causalcache_memory.selector.witness_check import displaced_sources, witness_sources

_DECIDE = SelectorAllocator.decide
_ALLOCATE = SelectorAllocator.allocate
DEFAULT_ARMS = "recent,random,causalcache,causalcache_refit,causalcache_noguard"


def _allocate(self, ctx):
    """Unchanged for guarded arms; on the guard-off arm, also the witness-source check's verdict."""
    allocation = _ALLOCATE(self, ctx)
    if self.ood_guard or self.witness_check or exact_b_size(ctx.t, ctx.budget) == ctx.t - 1:
        return allocation
    cache = self._extractor_for(ctx.archive).screen_text
    sources = witness_sources(cache, ctx.trace, ctx.budget, ctx.witness)
    if sources and displaced_sources(sources, allocation.selected):
        allocation.info["witness_kept"] = list(sources)
    return allocation


def _decide(self, events, *, t, budget, witness, sources=()):
    """Unchanged for guarded arms; on the guard-off arm, also the bundled and shadow-refit verdicts."""
    allocation = _DECIDE(self, events, t=t, budget=budget, witness=witness, sources=sources)
    guard = self.model.ood
    if self.ood_guard or events is None or not isinstance(guard, RobustGuard):
        return allocation
    summary = state_summary(events, self.model.drop_index)
    _, distance, threshold = guard.judge(summary)
    allocation.info["ood_distance"] = round(distance, 4)
    if not distance <= threshold:
        allocation.info["ood_group"] = "bundled"
    shadow = self.__dict__.setdefault("_shadow_refit", RefitGuard(guard, REFIT_WARMUP))
    judge = shadow.observe(summary)
    state = "refit" if shadow.refitted else "warmup"
    out, _ = judge.is_ood(summary)
    allocation.info["ood_refit"] = state + ("-refuse" if out else "")
    return allocation


def tally(episodes: list[dict], refused_by) -> dict:
    """Episodes of the guard-off arm with a swap, split by whether ``refused_by(record)`` holds for one
    of its swaps; harmed/helped against the paired Recent-4 episode (same task, same policy seed)."""
    by_key = {(e["task_id"], e["seed"], e["arm"]): e for e in episodes}
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    swaps = refused_swaps = 0
    for (task, seed, arm), e in by_key.items():
        if arm != "causalcache_noguard":
            continue
        base = by_key[(task, seed, "recent")]
        swapped = [r for r in e["log"] if int(r.get("k", 0)) > 0]
        n_refused = sum(bool(refused_by(r)) for r in swapped)
        swaps += len(swapped)
        refused_swaps += n_refused
        kind = "no_swap" if not swapped else ("refused" if n_refused else "accepted")
        for name in (f"{kind}/{e['split']}", f"{kind}/all"):
            count_harm(groups[name], swaps=len(swapped), base_success=base["success"], success=e["success"])
    return {"swaps": swaps, "swaps_refused": refused_swaps, "episodes": harm_rates(groups)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("generator")
    parser.add_argument("policy")
    parser.add_argument("--tasks-per-split", type=int, default=10)
    parser.add_argument("--task-seed", type=int, default=0, help="task-generation seed (not a sealed one)")
    parser.add_argument("--policy-seeds", default="0,1")
    parser.add_argument("--out", required=True)
    parser.add_argument("--arms", default=DEFAULT_ARMS, help="comma-separated harness arms")
    args = parser.parse_args(argv)
    settings = ExtEvalSettings(
        args.generator,
        args.policy,
        tasks_per_split=args.tasks_per_split,
        task_seed=args.task_seed,
        policy_seeds=tuple(int(s) for s in args.policy_seeds.split(",") if s),
        arms=tuple(a for a in args.arms.split(",") if a),
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    episodes: list[dict] = []

    def keep(o) -> None:
        episodes.append(o.with_log())

    SelectorAllocator.decide = _decide  # type: ignore[method-assign]
    SelectorAllocator.allocate = _allocate  # type: ignore[method-assign]
    try:
        results = run_ext_eval(settings, out / "work", progress=keep)
    finally:
        SelectorAllocator.decide = _DECIDE  # type: ignore[method-assign]
        SelectorAllocator.allocate = _ALLOCATE  # type: ignore[method-assign]
    (out / "results.json").write_text(json.dumps(results, indent=1))
    harm = {
        "bundled": tally(episodes, lambda r: r.get("ood_group") == "bundled"),
        "refit": tally(episodes, lambda r: str(r.get("ood_refit", "")).endswith("-refuse")),
        "refit_after_warmup": tally(episodes, lambda r: r.get("ood_refit") == "refit-refuse"),
        "witness": tally(episodes, lambda r: "witness_kept" in r),
        "try2": tally(episodes, lambda r: "witness_kept" in r or r.get("ood_refit") == "refit-refuse"),
    }
    (out / "harm.json").write_text(json.dumps(harm, indent=1))
    print(
        json.dumps(
            {
                k: {
                    "swaps": v["swaps"],
                    "refused": v["swaps_refused"],
                    **{
                        g: (x["episodes"], x["harmed"], x["harmed"] and x["harm_rate"])
                        for g, x in v["episodes"].items()
                        if g.endswith("/all")
                    },
                }
                for k, v in harm.items()
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
