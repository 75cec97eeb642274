"""``causalcache learn --guard-only``: refit the OOD guard on a team's unlabelled recordings.

When the bundled selector's guard declines most decisions on a team's screens (the idle warning: "fell
back to Recent-B ... 'ood'"), the memory is exactly Recent-B, however well the scorer would rank. A guard
describes what the states look like, not what helps, so it needs no labels: this stage reads the team's
recorded threads (every episode, failed ones too; no success labels and no labeller), featurizes every
decision state where a swap is possible (``t >= B + 2`` at the deployed budget ``deploy.budget``), and fits
the robust guard of :mod:`causalcache_memory.selector.ood` on them: the guard's columns, centre, scale
and shrinkage covariance on the **train** trajectories, its threshold so that at most 1% of the
**held-out** trajectories' states are flagged. The split is the one trajectory split
(:func:`~causalcache_lab.data.split.trajectory_split`, ``train.split_salt``); the test share goes
to the held-out part (no test metric is reported here).

What ships: the base (``train.init_from``, the bundled selector by default) with its scorer and its swap
threshold unchanged and the new guard in its ``causalcache.ood`` metadata. **The threshold is kept**:
its dev frontier ``gain(τ)`` sums label utilities (:mod:`causalcache_memory.selector.threshold`), so it
cannot be refitted without labels. The deployment still holds its pass-2 share on the team's own
decisions (``selector.share_window``, after 20 decisions at a budget), which needs no labels either.

Output, under ``<output>/``: the ``guard-trajectories`` stage (every episode), the ``guard`` stage (``guard/model/`` = ``selector.onnx`` + ``metadata.json``, ``guard/manifest.json``),
``guard-deploy.yaml`` and ``guard-summary.json``. It refuses, before featurizing anything, a recording too
small for the guard (:func:`~causalcache_memory.selector.ood.min_guard_states`), naming the episodes it
would take at this recording's states per episode.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from causalcache_lab.learn.plan import InsufficientDataError
from causalcache_memory.errors import ConfigError

__all__ = ["GUARD_STAGE", "guard_states", "refit_guard", "run_guard_refit"]

#: the stage folders under ``output`` (the trajectories of every episode, apart from learn's own stage)
GUARD_STAGE = "guard"
TRAJECTORY_STAGE = "guard-trajectories"


def guard_states(trajectory: Any, budgets: Sequence[int]) -> list[tuple[int, int]]:
    """``(t, B)`` of every decision of ``trajectory`` where a swap out of Recent-B is possible."""
    return [
        (t, b) for b in budgets for t in range(b + 2, len(trajectory) + 1) if trajectory.steps[t - 1].parsed
    ]


def _split(tid: str, fractions: Sequence[float], salt: str) -> str:
    from causalcache_lab.data.split import trajectory_split

    held = float(fractions[1]) + float(fractions[2])  # the test share is held out too
    return "dev" if trajectory_split(tid, dev=held, test=0.0, salt=salt) == "dev" else "train"


def _base(spec: str) -> tuple[Path, dict[str, Any]]:
    from causalcache_lab.selector.base_model import resolve_base

    onnx_path = resolve_base(spec)
    meta_path = onnx_path.parent / "metadata.json"
    if not meta_path.is_file():
        raise ConfigError(
            f"train.init_from={spec!r}: no metadata.json beside {onnx_path}; the guard refit keeps the base's "
            "threshold, which lives there: give a model directory written by training or `learn`"
        )
    return onnx_path, json.loads(meta_path.read_text(encoding="utf-8"))


def refit_guard(
    trajectories: Sequence[Any],
    archive: Any,
    *,
    base: str = "bundled",
    budgets: Sequence[int] = (4,),
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    salt: str = "",
    screen_text: Any = None,
    out_dir: str | Path,
) -> dict[str, Any]:
    """Fit the guard on the states of ``trajectories`` and write the base with it to ``out_dir`` (module
    doc); returns the report (``ood``: the guard's fit report; ``base_flagged``: the share of the team's
    states the base's own guard flags; ``flagged``: the new guard's share on the held-out states)."""
    from causalcache_lab.selector.calibrate import fit_ood
    from causalcache_memory.selector.features import FEATURE_SCHEMA, FeatureExtractor, feature_index
    from causalcache_memory.selector.ood import load_guard, min_guard_states, state_summary

    start = time.perf_counter()
    onnx_path, meta = _base(base)
    drop_names = list((meta.get("train") or {}).get("drop_features", ()))
    plan = {(t.trajectory_id, t_, b): _split(t.trajectory_id, fractions, salt)
            for t in trajectories for t_, b in guard_states(t, budgets)}  # fmt: skip
    _check_size(plan, len(trajectories), min_guard_states(len(FEATURE_SCHEMA)), fractions)
    thumbs = None
    if meta.get("image_features") and hasattr(archive, "open_image"):
        from causalcache_memory.archive.thumbs import ThumbnailCache

        thumbs = ThumbnailCache(archive, size=32)
    extractor = FeatureExtractor(thumbs, screen_text=screen_text)
    parts: dict[str, list[Any]] = {"train": [], "dev": []}
    by_id = {t.trajectory_id: t for t in trajectories}
    for (tid, t, b), split in plan.items():
        traj = by_id[tid]
        events = extractor(traj.trace_at(t), b, traj.steps[t - 1].action)  # the recorded step as witness
        parts[split].append(SimpleNamespace(events=events))
    guard, report = fit_ood(parts["train"], parts["dev"], drop_names)
    drop = [feature_index(n) for n in drop_names]
    summaries = [state_summary(s.events, drop) for s in parts["train"] + parts["dev"]]
    names = [n for n, _ in FEATURE_SCHEMA]
    old = (meta.get("ood") or {}).get("guard")
    base_flagged = (
        float(np.mean([load_guard(old, names).is_ood(z)[0] for z in summaries])) if old else float("nan")
    )
    ood = {
        **report,
        "guard": guard.to_json(),
        "refit": "unlabelled team states (causalcache learn --guard-only)",
    }
    model_dir = _write_model(Path(out_dir) / "model", onnx_path, meta, ood, len(trajectories))
    return {
        "model": str(model_dir),
        "base": str(onnx_path),
        "trajectories": len(trajectories),
        "states": {k: len(v) for k, v in parts.items()},
        "base_flagged": round(base_flagged, 4),
        "flagged": round(float(report.get("dev_flagged", report["train_flagged"])), 4),
        "ood": {k: v for k, v in ood.items() if k != "guard"},
        "threshold": "the base's (its dev frontier needs labels); the deployment's budget window holds the "
        "pass-2 share on the team's own decisions",
        "seconds": round(time.perf_counter() - start, 2),
    }


def _check_size(plan: dict[Any, str], episodes: int, need: int, fractions: Sequence[float]) -> None:
    """Refuse a recording too small for the guard before any state is featurized (:func:`refit_guard`)."""
    have = sum(1 for s in plan.values() if s == "train")
    if have >= need:
        return
    per = len(plan) / episodes if episodes else 0.0
    if per <= 0:
        raise InsufficientDataError(
            f"no recorded episode has a decision where a swap is possible ({episodes} episodes): episodes need "
            "at least budget + 2 steps; record longer episodes"
        )
    needed = math.ceil(need / (per * float(fractions[0])))
    raise InsufficientDataError(
        f"refitting the OOD guard needs {need} training states, the recording gives {have} ({episodes} "
        f"episodes, {per:.1f} decision states each, {fractions[0]:g} of them for training): record about "
        f"{needed} episodes. Nothing was written"
    )


def _write_model(
    folder: Path, onnx_path: Path, meta: dict[str, Any], ood: dict[str, Any], episodes: int
) -> Path:
    """The base's ONNX file with ``causalcache.ood`` replaced, and its metadata with the new ``ood``."""
    from causalcache_memory._optional import require

    onnx = require("onnx", purpose="writing a selector with a refitted guard")
    folder.mkdir(parents=True, exist_ok=True)
    proto = onnx.load(str(onnx_path))
    props = {p.key: p.value for p in proto.metadata_props}
    props["causalcache.ood"] = ood["guard"]
    data = json.loads(props.get("causalcache.training_data", "{}") or "{}")
    data["guard_refit"] = f"OOD guard refitted on {episodes} unlabelled recorded episodes"
    props["causalcache.training_data"] = json.dumps(data, sort_keys=True)
    del proto.metadata_props[:]
    for key, value in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, str(folder / "selector.onnx"))
    out = {**meta, "ood": ood, "guard_refit": {"base": str(onnx_path), "episodes": episodes}}
    (folder / "metadata.json").write_text(json.dumps(out, indent=1, sort_keys=True), encoding="utf-8")
    return folder


def run_guard_refit(config: Any, *, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The ``--guard-only`` run of a learn config: trajectories stage (every episode), guard stage, deploy
    snippet (module doc). No labeller is built and no success labels are needed."""
    from causalcache_lab.data.trajectory import load_trajectories
    from causalcache_lab.learn import pipeline
    from causalcache_lab.learn.deploy import deploy_snippet
    from causalcache_lab.learn.recordings import recording_specs
    from causalcache_lab.learn.stages import Stages
    from causalcache_lab.learn.text_source import learn_screen_text
    from causalcache_lab.selector.base_model import resolve_base
    from causalcache_memory._jsonl import write_json

    say = log or (lambda msg: None)
    start = time.perf_counter()
    out = Path(config.output)
    stages = Stages(out)
    threads = config.data.threads
    if threads is not None:  # every thread: a guard needs no success labels
        every = [spec.model_copy(update={"success": "all"}) for spec in recording_specs(threads)]
        threads = every if isinstance(threads, list) else every[0]
    data = config.data.model_copy(update={"threads": threads, "successful_only": False})
    config = config.model_copy(update={"data": data})
    say("[1/2] trajectories (every episode: a guard needs no success labels)")
    traj = stages.run(
        TRAJECTORY_STAGE,
        pipeline._trajectory_inputs(config),
        lambda f: pipeline._trajectories_stage(config, f),
    )
    trajectories = list(load_trajectories(traj.path / "trajectories.jsonl"))
    say(f"      {len(trajectories)} trajectories ({pipeline._skipped(traj)})")
    archive = pipeline._open_archive(config)
    text = learn_screen_text(config.screen_text, archive, config.trusted)
    base = config.train_settings().get("init_from") or "bundled"
    inputs = {
        "trajectories": traj.hash,
        "base": pipeline.file_digest(resolve_base(str(base))),
        "budget": config.deploy.budget,
        "splits": list(config.splits()),
        "salt": str(config.train.get("split_salt", "")),
        "screen_text": config.screen_text.model_dump() if config.screen_text else "archive",
    }
    say("[2/2] guard: refit on the team's states (no labels)")
    stage = stages.run(
        GUARD_STAGE,
        inputs,
        lambda f: refit_guard(
            trajectories,
            archive,
            base=str(base),
            budgets=(config.deploy.budget,),
            fractions=config.splits(),
            salt=inputs["salt"],
            screen_text=text,
            out_dir=f,
        ),
    )
    model_dir = stage.path / "model"
    pipeline._check_deployable(model_dir)
    snippet = deploy_snippet(model_dir, budget=config.deploy.budget, min_gain=config.deploy.min_gain).replace(
        "# causalcache learn: deploy the selector trained on your own trajectories",
        "# causalcache learn --guard-only: the base selector with its OOD guard refitted on your recordings",
    )
    (out / "guard-deploy.yaml").write_text(snippet, encoding="utf-8")
    result = dict(stage.result)
    result["model"] = str(model_dir)  # the published folder (the stage ran in a partial one)
    summary = {
        "output": str(out),
        "trajectories": pipeline._stage_summary(traj),
        "guard": {**result, "up_to_date": stage.skipped},
        "deploy": str(out / "guard-deploy.yaml"),
        "deploy_yaml": snippet,
        "seconds": round(time.perf_counter() - start, 2),
    }
    write_json(out / "guard-summary.json", summary)
    return summary


def print_guard_summary(summary: dict[str, Any]) -> None:
    """The CLI's lines for a guard-only run."""
    g = summary["guard"]
    took = "up to date" if g["up_to_date"] else f"{g['seconds']:.1f} s"
    print(f"\nguard refit ({summary['seconds']:.1f} s; stage {took})")
    print(
        f"  states: {g['states']['train']} train / {g['states']['dev']} held out, from {g['trajectories']} episodes"
    )
    print(
        f"  the base's guard flags {g['base_flagged']:.1%} of them; the refitted guard {g['flagged']:.1%} "
        f"of the held-out ones (threshold {g['ood']['threshold']:.3g})"
    )
    print(f"  threshold: {g['threshold']}")
    print(f"  model: {g['model']}\n  deploy snippet: {summary['deploy']}")
