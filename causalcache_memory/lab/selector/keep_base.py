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

A scorer whose weights *did* change (a fine-tuned epoch, or its mix with the base) can keep part of the
base's calibration under the same 90% rule (``train.base_calibration``): ``guard`` keeps the guard alone
(it reads only the features' state summaries, never the weights, so the base's guard, fitted on the
base's whole training set, judges the team's screens as well for the changed scorer as for the base) and
refits the threshold on the team's dev states (the predicted gains moved); ``all`` keeps the threshold
too (fine-tuning keeps the base's target scale, so the gains stay in the base's units, and the base's
threshold was chosen on far more dev states than a team's recording holds).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_memory.lab.selector.examples import StateExample
from causalcache_memory.selector.features import FEATURE_SCHEMA, feature_index
from causalcache_memory.selector.ood import load_guard, state_summary

__all__ = ["BASE_GUARD_MAX_FLAGGED", "base_calibration"]

logger = logging.getLogger("causalcache_memory.lab.selector.keep_base")

#: the base's guard must accept at least 90% of the team's states (issue 24/25's OOD budget: 10%)
BASE_GUARD_MAX_FLAGGED = 0.10


def base_calibration(
    onnx_path: Path, parts: Mapping[str, Sequence[StateExample]], *, keep: str = "all"
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(what ships of the base's calibration, or None; report)``: ``{"calibration", "ood"}`` for
    ``keep="all"``, ``{"ood"}`` (the guard alone) for ``keep="guard"``, None when the base's guard does
    not fit; ``parts`` are the team's split states (its ``train`` and ``dev`` ones are judged)."""
    states = [*parts.get("train", ()), *parts.get("dev", ())]
    meta_path = Path(onnx_path).parent / "metadata.json"
    if not meta_path.is_file():
        return None, {"kept": False, "reason": f"no metadata.json beside {onnx_path}"}
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    calibration, ood = meta.get("calibration"), meta.get("ood") or {}
    if not calibration or "guard" not in ood:
        return None, {"kept": False, "reason": f"{meta_path} has no calibration or no OOD guard"}
    guard = load_guard(ood["guard"], [n for n, _ in FEATURE_SCHEMA], source=str(meta_path))
    drop = [feature_index(n) for n in (meta.get("train") or {}).get("drop_features", ())]
    flagged = (
        float(np.mean([guard.is_ood(state_summary(ex.events, drop))[0] for ex in states])) if states else 1.0
    )
    report = {"base_flagged": flagged, "limit": BASE_GUARD_MAX_FLAGGED, "states": len(states)}
    why = f"the base's guard flags {flagged:.1%} of the team's states (limit {BASE_GUARD_MAX_FLAGGED:.0%})"
    if keep not in ("all", "guard"):
        raise ValueError(f"keep={keep!r} must be 'all' or 'guard'")
    refit = "threshold and guard" if keep == "all" else "guard"
    if flagged > BASE_GUARD_MAX_FLAGGED:
        logger.info("%s: %s refitted on the team's data", why, refit)
        return None, {**report, "kept": False, "reason": f"{why}: {refit} refitted"}
    if keep == "guard":
        logger.info("the scorer ships the base's guard (threshold refitted on dev): %s", why)
        return {"ood": ood}, {**report, "kept": "guard"}
    logger.info("the scorer ships the base's threshold and guard: %s", why)
    return {"calibration": calibration, "ood": ood}, {**report, "kept": True}
