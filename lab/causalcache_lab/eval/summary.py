"""Summaries of closed-loop outcomes (``results.json``): the protocol's numbers.

* A task's score under an arm is its success averaged over the policy seeds it ran under.
* Success per split: the mean task score with a task-bootstrap 95% interval (tasks are the clusters),
  plus the per-seed success rates (their spread shows the policy's own noise).
* Paired contrasts against Recent-B, per split: the mean of per-task score differences with a
  task-paired bootstrap interval, and the counts of tasks *helped* (score higher than under Recent-B)
  and *harmed* (lower).
* On controls, a non-inferiority check replaces "no detectable difference": an arm is non-inferior to
  Recent-B at margin ``δ`` when the lower end of its control contrast's interval is above ``-δ``.
* The split × method interaction (memory-critical gain − control gain), the realized ``k`` profile and
  the pass-2 fire rate per split (share of two-pass steps whose second pass ran), and the shares of
  two-pass steps the selector declined as out of distribution (``ood_rate``) or that fell back to Recent-B
  on an error or time-out (``fallback_rate``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_lab.eval.stats import cluster_bootstrap, paired_difference, split_interaction
from causalcache_memory.decisions.counts import DecisionStats

if TYPE_CHECKING:
    from causalcache_lab.eval.world_agent import EpisodeOutcome

__all__ = ["SPLITS", "budget_curve", "split_rows", "summarize", "summarize_arm", "task_scores"]

SPLITS = ("all", "memory_critical", "control")


def split_rows(outcomes: Sequence[EpisodeOutcome], split: str) -> list[EpisodeOutcome]:
    return [o for o in outcomes if split == "all" or o.split == split]


def task_scores(outcomes: Sequence[EpisodeOutcome]) -> dict[str, float]:
    """Task id -> success averaged over the seeds it ran under (insertion order of first appearance)."""
    runs: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        runs[o.task_id].append(float(o.success))
    return {t: sum(v) / len(v) for t, v in runs.items()}


def _fire_rate(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    two_pass = [r for o in outcomes for r in o.log if "proposal" in r]
    return (sum(bool(r.get("second_pass")) for r in two_pass) / len(two_pass)) if two_pass else None


def _fallback_rates(outcomes: Sequence[EpisodeOutcome]) -> dict[str, float | None]:
    """Share of two-pass decisions the selector declined as out of distribution (``ood``), and the share
    that fell back to Recent-B for any other reason (an error or a time-out)."""
    two_pass = [r for o in outcomes for r in o.log if "proposal" in r]
    if not two_pass:
        return {"ood_rate": None, "fallback_rate": None}
    ood = sum(r.get("fallback") == "ood" for r in two_pass)
    other = sum(r.get("fallback") not in (None, "ood") for r in two_pass)
    return {"ood_rate": ood / len(two_pass), "fallback_rate": other / len(two_pass)}


def _cell(rows: Sequence[EpisodeOutcome], seed: int) -> dict[str, Any]:
    scores = task_scores(rows)
    est = cluster_bootstrap(list(scores.values()), seed=seed)
    by_seed: dict[int, list[float]] = defaultdict(list)
    for o in rows:
        by_seed[o.seed].append(float(o.success))
    n = len(rows) or 1
    return {
        "success": est.value,
        "ci95": [est.low, est.high],
        "n": len(scores),
        "episodes": len(rows),
        "per_seed": {str(s): sum(v) / len(v) for s, v in sorted(by_seed.items())},
        "steps_mean": sum(o.steps for o in rows) / n if rows else float("nan"),
        "wall_s_mean": sum(o.wall_s for o in rows) / n if rows else float("nan"),
        "fire_rate": _fire_rate(rows),
        **_fallback_rates(rows),
    }


def summarize_arm(outcomes: Sequence[EpisodeOutcome], seed: int = 0) -> dict[str, Any]:
    """Per split: success over tasks (mean over seeds) with a task-bootstrap interval, per-seed rates,
    steps, wall time and the pass-2 fire rate; overall: the k profile and pass-2 accounting."""
    out: dict[str, Any] = {split: _cell(split_rows(outcomes, split), seed) for split in SPLITS}
    records = [r for o in outcomes for r in o.log]
    ks = Counter(int(r.get("k", 0)) for r in records)
    total = sum(ks.values()) or 1
    out["k_profile"] = {str(k): ks[k] / total for k in sorted(ks)}
    out["fire_rate"] = _fire_rate(outcomes)
    out.update(_fallback_rates(outcomes))
    cache = DecisionStats.from_records(records).cache_dict()  # {} unless the memories were metered
    if cache:
        out["prompt_cache"] = cache
    two_pass = [r for r in records if "proposal" in r]
    if two_pass:
        added = [r["pass_latency_ms"][1] for r in two_pass if len(r.get("pass_latency_ms", [])) > 1]
        out["added_model_ms_per_step"] = sum(added) / len(two_pass)
        out["model_ms_per_step"] = sum(sum(r.get("pass_latency_ms", [])) for r in two_pass) / len(two_pass)
    else:
        out["added_model_ms_per_step"] = None
        out["model_ms_per_step"] = (
            sum(sum(r.get("pass_latency_ms", [])) for r in records) / len(records) if records else None
        )
    out["selector_ms_per_step"] = (
        sum(r.get("selector_latency_ms", 0.0) for r in records) / len(records) if records else None
    )
    return out


def _paired(
    outcomes: Sequence[EpisodeOutcome], arm: str, base: str, split: str, seed: int, margin: float
) -> dict[str, Any]:
    treat = task_scores([o for o in outcomes if o.arm == arm and (split == "all" or o.split == split)])
    ctrl = task_scores([o for o in outcomes if o.arm == base and (split == "all" or o.split == split)])
    ids = [t for t in treat if t in ctrl]
    est = paired_difference([treat[t] for t in ids], [ctrl[t] for t in ids], seed=seed)
    out = {
        "delta": est.value,
        "ci95": [est.low, est.high],
        "n": len(ids),
        "excludes_zero": est.excludes_zero,
        "helped": sum(treat[t] > ctrl[t] for t in ids),
        "harmed": sum(treat[t] < ctrl[t] for t in ids),
    }
    if split == "control":
        out["ni_margin"] = margin
        out["non_inferior"] = bool(ids) and est.low > -margin
    return out


def summarize(
    outcomes: Sequence[EpisodeOutcome],
    arms: Sequence[str],
    *,
    treatment: str = "causalcache",
    baseline: str = "recent",
    seed: int = 0,
    ni_margin: float = 0.05,
) -> dict[str, Any]:
    """The ``arms``, ``contrasts`` (treatment − baseline) and ``contrasts_by_arm`` sections."""
    result: dict[str, Any] = {"arms": {}, "contrasts": {}, "contrasts_by_arm": {}}
    for arm in arms:
        result["arms"][arm] = summarize_arm([o for o in outcomes if o.arm == arm], seed=seed)
    if baseline not in arms:
        return result
    for arm in arms:
        if arm != baseline:
            result["contrasts_by_arm"][arm] = {
                s: _paired(outcomes, arm, baseline, s, seed, ni_margin) for s in SPLITS
            }
    if treatment in arms:
        result["contrasts"] = dict(result["contrasts_by_arm"][treatment])
        treat = task_scores([o for o in outcomes if o.arm == treatment])
        ctrl = task_scores([o for o in outcomes if o.arm == baseline])
        split_of = {o.task_id: o.split for o in outcomes}
        ids = [t for t in treat if t in ctrl]
        inter = split_interaction(
            [treat[t] for t in ids],
            [ctrl[t] for t in ids],
            [split_of[t] == "memory_critical" for t in ids],
            seed=seed,
        )
        result["contrasts"]["interaction"] = {"delta": inter.value, "ci95": [inter.low, inter.high]}
    return result


def budget_curve(
    outcomes: Sequence[EpisodeOutcome], budgets: Sequence[int], arms: Sequence[str]
) -> dict[str, Any]:
    """Success (mean over tasks of the mean over seeds) per arm, split and budget."""
    curve: dict[str, Any] = {"budgets": list(budgets), "arms": {}}
    for arm in arms:
        series: dict[str, list[float | None]] = {s: [] for s in SPLITS}
        for budget in budgets:
            b = 0 if arm == "summary_only" else budget
            rows = [o for o in outcomes if o.arm == arm and o.budget == b]
            for split in SPLITS:
                scores = task_scores(split_rows(rows, split))
                series[split].append(sum(scores.values()) / len(scores) if scores else None)
        curve["arms"][arm] = series
    return curve
