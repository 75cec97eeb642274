"""Feature-group dropout in selector training (``TrainConfig.mask_dropout``; RESULTS.md 8e).

A deployment may lack a feature group's source (no screen text, no app labels, no thumbnails); the
extractor then masks the group: every column of the group, its ``<group>_available`` flag included, is 0
(:mod:`~causalcache_memory.selector.ood_masks`). ``mask_dropout`` (e.g. ``{text: 0.3, app: 0.3}``) shows
the scorer such states in training: in every epoch, each training state independently has each named
group masked with its probability, through :func:`~causalcache_memory.selector.ood_masks.mask_summary` on
the state's event rows -- the function that builds the guard's masked dev states. The model reads no
state summary, and dev selection, the threshold and the guard read the states unmasked. The draws come
from a numpy generator seeded with the training seed, so training stays bitwise reproducible; with no
group named nothing is drawn and training is unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from causalcache_lab.selector.examples import StateExample
from causalcache_memory.selector.features import FEATURE_SCHEMA
from causalcache_memory.selector.ood_masks import MASK_GROUPS, group_columns, mask_summary, pattern_key

__all__ = ["MaskDropout", "check_mask_dropout"]


def check_mask_dropout(rates: Mapping[str, float]) -> list[str]:
    """The problems of a ``train.mask_dropout`` mapping (empty when it is valid)."""
    errors = []
    for group, rate in rates.items():
        if group not in MASK_GROUPS:
            errors.append(
                f"train.mask_dropout: unknown group {group!r}; choose from {', '.join(MASK_GROUPS)}"
            )
        elif not 0.0 <= rate < 1.0:
            errors.append(f"train.mask_dropout.{group}={rate} must be a probability in [0, 1), e.g. 0.3")
    return errors


class MaskDropout:
    """Masks feature groups of training states at random.

    For each state, one uniform number per named group, drawn in :data:`MASK_GROUPS` order from a
    generator seeded with ``seed``: the same seed masks the same states in the same epochs.
    """

    def __init__(self, rates: Mapping[str, float], seed: int) -> None:
        self.groups = group_columns([n for n, _ in FEATURE_SCHEMA])
        self.rates = [(g, float(rates[g])) for g in MASK_GROUPS if rates.get(g, 0.0) > 0.0]
        self.rng = np.random.default_rng(seed)

    def __call__(self, ex: StateExample) -> StateExample:
        """``ex`` with the drawn groups masked in every event row (``ex`` itself when none is drawn)."""
        key = pattern_key(g for g, rate in self.rates if self.rng.random() < rate)
        if not key:
            return ex
        return dataclasses.replace(ex, events=mask_summary(ex.events, self.groups, key))
