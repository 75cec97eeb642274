"""Issue 27, finding 1 end to end: writers, a retainer, a releaser and ``gc`` in separate processes on a
loopback S3 server, with kill -9s (small size; ``s3_gc_campaign.py`` runs the long campaign). Before the
fix the collector's cached ``refs/`` listing deleted objects other processes had put and retained."""

from __future__ import annotations

import os
import sys

import pytest
from s3_gc_campaign import run_s3_gc_campaign

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

KILLS = int(os.environ.get("CAUSALCACHE_S3_GC_KILLS", "3"))


def test_gc_race_on_s3_loses_no_acknowledged_and_retained_object(s3, tmp_path):
    url = f"s3://{s3.bucket}/gc-race"
    figures = run_s3_gc_campaign(url, s3.env, tmp_path, kills=KILLS, grace=1.0)
    assert figures.kills >= KILLS and figures.acknowledged > 0 and figures.verified_at_end > 0
    assert figures.gc_runs > 0 and figures.released_episodes > 0
    assert (figures.lost, figures.torn_reads) == (0, 0), figures.problems[:5]
