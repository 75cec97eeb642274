"""The selector training recipe, ``train:`` in YAML (validated; every field documented where it is declared).

:class:`TrainConfig` is read by :func:`~causalcache_lab.selector.train.train_selector` (the loss,
the splits, fine-tuning from a base and what it keeps of it) and by ``causalcache learn``; kept apart
from the training loop so that reading a recipe needs neither torch nor the loop.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from causalcache_lab.selector.mask_dropout import check_mask_dropout
from causalcache_lab.selector.split_sizes import MIN_DEV_STATES, MIN_TRAIN_STATES
from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.features import feature_index

__all__ = ["TrainConfig"]


class TrainConfig(BaseModel):
    """Training recipe (see module doc for the loss)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hidden: int = Field(64, ge=1)
    embed: int = Field(32, ge=1)
    epochs: int = Field(40, ge=1)
    lr: float = Field(3e-3, gt=0)
    weight_decay: float = Field(1e-4, ge=0)
    batch_states: int = Field(16, ge=1)
    huber_delta: float = Field(1.0, gt=0)
    rank_weight: float = Field(1.0, ge=0)
    rank_temperature: float = Field(0.25, gt=0)
    rank_epsilon: float = Field(1e-3, ge=0)
    #: ``regression``: Huber on ``y / scale`` plus pairwise ranks over every label entry (the paper's
    #: recipe); ``decision``: a per-state softmax over the deployed choice, the best swap out of
    #: Recent-B or keep (:mod:`~causalcache_lab.selector.decision_loss`; RESULTS.md 9g)
    loss: Literal["regression", "decision"] = "regression"
    #: the decision loss's softmax temperature, in target-scale units of ``d``
    decision_temperature: float = Field(0.1, gt=0)
    #: a state teaches its best swap when that swap's label exceeds this many target scales, else "keep"
    decision_min_gain: float = Field(0.5, ge=0)
    #: weight of the states that teach "keep" (most of a team's states) against those that teach a swap;
    #: 0 (chosen on the devage worlds, RESULTS.md 9g): the deployment's pass-2 share decides how often
    #: to fire, and a positive weight pushes predicted gains below its floor of 0 (the selector idles)
    decision_keep_weight: float = Field(0.0, ge=0)
    #: weight of the decision loss's cross-state rank term (a helped state's helpful swap above the top
    #: swap of a state nothing helps; module ``decision_loss``); 0: the per-state choice alone
    decision_state_rank_weight: float = Field(0.0, ge=0)
    #: fine-tuning (``init_from``) with the decision loss: weight of the term that holds the top predicted
    #: gain of states without a helpful swap at or below the base's (module ``decision_loss``); 0: off
    decision_anchor_weight: float = Field(0.0, ge=0)
    #: with the decision loss: weight of the later decisions of the search (the teacher path's swaps after
    #: the first, with the same choice and anchor terms; module ``decision_loss``); 0: the first swap alone
    decision_path_weight: float = Field(0.0, ge=0)
    #: fine-tuning with the decision loss: weight of the term that holds the search's second swap, on the
    #: base's own path, at the base's predicted gains (module ``later_anchor``); 0: off
    decision_later_weight: float = Field(0.0, ge=0)
    max_pairs_per_group: int = Field(256, ge=1)
    seed: int = 0
    splits: tuple[float, float, float] = (0.7, 0.15, 0.15)
    #: ``hash``: trajectory-disjoint splits by ``splits`` fractions with the one trajectory split
    #: (:func:`~causalcache_lab.data.split.trajectory_split`, as ``data mine --dev --test
    #: --salt``); ``metadata``: the data's own ``metadata["data_split"]`` (e.g. template-disjoint
    #: train/dev from the world recipe)
    split_by: str = "hash"
    #: the salt of the hash split (``data mine --salt``); the defaults match ``data mine``'s
    split_salt: str = ""
    #: fewest training / dev states :func:`train_selector` accepts (:func:`check_split_sizes`); lower
    #: them only for smoke runs: the guard and the threshold fitted on less are not usable
    min_train_states: int = Field(MIN_TRAIN_STATES, ge=2)
    min_dev_states: int = Field(MIN_DEV_STATES, ge=1)
    witness: str = "gold"
    drop_features: tuple[str, ...] = ()
    patience: int = Field(10, ge=1)
    threads: int = Field(1, ge=1)
    #: fine-tune from a base scorer instead of a random start: ``bundled``, a model directory or an
    #: ``.onnx`` file (:mod:`~causalcache_lab.selector.base_model`); ``None``: from scratch. The
    #: base unchanged is the dev-selection candidate "epoch 0", and its target scale is kept
    init_from: str | None = None
    #: per feature group (``app``, ``text``, ``image``), the probability that a training state is seen
    #: with that group masked in an epoch (as when its source is missing); empty: never (module doc)
    mask_dropout: dict[str, float] = Field(default_factory=dict)
    #: number of scorers trained with seeds ``seed, seed + 1, ...`` and averaged into one exported graph
    #: (module doc); 1: a single scorer
    ensemble: int = 1
    #: fine-tuning: keep the fine-tuned epoch only when its dev gain over the base is shown at this
    #: confidence, else ship the base (module ``fine_tune_gate``); ``None``: keep the best dev epoch
    fine_tune_gate: float | None = Field(0.95, gt=0, lt=1)
    #: fine-tuning: ``K`` folds by trajectory choose the epoch, gate it and calibrate the threshold on
    #: every train+dev state by the budgeted value (module ``cross_fit``); ``None``: the dev split alone
    cross_fit: int | None = Field(None, ge=2)
    #: with ``cross_fit``: fine-tune exactly this many epochs (the out-of-fold value checks for harm and
    #: gates, module ``cross_fit``; ``epochs`` and ``patience`` then go unused); ``None``: the best
    #: out-of-fold epoch within ``epochs``
    cross_fit_epochs: int | None = Field(None, ge=1)
    #: with ``cross_fit``: ship (and check out of fold) the weight-space blend ``θ_base + β(θ_tuned −
    #: θ_base)`` of the fine-tune with its base (WiSE-FT; module ``cross_fit``); 1: the fine-tune as trained
    fine_tune_blend: float = Field(1.0, gt=0, le=1)
    #: with ``cross_fit`` and ``cross_fit_epochs``: ship the mean of the fine-tune's weights and its fold
    #: copies' (a uniform soup over ``cross_fit + 1`` fine-tunes of one base; module ``cross_fit``)
    fine_tune_soup: bool = False
    #: with ``cross_fit``: ship the base unchanged when it is shown to realize at least this share of the label
    #: oracle's budgeted value on the pool, its own OOD guard applied: the lower end of the share's 95%
    #: interval, resampled by trajectory (module ``headroom``); ``None``: off
    fine_tune_headroom: float | None = Field(None, gt=0, le=1)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            errors = [
                f"train.{'.'.join(str(p) for p in e['loc'])}={e.get('input')!r}: {e['msg']}"
                for e in exc.errors()
            ]
            raise ConfigError("invalid selector training config: " + "; ".join(errors), errors) from exc
        self._check()

    def _check(self) -> None:
        errors = []
        if abs(sum(self.splits) - 1.0) > 1e-6 or min(self.splits) < 0:
            errors.append(f"train.splits={self.splits} must be three non-negative fractions summing to 1")
        if self.split_by not in ("hash", "metadata"):
            errors.append(f"train.split_by={self.split_by!r} must be 'hash' or 'metadata'")
        if self.witness not in ("gold", "none"):
            errors.append(f"train.witness={self.witness!r} must be 'gold' or 'none'")
        for name in self.drop_features:
            try:
                feature_index(name)
            except KeyError as exc:
                errors.append(f"train.drop_features: {exc.args[0]}")
        errors.extend(check_mask_dropout(self.mask_dropout))
        if self.ensemble < 1:
            errors.append(
                f"train.ensemble={self.ensemble} must be at least 1 (1: a single scorer; E > 1: E scorers "
                "trained with seeds seed..seed+E-1 and averaged); set train.ensemble: 1 to train one"
            )
        if self.cross_fit is not None and (self.init_from is None or self.ensemble != 1):
            errors.append(
                f"train.cross_fit={self.cross_fit} cross-fits the fine-tuning of one scorer: it needs "
                f"train.init_from (got {self.init_from!r}) and train.ensemble: 1 (got {self.ensemble}); "
                "set both or remove train.cross_fit"
            )
        if self.cross_fit_epochs is not None and self.cross_fit is None:
            errors.append(
                f"train.cross_fit_epochs={self.cross_fit_epochs} fixes the length of a cross-fitted "
                "fine-tune: set train.cross_fit (e.g. 5) or remove train.cross_fit_epochs"
            )
        for field, what in (
            ("decision_anchor_weight", "anchors a fine-tune to its base"),
            ("decision_later_weight", "holds a fine-tune's second swaps at its base's"),
        ):
            if (weight := getattr(self, field)) > 0 and (self.init_from is None or self.loss != "decision"):
                errors.append(
                    f"train.{field}={weight} {what} under the decision loss: it needs train.init_from (got "
                    f"{self.init_from!r}) and train.loss: decision (got {self.loss!r}); set both or set "
                    f"train.{field}: 0"
                )
        if self.decision_path_weight > 0 and self.loss != "decision":
            errors.append(
                f"train.decision_path_weight={self.decision_path_weight} weights the search's later decisions "
                f"in the decision loss: it needs train.loss: decision (got {self.loss!r}); set it or set "
                "train.decision_path_weight: 0"
            )
        if self.fine_tune_blend != 1.0 and self.cross_fit is None:
            errors.append(
                f"train.fine_tune_blend={self.fine_tune_blend} blends a cross-fitted fine-tune with its "
                "base: set train.cross_fit (e.g. 5) and train.init_from, or set train.fine_tune_blend: 1"
            )
        if self.fine_tune_headroom is not None and self.cross_fit is None:
            errors.append(
                f"train.fine_tune_headroom={self.fine_tune_headroom} gates a cross-fitted fine-tune on its "
                "base's share of the label oracle's value: set train.cross_fit (e.g. 5) and train.init_from, "
                "or set train.fine_tune_headroom: null"
            )
        if self.fine_tune_soup and (self.cross_fit is None or self.cross_fit_epochs is None):
            errors.append(
                "train.fine_tune_soup averages a fixed-length fine-tune with its cross-fitted fold copies: set "
                f"train.cross_fit (got {self.cross_fit!r}) and train.cross_fit_epochs (got "
                f"{self.cross_fit_epochs!r}), or set train.fine_tune_soup: false"
            )
        if errors:
            raise ConfigError("invalid selector training config: " + "; ".join(errors), errors)
