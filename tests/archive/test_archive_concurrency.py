"""Concurrent writers (processes and threads) never corrupt, lose or leave partial blobs."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

from archive_workers import put_many, screenshot

from causalcache_memory.archive import LocalArchive


def _overlapping_batches(workers: int, per_worker: int) -> list[list[int]]:
    # worker w writes ids w*10 .. w*10+per_worker-1: neighbours share per_worker-10 ids
    return [list(range(w * 10, w * 10 + per_worker)) for w in range(workers)]


def _check(archive, batches: list[list[int]], results: list[dict[int, str]]) -> None:
    expected = {i for batch in batches for i in batch}
    merged: dict[int, str] = {}
    for result in results:
        for i, sha in result.items():
            assert merged.setdefault(i, sha) == sha  # every writer got the same address
    assert set(merged) == expected
    assert sorted(archive.iter_hashes()) == sorted(set(merged.values()))
    for i, sha in merged.items():
        assert archive.get_bytes(sha) == screenshot(i)


def test_concurrent_writers_from_processes(tmp_path):
    root = str(tmp_path / "archive")
    LocalArchive(root)
    batches = _overlapping_batches(workers=4, per_worker=20)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=4, mp_context=ctx) as pool:
        futures = [pool.submit(put_many, root, batch, f"ep-{w}") for w, batch in enumerate(batches)]
        results = [f.result(timeout=120) for f in futures]
    archive = LocalArchive(root)
    _check(archive, batches, results)
    assert os.listdir(archive.root / "tmp") == []
    assert archive.live_episodes() == ["ep-0", "ep-1", "ep-2", "ep-3"]
    assert archive.gc(grace_seconds=0).deleted == 0


def test_concurrent_writers_from_threads(make_archive):
    archive = make_archive()
    batches = _overlapping_batches(workers=8, per_worker=15)

    def work(batch: list[int]) -> dict[int, str]:
        return {i: archive.put(screenshot(i)).sha256 for i in batch}

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, batches))
    _check(archive, batches, results)
    if isinstance(archive, LocalArchive):
        assert os.listdir(archive.root / "tmp") == []
