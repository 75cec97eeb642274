"""The ``causalcache learn`` configuration: one YAML file, validated, every error reported at once.

::

    output: runs/learn                      # stage folders, the model, deploy.yaml, summary.json
    data:                                   # one of threads / dataset
      threads: {checkpointer: .causalcache/checkpoints.sqlite, archive: .causalcache/archive,
                success: success.json}      # or success: all; or a list of such recordings, each
                                            # with a name (ids become '<name>/<thread id>')
      dataset: runs/agentnet                # a `causalcache data import` folder
      successful_only: true                 # default: true, false with labels.reference: full_history
    labeller: {factory: "pkg.module:make", kwargs: {...}}   # built only by the labelling stage
    screen_text: {factory: "pkg.module:ocr", kwargs: {}}    # called with archive=...; default: the
                                            # archive's own get_text (lab/learn/screen_text.py)
    labels: {budgets: [4], path_length: 3, ...}             # LabelConfig (lab/selector/labels.py)
    sources: {teacher_forced: 1.0}          # label sources to produce and their training weights
    agreement: {k: 4, temperature: 0.7}     # source 'agreement' (black-box sampling)
    evidence: {links: links.json}           # source 'evidence' (or groups: GROUPS.jsonl)
    train: {epochs: 40, splits: [0.7, 0.15, 0.15], ...}     # TrainConfig (lab/selector/train.py)
                                            # init_from: bundled (default) | model dir | .onnx | null
    deploy: {budget: 4, min_gain: auto}

Relative paths are resolved against the config file's folder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from causalcache_lab.selector.labels import LabelConfig
from causalcache_lab.selector.recipe import ComponentSpec
from causalcache_lab.trust import lab_trusted_modules
from causalcache_memory.config.loader import refuse_foreign, show_key, show_value
from causalcache_memory.config.trusted import factory_error
from causalcache_memory.errors import ConfigError

__all__ = [
    "LEARN_CROSS_FIT",
    "LEARN_CROSS_FIT_EPOCHS",
    "LEARN_CROSS_FIT_GATE",
    "LEARN_CROSS_FIT_GATE_AGREEMENT",
    "LEARN_FINE_TUNE_LR",
    "LEARN_INIT_FROM",
    "SOURCES",
    "LearnConfig",
    "load_learn_config",
]

#: label sources ``causalcache learn`` can produce (``sources:`` keys)
SOURCES = ("teacher_forced", "agreement", "evidence")

#: ``train.init_from`` when the learn config does not set it: fine-tune the bundled selector (chosen on
#: the development world dev-00 against training from scratch, RESULTS.md 9c); ``null`` trains from scratch
LEARN_INIT_FROM: str | None = "bundled"
#: ``train.loss`` when fine-tuning and the config does not set it: the per-state decision loss with keep
#: weight 0 (chosen on the devage worlds against the regression loss, then measured once on held-out
#: worlds: RESULTS.md 9g); ``regression`` is the recipe the bundled selector was trained with
LEARN_FINE_TUNE_LOSS = "decision"
#: ``train.lr`` when fine-tuning and the config does not set it: 1e-4 with the decision loss (at 3e-4 its
#: dev value collapses after an epoch or two, RESULTS.md 9g); 3e-4 with ``loss: regression`` (a tenth of
#: training's 3e-3 from scratch; chosen on dev-00 among 3e-3, 1e-3 and 3e-4, RESULTS.md 9c)
LEARN_FINE_TUNE_LR = {"decision": 1e-4, "regression": 3e-4}
#: ``train.cross_fit`` when fine-tuning one scorer and the config does not set it: 5 folds choose the epoch,
#: gate it and calibrate the threshold on every train+dev state (lab/selector/cross_fit.py; chosen on the
#: devage worlds, RESULTS.md 9h); ``null`` chooses on the dev split alone, as before
LEARN_CROSS_FIT = 5
#: ``train.cross_fit_epochs`` when cross-fitting and the config does not set it: fine-tune a fixed 4 epochs
#: (the median of the epochs the out-of-fold argmax chose on nine devage recordings), cross-fitting only
#: checks for harm (and gates where a gate is set). Over those nine recordings: +0.18 over the bundle on
#: average against +0.12 for the argmax, none below it with an interval under 0 (RESULTS.md 9i); ``null``:
#: the best out-of-fold epoch
LEARN_CROSS_FIT_EPOCHS: int | None = 4
#: ``train.decision_anchor_weight`` when fine-tuning with the decision loss and the config does not set it:
#: states without a helpful swap keep their top predicted gain at or below the base's (lab/selector/
#: decision_loss.py). Adopted by a rule stated before its dev study (RESULTS.md 9j): over the three kinds of
#: development world (devage, devshift, devtype) +0.19 over the bundle on average against +0.22 without it,
#: within the stated 0.03, none below the bundle; meant for worlds where the bundle already ranks well
#: (the held-out drift of 9i). 0: off
LEARN_DECISION_ANCHOR_WEIGHT = 1.0
#: ``train.fine_tune_headroom`` when cross-fitting and the config does not set it: the base ships unchanged
#: where it is shown to realize 37% of the label oracle's budgeted value on the team's pool (the lower end
#: of the share's 95% interval; lab/selector/headroom.py). The level was fixed on the development worlds by
#: a rule stated before its study (RESULTS.md 9o), the lower end in 9p (the share's SD on one recording is
#: about 0.07); no development recording is gated by it; ``null``: off
LEARN_FINE_TUNE_HEADROOM: float | None = 0.37
#: ``train.fine_tune_gate`` when cross-fitting and the config does not set it: none, the best out-of-fold
#: epoch ships when it beats the base (its evidence is still reported at 95%). Chosen on nine devage
#: recordings of 200 Recent-4 episodes against a 0.8 gate (RESULTS.md 9h): mean +0.12 over the bundle,
#: none below it with an interval under 0; a number sets a gate (the interval's lower end above 0)
LEARN_CROSS_FIT_GATE: float | None = None
#: the same when the sources include ``agreement``: a 95% gate. Without one, agreement-labelled fine-tunes
#: lost to the bundle on average over six devage recordings (−0.16 [−0.25, −0.08] on one) and on heldout-03
#: (RESULTS.md 9h); every one of those six had its 95% out-of-fold interval include 0, so this gate hands
#: back the bundle there
LEARN_CROSS_FIT_GATE_AGREEMENT = 0.95


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ThreadsSpec(_Strict):
    #: the recording's namespace when data.threads lists several (thread ids become '<name>/<id>')
    name: str | None = None
    checkpointer: str
    archive: str
    success: str = "all"
    platform: Literal["desktop", "mobile"] | None = None
    source: str = Field(
        "threads",
        description="origin recorded in each trajectory's metadata['source']; 'synthetic-world' for threads "
        "recorded in this package's synthetic world, the only data the simulated policy may label",
    )


class DataSection(_Strict):
    #: one recording, or several read as one dataset (lab/learn/recordings.py)
    threads: ThreadsSpec | list[ThreadsSpec] | None = None
    dataset: str | None = None
    #: keep only the successful episodes; None (default): true when the labels' target is the recorded
    #: step, false with ``labels.reference: full_history`` (:attr:`LearnConfig.successful_only`)
    successful_only: bool | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DataSection:
        if (self.threads is None) == (self.dataset is None):
            raise ValueError(
                "give exactly one of data.threads (recorded LangGraph threads) or data.dataset "
                "(a `causalcache data import` folder)"
            )
        if isinstance(self.threads, list) and not self.threads:
            raise ValueError("data.threads is an empty list; give at least one recording")
        return self


class AgreementSection(_Strict):
    k: int = Field(4, ge=1, description="samples of the labeller's action per allocation")
    temperature: float | None = Field(
        0.7, ge=0, description="sampling temperature (None: the sampler's own randomness, e.g. seeds)"
    )


class EvidenceSection(_Strict):
    links: str | None = None
    groups: str | None = None
    screen: Literal["before", "after"] = "before"

    @model_validator(mode="after")
    def _one_file(self) -> EvidenceSection:
        if self.links is not None and self.groups is not None:
            raise ValueError("give one of evidence.links (AndroTMem-style) or evidence.groups (mined)")
        return self


class DeploySection(_Strict):
    budget: int = Field(4, ge=1, le=64)
    min_gain: float | Literal["auto"] = "auto"


class LearnConfig(_Strict):
    output: str = "runs/learn"
    data: DataSection
    labeller: ComponentSpec | None = None
    #: the text source of the team's states' ``text_*`` features (lab/learn/screen_text.py); None: the
    #: archive's own ``get_text`` (what the deployed memory reads)
    screen_text: ComponentSpec | None = None
    labels: LabelConfig = LabelConfig()
    sources: dict[str, float] = {"teacher_forced": 1.0}
    agreement: AgreementSection = AgreementSection()
    evidence: EvidenceSection = EvidenceSection()
    train: dict[str, Any] = {}
    image_features: bool = False
    deploy: DeploySection = DeploySection()
    #: the modules ``labeller``/``screen_text`` may name (set by :func:`load_learn_config`, never from the
    #: file; :mod:`causalcache_memory.config.trusted`)
    _trusted: tuple[str, ...] = PrivateAttr(default=())

    @property
    def trusted(self) -> tuple[str, ...]:
        """The modules this config's factories may name (the project's, plus those the user trusts)."""
        return self._trusted or lab_trusted_modules()

    @model_validator(mode="after")
    def _check(self) -> LearnConfig:
        errors = []
        for name, weight in self.sources.items():
            if name not in SOURCES:
                errors.append(f"sources: {name!r} is not a label source; use {', '.join(SOURCES)}")
            elif not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
                errors.append(f"sources.{name}={weight!r} must be a weight > 0 (drop the source to skip it)")
        if not self.sources:
            errors.append("sources is empty; e.g. sources: {teacher_forced: 1.0}")
        if self.deploy.budget not in self.labels.budgets:
            errors.append(
                f"deploy.budget={self.deploy.budget} is not among labels.budgets={list(self.labels.budgets)}; "
                "label the budget you deploy"
            )
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def labelling_errors(self) -> list[str]:
        """What labelling still needs (checked before any stage runs, unless only trajectories are made)."""
        errors = []
        needs_model = {"teacher_forced", "agreement"} & set(self.sources)
        if needs_model and self.labeller is None:
            errors.append(
                f"sources {sorted(needs_model)} need a labeller: set labeller.factory "
                "(a Policy, a LangChain chat model or an OpenAIPolicy)"
            )
        if "evidence" in self.sources and not (self.evidence.links or self.evidence.groups):
            errors.append("sources.evidence needs evidence.links (AndroTMem-style) or evidence.groups")
        return errors

    @property
    def successful_only(self) -> bool:
        """``data.successful_only``, or by default: True when every label scores the recorded step (a failed
        episode's recorded action is the wrong one, docs/LEARN.md), False with ``labels.reference:
        full_history``, whose target is the labeller's own full-history action and so is sound in a failed
        episode too (its memory-critical steps are where Recent-B misses a screen, RESULTS.md 9g)."""
        if self.data.successful_only is not None:
            return self.data.successful_only
        return self.labels.reference == "recorded"

    def train_settings(self) -> dict[str, Any]:
        """The ``train`` section with learn's defaults filled in: ``init_from`` :data:`LEARN_INIT_FROM`
        and, when fine-tuning, ``loss`` :data:`LEARN_FINE_TUNE_LOSS` and its ``lr`` (:data:`LEARN_FINE_TUNE_LR`),
        ``decision_anchor_weight`` :data:`LEARN_DECISION_ANCHOR_WEIGHT` (decision loss),
        ``cross_fit`` :data:`LEARN_CROSS_FIT` (one scorer) with ``cross_fit_epochs`` :data:`LEARN_CROSS_FIT_EPOCHS`,
        ``fine_tune_headroom`` :data:`LEARN_FINE_TUNE_HEADROOM`
        and ``fine_tune_gate`` :data:`LEARN_CROSS_FIT_GATE` (:data:`LEARN_CROSS_FIT_GATE_AGREEMENT` when the
        sources include agreement).
        A setting the config gives is used as is."""
        out = {"init_from": LEARN_INIT_FROM, **self.train}
        if out["init_from"] is not None:
            out.setdefault("loss", LEARN_FINE_TUNE_LOSS)
            out.setdefault("lr", LEARN_FINE_TUNE_LR.get(out["loss"], LEARN_FINE_TUNE_LR["regression"]))
            if out["loss"] == "decision":
                out.setdefault("decision_anchor_weight", LEARN_DECISION_ANCHOR_WEIGHT)
            if out.get("ensemble", 1) == 1:
                out.setdefault("cross_fit", LEARN_CROSS_FIT)
            if out.get("cross_fit"):
                agreement = "agreement" in self.sources
                out.setdefault("cross_fit_epochs", LEARN_CROSS_FIT_EPOCHS)
                out.setdefault("fine_tune_headroom", LEARN_FINE_TUNE_HEADROOM)
                out.setdefault(
                    "fine_tune_gate", LEARN_CROSS_FIT_GATE_AGREEMENT if agreement else LEARN_CROSS_FIT_GATE
                )
        return out

    def train_config(self) -> Any:
        """The :class:`~causalcache_lab.selector.train_config.TrainConfig`."""
        from causalcache_lab.selector.train_config import TrainConfig

        return TrainConfig(**self.train_settings())

    def splits(self) -> tuple[float, float, float]:
        raw = self.train.get("splits", (0.7, 0.15, 0.15))
        return (float(raw[0]), float(raw[1]), float(raw[2]))


def _resolve(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """Paths relative to the config file's folder (URLs and ``all`` untouched)."""

    def fix(value: Any) -> Any:
        if not isinstance(value, str) or value == "all" or "://" in value or Path(value).is_absolute():
            return value
        return str(base / value)

    raw = dict(raw)
    if "output" in raw:
        raw["output"] = fix(raw["output"])
    data = dict(raw.get("data") or {})
    paths = ("checkpointer", "archive", "success")
    if isinstance(data.get("threads"), dict):
        data["threads"] = {k: fix(v) if k in paths else v for k, v in data["threads"].items()}
    elif isinstance(data.get("threads"), list):
        data["threads"] = [
            {k: fix(v) if k in paths else v for k, v in t.items()} if isinstance(t, dict) else t
            for t in data["threads"]
        ]
    if "dataset" in data:
        data["dataset"] = fix(data["dataset"])
    raw["data"] = data
    train = raw.get("train")
    if (
        isinstance(train, dict)
        and isinstance(train.get("init_from"), str)
        and train["init_from"] != "bundled"
    ):
        raw["train"] = {**train, "init_from": fix(train["init_from"])}
    if isinstance(raw.get("evidence"), dict):
        raw["evidence"] = {k: fix(v) if k in ("links", "groups") else v for k, v in raw["evidence"].items()}
    return raw


def load_learn_config(
    path: str | Path | None = None, *, trusted: Iterable[str] = (), **overrides: Any
) -> LearnConfig:
    """Read and validate a learn config (``yaml.safe_load``); ``overrides`` replace top-level keys.

    ``labeller.factory`` and ``screen_text.factory`` run code: they may name the project's modules and
    ``trusted`` ones (``--trust-module``, ``CAUSALCACHE_TRUSTED_MODULES``); anything else is refused here,
    before any stage runs."""
    from causalcache_memory.config.loader import read_yaml_file

    raw: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        raw = read_yaml_file(path) or {}  # bounded; a link out of the config's folder is refused unread
        if not isinstance(raw, dict):
            raise ConfigError(f"learn config {path} must be a mapping of sections (output, data, ...)")
        refuse_foreign(raw, LearnConfig, f"learn config {path}")
        base = Path(path).resolve().parent
        raw = _resolve(raw, base)
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        config = LearnConfig.model_validate(raw)
    except ValidationError as exc:
        errors = []
        for e in exc.errors():
            where = ".".join(show_key(str(p)) for p in e["loc"]) or "<config>"
            value = e.get("input")
            shown = (
                ""
                if isinstance(value, dict) or e["type"] == "extra_forbidden"
                else f" (got {show_value(value)})"
            )
            errors.append(f"{where}: {e['msg'].removeprefix('Value error, ')}{shown}")
        raise ConfigError(f"invalid learn config {path or '<flags>'}: " + "; ".join(errors), errors) from exc
    trust = lab_trusted_modules(trusted)
    named = {"labeller.factory": config.labeller, "screen_text.factory": config.screen_text}
    errors = [
        e for f, spec in named.items() if spec is not None and (e := factory_error(f, spec.factory, trust))
    ]
    if errors:
        raise ConfigError(
            f"learn config {path or '<flags>'} names untrusted code: " + "; ".join(errors), errors
        )
    config._trusted = trust
    return config
