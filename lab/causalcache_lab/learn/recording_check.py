"""Warn before labelling when a recording cannot teach the selector anything with the chosen target.

A Recent-B episode that succeeded never needed an older screen, so when every kept episode ran Recent-B
alone (no ``allocation.explore``, no selector deployed) and the labels score the *recorded* action
(``labels.reference: recorded``), almost no state can show a gain from restoring an older step: on 200
such episodes of heldout-02, 2 of 192 states did and the learned selector changed no outcome (RESULTS.md 9).
With ``labels.reference: full_history`` the same recording labels soundly (the labeller's own action with
the last steps in view is the target, failed episodes included): RESULTS.md 9h. ``learn`` says so once,
as a warning in its log and its summary; it does not refuse (evidence labels, or a team that knows its
recording, can still learn from it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

__all__ = ["recording_warning"]

logger = logging.getLogger("causalcache_lab.learn")

#: the sources whose labels score a target action (evidence labels do not)
_TARGET_SOURCES = ("teacher_forced", "agreement")


def recording_warning(trajectories: Sequence[Any], config: Any) -> str | None:
    """The warning (logged) when every kept trajectory ran Recent-B alone and the target is the recorded
    step of a target-scoring source; None otherwise. ``config`` is the :class:`~.config.LearnConfig`;
    a trajectory's ``metadata["allocators"]`` names the allocators its decisions used (recorded threads)."""
    if config.labels.reference != "recorded" or not any(s in config.sources for s in _TARGET_SOURCES):
        return None
    used = [set(t.metadata.get("allocators") or ()) for t in trajectories]
    if not used or not all(u == {"recent"} for u in used):
        return None
    message = (
        f"all {len(used)} kept episodes ran Recent-B alone and labels.reference is 'recorded': a Recent-B "
        "episode never needed an older screen, so its labels can hardly show a gain and learn will likely "
        "hand back the bundled selector. Set labels.reference: full_history (the labeller's own action "
        "with the last steps in view as the target; failed episodes are labelled too), or record with "
        "allocation.explore or the selector deployed (docs/LEARN.md, 'Record so that learning has signal')"
    )
    logger.warning("causalcache learn: %s", message)
    return message
