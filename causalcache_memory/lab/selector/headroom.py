"""The headroom gate: keep the base where it already takes most of what the budget can (``train.fine_tune_headroom``).

Why (RESULTS.md 9o). Where the bundled selector is strong and in its distribution (heldout-03, the devmix
worlds), a fine-tune from a 200-episode recording moves the closed loop by about ±0.06 with no direction the
out-of-fold check can see, and on heldout-03 it lost twice. What those recordings share is little room:
the base already realizes a large share of what the labels say the deployment's budget could realize.

**Share.** On the pool states (training and dev; :mod:`.cross_fit`), with the budgeted value ``v`` of
:func:`~.cross_fit.budgeted_values` (each ``B``'s top 15% of states by their best first swap's predicted
gain ``d``, a state contributing that swap's label ``y``),

    oracle = mean_i v_i(d := y)                    (the labels rank the states and choose the swap)
    base   = mean_i v_i(d := d_base) · [i not flagged by the base's OOD guard]
    share  = base / oracle                          (1 when oracle <= 0: nothing to gain)

A guarded state keeps Recent-B in deployment, so it realizes nothing; that is why a base the team's screens
are foreign to (devtype: its guard declines 69-80% of the states) has a small share and a fine-tune ships there. With
``train.fine_tune_headroom: h`` the base ships unchanged when ``share >= h``; the choice of ``h`` on the
development worlds is in docs/results/learn_crossfit_rules.md (session 15).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["headroom_share"]


def headroom_share(
    oracle_values: np.ndarray, base_values: np.ndarray, flagged: np.ndarray | None
) -> dict[str, Any]:
    """``{"share", "base", "oracle", "flagged"}`` of the module doc over ``N`` pool states.

    ``oracle_values`` ``(N,)``: the budgeted values with the labels as predictions
    (``budgeted_values([ex.y for ex in pool], pool)``); ``base_values`` ``(N,)``: the base's (cross-fitting's
    epoch 0); ``flagged`` ``(N,)`` bool: the base's OOD guard's verdict on each state (None: a base without
    a guard, nothing flagged)."""
    oracle_arr = np.asarray(oracle_values, dtype=np.float64)
    n = len(oracle_arr)
    if n == 0:
        raise ValueError("headroom_share needs at least one pool state")
    values = np.asarray(base_values, dtype=np.float64)
    if values.shape != (n,):
        raise ValueError(f"base_values has shape {values.shape}, expected ({n},)")
    mask = np.zeros(n, bool) if flagged is None else np.asarray(flagged, dtype=bool)
    if mask.shape != (n,):
        raise ValueError(f"flagged has shape {mask.shape}, expected ({n},)")
    oracle = float(oracle_arr.mean())
    base = float(np.where(mask, 0.0, values).mean())
    share = base / oracle if oracle > 0.0 else 1.0
    return {"share": share, "base": base, "oracle": oracle, "flagged": float(mask.mean())}
