"""The headroom gate: keep the base where it already takes most of what the budget can (``train.fine_tune_headroom``).

Why (RESULTS.md 9o). Where the bundled selector is strong and in its distribution (heldout-03, the devmix
worlds), a fine-tune from a 200-episode recording moves the closed loop by about ±0.06 with no direction the
out-of-fold check can see, and on heldout-03 it lost twice. What those recordings share is little room:
the base already realizes a large share of what the labels say the deployment's budget could realize.

**Share.** On the pool states (training and dev; :mod:`.cross_fit`), with the budgeted value ``v`` of
:func:`~.cross_fit.budgeted_values` over the whole pool (each ``B``'s top 15% of states by their best first
swap's predicted gain ``d``, a state contributing that swap's label ``y``; one ranking for both terms, the
base being one model, RESULTS.md 9p),

    oracle = mean_i v_i(d := y)                    (the labels rank the states and choose the swap)
    base   = mean_i v_i(d := d_base) · [i not flagged by the base's OOD guard]
    share  = base / oracle                          (1 when oracle <= 0: nothing to gain)

A guarded state keeps Recent-B in deployment, so it realizes nothing; that is why a base the team's screens
are foreign to (devtype: its guard declines 69-80% of the states) has a small share and a fine-tune ships there.

**Interval.** The share is a ratio of two means over one recording, and it is noisy: on a 200-episode
development recording its standard deviation over a resampling of the trajectories is about 0.07 (RESULTS.md
9p). With ``clusters`` (one key per state, its trajectory) the whole trajectories are resampled, as the harm
check and the fine-tune gate resample (:mod:`.fine_tune_gate`), with the per-state values held:

    share_r = sum_{c in draw r} base_c / sum_{c in draw r} oracle_c      (1 where the drawn oracle is <= 0)

and ``ci`` is the two-sided ``confidence`` quantile interval of the ``share_r``. With
``train.fine_tune_headroom: h`` the base ships unchanged only when the **lower end** of that interval is at
least ``h`` (:func:`no_room`): like the other two gates, this one acts on what its interval shows, not on a
point estimate that moves by ±0.14 with the draw of episodes. The choice of ``h`` (session 15) and of the
lower end (session 16) are in docs/results/learn_crossfit_rules.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causalcache_lab.selector.fine_tune_gate import cluster_resampled_sums

__all__ = ["headroom_share", "no_room"]


def headroom_share(
    oracle_values: np.ndarray,
    base_values: np.ndarray,
    flagged: np.ndarray | None,
    clusters: Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 2000,
) -> dict[str, Any]:
    """``{"share", "base", "oracle", "flagged"}`` of the module doc over ``N`` pool states, and with
    ``clusters`` also ``"ci"`` (the share's interval), ``"confidence"`` and ``"clusters"`` (their number).

    ``oracle_values`` ``(N,)``: the budgeted values with the labels as predictions
    (``budgeted_values([ex.y for ex in pool], pool)``); ``base_values`` ``(N,)``: the base's, ranked over the
    same pool (``budgeted_values(d_base, pool)``); ``flagged`` ``(N,)`` bool: the base's OOD guard's
    verdict on each state (None: a base without a guard, nothing flagged); ``clusters`` ``(N,)``: each
    state's trajectory (seeded by ``seed``)."""
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
    realized = np.where(mask, 0.0, values)
    oracle = float(oracle_arr.mean())
    base = float(realized.mean())
    share = base / oracle if oracle > 0.0 else 1.0
    out: dict[str, Any] = {"share": share, "base": base, "oracle": oracle, "flagged": float(mask.mean())}
    if clusters is None:
        return out
    if len(clusters) != n:
        raise ValueError(f"clusters has {len(clusters)} keys for {n} pool states")
    (drawn_base, drawn_oracle), k = cluster_resampled_sums(
        clusters, [realized, oracle_arr], resamples=resamples, seed=seed
    )
    shares = np.divide(drawn_base, drawn_oracle, out=np.ones(resamples), where=drawn_oracle > 0.0)
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(shares, [tail, 1.0 - tail]))
    return {**out, "ci": [lo, hi], "confidence": confidence, "clusters": k}


def no_room(room: dict[str, Any], limit: float) -> bool:
    """The headroom gate's verdict: the base takes at least ``limit`` of the room, shown by the lower end of
    the share's interval (``room``: :func:`headroom_share` with ``clusters``)."""
    return bool(room["ci"][0] >= limit)
