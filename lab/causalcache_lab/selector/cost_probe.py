"""CPU cost of the selector's image features: one thumbnail decode per screenshot, and one decision.

``python -m causalcache_lab.selector.cost_probe MODEL [MODEL ...]`` prints (CPU time, so a loaded
machine does not inflate it):

* the median CPU milliseconds of ``ThumbnailCache.get`` on 40 distinct 1920x1080 benchmark PNGs (the
  decode a model with thumbnail features pays once per archived screenshot);
* for each model, the median CPU milliseconds of one ``SelectorAllocator.allocate`` at B = 4 on the
  world's eval-template traces (a growing history, thumbnails decoded once and cached).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

__all__ = ["decision_cpu_ms", "main", "thumbnail_cpu_ms"]


def thumbnail_cpu_ms(n: int = 40) -> float:
    from causalcache_lab.bench.screens import screenshot_pool, unique_variant
    from causalcache_memory.archive import LocalArchive, ThumbnailCache

    archive = LocalArchive(tempfile.mkdtemp(prefix="causalcache-cost-"))
    pool = screenshot_pool(4, (1920, 1080))
    shas = [archive.put(unique_variant(pool[i % 4], i)).sha256 for i in range(n)]
    cache = ThumbnailCache(archive, size=32)
    cpu = []
    for sha in shas:
        start = time.process_time()
        cache.get(sha)
        cpu.append((time.process_time() - start) * 1000.0)
    return statistics.median(cpu)


def decision_cpu_ms(model: str | None, *, tasks: int = 12, seed: int = 77, budget: int = 4) -> float:
    from causalcache_lab.world import generate_demonstrations, generate_tasks
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.selector.allocator import SelectorAllocator

    archive = LocalArchive(tempfile.mkdtemp(prefix="causalcache-cost-"))
    trajs = generate_demonstrations(generate_tasks(tasks, seed, platform="mobile", templates="eval"), archive)
    selector = SelectorAllocator(model)
    cpu = []
    for traj in trajs:
        for t in range(budget + 2, len(traj) + 1):
            ctx = AllocationContext(traj.trace_at(t), budget, archive, witness=traj.steps[t - 1].action)
            start = time.process_time()
            selector.allocate(ctx)
            cpu.append((time.process_time() - start) * 1000.0)
    selector.close()
    return statistics.median(cpu)


def main(argv: Sequence[str] | None = None) -> int:
    models = list(sys.argv[1:] if argv is None else argv) or [None]
    print(f"thumbnail of a 1920x1080 PNG: {thumbnail_cpu_ms():.1f} CPU ms (median of 40)")
    for model in models:
        print(f"decision, B=4, model {model or 'bundled'}: {decision_cpu_ms(model):.1f} CPU ms (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
