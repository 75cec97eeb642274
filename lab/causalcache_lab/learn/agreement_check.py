"""Does the agreement labeller reproduce the recorded actions? A check on the labels it wrote.

Agreement labels score each allocation by the share of sampled actions equivalent to the recorded one
(:mod:`.agreement`). Under Recent-B, on a successful episode of the same agent, the labeller should mostly
reproduce what the agent did: the anchor ``Q_agree(Recent-B)`` of each state is high. A labeller that
rarely agrees with the recorded actions even there (another model, another coordinate convention, a
prompt that lost the screen size, issue 55) gives labels that are noise: every swap is measured against
a near-zero anchor. The labels stage therefore reports the mean anchor (``anchor_agreement``) and warns
below :data:`MIN_ANCHOR_AGREEMENT`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["MIN_ANCHOR_AGREEMENT", "agreement_report", "anchor_agreement", "anchor_warning"]

#: mean anchor agreement below which the labels stage warns
MIN_ANCHOR_AGREEMENT = 0.5


def anchor_agreement(labels_path: str | Path) -> float | None:
    """Mean ``Q_agree(Recent-B)`` over the records of an agreement labels file (None: no record)."""
    from causalcache_lab.selector.labels import read_labels

    _, records = read_labels(labels_path)
    anchors = [float(r["anchor"]) for r in records if r.get("anchor") is not None]
    return sum(anchors) / len(anchors) if anchors else None


def anchor_warning(share: float | None, k: int) -> str | None:
    """The warning for a mean anchor agreement below :data:`MIN_ANCHOR_AGREEMENT`, else None."""
    if share is None or share >= MIN_ANCHOR_AGREEMENT:
        return None
    return (
        f"the labeller reproduces the recorded action in only {share:.0%} of its {k} samples per state under "
        "Recent-B, on the agent's own successful episodes: its agreement labels are mostly noise. Check that "
        "the labeller is the agent's model with the agent's coordinate convention (ChatModelPolicy(model, "
        "coords=...)) and prompt (docs/LEARN.md, 'A black-box agent, end to end')"
    )


def agreement_report(folder: Path, k: int) -> dict[str, Any]:
    """``{"anchor_agreement", "warnings"}`` of a finished agreement labels folder."""
    share = anchor_agreement(folder / "labels.jsonl")
    warning = anchor_warning(share, k)
    return {
        "anchor_agreement": None if share is None else round(share, 4),
        "warnings": [warning] if warning else [],
    }
