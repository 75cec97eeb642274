"""The format-2 OOD guard (:class:`OodGuard`), kept so that models of format 2 load and are guarded as before.

Mahalanobis distance of a state summary over every feature column from the training states' mean, with
covariance + ``1e-3 × mean variance × I``, above the 99.9th percentile of train + dev state distances.
The current guard is :class:`causalcache_memory.selector.ood.RobustGuard`; :func:`~causalcache_memory.
selector.ood.load_guard` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalcache_memory.errors import SelectorError

__all__ = ["OOD_QUANTILE", "OOD_RIDGE", "OodGuard"]

#: format-2 guard (:class:`OodGuard`): ridge relative to the mean variance, and its train+dev quantile
OOD_RIDGE = 1e-3
OOD_QUANTILE = 0.999
_LEGACY_RULE = (
    "Mahalanobis distance of the state's per-feature event means from the training states' mean "
    "(covariance + 1e-3 x mean variance x I) above the 99.9th percentile of train+dev state distances"
)


@dataclass(frozen=True)
class OodGuard:
    """The format-2 guard: Mahalanobis distance over every column (kept to load models of format 2)."""

    features: tuple[str, ...]
    mean: np.ndarray
    precision: np.ndarray
    threshold: float
    rule: str = _LEGACY_RULE

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
        """Parse format-2 ``causalcache.ood`` metadata; refuses statistics of another feature list or kind."""
        try:
            data: Mapping[str, Any] = json.loads(text)
            if "kind" in data:
                raise SelectorError(f"{source}: causalcache.ood holds a {data['kind']} guard; use load_guard")
            return cls.from_dict(data, feature_names, source)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if isinstance(exc, SelectorError):
                raise
            raise SelectorError(
                f"{source}: causalcache.ood metadata is malformed ({exc!r}); re-export the model"
            ) from exc

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], feature_names: Sequence[str], source: str) -> OodGuard:
        features = tuple(data["features"])
        mean = np.asarray(data["mean"], dtype=np.float64)
        precision = np.asarray(data["precision"], dtype=np.float64)
        threshold = float(data["threshold"])
        n = len(feature_names)
        if features != tuple(feature_names) or mean.shape != (n,) or precision.shape != (n, n):
            raise SelectorError(
                f"{source}: causalcache.ood statistics describe {len(features)} features with mean "
                f"{mean.shape} and precision {precision.shape}, but the model has {n} features; re-export it"
            )
        if not (np.isfinite(mean).all() and np.isfinite(precision).all() and threshold > 0):
            raise SelectorError(f"{source}: causalcache.ood statistics are not finite; re-export the model")
        return cls(features, mean, precision, threshold, str(data.get("rule", _LEGACY_RULE)))
