"""Labeller factories the learn tests name in their configs (import paths), with call counters."""

from __future__ import annotations

CALLS = {"labeller": 0}


def world_labeller(world: str = "train-00", seed: int = 0):  # type: ignore[no-untyped-def]
    from causalcache_lab.world.family import policy_for_world

    CALLS["labeller"] += 1
    return policy_for_world(world, seed)


def world_policies(world: str = "train-00", seeds: tuple[int, ...] = (0, 1, 2)):  # type: ignore[no-untyped-def]
    from causalcache_lab.world.family import policy_for_world

    CALLS["labeller"] += 1
    return [policy_for_world(world, s) for s in seeds]


def no_text_source(archive):  # type: ignore[no-untyped-def]
    """A screen_text factory that returns something without ``get_text`` (for the refusal test)."""
    return object()


def text_source_without_archive():  # type: ignore[no-untyped-def]
    """A screen_text factory that takes no ``archive`` keyword (for the refusal test)."""
    return object()
