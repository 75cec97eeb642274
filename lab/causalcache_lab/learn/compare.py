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
stream, not paired).

**Triggered analysis** (``allocation.compare.shadow``, on by default). Each decision record then also
holds the set the other selector would have chosen (:mod:`~causalcache_memory.allocation.explore`). An
episode is *triggered* when some step's two sets differ. Up to that step both arms run the same process,
so being triggered does not depend on the arm, and an untriggered episode's outcome has the same
distribution in both arms. With ``ρ`` the triggered share and ``Δ_T`` the difference on triggered
episodes,

    Δ = ρ · Δ_T

so ``Δ_T`` has the sign of ``Δ`` without the untriggered episodes' noise: for a triggered share of
about 0.3 the same interval width needs about 3 times fewer episodes (RESULTS.md 9l). The verdict is
then judged on the triggered episodes (an interval for ``Δ_T``, each arm's triggered episodes resampled),
and the all-episode figures are reported beside it. When any labelled episode has no shadow decision
before its first disagreement (recorded without shadow, or a shadow failed), the verdict falls back to
all episodes and says why.

The verdict:

* **worse**: the interval lies entirely below 0 -- the deployed selector loses to the compared one; a
  WARNING is logged (``causalcache_lab.learn.compare``) and the CLI says to switch back;
* **better**: entirely above 0;
* **not shown**: otherwise, with the episodes per arm that would shrink the interval of ``Δ`` to
  ±``resolve`` (by the usual ``1/√n`` scaling from the current half-width, ``ρ`` times the triggered one
  in the triggered analysis);
* **too few**: an arm has fewer than ``min_episodes`` labelled (triggered) episodes; the interval is
  still reported.

**Looking more than once.** Each run of the comparison is one look at a 95% interval, and a team that
re-runs it as episodes come in and stops at the first "worse" or "better" has more than a 5% chance of a
false verdict. ``looks: K`` (``--looks``) states how many times the comparison will be run on the growing
recording, and every look uses the level ``1 - (1 - confidence) / K`` (Bonferroni), so the chance that
any of the ``K`` looks gives a false verdict stays within ``1 - confidence``.

Threads whose records name neither arm (no decision, or another allocator) and threads that ran both
(a config changed mid-thread) are left out and counted.
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from causalcache_memory._jsonl import finite_json
from causalcache_memory.allocation.registry import COMPARED_SELECTOR
from causalcache_memory.errors import ConfigError

__all__ = ["DEPLOYED_SELECTOR", "Arm", "Comparison", "compare_arms", "compare_threads"]

logger = logging.getLogger("causalcache_lab.learn.compare")

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
class Triggered:
    """The arms on their triggered episodes (module doc): ``delta`` and ``ci`` are ``Δ_T``."""

    deployed: Arm
    compared: Arm
    delta: float
    ci: tuple[float, float]
    share: float  # ρ, the triggered share of the labelled episodes of both arms


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_arms` found (module doc); ``delta`` and ``ci`` are deployed minus compared over
    all episodes, ``triggered`` the same on triggered episodes (None without shadow decisions), and
    ``analysis`` which of the two the verdict judged (``triggered`` | ``all episodes``)."""

    deployed: Arm
    compared: Arm
    delta: float
    ci: tuple[float, float]
    confidence: float  # the level of this look's intervals (``1 - (1 - confidence) / looks``)
    verdict: str  # worse | better | not shown | too few
    message: str
    left_out: dict[str, int] = field(default_factory=dict)
    triggered: Triggered | None = None
    analysis: str = "all episodes"
    looks: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The comparison as strict JSON-ready data: a figure that does not exist (the rate of an arm
        without episodes, the interval of an empty triggered analysis) is None, never NaN, which
        ``json.dumps`` would write as the invalid token ``NaN``."""
        out = asdict(self)
        out["deployed"]["rate"], out["compared"]["rate"] = self.deployed.rate, self.compared.rate
        if self.triggered is not None:
            t = out["triggered"]
            t["deployed"]["rate"], t["compared"]["rate"] = (
                self.triggered.deployed.rate,
                self.triggered.compared.rate,
            )
        return finite_json(out)


def compare_arms(
    outcomes: Iterable[tuple[str, bool] | tuple[str, bool, bool | None]],
    *,
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
    min_episodes: int = 20,
    resolve: float = 0.05,
    left_out: Mapping[str, int] | None = None,
    looks: int = 1,
) -> Comparison:
    """``outcomes``: ``(arm name, success)`` or ``(arm name, success, triggered)`` per labelled episode,
    arm names :data:`DEPLOYED_SELECTOR` and :data:`COMPARED_SELECTOR` (others are counted as left out);
    ``triggered`` is None (or absent) for an episode without shadow decisions. See the module doc."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence={confidence!r} must be in (0, 1), e.g. 0.95")
    if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
        raise ConfigError(
            f"looks={looks!r} must be a whole number >= 1: how many times this comparison will be run on "
            "the growing recording (1 = judged once)"
        )
    confidence = 1.0 - (1.0 - confidence) / looks
    if min_episodes < 1 or resamples < 100 or not resolve > 0.0:
        raise ConfigError(
            f"min_episodes={min_episodes!r} must be >= 1 (e.g. 20), resamples={resamples!r} >= 100 (e.g. 4000) "
            f"and resolve={resolve!r} > 0 (e.g. 0.05)"
        )
    arms: dict[str, list[tuple[bool, bool | None]]] = {DEPLOYED_SELECTOR: [], COMPARED_SELECTOR: []}
    skipped: Counter[str] = Counter(left_out or {})
    for name, success, *rest in outcomes:
        if name in arms:
            arms[name].append((bool(success), rest[0] if rest else None))
        else:
            skipped[f"allocator {name}"] += 1
    mine, other = arms[DEPLOYED_SELECTOR], arms[COMPARED_SELECTOR]
    deployed = _arm(DEPLOYED_SELECTOR, [s for s, _ in mine])
    compared = _arm(COMPARED_SELECTOR, [s for s, _ in other])
    if not mine or not other:
        message = (
            f"no comparison: {deployed.episodes} labelled episodes ran the deployed selector and "
            f"{compared.episodes} the compared one; deploy with allocation.compare and label both"
        )
        return Comparison(
            deployed,
            compared,
            math.nan,
            (math.nan, math.nan),
            confidence,
            "too few",
            message,
            dict(skipped),
            looks=looks,
        )
    boot = dict(confidence=confidence, resamples=resamples, seed=seed)
    ci = _interval([s for s, _ in mine], [s for s, _ in other], **boot)
    delta = deployed.rate - compared.rate
    head = _head("", deployed, compared, delta, ci, confidence)
    unknown = sum(t is None for _, t in mine + other)
    triggered = None
    if unknown == 0:
        t_mine, t_other = [s for s, t in mine if t], [s for s, t in other if t]
        share = (len(t_mine) + len(t_other)) / (len(mine) + len(other))
        t_ci = _interval(t_mine, t_other, **boot) if t_mine and t_other else (math.nan, math.nan)
        t_dep, t_cmp = _arm(DEPLOYED_SELECTOR, t_mine), _arm(COMPARED_SELECTOR, t_other)
        triggered = Triggered(t_dep, t_cmp, t_dep.rate - t_cmp.rate, t_ci, share)
        verdict, message = _triggered_verdict(
            triggered, head, confidence, min_episodes, resolve, deployed, compared
        )
    else:
        total = len(mine) + len(other)
        without = "no episode has" if unknown == total else f"{unknown} of {total} episodes have no"
        note = f" ({without} shadow decisions: judged on all episodes)"
        verdict, message = _verdict(
            head + note, ci, min(deployed.episodes, compared.episodes), min_episodes, resolve
        )
    (logger.warning if verdict == "worse" else logger.info)("%s", message)
    analysis = "triggered" if triggered is not None else "all episodes"
    return Comparison(
        deployed, compared, delta, ci, confidence, verdict, message, dict(skipped), triggered, analysis, looks
    )


def _arm(name: str, successes: Sequence[bool]) -> Arm:
    return Arm(name, len(successes), sum(successes))


def _interval(
    mine: list[bool], other: list[bool], *, confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(mine) - mean(other)``, each arm resampled on its own."""
    rng = random.Random(seed)
    draws = sorted(
        _mean(rng.choices(mine, k=len(mine))) - _mean(rng.choices(other, k=len(other)))
        for _ in range(resamples)
    )
    tail = (1.0 - confidence) / 2
    return draws[int(tail * (resamples - 1))], draws[math.ceil((1 - tail) * (resamples - 1))]


def _level(confidence: float) -> str:
    """``95%``, or ``98.3%`` for a level that whole percents would round."""
    text = f"{confidence:.0%}"
    return text if abs(float(text[:-1]) / 100 - confidence) < 1e-9 else f"{confidence:.1%}"


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values)


def _head(
    what: str, deployed: Arm, compared: Arm, delta: float, ci: tuple[float, float], confidence: float
) -> str:
    lo, hi = ci
    return (
        f"{what}deployed selector {deployed.rate:.3f} ({deployed.successes}/{deployed.episodes}) vs compared "
        f"{compared.rate:.3f} ({compared.successes}/{compared.episodes}): {delta:+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}] ({_level(confidence)})"
    )


def _verdict(
    head: str,
    ci: tuple[float, float],
    few: int,
    min_episodes: int,
    resolve: float,
    scale: float = 1.0,
    per_arm: int | None = None,
) -> tuple[str, str]:
    """The verdict on interval ``ci`` with ``few`` episodes in the smaller arm (module doc). ``scale`` puts
    the interval's half-width in units of ``Δ`` (``ρ`` for ``Δ_T``) and ``per_arm`` is the smaller arm's
    episodes that the needed count scales from (default ``few``)."""
    lo, hi = ci
    if few < min_episodes:
        return "too few", f"{head}; too few episodes to compare (fewer than {min_episodes} in an arm)"
    if hi < 0.0:
        return "worse", f"{head}: the deployed selector is WORSE; switch back to the compared one"
    if lo > 0.0:
        return "better", f"{head}: the deployed selector is better"
    half = max(scale * (hi - lo) / 2, 1e-9)
    needed = math.ceil((per_arm or few) * (half / resolve) ** 2)
    return "not shown", (
        f"{head}: no difference shown yet; about {needed} episodes per arm would resolve ±{resolve:.2f}"
    )


def _triggered_verdict(
    trig: Triggered,
    head: str,
    confidence: float,
    min_episodes: int,
    resolve: float,
    deployed: Arm,
    compared: Arm,
) -> tuple[str, str]:
    """The verdict judged on the triggered episodes; the message gives both analyses."""
    overall = min(deployed.episodes, compared.episodes)
    if overall < min_episodes:
        return _verdict(head, (math.nan, math.nan), overall, min_episodes, resolve)
    if trig.deployed.episodes == 0 and trig.compared.episodes == 0:
        return "not shown", (
            f"{head}; the two selectors chose the same sets at every step of all "
            f"{deployed.episodes + compared.episodes} episodes: nothing to compare"
        )
    t_head = _head(
        f"{head}; on the {trig.share:.0%} of episodes where the two disagreed (triggered): ",
        trig.deployed, trig.compared, trig.delta, trig.ci, confidence,
    )  # fmt: skip
    few = min(trig.deployed.episodes, trig.compared.episodes)
    return _verdict(
        t_head, trig.ci, few, min_episodes, resolve, scale=trig.share,
        per_arm=overall,
    )  # fmt: skip


def compare_threads(
    checkpointer: Any, archive: Any, success: Mapping[str, bool] | str | Path, **options: Any
) -> Comparison:
    """:func:`compare_arms` over recorded threads: the checkpointer and archive the memory wrote, and
    the team's success labels (a mapping, or a JSON/CSV file as ``learn`` reads them; not ``all``)."""
    from causalcache_lab.learn.threads import load_success_labels, threads_to_trajectories

    if not isinstance(success, Mapping) and str(success) == "all":
        raise ConfigError(
            "compare needs a success label per thread (a JSON object or a CSV file), not 'all': with every "
            "thread successful the two selectors cannot differ"
        )
    labels = (
        success
        if isinstance(success, Mapping)
        else load_success_labels(success, field="--success", allow_all=False)
    )
    assert labels is not None  # 'all' was refused above
    trajectories, report = threads_to_trajectories(checkpointer, archive, labels, success_field="--success")
    left_out: Counter[str] = Counter({"unlabelled": len(report.unlabelled), "empty": len(report.empty)})
    outcomes = []
    for traj in trajectories:
        used = list(traj.metadata.get("allocators") or [])
        if len(used) == 1:
            outcomes.append((used[0], bool(traj.success), traj.metadata.get("shadow_disagrees")))
        else:
            left_out["no single allocator"] += 1
    return compare_arms(outcomes, left_out={k: v for k, v in left_out.items() if v}, **options)
