"""Out-of-distribution guard: does a decision state look like the states the scorer was trained on?

A state is summarized by the mean of each event-feature column over its events (:func:`state_summary`,
``(F,)``). The guard (:class:`RobustGuard`, rule :data:`OOD_RULE`, fitted by :meth:`RobustGuard.fit`)
looks only at what the scorer relies on:

* **columns**: the features the model uses and that vary across training states (columns the model drops,
  columns constant in training such as ``witness_present`` under a gold witness, and identity columns
  named ``*_id`` / ``*_px`` — raw verb ids, pixel sizes — are left out). Action types enter the features
  as families only, and points as relative coordinates, so an unseen verb of a known family or a larger
  screen moves no action or position column (summaries name the verb and the pixel point, so the
  summary-overlap columns can move a little);
* **robust standardisation**: ``u_f = (z_f − median_f) / s_f`` with ``s_f = max(1.4826 · MAD_f, 0.1)``
  over the training states (the standard deviation where the MAD is 0; the floor: features live on unit
  ranges, and a column that barely varies in training, e.g. a summary overlap under one verb, must not
  make a shift of a tenth of its range out of distribution by itself);
* **shrinkage covariance** (Ledoit & Wolf 2004): ``Σ = (1 − δ) S + δ (tr S / d) I`` of ``u`` over the
  training states, ``δ`` the estimated optimal intensity but at least 0.5, so a few dozen states never
  give a singular guard and columns computed from one source (the summary-overlap features move
  together in training) may move off their training pattern — new wording, a new verb — without the
  state being out of distribution unless the columns themselves are far; distance
  ``D(z) = sqrt(u^T Σ^{-1} u)``;
* **threshold on dev**: the smallest order statistic of the *dev* states' distances above which at most
  ``false_alarm_rate`` (1%) of them lie; a state with ``D > threshold`` (or a non-finite summary) is out of
  distribution and the decision falls back to Recent-B with reason ``ood``;
* **masked groups** (:mod:`~causalcache_memory.selector.ood_masks`): a state whose app labels, screen text
  or thumbnails are missing altogether (the group's availability mean is 0) is judged on the other guarded
  columns only — the marginal distance ``D_S`` over the remaining columns ``S`` — against a threshold
  calibrated for that mask pattern the same way, on the dev states with those groups masked as the
  extractor masks them (columns set to 0, summaries recomputed). Every pattern of the watched groups gets
  a threshold (``mask_thresholds``); a state with every group available is judged exactly as without them.

Fitting needs at least :func:`min_guard_states` training states (:func:`guard_fit_size_check` refuses
fewer with the number needed). The statistics live in the model's ``causalcache.ood`` metadata (JSON,
``"kind": "robust-shrinkage"``; guards stored before masked groups lack ``mask_groups`` /
``mask_thresholds`` and judge every state on all guarded columns). Format 2's Mahalanobis guard (no
``kind``) is refused by :func:`load_guard`, naming the format and the fix (re-export the model).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.ood_masks import (
    FULL_PATTERN,
    group_columns,
    marginal_precision,
    mask_summary,
    patterns,
    state_pattern,
)

__all__ = [
    "FALSE_ALARM_RATE",
    "GUARD_KIND",
    "GUARD_MIN_STATES",
    "OOD_RULE",
    "SCALE_FLOOR",
    "GuardFitError",
    "RobustGuard",
    "guard_columns",
    "guard_fit_size_check",
    "load_guard",
    "min_guard_states",
    "state_summary",
]

GUARD_KIND = "robust-shrinkage"
#: share of dev decision states the fitted guard may flag (its calibrated false-alarm rate)
FALSE_ALARM_RATE = 0.01
#: fewest training states a guard is fitted on, and the states needed per guarded column
GUARD_MIN_STATES = 30
GUARD_STATES_PER_FEATURE = 2
#: smallest robust scale: features live on unit ranges (0..1 shares, log ages), so a shift of a tenth
#: of the range is at most one robust standard unit, however narrow the training spread
SCALE_FLOOR = 0.1
#: least shrinkage intensity: training correlations are at most half trusted (see module doc)
MIN_SHRINKAGE = 0.5
#: name endings of identity columns (raw verb/type ids, pixel sizes), never guarded
IDENTITY_SUFFIXES = ("_id", "_px")
OOD_RULE = (
    "shrinkage (Ledoit-Wolf) Mahalanobis distance of the state's per-feature event means, robustly "
    "standardised (median, 1.4826 MAD) on the training states, over the columns that vary in training "
    "(no dropped or identity columns), above the threshold that flags at most {rate:g} of the dev states"
)


class GuardFitError(SelectorError, ValueError):
    """Too few (or degenerate) training states to fit the OOD guard."""


def state_summary(events: np.ndarray, drop: Sequence[int] = ()) -> np.ndarray:
    """``(F,)`` float64 mean of each feature column over the state's events (dropped columns = 0)."""
    z = np.asarray(events, dtype=np.float64).mean(axis=0)
    if len(drop):
        z[list(drop)] = 0.0
    return z


def min_guard_states(n_features: int) -> int:
    """Training states needed to fit a guard on ``n_features`` columns: ``max(30, 2 · n_features)``."""
    return max(GUARD_MIN_STATES, GUARD_STATES_PER_FEATURE * int(n_features))


def guard_fit_size_check(n_states: int, n_features: int) -> None:
    """Refuse (:class:`GuardFitError`) to fit a guard on fewer than :func:`min_guard_states` states."""
    need = min_guard_states(n_features)
    if n_states < need:
        raise GuardFitError(
            f"the OOD guard needs at least {need} training decision states for {n_features} features "
            f"(max({GUARD_MIN_STATES}, {GUARD_STATES_PER_FEATURE} per feature)), got {n_states}: label "
            f"{need - n_states} more states (more trajectories, or more states per trajectory)"
        )


def guard_columns(
    names: Sequence[str], z_train: np.ndarray, drop: Sequence[int] = (), *, tol: float = 1e-9
) -> list[int]:
    """Indices of the columns the guard watches: used, varying in training, not identity columns."""
    spread = np.asarray(z_train, dtype=np.float64).std(axis=0)
    dropped = set(drop)
    return [
        i
        for i, name in enumerate(names)
        if i not in dropped and not name.endswith(IDENTITY_SUFFIXES) and spread[i] > tol
    ]


def _ledoit_wolf(u: np.ndarray) -> tuple[np.ndarray, float]:
    """``(Σ, δ)``: the shrinkage of the covariance of ``u`` ``(n, d)`` towards ``(tr S/d) I``.

    ``δ`` = the Ledoit-Wolf estimate of the optimal intensity, at least :data:`MIN_SHRINKAGE`.
    """
    n, d = u.shape
    x = u - u.mean(axis=0)
    s = x.T @ x / n
    mu = float(np.trace(s)) / d
    dist2 = float(((s - mu * np.eye(d)) ** 2).sum())
    x2 = x**2
    beta2 = float((x2.T @ x2).sum() / n - (s**2).sum()) / n
    delta = 0.0 if dist2 <= 0.0 else min(max(beta2, 0.0), dist2) / dist2
    delta = max(delta, MIN_SHRINKAGE)
    return (1.0 - delta) * s + delta * mu * np.eye(d), delta


def _order_threshold(distances: Sequence[float], false_alarm_rate: float) -> float:
    """The smallest order statistic of ``distances`` above which at most ``false_alarm_rate`` of them lie."""
    dist = np.sort(np.asarray(distances, dtype=np.float64))
    k = max(math.ceil((1.0 - false_alarm_rate) * len(dist)) - 1, 0)
    return max(float(dist[k]), 1e-9)


@dataclass(frozen=True)
class RobustGuard:
    """The guard of the module doc: robust standardisation, shrinkage covariance, dev-calibrated threshold.

    Attributes:
        features: the model's feature names (all ``F`` columns of a summary).
        columns: indices of the guarded columns (``d`` of them).
        center, scale: ``(d,)`` training medians and robust scales of those columns.
        precision: ``(d, d)`` inverse of the shrunk covariance of the standardised training summaries.
        threshold: distance above which a state is out of distribution.
        false_alarm_rate: share of dev states the threshold was set to flag at most.
        shrinkage: the Ledoit-Wolf intensity ``δ`` used.
        mask_groups: ``{group: feature indices}`` (availability first) of the maskable groups it watches.
        mask_thresholds: ``{pattern key: threshold}`` of every non-empty pattern of ``mask_groups``
            (empty: every state is judged on all guarded columns, as guards stored before patterns).
    """

    features: tuple[str, ...]
    columns: tuple[int, ...]
    center: np.ndarray
    scale: np.ndarray
    precision: np.ndarray
    threshold: float
    false_alarm_rate: float = FALSE_ALARM_RATE
    shrinkage: float = 0.0
    mask_groups: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    mask_thresholds: Mapping[str, float] = field(default_factory=dict)
    _views: dict[str, tuple[list[int], np.ndarray]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def rule(self) -> str:
        return OOD_RULE.format(rate=self.false_alarm_rate)

    @classmethod
    def fit(
        cls,
        names: Sequence[str],
        z_train: np.ndarray,
        z_dev: np.ndarray | None = None,
        *,
        drop: Sequence[int] = (),
        false_alarm_rate: float = FALSE_ALARM_RATE,
    ) -> RobustGuard:
        """Fit on training summaries ``(n, F)``; the threshold comes from ``z_dev`` (training if empty)."""
        if not 0.0 <= false_alarm_rate < 1.0:
            raise GuardFitError(f"false_alarm_rate={false_alarm_rate!r} must be in [0, 1), e.g. 0.01")
        z_train = np.asarray(z_train, dtype=np.float64)
        cols = guard_columns(names, z_train, drop)
        guard_fit_size_check(len(z_train), len(cols))
        if not cols:
            raise GuardFitError(
                "no feature varies across the training states: the OOD guard has nothing to watch"
            )
        x = z_train[:, cols]
        center = np.median(x, axis=0)
        scale = 1.4826 * np.median(np.abs(x - center), axis=0)
        scale = np.maximum(np.where(scale > 1e-9, scale, x.std(axis=0)), SCALE_FLOOR)
        cov, delta = _ledoit_wolf((x - center) / scale)
        precision = np.linalg.inv(cov)
        groups = group_columns(list(names), cols)
        guard = cls(
            tuple(names), tuple(cols), center, scale, (precision + precision.T) / 2.0, 1.0, mask_groups=groups
        )
        pool = z_train if z_dev is None or not len(z_dev) else np.asarray(z_dev, dtype=np.float64)
        threshold = _order_threshold([guard.distance(z) for z in pool], false_alarm_rate)
        masked = {
            key: _order_threshold(
                [guard.masked_distance(mask_summary(z, groups, key), key) for z in pool], false_alarm_rate
            )
            for key in patterns(groups)
        }
        return cls(
            guard.features, guard.columns, center, scale, guard.precision, threshold, false_alarm_rate, delta,
            groups, masked,
        )  # fmt: skip

    def distance(self, summary: np.ndarray) -> float:
        u = (np.asarray(summary, dtype=np.float64)[list(self.columns)] - self.center) / self.scale
        value = float(u @ self.precision @ u)
        return float(np.sqrt(max(value, 0.0))) if np.isfinite(value) else float("inf")

    def pattern(self, summary: np.ndarray) -> str:
        """The mask pattern ``summary`` is judged under (``""``: all guarded columns; see the module doc)."""
        if not self.mask_thresholds:
            return FULL_PATTERN
        key = state_pattern(np.asarray(summary, dtype=np.float64), self.mask_groups)
        return key if key in self.mask_thresholds else FULL_PATTERN

    def masked_distance(self, summary: np.ndarray, key: str) -> float:
        """``D_S``: the marginal distance over the guarded columns outside the groups of pattern ``key``."""
        if key == FULL_PATTERN:
            return self.distance(summary)
        keep, precision = self.view(key)
        cols = [self.columns[p] for p in keep]
        u = (np.asarray(summary, dtype=np.float64)[cols] - self.center[keep]) / self.scale[keep]
        value = float(u @ precision @ u)
        return float(np.sqrt(max(value, 0.0))) if np.isfinite(value) else float("inf")

    def view(self, key: str) -> tuple[list[int], np.ndarray]:
        """``(positions in columns, precision)`` the guard judges pattern ``key`` on (cached per key)."""
        if key == FULL_PATTERN:
            return list(range(len(self.columns))), self.precision
        view = self._views.get(key)
        if view is None:
            hidden = {c for g in key.split("+") for c in self.mask_groups[g]}
            keep = [p for p, c in enumerate(self.columns) if c not in hidden]
            view = self._views[key] = (keep, marginal_precision(np.linalg.inv(self.precision), keep))
        return view

    def judge(self, summary: np.ndarray) -> tuple[str, float, float]:
        """``(pattern, distance, threshold)`` of a state: its mask pattern and that pattern's distance/threshold."""
        key = self.pattern(summary)
        if key == FULL_PATTERN:
            return key, self.distance(summary), self.threshold
        return key, self.masked_distance(summary, key), self.mask_thresholds[key]

    def is_ood(self, summary: np.ndarray, *, scale: float = 1.0) -> tuple[bool, float]:
        """``(out_of_distribution, distance)``; a non-finite summary is always out of distribution."""
        _, dist, threshold = self.judge(summary)
        return (not dist <= threshold * scale), dist

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": GUARD_KIND,
                "rule": self.rule,
                "features": list(self.features),
                "columns": [self.features[i] for i in self.columns],
                "center": self.center.tolist(),
                "scale": self.scale.tolist(),
                "precision": self.precision.tolist(),
                "threshold": self.threshold,
                "false_alarm_rate": self.false_alarm_rate,
                "shrinkage": self.shrinkage,
                "mask_groups": {g: [self.features[i] for i in c] for g, c in self.mask_groups.items()},
                "mask_thresholds": dict(self.mask_thresholds),
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], feature_names: Sequence[str], source: str) -> RobustGuard:
        names = tuple(data["features"])
        if names != tuple(feature_names):
            raise SelectorError(
                f"{source}: causalcache.ood statistics describe {len(names)} features, but the model has "
                f"{len(feature_names)} ({'another order' if len(names) == len(feature_names) else 'another list'}); "
                "re-export it"
            )
        cols = tuple(names.index(c) for c in data["columns"])
        center = np.asarray(data["center"], dtype=np.float64)
        scale = np.asarray(data["scale"], dtype=np.float64)
        precision = np.asarray(data["precision"], dtype=np.float64)
        d = len(cols)
        if center.shape != (d,) or scale.shape != (d,) or precision.shape != (d, d):
            raise SelectorError(
                f"{source}: causalcache.ood statistics for {d} columns have center {center.shape}, scale "
                f"{scale.shape}, precision {precision.shape}; re-export the model"
            )
        threshold = float(data["threshold"])
        finite = np.isfinite(center).all() and np.isfinite(precision).all() and np.isfinite(scale).all()
        if not (finite and (scale > 0).all() and threshold > 0):
            raise SelectorError(f"{source}: causalcache.ood statistics are not finite; re-export the model")
        groups = {str(g): tuple(names.index(c) for c in cs) for g, cs in data.get("mask_groups", {}).items()}
        masked = {str(k): float(v) for k, v in data.get("mask_thresholds", {}).items()}
        unknown = sorted({g for k in masked for g in k.split("+")} - set(groups))
        if unknown or not all(v > 0 and math.isfinite(v) for v in masked.values()):
            raise SelectorError(
                f"{source}: causalcache.ood mask_thresholds {masked} name groups {unknown} missing from "
                f"mask_groups {sorted(groups)} or are not positive; re-export the model"
            )
        return cls(
            names, cols, center, scale, precision, threshold,
            float(data.get("false_alarm_rate", FALSE_ALARM_RATE)), float(data.get("shrinkage", 0.0)),
            groups, masked,
        )  # fmt: skip


def load_guard(text: str, feature_names: Sequence[str], *, source: str = "model") -> RobustGuard:
    """Parse a model's ``causalcache.ood`` metadata (the robust guard; format 2's guard is refused)."""
    try:
        data: Mapping[str, Any] = json.loads(text)
        kind = data.get("kind")
        if kind == GUARD_KIND:
            return RobustGuard.from_dict(data, feature_names, source)
        if kind is None:
            raise SelectorError(
                f"{source}: causalcache.ood holds the Mahalanobis guard of selector model format 2, which "
                f"this library does not read; retrain and re-export the model (`causalcache train selector` "
                f"or `causalcache learn`) to get the {GUARD_KIND!r} guard of format 3"
            )
        raise SelectorError(
            f"{source}: causalcache.ood has guard kind {kind!r}; this library reads {GUARD_KIND!r}: "
            "upgrade causalcache-memory or re-export the model"
        )
    except SelectorError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SelectorError(
            f"{source}: causalcache.ood metadata is malformed ({exc!r}); re-export the model"
        ) from exc
