"""Say so when cross-fitting showed that fine-tuning on the team's recordings would make the selector worse.

With a fixed fine-tuning length (``train.cross_fit_epochs``, :mod:`~causalcache_lab.selector.cross_fit`)
the base ships unchanged when the out-of-fold budgeted gain of the fine-tune has its whole 95% interval
below 0. That is not a failure of ``learn`` (the deployed selector is the base, as safe as before) but it is
news a team should hear: the recordings teach the base something that does not carry to their other
trajectories. On three of four held-out worlds (RESULTS.md 9i) the fine-tune swapped the base's most valuable
fired swaps for ones worth nothing.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["harm_warning"]

logger = logging.getLogger("causalcache_lab.learn")


def harm_warning(meta: dict[str, Any]) -> str | None:
    """The warning for a model's ``metadata.json`` whose cross-fitted fine-tune was shown harmful, else None
    (logged as a warning too)."""
    gate = (meta.get("init_from") or {}).get("gate") or {}
    if not gate.get("harmful"):
        return None
    lo, hi = gate["ci"]
    message = (
        f"fine-tuning the base on these recordings for {gate['epoch']} epochs was shown worse than the base "
        f"out of fold (budgeted gain {gate['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}], {gate.get('confidence', 0.95):.0%}, "
        "by trajectory): the base ships unchanged. Keep deploying it; more or more varied recordings may "
        "change this (docs/LEARN.md, 'When fine-tuning is shown harmful')"
    )
    logger.warning("causalcache learn: %s", message)
    return message
