"""Training the set-conditional scorer on implied marginals (PyTorch; imported only on use).

Each labelled group ``(S, r, cands, q)`` gives, under conditioning set ``C = S \\ {r}``, targets
``y_j = Q(C ∪ {j}) - Q(S)`` for each candidate and ``y_r = 0`` for the evicted event itself
(:mod:`~causalcache_lab.selector.examples`). The model's prediction is
``d_j = Δ̂(j | C) - Δ̂(r | C)`` (so ``d_r = 0``), in units of ``s``, the training-set scale of ``|y|``;
the loss of a batch (the paper's regression recipe, the decision loss and their terms) is written out
once, in :mod:`.batch_loss`. Splits are disjoint by trajectory (the one trajectory split
of :mod:`causalcache_lab.data.split`, shared with ``data mine``, or the data's own); the checkpoint is chosen on the dev split only, by the mean realized utility of the group's argmax
(``y`` of the candidate the model ranks first, 0 when it keeps ``r``). After training, the dev split
also calibrates the swap threshold and the training split fits the out-of-distribution guard
(:mod:`~causalcache_lab.selector.calibrate`); both are stored in the model's metadata.

``init_from`` fine-tunes a base scorer (the bundled one, or any exported model of the same schema and
architecture; :mod:`.base_model`): the base unchanged is the dev candidate "epoch 0" and its target scale
``s`` is kept; a later epoch ships only when :mod:`.fine_tune_gate` shows its gain, and a base shipped
unchanged keeps its own threshold and guard when they fit the data (:mod:`.keep_base`), else both are
recalibrated as above; ``metadata["init_from"]`` records the base, the epochs fine-tuned and the evidence.

``cross_fit = K`` (with ``init_from``) chooses the fine-tuning epoch (or, with ``cross_fit_epochs``, checks a
fixed one for harm), gates it and calibrates the threshold on out-of-fold budgeted values over every
train+dev state instead of the dev split (:mod:`.cross_fit`), then fine-tunes on train+dev for that many
epochs (with ``fine_tune_blend`` β < 1, the weight-space blend ``θ_base + β(θ_tuned − θ_base)`` of
that fine-tune with its base).

``ensemble = E > 1`` trains ``E`` scorers with seeds ``seed..seed+E-1``, each choosing its own epoch on dev,
and keeps their mean as one model (:mod:`~causalcache_lab.selector.ensemble`; calibrated, guarded
and exported as one scorer). ``E = 1`` (the default) is the single scorer, unchanged.
``mask_dropout`` masks feature groups of training states at random, as a missing source does
(:mod:`~causalcache_lab.selector.mask_dropout`; default off).
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_lab.data.split import trajectory_split
from causalcache_lab.selector.base_model import BaseSelector, load_base
from causalcache_lab.selector.batch_loss import batch_loss, entry_diffs, needs_base
from causalcache_lab.selector.batches import batches, collate
from causalcache_lab.selector.calibrate import calibrate_ood, calibrate_threshold
from causalcache_lab.selector.checkpoint import TorchSetScorer, frozen_copy, load_model, save_model
from causalcache_lab.selector.cross_fit import CrossFit, blend_states, cross_fit, soup_states
from causalcache_lab.selector.ensemble import Scorer, check_base_members, fit_members
from causalcache_lab.selector.examples import StateExample, build_examples
from causalcache_lab.selector.export import MODEL_FORMAT_VERSION
from causalcache_lab.selector.fine_tune_gate import gate_fine_tune
from causalcache_lab.selector.keep_base import base_calibration, base_guard_flags
from causalcache_lab.selector.mask_dropout import MaskDropout
from causalcache_lab.selector.model import ScorerConfig, SetScorerModel
from causalcache_lab.selector.split_sizes import MIN_DEV_STATES, MIN_TRAIN_STATES, check_split_sizes
from causalcache_lab.selector.train_config import TrainConfig
from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.features import CONTEXT_SCHEMA, FEATURE_SCHEMA, schema_hash

torch = require("torch", purpose="training the learned selector")

__all__ = [
    "MIN_DEV_STATES",
    "MIN_TRAIN_STATES",
    "MODEL_FORMAT_VERSION",
    "StateExample",
    "TorchSetScorer",
    "TrainConfig",
    "TrainResult",
    "build_examples",
    "check_split_sizes",
    "load_model",
    "save_model",
    "train_selector",
]


def _evaluate(
    model: Scorer, data: Sequence[dict[str, Any]], scale: float, cfg: TrainConfig, *, per_group: bool = False
) -> dict[str, Any]:
    """Mean loss, mean realized / oracle utility of each group's argmax (``r`` = 0); ``per_group``: ``values``."""
    if not data:
        empty = {"loss": float("nan"), "value": float("nan"), "oracle": float("nan"), "top1": float("nan")}
        return {**empty, "values": np.zeros(0)} if per_group else empty
    losses, value, oracle, top1, n, values = [], 0.0, 0.0, 0.0, 0, []
    with torch.no_grad():
        for tx in data:
            losses.append(batch_loss(model, tx, scale, cfg).item())
            d = entry_diffs(model, tx).numpy()
            y, g = tx["y"].numpy(), tx["group"].numpy()
            for k in np.unique(g):
                sel = g == k
                pick = int(np.argmax(d[sel]))
                value += float(y[sel][pick])
                values.append(float(y[sel][pick]))
                oracle += float(y[sel].max())
                top1 += float(y[sel][pick] >= y[sel].max() - 1e-9)
                n += 1
    out = {"loss": float(np.mean(losses)), "value": value / n, "oracle": oracle / n, "top1": top1 / n}
    return {**out, "values": np.asarray(values)} if per_group else out


@dataclass
class TrainResult:
    """What :func:`train_selector` produced."""

    model: Scorer
    metadata: dict[str, Any]
    output_dir: Path | None


def train_selector(
    examples: Sequence[StateExample],
    config: TrainConfig | None = None,
    *,
    output_dir: str | Path | None = None,
    export_onnx: bool = True,
    data_description: str = "",
    label_header: Mapping[str, Any] | None = None,
    image_features: bool = True,
    log: Any = None,
) -> TrainResult:
    """Train, choose the checkpoint on dev, calibrate on dev, evaluate on test, write the model directory.

    ``image_features`` records whether the examples were featurized with thumbnails (a model trained
    without them makes the deployed extractor skip every pixel read). Runs with ``config.threads``
    torch threads (1 by default: the model is tiny and extra threads only add synchronization;
    restored afterwards).
    """
    cfg = config or TrainConfig()
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        start = time.perf_counter()
        parts = _split(examples, cfg)
        base = _base(cfg)
        tensors = {k: batches(v, cfg.batch_states) for k, v in parts.items()}
        crossed, guard = None, None  # guard: the base's OOD verdicts on train+dev, read once
        if cfg.cross_fit and base is not None:  # the epoch, gate and threshold from every pool state
            if cfg.fine_tune_headroom is not None:  # the headroom gate reads it; a kept base reuses it
                guard = base_guard_flags(base.path, [*parts["train"], *parts["dev"]])
            model, scale, crossed = _fit_cross(parts, cfg, base, log, guard[0] if guard else None)
            best_epoch, history, gate = crossed.ship_epoch, crossed.history, crossed.evidence
            ensemble = {"members": 1, "seeds": [cfg.seed], "epochs": [best_epoch]}
        else:
            fit = lambda seed, member, log: _fit(parts, cfg, log, base, seed=seed, member=member)  # noqa: E731
            model, scale, best_epoch, history, ensemble = fit_members(fit, cfg.seed, cfg.ensemble, log)
            values = lambda m: _evaluate(m, tensors["dev"], scale, cfg, per_group=True)["values"]  # noqa: E731
            model, best_epoch, gate = gate_fine_tune(model, best_epoch, base, values, cfg, log)
        metrics = {k: _evaluate(model, v, scale, cfg) for k, v in tensors.items()}
        metadata = _metadata(
            cfg, model, scale, parts, metrics, best_epoch, history, data_description, label_header
        )
        metadata["image_features"] = bool(image_features)
        metadata["ensemble"] = ensemble
        kept = None
        if base is not None:
            init = {**base.provenance(str(cfg.init_from)), "epochs_fine_tuned": best_epoch, "gate": gate}
            if best_epoch == 0 and cfg.ensemble == 1:  # the base unchanged: its own calibration if it fits
                kept, init["base_calibration"] = base_calibration(base.path, parts, guard)
            metadata["init_from"] = init
        if crossed is not None:
            metadata["cross_fit"] = {"folds": crossed.folds, "epoch": crossed.epoch, "pool": "train+dev"}
        metadata.update(kept or _calibrate(model, parts, cfg, crossed))
        metadata["train_seconds"] = round(time.perf_counter() - start, 2)
    finally:
        torch.set_num_threads(threads)
    out = Path(output_dir) if output_dir is not None else None
    if out is not None:
        save_model(model, metadata, out, export_onnx=export_onnx)
    return TrainResult(model, metadata, out)


def _split(examples: Sequence[StateExample], cfg: TrainConfig) -> dict[str, list[StateExample]]:
    parts: dict[str, list[StateExample]] = {"train": [], "dev": [], "test": []}
    for ex in examples:
        if cfg.split_by == "hash":
            split = trajectory_split(
                ex.trajectory_id, dev=cfg.splits[1], test=cfg.splits[2], salt=cfg.split_salt
            )
            parts[split].append(ex)
        elif ex.data_split in parts:
            parts[ex.data_split].append(ex)
        else:
            raise ConfigError(
                f"train.split_by=metadata but trajectory {ex.trajectory_id!r} has data_split="
                f"{ex.data_split!r}; set metadata['data_split'] to train/dev/test or use split_by: hash"
            )
    check_split_sizes(parts, cfg)
    return parts


def _scorer_config(cfg: TrainConfig) -> ScorerConfig:
    return ScorerConfig(hidden=cfg.hidden, embed=cfg.embed, drop_features=cfg.drop_features)


def _base(cfg: TrainConfig) -> BaseSelector | None:
    """The base of ``cfg.init_from`` (refused when its schema or architecture differs), or None."""
    if cfg.init_from is None:
        return None
    base = load_base(cfg.init_from, _scorer_config(cfg))
    check_base_members(base.members, cfg.ensemble, cfg.init_from)
    return base


def _fit(
    parts: Mapping[str, list[StateExample]],
    cfg: TrainConfig,
    log: Any,
    base: BaseSelector | None = None,
    *,
    seed: int | None = None,
    member: int = 0,
) -> tuple[SetScorerModel, float, int, list]:
    """Train with early stopping on the dev value; returns ``(best model, target scale, epoch, history)``.

    From a ``base``: its weights and target scale, and "epoch 0" (the base unchanged) is the first
    candidate, so a later epoch is kept only when it is better on dev. ``seed`` (default ``cfg.seed``)
    seeds the initialisation, the shuffling and the mask draws; ``member`` picks an ensemble base's member.
    """
    seed = cfg.seed if seed is None else seed
    torch.manual_seed(seed)
    rng = random.Random(seed)
    train = parts["train"]
    all_y = np.concatenate([ex.y for ex in train])
    scale = float(np.mean(np.abs(all_y[all_y != 0]))) if np.any(all_y != 0) else 1.0
    select = batches(parts["dev"], cfg.batch_states) or batches(train, cfg.batch_states)
    model = SetScorerModel(_scorer_config(cfg))
    first, anchor = 1, None
    if base is not None:
        model.load_state_dict(base.member_state(member))
        scale, first = base.target_scale, 0
        anchor = frozen_copy(model) if needs_base(cfg) else None
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    best = (-float("inf"), -float("inf"))
    best_state, best_epoch, history, stale = copy.deepcopy(model.state_dict()), 0, [], 0
    masker = MaskDropout(cfg.mask_dropout, seed) if cfg.mask_dropout else None
    for epoch in range(first, cfg.epochs + 1):
        running = _epoch(model, opt, train, rng, scale, cfg, masker, anchor) if epoch > 0 else [float("nan")]
        model.eval()
        dev_m = _evaluate(model, select, scale, cfg)
        history.append({"epoch": epoch, "train_loss": float(np.mean(running)), "dev": dev_m})
        if log:
            log(
                f"epoch {epoch}: train loss {np.mean(running):.4f} dev loss {dev_m['loss']:.4f} "
                f"dev value {dev_m['value']:.4f} (oracle {dev_m['oracle']:.4f})"
            )
        # dev value in units of the target scale, to 1e-3: ties are broken by the dev loss
        key = (round(dev_m["value"] / scale, 3), -dev_m["loss"])
        if key > best:
            best, best_state, best_epoch, stale = key, copy.deepcopy(model.state_dict()), epoch, 0
        else:
            stale += 1
            if stale >= cfg.patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    return model, scale, best_epoch, history


def _fit_cross(
    parts: Mapping[str, list[StateExample]],
    cfg: TrainConfig,
    base: BaseSelector,
    log: Any,
    flagged: np.ndarray | None,
) -> tuple[SetScorerModel, float, CrossFit]:
    """Cross-fitted fine-tuning (:mod:`.cross_fit`): the base fine-tuned on train+dev for the chosen epochs;
    ``flagged``: the base's guard's verdict on the pool (train+dev), for the headroom gate."""
    pool, scale, start = [*parts["train"], *parts["dev"]], base.target_scale, base.member_state(0)
    masker = MaskDropout(cfg.mask_dropout, cfg.seed) if cfg.mask_dropout else None
    make_model = lambda: SetScorerModel(_scorer_config(cfg))  # noqa: E731
    make_opt = lambda m: torch.optim.AdamW(m.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)  # noqa: E731
    anchor = frozen_copy(make_model(), start) if needs_base(cfg) else None
    one_epoch = lambda m, o, ex, rng: _epoch(m, o, ex, rng, scale, cfg, masker, anchor)  # noqa: E731
    torch.manual_seed(cfg.seed)
    crossed = cross_fit(
        pool, cfg, start, make_model=make_model, make_optimizer=make_opt, train_epoch=one_epoch,
        state_diffs=_state_diffs, scale=scale, log=log, base_flagged=flagged,
    )  # fmt: skip
    torch.manual_seed(cfg.seed)
    model, rng = make_model(), random.Random(cfg.seed)
    model.load_state_dict(start)
    opt = make_opt(model)
    for _ in range(crossed.ship_epoch):
        one_epoch(model, opt, pool, rng)
    if crossed.ship_epoch:
        model.load_state_dict(blend_states(start, model.state_dict(), cfg.fine_tune_blend))
        if cfg.fine_tune_soup:  # the fold copies are blended alike (cross_fit scores them as they ship)
            model.load_state_dict(soup_states([model.state_dict(), *crossed.fold_states]))
    model.eval()
    return model, scale, crossed


def _epoch(
    model,
    opt,
    train: Sequence[StateExample],
    rng: random.Random,
    scale: float,
    cfg: TrainConfig,
    masker=None,
    anchor=None,
) -> list[float]:  # type: ignore[no-untyped-def]
    order = list(range(len(train)))
    rng.shuffle(order)
    model.train()
    running = []
    for i in range(0, len(order), cfg.batch_states):
        opt.zero_grad()
        batch = [train[j] for j in order[i : i + cfg.batch_states]]
        batch = [masker(ex) for ex in batch] if masker is not None else batch  # MaskDropout: fresh draws
        loss = batch_loss(model, collate(batch), scale, cfg, anchor)
        loss.backward()
        opt.step()
        running.append(loss.item())
    return running


def _state_diffs(model: Scorer, examples: Sequence[StateExample]) -> list[np.ndarray]:
    """Predicted ``d`` of every label entry, one array per state (for calibration)."""
    out = []
    with torch.no_grad():
        for ex in examples:
            out.append(entry_diffs(model, collate([ex])).numpy())
    return out


def _calibrate(
    model: Scorer, parts: Mapping[str, list[StateExample]], cfg: TrainConfig, crossed: CrossFit | None = None
) -> dict[str, Any]:
    """``{"calibration", "ood"}`` metadata: threshold on dev (never on train; cross-fitted: on the pool's
    out-of-fold predictions), OOD statistics."""
    if crossed is not None:
        calibration = calibrate_threshold(crossed.oof_diffs, [*parts["train"], *parts["dev"]])
        calibration["split"] = "train+dev, out of fold"
    else:
        calibration = calibrate_threshold(_state_diffs(model, parts["dev"]), parts["dev"])
        calibration["split"] = "dev"
    return {"calibration": calibration, "ood": calibrate_ood(parts["train"], parts["dev"], cfg.drop_features)}


def _metadata(cfg, model, scale, parts, metrics, best_epoch, history, description, header) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from causalcache_memory import __version__

    return {
        "format": "causalcache-selector",
        "model_format_version": MODEL_FORMAT_VERSION,
        "library_version": __version__,
        "schema_hash": schema_hash(),
        "feature_names": [n for n, _ in FEATURE_SCHEMA],
        "context_names": [n for n, _ in CONTEXT_SCHEMA],
        "scorer": model.config.to_dict(),
        "train": cfg.model_dump(),
        "target_scale": scale,
        "best_epoch": best_epoch,
        "metrics": metrics,
        "history": history,
        "splits": {k: sorted({ex.trajectory_id for ex in v}) for k, v in parts.items()},
        "states": {k: len(v) for k, v in parts.items()},
        "data_description": description,
        "labels": {k: header.get(k) for k in ("labeller", "config_hash", "config")} if header else {},
    }
