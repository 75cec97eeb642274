"""``causalcache learn``: recorded threads or an imported dataset -> a deployed selector, in stages.

Stages (each resumable and published atomically, :mod:`.stages`), under ``config.output``:

1. ``trajectories``  threads -> trajectories (:mod:`.threads`) or a dataset folder's trajectories;
   failed episodes dropped when ``config.successful_only``. No blob is copied.
2. *plan*            states per split; refusal before any labelling when the data cannot calibrate or
                     guard (:mod:`.plan`).
3. ``labels-<source>`` one labels file per source (``teacher_forced`` | ``agreement`` | ``evidence``),
                     through :func:`~causalcache_lab.selector.labels.run_labelling`; the only
                     stage that builds the labeller (:mod:`.label_stage`).
4. ``model``         mix the sources (:mod:`.mix`), train (fine-tuning the bundled selector unless
                     ``train.init_from`` says otherwise), calibrate on dev, fit the OOD guard, export
                     ONNX (:func:`~causalcache_lab.selector.train.train_selector`).
5. ``deploy.yaml`` + ``summary.json`` at the output root.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from causalcache_lab.learn.config import LearnConfig
from causalcache_lab.learn.deploy import deploy_snippet
from causalcache_lab.learn.evidence_plan import planned_trajectories
from causalcache_lab.learn.fine_tune_check import harm_warning
from causalcache_lab.learn.label_stage import label_inputs, labels_stage, relabel_note
from causalcache_lab.learn.labeller_version import adopt_unversioned
from causalcache_lab.learn.plan import (
    InsufficientDataError,
    check_plan,
    fold_test_into_dev,
    plan_labels,
)
from causalcache_lab.learn.recording_check import recording_warning
from causalcache_lab.learn.recordings import (
    open_recordings_archive,
    read_recordings,
    recording_specs,
    recordings_inputs,
    stale_conversion_note,
)
from causalcache_lab.learn.stages import StageResult, Stages, file_digest
from causalcache_lab.learn.text_source import coverage_warning, learn_screen_text, text_coverage
from causalcache_lab.selector.split_sizes import MIN_DEV_STATES, MIN_TRAIN_STATES
from causalcache_memory._jsonl import write_json
from causalcache_memory.errors import ConfigError

__all__ = ["STAGES", "run_learn"]

logger = logging.getLogger("causalcache_lab.learn.pipeline")

#: stage names, in order (``--stop-after`` accepts these)
STAGES = ("trajectories", "labels", "model")


def _archive_url(config: LearnConfig) -> str:
    if config.data.threads is not None:
        return " + ".join(spec.archive for spec in recording_specs(config.data.threads))
    return str(Path(config.data.dataset) / "archive")  # type: ignore[arg-type]


def _open_archive(config: LearnConfig) -> Any:
    if config.data.threads is not None:  # one recording's archive, or a read-only view of several
        return open_recordings_archive(recording_specs(config.data.threads))
    from causalcache_memory.archive import open_archive

    return open_archive(_archive_url(config))


# ------------------------------------------------------------------------------------------ stage 1
def _trajectory_inputs(config: LearnConfig) -> dict[str, Any]:
    data, only = config.data, config.successful_only
    if data.threads is not None:  # each recording's spec, its threads' chain heads, its success digest
        parts = recordings_inputs(recording_specs(data.threads))
        if not isinstance(data.threads, list):  # one recording: the identity it always had
            return {**parts[0], "successful_only": only}
        return {"recordings": parts, "successful_only": only}
    src = Path(data.dataset) / "trajectories.jsonl"  # type: ignore[arg-type]
    return {"dataset": str(data.dataset), "digest": file_digest(src), "successful_only": only}


def _trajectories_stage(config: LearnConfig, folder: Path) -> dict[str, Any]:
    from causalcache_lab.data.trajectory import load_trajectories, save_trajectories

    report: dict[str, Any] = {}
    if config.data.threads is not None:
        trajs, report = read_recordings(recording_specs(config.data.threads))
    else:
        trajs = list(load_trajectories(Path(config.data.dataset) / "trajectories.jsonl"))  # type: ignore[arg-type]
    total = len(trajs)
    if config.successful_only:
        trajs = [t for t in trajs if t.success]
    save_trajectories(folder / "trajectories.jsonl", trajs)
    by: dict[str, int] = {}
    for traj in trajs:  # threads whose decisions name an exploring allocator (allocation.explore)
        name = ",".join(traj.metadata.get("allocators") or []) or "none"
        by[name] = by.get(name, 0) + 1
    out = {"read": total, "kept": len(trajs), "archive": _archive_url(config), "report": report}
    return {**out, "kept_by_allocator": dict(sorted(by.items()))} if config.data.threads is not None else out


# ------------------------------------------------------------------------------------------ stage 4
def _model_stage(
    config: LearnConfig,
    labels: dict[str, StageResult],
    trajectories: list,
    archive: Any,
    folder: Path,
    text: Any,
) -> dict[str, Any]:
    from causalcache_lab.learn.mix import mix_labels
    from causalcache_lab.selector.examples import states_with_gain
    from causalcache_lab.selector.train import build_examples, train_selector
    from causalcache_memory.selector.features import FeatureExtractor

    header, records = mix_labels(
        {name: stage.path / "labels.jsonl" for name, stage in labels.items()}, config.sources
    )
    cfg = config.train_config()
    thumbs = None
    if config.image_features and hasattr(archive, "open_image"):
        from causalcache_memory.archive.thumbs import ThumbnailCache

        thumbs = ThumbnailCache(archive, size=32)
    extractor = FeatureExtractor(thumbs, screen_text=text)
    examples = build_examples(
        records,
        {t.trajectory_id: t for t in trajectories},
        extractor=extractor,
        witness=cfg.witness,
        seed=cfg.seed,
    )
    result = train_selector(
        examples,
        cfg,
        output_dir=folder / "model",
        data_description=f"causalcache learn: {len(trajectories)} trajectories",
        label_header=header,
        image_features=extractor.thumbnails is not None,
    )
    meta = result.metadata
    coverage = text_coverage(examples)
    text_warning = coverage_warning(coverage, source=text)
    return {
        "warnings": [*_idle_warnings(meta), *filter(None, [text_warning, harm_warning(meta)])],
        "text_coverage": round(coverage, 4),
        "states": meta["states"],
        "states_with_gain": states_with_gain(examples),
        "best_epoch": meta["best_epoch"],
        "dev": meta["metrics"].get("dev"),
        "calibration": {k: meta["calibration"][k] for k in ("min_gain", "split", "dev_fire_rate")},
        "ood": {k: v for k, v in meta["ood"].items() if k != "guard"},
        "sources": header["config"]["sources"],
        "init_from": _init_summary(meta),
        "train_seconds": meta["train_seconds"],
    }


def _init_summary(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The base a fine-tuned model started from and the loss and rate it was fine-tuned with (None: scratch)."""
    if (init := meta.get("init_from")) is None:
        return None
    keep, train = ("spec", "sha256", "epochs_fine_tuned", "base_calibration", "gate"), meta["train"]
    return {
        **{k: init.get(k) for k in keep},
        **{k: train.get(k) for k in ("loss", "lr", "cross_fit", "cross_fit_epochs")},
    }


def _idle_warnings(meta: dict[str, Any]) -> list[str]:
    """Say so when the trained selector will (almost) never swap: the labels or the threshold say no."""
    out: list[str] = []
    oracle = (meta["metrics"].get("dev") or {}).get("oracle", float("nan"))
    if not oracle > 0:  # NaN (no dev states) included
        out.append(
            f"the labels show no swap that helps on dev (dev oracle gain {oracle:.4g}): the selector will "
            "keep Recent-B. Record more episodes where memory mattered and succeeded (docs/LEARN.md, "
            "'When the labels have no signal')"
        )
    elif meta["calibration"].get("dev_fire_rate", 0.0) == 0.0:
        out.append(
            f"the calibrated min_gain {meta['calibration']['min_gain']:.4g} admits no dev swap: the selector "
            "will rarely swap; more dev data sharpens the threshold"
        )
    for msg in out:
        logger.warning("causalcache learn: %s", msg)
    return out


# ------------------------------------------------------------------------------------------ driver
def _plan_or_refuse(config: LearnConfig, trajectories: list[Any], summary: dict[str, Any]) -> LearnConfig:
    """The label plan, with the test split given to dev when only that makes it deployable and the user
    left ``train.splits`` at its default (:func:`~.plan.fold_test_into_dev`); else :func:`~.plan.check_plan`
    refuses before any labelling. Returns the config training will use (its splits possibly folded)."""
    need_train = int(config.train.get("min_train_states", MIN_TRAIN_STATES))
    need_dev = int(config.train.get("min_dev_states", MIN_DEV_STATES))

    salt, split_by = str(config.train.get("split_salt", "")), str(config.train.get("split_by", "hash"))
    planned, scope = planned_trajectories(config, trajectories)  # evidence alone: its trajectories only
    plan_for = lambda f: plan_labels(planned, config.labels, salt=salt, fractions=f, split_by=split_by)  # noqa: E731
    if (warning := recording_warning(trajectories, config)) is not None:
        summary["recording_warning"] = warning
    fractions = config.splits()
    plan = plan_for(fractions)
    folded = None if "splits" in config.train else fold_test_into_dev(plan, fractions, need_train, need_dev)
    if folded is not None:
        message = (
            f"only {plan.states['dev']} dev states of the {need_dev} the threshold calibration needs: the "
            f"test split ({plan.states['test']} states) goes to dev, splits {list(fractions)} -> "
            f"{list(folded)}; no held-back test metric (set train.splits to keep one, and record more)"
        )
        logger.warning("causalcache learn: %s", message)
        summary["splits_folded"] = {"from": list(fractions), "to": list(folded), "why": message}
        config = config.model_copy(update={"train": {**config.train, "splits": list(folded)}})
        fractions, plan = folded, plan_for(folded)
    summary["plan"] = plan.to_dict()
    try:
        check_plan(plan, fractions, total=len(planned), need_train=need_train, need_dev=need_dev)
    except InsufficientDataError as exc:
        if scope is None:
            raise
        raise InsufficientDataError(scope + str(exc)) from None
    return config


def run_learn(
    config: LearnConfig,
    *,
    stop_after: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the stages (see module doc); returns the summary (also written to ``summary.json``)."""
    from causalcache_lab.data.trajectory import load_trajectories

    if stop_after != "trajectories" and (errors := config.labelling_errors()):
        raise ConfigError("causalcache learn cannot label: " + "; ".join(errors), errors)
    if stop_after not in ("trajectories", "labels"):
        _check_base(config)  # a base that cannot be fine-tuned is refused before any labelling
    say = log or (lambda msg: logger.info("%s", msg))
    out = Path(config.output)
    stages = Stages(out)
    start = time.perf_counter()
    n_steps = 2 + len(config.sources)

    say(f"[1/{n_steps}] trajectories")
    traj_stage = stages.run(
        "trajectories", _trajectory_inputs(config), lambda f: _trajectories_stage(config, f)
    )
    trajectories = list(load_trajectories(traj_stage.path / "trajectories.jsonl"))
    say(f"      {traj_stage.result['kept']} trajectories ({_skipped(traj_stage)})")
    summary: dict[str, Any] = {"output": str(out), "stages": {"trajectories": _stage_summary(traj_stage)}}
    if config.data.threads is not None and (note := stale_conversion_note(trajectories, traj_stage.path)):
        say(f"      warning: {note}")
        summary.setdefault("notes", []).append(note)
    if stop_after == "trajectories":
        return _finish(out, summary, start)

    config = _plan_or_refuse(config, trajectories, summary)
    archive = _open_archive(config)
    text = learn_screen_text(
        config.screen_text, archive, config.trusted
    )  # before labelling: a bad source costs nothing

    labels: dict[str, StageResult] = {}
    for i, source in enumerate(config.sources, 2):
        say(f"[{i}/{n_steps}] labels ({source})")
        inputs = label_inputs(config, source, traj_stage)
        adopted = adopt_unversioned(stages, f"labels-{source}", inputs)
        if (note := adopted or relabel_note(stages.manifest(f"labels-{source}"), inputs)) is not None:
            say(f"      {note}")
            summary.setdefault("notes", []).append(note)
        stage = stages.run(
            f"labels-{source}",
            inputs,
            lambda f, s=source: labels_stage(config, s, trajectories, archive, f, progress),
        )
        labels[source] = stage
        say(
            f"      {stage.result['written'] + stage.result['skipped']} states, {stage.result['prompts']} prompts ({_skipped(stage)})"
        )
        summary["stages"][stage.name] = _stage_summary(stage)
        for warning in stage.result.get("warnings") or ():
            say(f"      warning: {warning}")
    if stop_after == "labels":
        return _finish(out, summary, start)

    say(f"[{n_steps}/{n_steps}] train, calibrate on dev, export ONNX")
    model_inputs = {
        "labels": {k: v.hash for k, v in labels.items()},
        "weights": dict(config.sources),
        "train": config.train_settings(),
        "base": _base_digest(config),
        "image_features": config.image_features,
        "screen_text": config.screen_text.model_dump() if config.screen_text else "archive",
    }
    model = stages.run(
        "model", model_inputs, lambda f: _model_stage(config, labels, trajectories, archive, f, text)
    )
    summary["stages"]["model"] = _stage_summary(model)
    model_dir = model.path / "model"
    snippet = deploy_snippet(model_dir, budget=config.deploy.budget, min_gain=config.deploy.min_gain)
    _check_deployable(model_dir)
    (out / "deploy.yaml").write_text(snippet, encoding="utf-8")
    summary["model"] = str(model_dir)
    summary["deploy"] = str(out / "deploy.yaml")
    summary["deploy_yaml"] = snippet
    return _finish(out, summary, start)


def _check_base(config: LearnConfig) -> None:
    """Load the ``train.init_from`` base as training will (schema, architecture, ONNX parity)."""
    cfg = config.train_config()
    if cfg.init_from is None:
        return
    from causalcache_lab.selector.base_model import load_base
    from causalcache_lab.selector.model import ScorerConfig

    load_base(
        cfg.init_from, ScorerConfig(hidden=cfg.hidden, embed=cfg.embed, drop_features=cfg.drop_features)
    )


def _base_digest(config: LearnConfig) -> str | None:
    """sha256 of the base ``train.init_from`` names (a changed base retrains the model stage)."""
    spec = config.train_settings().get("init_from")
    if spec is None:
        return None
    from causalcache_lab.selector.base_model import resolve_base

    return file_digest(resolve_base(str(spec)))


def _check_deployable(model_dir: Path) -> None:
    """Load the exported scorer the way the memory will (schema hash, metadata, ONNX session)."""
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    OnnxScorer(model_dir)


def _skipped(stage: StageResult) -> str:
    return "up to date, skipped" if stage.skipped else f"{stage.manifest['seconds']:.1f} s"


def _stage_summary(stage: StageResult) -> dict[str, Any]:
    return {**stage.result, "seconds": stage.manifest["seconds"], "up_to_date": stage.skipped}


def _finish(out: Path, summary: dict[str, Any], start: float) -> dict[str, Any]:
    summary["seconds"] = round(time.perf_counter() - start, 2)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "summary.json", summary)
    return summary
