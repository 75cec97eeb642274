"""When training ships its base unchanged, it ships the base's calibration and OOD guard too, if they fit.

Fine-tuning (``train.init_from``) can end with the base itself: "epoch 0" won on dev, or the fine-tune
gate (:mod:`.fine_tune_gate`) found no shown gain. Refitting the swap threshold on a small dev split and
the guard on a few hundred training states then only adds noise to a model that did not change: on
heldout-02 (RESULTS.md 9e) the base kept with a guard refitted on 231 states declined 4.5% of decisions
where the bundled guard declined 0.6%, and lost 0.06 against the bundled selector as shipped. So when
the base's own guard (``metadata.json`` beside its ONNX file) flags at most
:data:`BASE_GUARD_MAX_FLAGGED` of the team's states (training and dev), its ``calibration`` and ``ood``
ship unchanged; otherwise (the team's screens are out of the base's distribution, or the base has no
metadata) both are refitted on the team's data as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_lab.selector.examples import StateExample
from causalcache_memory.selector.features import FEATURE_SCHEMA, feature_index
from causalcache_memory.selector.ood import load_guard, state_summary

__all__ = ["BASE_GUARD_MAX_FLAGGED", "base_calibration", "base_guard_flags"]

logger = logging.getLogger("causalcache_lab.selector.keep_base")

#: the base's guard must accept at least 90% of the team's states (issue 24/25's OOD budget: 10%)
BASE_GUARD_MAX_FLAGGED = 0.10


def base_guard_flags(
    onnx_path: Path, states: Sequence[StateExample]
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """``(flags, meta)``: the base's own OOD guard's verdict on each of ``states`` (``(N,)`` bool) and the
    base's ``metadata.json``; ``flags`` is None, with ``meta["reason"]`` saying why, when the base has no
    metadata beside its ONNX file or no guard in it."""
    meta_path = Path(onnx_path).parent / "metadata.json"
    if not meta_path.is_file():
        return None, {"reason": f"no metadata.json beside {onnx_path}"}
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    ood = meta.get("ood") or {}
    if "guard" not in ood:
        return None, {**meta, "reason": f"{meta_path} has no OOD guard"}
    guard = load_guard(ood["guard"], [n for n, _ in FEATURE_SCHEMA], source=str(meta_path))
    drop = [feature_index(n) for n in (meta.get("train") or {}).get("drop_features", ())]
    flags = np.array([guard.is_ood(state_summary(ex.events, drop))[0] for ex in states], dtype=bool)
    return flags, meta


def base_calibration(
    onnx_path: Path,
    parts: Mapping[str, Sequence[StateExample]],
    guard: tuple[np.ndarray | None, dict[str, Any]] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``({"calibration", "ood"} of the base or None, report)`` for a model that is its base unchanged;
    ``parts`` are the team's split states (its ``train`` and ``dev`` ones are judged). ``guard``: what
    :func:`base_guard_flags` already returned on those states, in that order (the headroom gate reads it
    first); None: read here."""
    states = [*parts.get("train", ()), *parts.get("dev", ())]
    flags, meta = guard if guard is not None else base_guard_flags(onnx_path, states)
    if flags is not None and len(flags) != len(states):
        raise ValueError(f"guard has {len(flags)} verdicts for {len(states)} train and dev states")
    calibration = meta.get("calibration")
    if flags is None or not calibration:
        reason = meta.get("reason") or f"{Path(onnx_path).parent / 'metadata.json'} has no calibration"
        return None, {"kept": False, "reason": reason}
    flagged = float(flags.mean()) if states else 1.0
    report = {"base_flagged": flagged, "limit": BASE_GUARD_MAX_FLAGGED, "states": len(states)}
    why = f"the base's guard flags {flagged:.1%} of the team's states (limit {BASE_GUARD_MAX_FLAGGED:.0%})"
    if flagged > BASE_GUARD_MAX_FLAGGED:
        logger.info("base shipped unchanged; %s: threshold and guard refitted on the team's data", why)
        return None, {**report, "kept": False, "reason": why + ": threshold and guard refitted"}
    logger.info("base shipped unchanged with its own threshold and guard: %s", why)
    return {"calibration": calibration, "ood": meta["ood"]}, {**report, "kept": True}
