"""Keep a fine-tuned selector only when the dev states show it beats its base (``train.fine_tune_gate``).

Fine-tuning (``train.init_from``) chooses the epoch with the best dev value, and "epoch 0" (the base
unchanged) is one of the candidates. On a small dev split that choice is noisy: the best of 40 epochs
beats the base by chance. The gate asks for evidence. With ``v_g`` the realized utility of the argmax
candidate of dev group ``g`` (one recent slot of one state, as in the dev value), for the fine-tuned
model ``v'_g`` and for the base ``v_g``, the paired differences ``d_g = v'_g - v_g`` are resampled with
replacement (``resamples`` draws, seeded); the fine-tuned model is kept only when the lower end of the
two-sided ``confidence`` interval of ``mean(d)`` is above ``MIN_SHOWN_GAIN × s`` (``s`` the target scale,
the mean ``|y|`` of a non-zero label, which fine-tuning keeps from the base): a gain must be shown *and*
not be negligible. Otherwise training ships the base unchanged (``epochs_fine_tuned: 0``), with its own
threshold and guard when they fit (:mod:`.keep_base`).

Why the margin (RESULTS.md 9f): on the development world devage-02 every epoch's dev value was 0 to three
decimals, the dev loss picked epoch 29, and its per-group gains of about 1e-4 (0.2% of ``s``) were
consistently positive, so an interval above 0 shipped it, with a threshold refitted on 46 dev states that
admitted no swap (−0.013 against the bundled selector in the closed loop).

Groups of one state are resampled independently (an approximation: they share the state's context).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MIN_SHOWN_GAIN", "cluster_resampled_sums", "fine_tune_evidence", "gate_fine_tune"]

logger = logging.getLogger("causalcache_lab.selector.fine_tune_gate")

#: the smallest dev gain per group worth shipping a fine-tune for, as a share of the target scale
MIN_SHOWN_GAIN = 0.05


def cluster_resampled_sums(
    clusters: Sequence[str], arrays: Sequence[np.ndarray], *, resamples: int, seed: int
) -> tuple[list[np.ndarray], int]:
    """The cluster bootstrap shared by the gates: ``(sums, K)`` where ``sums[j]`` ``(resamples,)`` is, for each
    draw of ``K`` clusters with replacement (seeded), the sum of ``arrays[j]`` ``(N,)`` over the drawn
    clusters' members; ``clusters`` ``(N,)`` is each element's key (its trajectory)."""
    _, index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    per_cluster = [np.bincount(index, weights=np.asarray(a, dtype=np.float64)) for a in arrays]
    k = int(index.max()) + 1
    draw = np.random.default_rng(seed).integers(0, k, size=(resamples, k))
    return [c[draw].sum(axis=1) for c in per_cluster], k


def fine_tune_evidence(
    tuned: np.ndarray,
    base: np.ndarray,
    *,
    confidence: float,
    seed: int,
    resamples: int = 2000,
    min_gain: float = 0.0,
    clusters: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Paired bootstrap of ``mean(tuned - base)`` over dev groups (module doc); ``keep`` = lower end > ``min_gain``.

    ``tuned`` and ``base`` are ``(groups,)`` realized utilities, in the same order. ``clusters`` (one key per
    group, e.g. its trajectory) resamples whole clusters instead of groups: each draw's mean is the sum of
    the drawn clusters' differences over their number of groups. Returns ``{"groups", "delta", "ci",
    "confidence", "min_gain", "keep"}`` (and ``"clusters"``); no groups gives ``keep: False``.
    """
    tuned, base = np.asarray(tuned, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if tuned.shape != base.shape:
        raise ValueError(f"tuned {tuned.shape} and base {base.shape} must hold the same dev groups")
    n = int(tuned.shape[0])
    if n == 0:
        return {
            "groups": 0,
            "delta": float("nan"),
            "ci": [float("nan"), float("nan")],
            "confidence": confidence,
            "min_gain": min_gain,
            "keep": False,
        }
    diff = tuned - base
    extra: dict[str, Any] = {}
    if clusters is None:
        means = diff[np.random.default_rng(seed).integers(0, n, size=(resamples, n))].mean(axis=1)
    else:
        if len(clusters) != n:
            raise ValueError(f"clusters has {len(clusters)} keys for {n} groups")
        (sums, sizes), extra["clusters"] = cluster_resampled_sums(
            clusters, [diff, np.ones(n)], resamples=resamples, seed=seed
        )
        means = sums / sizes
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(means, [tail, 1.0 - tail]))
    return {
        "groups": n,
        "delta": float(diff.mean()),
        "ci": [lo, hi],
        "confidence": confidence,
        "min_gain": min_gain,
        "keep": lo > min_gain,
        **extra,
    }


def gate_fine_tune(
    tuned: Any, best_epoch: Any, base: Any, values: Any, cfg: Any, log: Any = None
) -> tuple[Any, Any, dict[str, Any] | None]:
    """``(model to ship, its epoch, evidence or None)`` after fine-tuning from ``base`` (a BaseSelector).

    The gate runs when a later epoch than 0 won on dev, ``cfg.fine_tune_gate`` is set and the model is a
    single scorer; it keeps ``tuned`` when :func:`fine_tune_evidence` does, else ships the base's scorer
    unchanged (epoch 0). ``values(model)`` gives a model's ``(groups,)`` dev utilities (the dev value's
    per-group terms); ``cfg`` is the TrainConfig (``fine_tune_gate`` = the confidence, ``seed`` seeds the
    resampling). No base, epoch 0 or an ensemble: ``(tuned, best_epoch, None)``."""
    if base is None or not best_epoch or cfg.fine_tune_gate is None or cfg.ensemble != 1:
        return tuned, best_epoch, None
    confidence = float(cfg.fine_tune_gate)
    margin = MIN_SHOWN_GAIN * float(base.target_scale)
    evidence = fine_tune_evidence(
        values(tuned),
        values(base.member_module(base.scorer)),
        confidence=confidence,
        seed=cfg.seed,
        min_gain=margin,
    )
    lo, hi = evidence["ci"]
    verdict = "kept" if evidence["keep"] else "not shown: the base is kept (epochs_fine_tuned 0)"
    message = (
        f"fine-tune gate: dev gain over the base {evidence['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}] "
        f"({confidence:.0%}, {evidence['groups']} dev groups; needs the lower end above {margin:.4f}): "
        f"fine-tuning {verdict}"
    )
    logger.info("%s", message)
    if log:
        log(message)
    if evidence["keep"]:
        return tuned, best_epoch, evidence
    return base.member_module(base.scorer), 0, evidence
