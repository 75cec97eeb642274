"""Stage 3 of ``causalcache learn``: the labels of one source (the only stage that builds the labeller).

:func:`label_inputs` is the stage's identity (the trajectories stage's hash, the label config, the
labeller's spec and version, the source's own settings); :func:`labels_stage` builds the scorer of the
source and labels through :func:`~causalcache_lab.selector.labels.run_labelling`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from causalcache_lab.learn.config import LearnConfig
from causalcache_lab.learn.stages import StageResult, file_digest

__all__ = ["label_inputs", "labeller_for", "labels_stage", "relabel_note"]


def labeller_for(config: LearnConfig, source: str, trajectories: list) -> Any:
    """The scorer of ``source`` (built here only: training never calls this)."""
    if source == "evidence":
        from causalcache_lab.learn.evidence import (
            EvidenceScorer,
            evidence_from_groups,
            evidence_from_links,
        )

        ev = config.evidence
        if ev.links:
            return EvidenceScorer(
                evidence_from_links(ev.links, trajectories, screen=ev.screen), origin=ev.links
            )
        return EvidenceScorer(evidence_from_groups(ev.groups), origin=str(ev.groups))  # type: ignore[arg-type]
    from causalcache_lab.selector.recipe import _call

    assert config.labeller is not None  # the config's validator requires it for these sources
    obj = _call(config.labeller.factory, config.labeller.kwargs, "labeller", config.trusted)
    if source == "teacher_forced":
        return obj
    from causalcache_lab.learn.agreement import AgreementScorer, make_sampler

    return AgreementScorer(make_sampler(obj), k=config.agreement.k, temperature=config.agreement.temperature)


def label_inputs(config: LearnConfig, source: str, upstream: StageResult) -> dict[str, Any]:
    inputs: dict[str, Any] = {"trajectories": upstream.hash, "labels": config.labels.model_dump()}
    if source == "evidence":
        ev = config.evidence
        inputs["evidence"] = {**ev.model_dump(), "digest": file_digest(ev.links or ev.groups)}  # type: ignore[arg-type]
    else:
        inputs["labeller"] = config.labeller.model_dump() if config.labeller else None
        if config.labeller is not None:  # its code, not only its name: a changed labeller relabels
            from causalcache_lab.learn.labeller_version import labeller_version

            inputs["labeller_version"] = labeller_version(config.labeller.factory)
    if source == "agreement":
        inputs["agreement"] = config.agreement.model_dump()
    return inputs


def labels_stage(
    config: LearnConfig, source: str, trajectories: list, archive: Any, folder: Path, progress: bool
) -> dict[str, Any]:
    from causalcache_lab.selector.labels import label_source, run_labelling

    scorer = labeller_for(config, source, trajectories)
    labels = config.labels
    if source == "agreement":
        labels = labels.model_copy(update={"target": "action_json"})
    from causalcache_lab.learn.evidence import EvidenceScorer

    chosen = scorer.trajectories(trajectories) if isinstance(scorer, EvidenceScorer) else trajectories
    start = time.perf_counter()
    try:
        counts = run_labelling(scorer, archive, chosen, folder / "labels.jsonl", labels, progress=progress)
    finally:
        close = getattr(scorer, "close", None)
        if callable(close):
            close()
    seconds = time.perf_counter() - start
    extra: dict[str, Any] = {}
    if source == "agreement":  # does the labeller reproduce the agent's own recorded actions?
        from causalcache_lab.learn.agreement_check import agreement_report

        extra = agreement_report(folder, config.agreement.k)
    return {
        **extra,
        **counts,
        "source": label_source(scorer),
        "trajectories": len(chosen),
        "prompts_per_state": round(counts["prompts"] / max(counts["written"], 1), 2),
        "samples": getattr(scorer, "samples", None),
        "seconds_per_state": round(seconds / max(counts["written"], 1), 4),
    }


def relabel_note(old: dict[str, Any] | None, inputs: dict[str, Any]) -> str | None:
    """Say so when the labels stage reruns because the labeller's version changed."""
    before = ((old or {}).get("inputs") or {}).get("labeller_version")
    now = inputs.get("labeller_version")
    if before is None or now is None or before == now:
        return None
    return (
        f"the labeller changed (version {before['version']} -> {now['version']}, from its "
        f"{now['from']}): relabelling"
    )
