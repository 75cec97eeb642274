"""EpisodeStates: the per-episode state of the priced and mean-B wrappers, least recently used dropped."""

from __future__ import annotations

from causalcache_memory.allocation.base import EpisodeStates


def test_an_episode_keeps_its_state_and_the_least_recently_used_is_dropped() -> None:
    states: EpisodeStates[dict[str, int]] = EpisodeStates(dict, capacity=2)
    states.get("a")["t"] = 1
    states.get("b")["t"] = 2
    assert states.get("a") == {"t": 1}  # a is now the most recently used
    states.get("c")
    assert len(states) == 2
    assert states.get("a") == {"t": 1}
    assert states.get("b") == {}  # b was dropped: a fresh state
