"""Cross-fitted fine-tuning: the epoch, its gate and the swap threshold from every state (``train.cross_fit``).

Why (RESULTS.md 9h). A 200-episode recording holds about 2,500 labelled states, of which about 110 carry a
gain. The dev-split recipe (``cross_fit: null``) chooses the fine-tuning epoch, gates it and calibrates the threshold on the dev
split alone (15-30% of the trajectories: a dozen or two states with a gain), by the mean realized value of
each group's argmax, a quantity the deployment never acts on: the deployment runs pass 2 only on its
highest predicted gains, about a share ``b`` (``selector.second_pass_share``, 0.15) of its decisions,
never on a non-positive one (:mod:`causalcache_memory.selector.threshold`). On the devage worlds that
dev value fell at the first epoch while the budgeted value below rose on dev and test states alike.

**Budgeted value.** For the states of one evaluation set, each with its predicted best first swap out of
Recent-B (``d_top``, true utility ``y_top``: :func:`~.calibrate.top_swaps`), and ``m = floor(b · n)`` for
the ``n`` states of each memory budget ``B``, a state contributes

    v_i = y_top,i   if d_top,i is among its B's m largest and d_top,i > 0,     else 0

so ``mean(v)`` is the utility per decision that the deployment's budget rule would realize on them.

**Cross-fitting.** The pool (training and dev states; the test split stays out) is cut into ``K`` folds by
trajectory (a stable hash of the trajectory id and ``split_salt``). For each fold ``k`` one copy of the
base is fine-tuned on the other folds; after every epoch ``e`` the fold's states are scored by that copy,
so every state gets ``v_i(e)`` from a model that never trained on it (``e = 0``: the base). The epoch is

    e* = argmax_e mean_i v_i(e)            (ties: the earliest; stops after ``patience`` epochs without a rise)

and, when ``fine_tune_gate`` is set, it ships only when the paired difference ``v_i(e*) - v_i(0)``,
resampled by trajectory (clusters, seeded), has the lower end of its two-sided ``fine_tune_gate`` interval
above 0 (the gate of :mod:`.fine_tune_gate`, with the out-of-fold budgeted value as its per-state term;
no margin: the dev gate's margin answers consistent per-group gains of 1e-4 from reordered near-ties,
which a budgeted value, non-zero only where a fired swap changes, does not produce). With
``fine_tune_gate: null`` the best out-of-fold epoch ships when it is above the base (its interval is still
reported, at 95%).

**Fixed length** (``cross_fit_epochs: E``): every fold fine-tunes exactly ``E`` epochs and ``e* = E``
whatever the curve (the per-epoch values are still recorded). Cross-fitting then only checks: the gate as
above when one is set; without one, the base ships when the fine-tune is shown *worse* out of fold (the
upper end of the 95% interval of ``v_i(E) - v_i(0)`` below 0). An argmax over many noisy per-epoch means of a
small effect picks the base whenever the curve is flat within noise; a fixed length puts the burden of
proof on harm instead of on gain. ``learn`` cross-fits for a fixed 4 epochs without a gate (agreement
labels: a 0.95 gate): over nine devage recordings +0.18 over the bundle on average against +0.12 for the
argmax, which had itself replaced a 0.8 gate (RESULTS.md 9h, 9i; docs/results/learn_crossfit_rules.md).

**Headroom** (``fine_tune_headroom: h``; ``learn``'s default 0.37). The base also ships when it is shown to
realize at least the share ``h`` of the label oracle's budgeted value on the pool, its own OOD guard
applied: the lower end of the share's 95% interval, resampled by trajectory, is at least ``h``
(:mod:`.headroom`; RESULTS.md 9o, 9p), whatever the out-of-fold gain. The base is one model, so its
predictions and the labels are both ranked over the whole pool there, not fold by fold as the fold copies
are scored: a fold's own 15% budget can hold no state at all in a small pool.

**Blend** (``fine_tune_blend: β < 1``; WiSE-FT, Wortsman et al. 2022). Every fine-tuned copy is read as the
weight-space interpolation with its base,

    θ_β = θ_base + β · (θ_tuned - θ_base)        (every floating-point parameter and buffer; 0 < β <= 1)

both when a fold's copy is scored out of fold (so the epoch, the gate, the harm check and the threshold are
those of the blend) and for the shipped model. Fine-tuning from one base keeps the two ends in one basin,
and their interpolation keeps the base's behaviour where the small fine-tuning set says little, which is
what a world unlike the development ones needs (RESULTS.md 9j). β = 1 (the default) is the fine-tune as
trained.

**Soup** (``fine_tune_soup``, with a fixed length). The shipped model is the uniform mean of the weights of
the ``K + 1`` fine-tunes this already trains: the final one and the ``K`` fold copies, each ``E`` epochs from
the same base on overlapping data (a "model soup", Wortsman et al. 2022). What the folds agree on stays;
what one fold's draw of trajectories taught alone is divided by ``K + 1``. The harm check is still the
fold copies' (one by one), and the threshold is calibrated on their out-of-fold predictions.

The shipped model is the base fine-tuned on the whole pool for ``e*`` epochs (blended as above); its swap-threshold frontier
is calibrated on the out-of-fold predictions at ``e*`` (every pool state, each scored by a model that did
not train on it). Costs ``K`` times the fine-tuning of one model, plus the final fit.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalcache_lab.selector.calibrate import top_swaps
from causalcache_lab.selector.examples import StateExample
from causalcache_lab.selector.fine_tune_gate import fine_tune_evidence
from causalcache_lab.selector.headroom import headroom_share, no_room
from causalcache_memory.selector.threshold import DEFAULT_SECOND_PASS_SHARE

__all__ = [
    "CrossFit",
    "blend_states",
    "budgeted_values",
    "cross_fit",
    "fold_budgeted_values",
    "fold_of",
    "soup_states",
]

logger = logging.getLogger("causalcache_lab.selector.cross_fit")


def fold_of(trajectory_id: str, folds: int, salt: str = "") -> int:
    """The fold (``0..folds-1``) of a trajectory: a stable hash of ``salt`` and its id."""
    digest = hashlib.sha256(f"cross-fit\0{salt}\0{trajectory_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % folds


def blend_states(base: dict[str, Any], tuned: dict[str, Any], beta: float) -> dict[str, Any]:
    """``θ_base + β · (θ_tuned - θ_base)`` for every floating-point entry of two state dicts of one
    architecture (module doc, *Blend*); other entries are ``tuned``'s. ``β = 1`` returns ``tuned``."""
    if beta == 1.0:
        return tuned
    return {k: base[k] + beta * (v - base[k]) if v.is_floating_point() else v for k, v in tuned.items()}


def soup_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The uniform mean of state dicts of one architecture (floating-point entries; others the first's):
    the fine-tune and its fold copies as one model (module doc, *Soup*)."""
    first = states[0]
    return {
        k: sum(s[k] for s in states) / len(states) if v.is_floating_point() else v for k, v in first.items()
    }


def budgeted_values(
    diffs: Sequence[np.ndarray], examples: Sequence[StateExample], budget: float = DEFAULT_SECOND_PASS_SHARE
) -> np.ndarray:
    """``(N,)`` budgeted value ``v_i`` of each example (module doc); 0 for a state with no swap out of Recent-B.

    ``diffs[i]`` is the predicted ``d`` of every label entry of ``examples[i]`` (``(L,)``)."""
    out = np.zeros(len(examples))
    rows = [i for i, ex in enumerate(examples) if _has_swap(ex)]
    if not rows:
        return out
    gains, utils, _, budgets = top_swaps(
        [diffs[i] for i in rows], [examples[i] for i in rows], with_budgets=True
    )
    rows_arr = np.asarray(rows)
    for b in np.unique(budgets):
        sel = np.flatnonzero(budgets == b)
        m = int(budget * len(sel))
        if m == 0:
            continue
        top = sel[np.argsort(-gains[sel], kind="stable")[:m]]
        top = top[gains[top] > 0.0]
        out[rows_arr[top]] = utils[top]
    return out


def fold_budgeted_values(
    diffs: Sequence[np.ndarray], examples: Sequence[StateExample], folds: np.ndarray
) -> np.ndarray:
    """``(N,)`` :func:`budgeted_values` with each fold's states ranked among themselves (``folds`` ``(N,)``:
    each example's fold): the budget ``m = floor(b · n)`` is each fold's own, as when that fold is scored
    by the copy that did not train on it (the out-of-fold values of every epoch)."""
    folds = np.asarray(folds)
    if folds.shape != (len(examples),) or len(diffs) != len(examples):
        raise ValueError(
            f"fold_budgeted_values needs one fold and one diffs entry per example: {len(examples)} examples, "
            f"folds of shape {folds.shape}, {len(diffs)} diffs"
        )
    out = np.zeros(len(examples))
    for f in np.unique(folds):
        held = np.flatnonzero(folds == f)
        out[held] = budgeted_values([diffs[i] for i in held], [examples[i] for i in held])
    return out


def _has_swap(ex: StateExample) -> bool:
    if not len(ex.from_recent) or not ex.from_recent.any():
        return False
    return bool((ex.from_recent[ex.group] & (ex.cand != ex.out)).any())


@dataclass
class CrossFit:
    """What :func:`cross_fit` found: the chosen epoch, its gate and the out-of-fold predictions there."""

    epoch: int  # e*, before the gate
    ship_epoch: int  # e* when the gate keeps it, else 0 (the base)
    evidence: dict[str, Any]  # the gate's bootstrap over trajectories
    oof_diffs: list[np.ndarray]  # predicted d of every pool state at ship_epoch, out of fold
    history: list[dict[str, Any]] = field(default_factory=list)  # per epoch: pooled budgeted value
    folds: int = 0
    fold_states: list[dict[str, Any]] = field(default_factory=list)  # the fold copies' last weights (a soup)


def cross_fit(
    pool: Sequence[StateExample],
    cfg: Any,
    base_state: dict[str, Any],
    *,
    make_model: Callable[[], Any],
    make_optimizer: Callable[[Any], Any],
    train_epoch: Callable[[Any, Any, Sequence[StateExample], random.Random], Any],
    state_diffs: Callable[[Any, Sequence[StateExample]], list[np.ndarray]],
    scale: float,
    log: Any = None,
    base_flagged: np.ndarray | None = None,
) -> CrossFit:
    """Cross-fit the fine-tuning of ``base_state`` on ``pool`` (module doc); ``cfg`` is the TrainConfig.

    The callables keep the training loop in one place (:mod:`.train`): ``make_model()`` a fresh scorer,
    ``make_optimizer(model)``, ``train_epoch(model, opt, examples, rng)`` one epoch, ``state_diffs(model,
    examples)`` the predicted ``d`` per state. ``scale`` is the base's target scale (the gate's unit).
    ``base_flagged`` ``(N,)``: the base's OOD guard's verdict on each pool state, for the headroom gate
    (``cfg.fine_tune_headroom``, :mod:`.headroom`; None: nothing flagged).
    """
    k = int(cfg.cross_fit)
    fold = np.array([fold_of(ex.trajectory_id, k, cfg.split_salt) for ex in pool])
    members = []
    for f in range(k):
        held, rest = np.flatnonzero(fold == f), np.flatnonzero(fold != f)
        if not len(held) or not len(rest):
            continue
        model = make_model()
        model.load_state_dict(copy.deepcopy(base_state))
        model.eval()
        members.append(
            {"model": model, "opt": make_optimizer(model), "held": held, "train": [pool[i] for i in rest],
             "rng": random.Random(cfg.seed + f)}
        )  # fmt: skip
    if len(members) < 2:
        raise ValueError(f"cross-fitting needs trajectories in at least 2 of its {k} folds; the pool has one")
    trajectories = [ex.trajectory_id for ex in pool]

    beta = float(cfg.fine_tune_blend)
    blended = make_model() if beta != 1.0 else None

    def scored(model: Any) -> Any:  # the copy as it would ship: blended with the base when β < 1
        if blended is None:
            return model
        blended.load_state_dict(blend_states(base_state, model.state_dict(), beta))
        return blended.eval()

    def score() -> tuple[np.ndarray, list[np.ndarray]]:
        diffs = [np.zeros(0)] * len(pool)
        for m in members:
            d = state_diffs(scored(m["model"]), [pool[i] for i in m["held"]])
            for i, di in zip(m["held"], d, strict=True):
                diffs[i] = di
        return fold_budgeted_values(diffs, pool, fold), diffs

    values0, diffs0 = score()
    by_epoch, history = [values0], [{"epoch": 0, "budgeted_value": float(values0.mean())}]
    best_epoch, best_diffs, stale = 0, diffs0, 0
    best_key = round(float(values0.mean()) / scale, 4)
    fixed = cfg.cross_fit_epochs
    for epoch in range(1, (fixed or cfg.epochs) + 1):
        for m in members:
            train_epoch(m["model"], m["opt"], m["train"], m["rng"])
            m["model"].eval()
        values, diffs = score()
        by_epoch.append(values)
        history.append({"epoch": epoch, "budgeted_value": float(values.mean())})
        if log:
            log(
                f"cross-fit epoch {epoch}: out-of-fold budgeted value {values.mean():.4f} (base {values0.mean():.4f})"
            )
        key = round(float(values.mean()) / scale, 4)
        if fixed is not None:  # a fixed length: the last epoch is the candidate, whatever the curve
            if epoch == fixed:
                best_epoch, best_diffs = epoch, diffs
            continue
        if key > best_key:
            best_key, best_epoch, best_diffs, stale = key, epoch, diffs, 0
        else:
            stale += 1
            if stale >= cfg.patience:
                break
    confidence = float(cfg.fine_tune_gate) if cfg.fine_tune_gate is not None else 0.95
    evidence = fine_tune_evidence(
        by_epoch[best_epoch],
        values0,
        confidence=confidence,
        seed=cfg.seed,
        min_gain=0.0,
        clusters=trajectories,
    )
    gated = cfg.fine_tune_gate is not None and best_epoch > 0
    lo, hi = evidence["ci"]
    harmful = fixed is not None and hi < 0.0  # shown worse than the base out of fold
    room = None
    if cfg.fine_tune_headroom is not None:
        # the base is one model: its predictions and the labels are ranked over the whole pool (module doc)
        oracle = budgeted_values([ex.y for ex in pool], pool)
        share = headroom_share(
            oracle, budgeted_values(diffs0, pool), base_flagged, trajectories, seed=cfg.seed
        )
        room = {**share, "limit": float(cfg.fine_tune_headroom)}
    room_gone = room is not None and no_room(room, room["limit"])
    ship = (
        best_epoch
        if (best_epoch > 0 and (evidence["keep"] or not gated) and not harmful and not room_gone)
        else 0
    )
    chosen = f"epoch {best_epoch} (fixed length)" if fixed is not None else f"epoch {best_epoch} best"
    chosen += f", blended with the base at {beta:g}" if beta != 1.0 else ""
    needs = "needs the lower end above 0" if gated else "ships unless the upper end is below 0"
    rule = f"({confidence:.0%}; {needs if gated or fixed is not None else 'no gate'}): "
    message = (
        f"cross-fit ({len(members)} folds, {len(pool)} states): {chosen}, out-of-fold "
        f"budgeted gain over the base {evidence['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}] "
        + rule
        + (
            f"the base realizes {room['share']:.1%} [{room['ci'][0]:.1%}, {room['ci'][1]:.1%}] of the label "
            f"oracle's budgeted value (headroom gate: lower end >= {room['limit']:.1%}"
            f"{': no room' if room_gone else ''}); "
            if room is not None
            else ""
        )
        + (f"fine-tuning for {ship} epochs" if ship else "the base is kept (epochs_fine_tuned 0)")
    )
    logger.info("%s", message)
    if log:
        log(message)
    return CrossFit(
        epoch=best_epoch,
        ship_epoch=ship,
        evidence={
            **evidence,
            "value": "budgeted",
            "epoch": best_epoch,
            "length": "fixed" if fixed is not None else "argmax",
            "harmful": harmful,
            "blend": beta,
            **({"headroom": {**room, "no_room": room_gone}} if room is not None else {}),
        },
        oof_diffs=best_diffs if ship else diffs0,
        history=history,
        folds=len(members),
        fold_states=[  # copied only for a soup (``fine_tune_soup``), the one reader
            {k: v.detach().clone() for k, v in scored(m["model"]).state_dict().items()} for m in members
        ]
        if getattr(cfg, "fine_tune_soup", False)
        else [],
    )
