"""The one size rule of selector training: refuse splits too small to train, calibrate and guard.

``train selector`` (and ``causalcache learn``) call :func:`check_split_sizes` on the trajectory split
before anything is trained or written. The OOD guard (:mod:`causalcache_memory.selector.ood`) is fitted on
the training states and needs :func:`~causalcache_memory.selector.ood.min_guard_states` of them for the
``len(FEATURE_SCHEMA)`` per-state feature means (the guard's own rule, used here, not restated); the swap
threshold is calibrated on the dev states, never on train.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.features import FEATURE_SCHEMA
from causalcache_memory.selector.ood import min_guard_states

__all__ = ["MIN_DEV_STATES", "MIN_TRAIN_STATES", "check_split_sizes"]

#: fewest training states the OOD guard is fitted on (the guard's rule: at most one feature per two states;
#: with fewer the guard flagged nearly every deployed decision: 43 states declined all of them, issue 25)
MIN_TRAIN_STATES = min_guard_states(len(FEATURE_SCHEMA))
#: fewest dev states the swap threshold is calibrated on (it admits at most 1 % of the non-improving
#: top swaps: fewer states leave that quantile to one or two of them)
MIN_DEV_STATES = 20


def check_split_sizes(parts: Mapping[str, Sequence[Any]], cfg: Any) -> None:
    """Refuse ``parts`` (``{"train", "dev", "test"}`` -> state examples) with fewer than
    ``cfg.min_train_states`` training states (the OOD guard) or ``cfg.min_dev_states`` dev states
    (calibration); ``cfg`` is the :class:`~causalcache_lab.selector.train.TrainConfig`. The
    :class:`ConfigError` explains the split (trajectories and states per split, fractions, salt) and
    says how many trajectories to label.
    """
    n_train, n_dev = len(parts["train"]), len(parts["dev"])
    if n_train >= cfg.min_train_states and n_dev >= cfg.min_dev_states:
        return
    trajs = {k: {ex.trajectory_id for ex in v} for k, v in parts.items()}
    total_t = sum(len(v) for v in trajs.values())
    total_s = sum(len(v) for v in parts.values())
    problems = []
    if n_train < cfg.min_train_states:
        problems.append(f"{n_train} training states (the OOD guard needs >= {cfg.min_train_states})")
    if n_dev < cfg.min_dev_states:
        problems.append(f"{n_dev} dev states (calibration needs >= {cfg.min_dev_states})")
    where = ", ".join(f"{len(trajs[k])} in {k!r} ({len(parts[k])} states)" for k in ("train", "dev", "test"))
    if cfg.split_by == "hash":
        how = f"split_by: hash, fractions {tuple(cfg.splits)}, salt {cfg.split_salt!r}"
        per = total_s / max(total_t, 1)
        short = [name for name, k in (("train", 0), ("dev", 1)) if cfg.splits[k] == 0]
        if short:
            fix = f"train.splits gives {short[0]!r} no share: give it a fraction (e.g. [0.7, 0.15, 0.15])"
        else:
            need = max(
                cfg.min_train_states / (per * cfg.splits[0]), cfg.min_dev_states / (per * cfg.splits[1])
            )
            fix = (
                f"label at least {math.ceil(need)} trajectories (the expected need at about {per:.0f} states "
                "each, as here; the hash split varies around it)"
            )
    else:
        how = "split_by: metadata (each trajectory's metadata['data_split'])"
        fix = "label more trajectories of the short split"
    raise ConfigError(
        f"too little data to train the selector: {' and '.join(problems)}. {total_t} "
        f"trajector{'y' if total_t == 1 else 'ies'} ({total_s} states): {where} ({how}); {fix}, or lower "
        "train.min_train_states / train.min_dev_states for a smoke run",
        problems,
    )
