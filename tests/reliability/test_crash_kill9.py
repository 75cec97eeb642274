"""kill -9 crash tests: the local archive, an fsspec archive (``local://``, rename path) and the trace store.

Each campaign kills writer processes with SIGKILL at random moments while a collector runs and a reader
reads back what was acknowledged (``crash_campaign.py``). Set ``CAUSALCACHE_RELIABILITY_KILLS`` for longer
campaigns and ``CAUSALCACHE_RELIABILITY_REPORT=path.json`` to record the figures.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict

import pytest
from crash_campaign import run_archive_campaign, run_trace_campaign

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

KILLS = int(os.environ.get("CAUSALCACHE_RELIABILITY_KILLS", "8"))


def _record(figures) -> None:
    path = os.environ.get("CAUSALCACHE_RELIABILITY_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(figures)) + "\n")


@pytest.mark.parametrize("backend", ["local", "local-fsspec"])
def test_archive_survives_kill9_writers_and_concurrent_gc(tmp_path, backend):
    target = str(tmp_path / "archive") if backend == "local" else f"local://{tmp_path}/archive"
    figures = run_archive_campaign(target, tmp_path, kills=KILLS)
    _record(figures)
    assert figures.kills >= KILLS and figures.acknowledged > 0 and figures.verified_at_end > 0
    assert (figures.lost, figures.torn_reads) == (0, 0), figures.problems[:5]
    assert figures.temp_files_left == 0 and not figures.problems


def test_trace_store_survives_kill9_committers(tmp_path):
    figures = run_trace_campaign(str(tmp_path / "archive"), tmp_path, kills=KILLS)
    _record(figures)
    assert figures.kills >= KILLS and figures.acknowledged > KILLS
    assert (figures.lost, figures.torn_reads) == (0, 0), figures.problems[:5]
