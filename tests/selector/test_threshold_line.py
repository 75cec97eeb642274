"""The threshold INFO line leads with the value the memory's B uses (issue 51 item 4)."""

from __future__ import annotations

import logging

from causalcache_memory.allocation.simple import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.selector.threshold import Thresholds

SOURCE = "auto: pass-2 share 0.15 -> min_gain 0.0430 pooled"


def test_describe_leads_with_the_budgets_own_threshold() -> None:
    t = Thresholds(0.043, {1: 0.0426, 4: 0.4212}, SOURCE)
    assert t.describe(4).startswith("selector swap threshold 0.4212 at B=4 (B=4's own dev frontier)")
    assert t.describe(8).startswith("selector swap threshold 0.0430 at B=8 (pooled")
    assert t.describe().startswith(
        "selector swap thresholds B=1: 0.0426, B=4: 0.4212; 0.0430 at other budgets"
    )
    assert "replaces it after" in t.describe(4, deployment=True) and SOURCE in t.describe(4)


class _WithThresholds(RecentAllocator):
    thresholds = Thresholds(0.043, {4: 0.4212}, SOURCE)
    deployment = None


def test_the_controller_logs_the_value_at_its_budget(tmp_path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="causalcache_memory.controller"):
        MemoryController(archive=LocalArchive(str(tmp_path)), allocator=_WithThresholds(), budget=4)
        MemoryController(archive=LocalArchive(str(tmp_path)), allocator=RecentAllocator(), budget=4)
    lines = [r.getMessage() for r in caplog.records if "swap threshold" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("selector swap threshold 0.4212 at B=4")
