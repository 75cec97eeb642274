"""Compare two selectors on live episodes (``allocation.compare``): success by arm, with an interval.

``causalcache learn`` checks a fine-tune out of fold before it ships, but that check scores each recorded
decision on its own and can miss a loss the closed loop shows (RESULTS.md 9j: heldout-03, −0.03 and
−0.06 against the bundle, both unseen by it). The test that counts is the team's own tasks. With
``allocation.compare: {share: s, model_path: M}`` the memory runs the selector ``M`` on a stable share
``s`` of episodes (the others run the deployed model), and each decision record names which ran
(``selector`` or :data:`~causalcache_memory.allocation.registry.COMPARED_SELECTOR`). This module reads the
recorded threads with the team's success labels and compares the two arms:

    Δ = p_deployed - p_compared        p_a = successes_a / episodes_a over the labelled threads of arm a

with a two-sided percentile bootstrap interval (each arm's threads resampled on their own, seeded). The
arms are different episodes (the split is by episode id, so they are comparable draws from the same task
stream, not paired). The verdict:

* **worse**: the interval lies entirely below 0 -- the deployed selector loses to the compared one; a
  WARNING is logged (``causalcache_memory.lab.learn.compare``) and the CLI says to switch back;
* **better**: entirely above 0;
* **not shown**: otherwise, with the episodes per arm that would shrink the interval to ±``resolve`` (by
  the usual ``1/√n`` scaling from the current half-width);
* **too few**: an arm has fewer than ``min_episodes`` labelled threads (the interval is still reported).

Threads whose records name neither arm (no decision, or another allocator) and threads that ran both
(a config changed mid-thread) are left out and counted.
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from causalcache_memory.allocation.registry import COMPARED_SELECTOR
from causalcache_memory.errors import ConfigError

__all__ = ["DEPLOYED_SELECTOR", "Arm", "Comparison", "compare_arms", "compare_threads"]

logger = logging.getLogger("causalcache_memory.lab.learn.compare")

#: the decision records' ``allocator`` on the episodes the deployed selector ran
DEPLOYED_SELECTOR = "selector"


@dataclass(frozen=True)
class Arm:
    """One arm's labelled episodes and successes."""

    name: str
    episodes: int
    successes: int

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else float("nan")


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_arms` found (module doc); ``delta`` and ``ci`` are deployed minus compared."""

    deployed: Arm
    compared: Arm
    delta: float
    ci: tuple[float, float]
    confidence: float
    verdict: str  # worse | better | not shown | too few
    message: str
    left_out: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["deployed"]["rate"], out["compared"]["rate"] = self.deployed.rate, self.compared.rate
        return out


def compare_arms(
    outcomes: Iterable[tuple[str, bool]],
    *,
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
    min_episodes: int = 20,
    resolve: float = 0.05,
    left_out: Mapping[str, int] | None = None,
) -> Comparison:
    """``outcomes``: ``(arm name, success)`` per labelled episode, arm names :data:`DEPLOYED_SELECTOR` and
    :data:`COMPARED_SELECTOR` (others are counted as left out). See the module doc."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence={confidence!r} must be in (0, 1), e.g. 0.95")
    if min_episodes < 1 or resamples < 100 or not resolve > 0.0:
        raise ConfigError(
            f"min_episodes={min_episodes!r} must be >= 1 (e.g. 20), resamples={resamples!r} >= 100 (e.g. 4000) "
            f"and resolve={resolve!r} > 0 (e.g. 0.05)"
        )
    arms: dict[str, list[bool]] = {DEPLOYED_SELECTOR: [], COMPARED_SELECTOR: []}
    skipped: Counter[str] = Counter(left_out or {})
    for name, success in outcomes:
        if name in arms:
            arms[name].append(bool(success))
        else:
            skipped[f"allocator {name}"] += 1
    mine, other = arms[DEPLOYED_SELECTOR], arms[COMPARED_SELECTOR]
    deployed = Arm(DEPLOYED_SELECTOR, len(mine), sum(mine))
    compared = Arm(COMPARED_SELECTOR, len(other), sum(other))
    if not mine or not other:
        message = (
            f"no comparison: {deployed.episodes} labelled episodes ran the deployed selector and "
            f"{compared.episodes} the compared one; deploy with allocation.compare and label both"
        )
        return Comparison(
            deployed, compared, math.nan, (math.nan, math.nan), confidence, "too few", message, dict(skipped)
        )
    rng = random.Random(seed)
    draws = sorted(
        _mean(rng.choices(mine, k=len(mine))) - _mean(rng.choices(other, k=len(other)))
        for _ in range(resamples)
    )
    tail = (1.0 - confidence) / 2
    ci = (draws[int(tail * (resamples - 1))], draws[math.ceil((1 - tail) * (resamples - 1))])
    delta = deployed.rate - compared.rate
    verdict, message = _verdict(deployed, compared, delta, ci, confidence, min_episodes, resolve)
    if verdict == "worse":
        logger.warning("%s", message)
    else:
        logger.info("%s", message)
    return Comparison(deployed, compared, delta, ci, confidence, verdict, message, dict(skipped))


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values)


def _verdict(
    deployed: Arm,
    compared: Arm,
    delta: float,
    ci: tuple[float, float],
    confidence: float,
    min_episodes: int,
    resolve: float,
) -> tuple[str, str]:
    lo, hi = ci
    head = (
        f"deployed selector {deployed.rate:.3f} ({deployed.successes}/{deployed.episodes}) vs compared "
        f"{compared.rate:.3f} ({compared.successes}/{compared.episodes}): {delta:+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}] ({confidence:.0%})"
    )
    few = min(deployed.episodes, compared.episodes)
    if few < min_episodes:
        return "too few", f"{head}; too few episodes to compare (fewer than {min_episodes} in an arm)"
    if hi < 0.0:
        return "worse", f"{head}: the deployed selector is WORSE; switch back to the compared one"
    if lo > 0.0:
        return "better", f"{head}: the deployed selector is better"
    half = max((hi - lo) / 2, 1e-9)
    needed = math.ceil(few * (half / resolve) ** 2)
    return "not shown", (
        f"{head}: no difference shown yet; about {needed} episodes per arm would resolve ±{resolve:.2f}"
    )


def compare_threads(
    checkpointer: Any, archive: Any, success: Mapping[str, bool] | str | Path, **options: Any
) -> Comparison:
    """:func:`compare_arms` over recorded threads: the checkpointer and archive the memory wrote, and
    the team's success labels (a mapping, or a JSON/CSV file as ``learn`` reads them; not ``all``)."""
    from causalcache_memory.lab.learn.threads import load_success_labels, threads_to_trajectories

    labels = success if isinstance(success, Mapping) else load_success_labels(success)
    if labels is None:
        raise ConfigError(
            "compare needs a success label per thread (a JSON object or a CSV file), not 'all': with every "
            "thread successful the two selectors cannot differ"
        )
    trajectories, report = threads_to_trajectories(checkpointer, archive, labels)
    left_out: Counter[str] = Counter({"unlabelled": len(report.unlabelled), "empty": len(report.empty)})
    outcomes = []
    for traj in trajectories:
        used = list(traj.metadata.get("allocators") or [])
        if len(used) == 1:
            outcomes.append((used[0], bool(traj.success)))
        else:
            left_out["no single allocator"] += 1
    return compare_arms(outcomes, left_out={k: v for k, v in left_out.items() if v}, **options)
