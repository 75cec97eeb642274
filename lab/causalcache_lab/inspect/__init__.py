"""``causalcache inspect``: what the configured memory would do on a team's own data (issue 51 item 1).

:func:`inspect_dataset` replays every trajectory of an imported dataset (``causalcache data import``; recorded
threads through ``data import causalcache``) through the configured controller and returns an
:class:`InspectReport`; :mod:`~causalcache_lab.inspect.render` prints it as tables and writes one HTML page.
"""

from __future__ import annotations

from causalcache_lab.inspect.replay import (
    DecisionRow,
    InspectReport,
    TrajectoryReport,
    inspect_dataset,
    replay_trajectory,
)

__all__ = ["DecisionRow", "InspectReport", "TrajectoryReport", "inspect_dataset", "replay_trajectory"]
