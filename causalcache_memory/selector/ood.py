"""Out-of-distribution guard: is a decision state like the states the scorer was trained on?

Rule (stated in advance, stored with the model): a state is summarized by the mean of each event-feature
column over its events (``(F,)``; columns the model drops are zeroed). With ``mu`` and ``Sigma`` the mean
and covariance of that summary over the *training* states, the state's distance is the Mahalanobis
distance ``sqrt((z - mu)^T P (z - mu))`` with ``P = (Sigma + lambda I)^-1``, ``lambda`` = 1e-3 x the mean
variance (a feature constant in training makes any deviation from it far). The state is out of
distribution when its distance exceeds ``threshold``: the 99.9th percentile of the distances of the
training and development states. At deployment such a state falls back to Recent-B with reason ``ood``.

The statistics (fitted by :mod:`causalcache_memory.lab.selector.calibrate`) live in the model's ``causalcache.ood`` metadata (JSON):
``{"rule", "features", "mean", "precision", "threshold", "quantile", "states"}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalcache_memory.errors import SelectorError

__all__ = ["OOD_QUANTILE", "OOD_RIDGE", "OOD_RULE", "OodGuard", "state_summary"]

OOD_RULE = (
    "Mahalanobis distance of the state's per-feature event means from the training states' mean "
    "(covariance + 1e-3 x mean variance x I) above the 99.9th percentile of train+dev state distances"
)
#: ridge added to the covariance diagonal, relative to the mean feature variance
OOD_RIDGE = 1e-3
#: quantile of in-distribution (train + dev) distances used as the threshold
OOD_QUANTILE = 0.999


def state_summary(events: np.ndarray, drop: Sequence[int] = ()) -> np.ndarray:
    """``(F,)`` float64 mean of each feature column over the state's events (dropped columns = 0)."""
    z = np.asarray(events, dtype=np.float64).mean(axis=0)
    if len(drop):
        z[list(drop)] = 0.0
    return z


@dataclass(frozen=True)
class OodGuard:
    """Mahalanobis distance of a state summary to the training distribution (see module doc)."""

    features: tuple[str, ...]
    mean: np.ndarray
    precision: np.ndarray
    threshold: float
    rule: str = OOD_RULE

    def distance(self, summary: np.ndarray) -> float:
        d = np.asarray(summary, dtype=np.float64) - self.mean
        value = float(d @ self.precision @ d)
        return float(np.sqrt(max(value, 0.0))) if np.isfinite(value) else float("inf")

    def is_ood(self, summary: np.ndarray, *, scale: float = 1.0) -> tuple[bool, float]:
        """``(out_of_distribution, distance)``; a non-finite summary is always out of distribution."""
        dist = self.distance(summary)
        return (not dist <= self.threshold * scale), dist

    def to_json(self) -> str:
        return json.dumps(
            {
                "rule": self.rule,
                "features": list(self.features),
                "mean": self.mean.tolist(),
                "precision": self.precision.tolist(),
                "threshold": self.threshold,
            }
        )

    @classmethod
    def from_json(cls, text: str, feature_names: Sequence[str], *, source: str = "model") -> OodGuard:
        """Parse ``causalcache.ood`` metadata; refuses statistics of another feature list or shape."""
        try:
            data: Mapping[str, Any] = json.loads(text)
            features = tuple(data["features"])
            mean = np.asarray(data["mean"], dtype=np.float64)
            precision = np.asarray(data["precision"], dtype=np.float64)
            threshold = float(data["threshold"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SelectorError(
                f"{source}: causalcache.ood metadata is malformed ({exc}); re-export the model"
            ) from exc
        n = len(feature_names)
        if features != tuple(feature_names) or mean.shape != (n,) or precision.shape != (n, n):
            raise SelectorError(
                f"{source}: causalcache.ood statistics describe {len(features)} features with mean "
                f"{mean.shape} and precision {precision.shape}, but the model has {n} features; re-export it"
            )
        if not (np.isfinite(mean).all() and np.isfinite(precision).all() and threshold > 0):
            raise SelectorError(f"{source}: causalcache.ood statistics are not finite; re-export the model")
        return cls(features, mean, precision, threshold, str(data.get("rule", OOD_RULE)))
