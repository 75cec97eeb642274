"""Recipe ``data.factory`` of the fleet-labelling CLI test: expert demonstrations of the synthetic world."""

from __future__ import annotations


def demos(archive: str, tasks: int = 3, seed: int = 3) -> list:
    from causalcache_lab.world.expert import generate_demonstrations
    from causalcache_lab.world.tasks import generate_tasks
    from causalcache_memory.archive import LocalArchive

    return generate_demonstrations(generate_tasks(tasks, seed=seed), LocalArchive(archive))
