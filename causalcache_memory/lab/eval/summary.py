"""Summaries of closed-loop outcomes: success per split with task-bootstrap intervals, paired contrasts,
the split × method interaction, the realized k profile and the pass-2 accounting (``results.json``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.lab.eval.stats import cluster_bootstrap, paired_difference, split_interaction

if TYPE_CHECKING:
    from causalcache_memory.lab.eval.closed_loop import EpisodeOutcome

__all__ = ["SPLITS", "split_rows", "summarize", "summarize_arm"]

SPLITS = ("all", "memory_critical", "control")


def split_rows(outcomes: Sequence[EpisodeOutcome], split: str) -> list[EpisodeOutcome]:
    return [o for o in outcomes if split == "all" or o.split == split]


def summarize_arm(outcomes: Sequence[EpisodeOutcome], seed: int = 0) -> dict[str, Any]:
    """Success with task-bootstrap intervals per split, steps, wall time, k profile, pass-2 accounting."""
    out: dict[str, Any] = {}
    for split in SPLITS:
        rows = split_rows(outcomes, split)
        est = cluster_bootstrap([float(o.success) for o in rows], seed=seed)
        out[split] = {
            "success": est.value,
            "ci95": [est.low, est.high],
            "n": len(rows),
            "steps_mean": (sum(o.steps for o in rows) / len(rows)) if rows else float("nan"),
            "wall_s_mean": (sum(o.wall_s for o in rows) / len(rows)) if rows else float("nan"),
        }
    records = [r for o in outcomes for r in o.log]
    ks = Counter(int(r.get("k", 0)) for r in records)
    total = sum(ks.values()) or 1
    out["k_profile"] = {str(k): ks[k] / total for k in sorted(ks)}
    two_pass = [r for r in records if "proposal" in r]
    out["fire_rate"] = (
        (sum(bool(r.get("second_pass")) for r in two_pass) / len(two_pass)) if two_pass else None
    )
    if two_pass:
        added = [r["pass_latency_ms"][1] for r in two_pass if len(r.get("pass_latency_ms", [])) > 1]
        model = [sum(r.get("pass_latency_ms", [])) for r in two_pass]
        out["added_model_ms_per_step"] = sum(added) / len(two_pass)
        out["model_ms_per_step"] = sum(model) / len(two_pass)
    else:
        out["added_model_ms_per_step"] = None
        out["model_ms_per_step"] = (
            sum(sum(r.get("pass_latency_ms", [])) for r in records) / len(records) if records else None
        )
    out["selector_ms_per_step"] = (
        sum(r.get("selector_latency_ms", 0.0) for r in records) / len(records) if records else None
    )
    return out


def _paired(outcomes: Sequence[EpisodeOutcome], arm: str, base: str, split: str, seed: int) -> dict[str, Any]:
    treat = {o.task_id: o for o in outcomes if o.arm == arm}
    ctrl = {o.task_id: o for o in outcomes if o.arm == base}
    ids = [t for t in treat if t in ctrl and (split == "all" or treat[t].split == split)]
    est = paired_difference(
        [float(treat[t].success) for t in ids], [float(ctrl[t].success) for t in ids], seed=seed
    )
    return {
        "delta": est.value,
        "ci95": [est.low, est.high],
        "n": len(ids),
        "excludes_zero": est.excludes_zero,
    }


def summarize(
    outcomes: Sequence[EpisodeOutcome],
    arms: Sequence[str],
    *,
    treatment: str = "causalcache",
    baseline: str = "recent",
    seed: int = 0,
) -> dict[str, Any]:
    """The ``arms`` and ``contrasts`` sections of ``results.json``."""
    result: dict[str, Any] = {"arms": {}, "contrasts": {}, "contrasts_by_arm": {}}
    for arm in arms:
        result["arms"][arm] = summarize_arm([o for o in outcomes if o.arm == arm], seed=seed)
    if treatment in arms and baseline in arms:
        for split in SPLITS:
            result["contrasts"][split] = _paired(outcomes, treatment, baseline, split, seed)
        treat = {o.task_id: o for o in outcomes if o.arm == treatment}
        ctrl = {o.task_id: o for o in outcomes if o.arm == baseline}
        ids = [t for t in treat if t in ctrl]
        inter = split_interaction(
            [float(treat[t].success) for t in ids],
            [float(ctrl[t].success) for t in ids],
            [treat[t].split == "memory_critical" for t in ids],
            seed=seed,
        )
        result["contrasts"]["interaction"] = {"delta": inter.value, "ci95": [inter.low, inter.high]}
    for arm in arms:
        if arm != baseline and baseline in arms:
            result["contrasts_by_arm"][arm] = {s: _paired(outcomes, arm, baseline, s, seed) for s in SPLITS}
    return result
