"""The dev-world check of the recency rates (docs/WORLD.md, "How the rates were set").

Runs the single-process loop ``run_episode`` under summary-only, Recent-4, Random exact-4, First-4,
evenly spaced and the evidence oracle on tasks of the given worlds, with each world's simulated policy,
and prints success and the task-paired difference to Recent-4 (with tasks helped / harmed) per split.
Tasks are drawn with ``purpose="calibrate"``: held-out worlds are refused.

    python lab/tools/world_recency_check.py dev 60 0,1

``positions`` prints, for candidate ``before_read`` values on the development worlds, where the evidence of
memory-critical tasks sits (First-4 / Recent-4 / uniform shares, the position rule of
``lab/world/positions.py``, and the histogram of evidence events) -- how the family's ``before_read``
draw was chosen (docs/WORLD.md, "Where the evidence sits"). No closed-loop run, a second or two:

    python lab/tools/world_recency_check.py positions
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict

from causalcache_lab.world.calibration import EvidenceOracleAllocator, run_episode
from causalcache_lab.world.family import KNOB_VALUES, policy_for_world
from causalcache_lab.world.family_tasks import generate_world_tasks, world_of
from causalcache_lab.world.positions import before_read_positions, meets_position_rule
from causalcache_memory.allocation.positional import EvenlySpacedAllocator, FirstBAllocator
from causalcache_memory.allocation.simple import RandomAllocator, RecentAllocator, SummaryOnlyAllocator
from causalcache_memory.archive.local import LocalArchive

ARMS = {
    "summary_only": SummaryOnlyAllocator,
    "recent": RecentAllocator,
    "random": RandomAllocator,
    "first": FirstBAllocator,
    "evenly_spaced": EvenlySpacedAllocator,
    "oracle": EvidenceOracleAllocator,
}


def main(worlds: str, n: int, seeds: list[int]) -> None:
    tasks = generate_world_tasks(n, 7, worlds=worlds, purpose="calibrate")
    archive = LocalArchive(tempfile.mkdtemp())
    runs: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    start = time.perf_counter()
    for seed in seeds:
        policies: dict[str, object] = {}
        for task in tasks:
            world = world_of(task)
            policy = policies.setdefault(world, policy_for_world(world, seed))
            for arm, make in ARMS.items():
                result = run_episode(task, make(), policy, archive, budget=0 if arm == "summary_only" else 4)
                runs[arm][task.task_id].append(result.success)
    split = {t.task_id: t.split for t in tasks}
    print(f"{len(tasks)} tasks x {len(seeds)} seeds in {time.perf_counter() - start:.0f} s")
    base = {t: sum(v) / len(v) for t, v in runs["recent"].items()}
    for arm in ARMS:
        scores = {t: sum(v) / len(v) for t, v in runs[arm].items()}
        for name in ("memory_critical", "control"):
            ids = [t for t in scores if split[t] == name]
            mean = sum(scores[t] for t in ids) / len(ids)
            delta = sum(scores[t] - base[t] for t in ids) / len(ids)
            helped = sum(scores[t] > base[t] for t in ids)
            harmed = sum(scores[t] < base[t] for t in ids)
            print(f"{arm:13s} {name:16s} {mean:.2f} Δ={delta:+.2f} helped={helped} harmed={harmed}")


#: the before_read values examined (v2's 0-k ranges, and longer ones); the rule keeps every value that meets it
CANDIDATES = ((0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (1, 3), (1, 4), (1, 5), (1, 6), (2, 4), (2, 6))


def positions() -> None:
    shipped = set(KNOB_VALUES["before_read"]["dev"])
    print("before_read  first-4  recent-4  uniform  need  rule  shipped  evidence event histogram (1..12+)")
    for value in CANDIDATES:
        p = before_read_positions(value)
        hist = [p.histogram.get(e, 0) for e in range(1, 12)] + [
            sum(c for e, c in p.histogram.items() if e >= 12)
        ]
        print(
            f"{value!s:11s}  {p.first_share:7.2f}  {p.recent_share:8.2f}  {p.uniform_share:7.2f}  "
            f"{p.mean_need:4.1f}  {'meets' if meets_position_rule(p) else 'fails':5s}  "
            f"{'yes' if value in shipped else '':7s}  {hist}"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["positions"]:
        positions()
    else:
        main(sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")])
