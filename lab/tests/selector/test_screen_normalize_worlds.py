"""The screen-text normaliser leaves the synthetic worlds' text as it is, so the bundled selector (trained
on it) reads the same features with the normaliser on (the library's format tests:
tests/selector/test_screen_normalize.py)."""

from __future__ import annotations

import numpy as np
import pytest

from causalcache_memory.selector.screen_normalize import normalize_line, normalize_screen_text
from causalcache_memory.selector.screen_text import ScreenTextCache


@pytest.fixture(scope="module")
def world_screens():
    """Every screen of expert runs on training and development worlds (and v2): text and relative boxes."""
    from causalcache_lab.world.env import GuiWorld
    from causalcache_lab.world.expert import expert_action
    from causalcache_lab.world.family_tasks import generate_world_tasks

    screens = []
    for worlds in ("train", "dev"):
        for task in generate_world_tasks(24, seed=5, worlds=worlds, purpose="train"):
            world = GuiWorld(task, slips=False)
            screens.append(world.screen_text())
            for step in task.steps:
                world.step(expert_action(world, step, task.value, task.target.get("contact")))
                screens.append(world.screen_text())
    return screens


def test_the_identity_on_every_world_screen(world_screens) -> None:
    assert len(world_screens) > 150
    for lines in world_screens:
        text = "\n".join(line["text"] for line in lines)
        assert normalize_screen_text(text) == text
        assert all(normalize_line(line["text"]) == line["text"] for line in lines)


def test_the_bundle_reads_the_same_features_on_world_trajectories(tmp_path) -> None:
    """Feature matrices of every decision of world demonstrations, text read as is vs normalised: equal."""
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_lab.world.expert import generate_demonstrations
    from causalcache_lab.world.family_tasks import generate_world_tasks
    from causalcache_memory.archive import open_archive
    from causalcache_memory.selector.features import FeatureExtractor
    from causalcache_memory.selector.schema import TEXT_FEATURES, feature_index

    archive = open_archive(str(tmp_path / "a"))
    tasks = generate_world_tasks(6, seed=11, worlds="dev", purpose="train")
    trajectories = generate_demonstrations(tasks, archive)
    source = WorldScreenText(archive)
    before = FeatureExtractor(screen_text=ScreenTextCache(source, normalize=False))
    after = FeatureExtractor(screen_text=ScreenTextCache(source))
    text_cols = [feature_index(n) for n in TEXT_FEATURES]
    compared = 0
    for traj in trajectories:
        for t in range(2, len(traj.steps) + 1):
            trace = traj.trace_at(t)
            for witness in (None, traj.steps[t - 1].action):
                a, b = before(trace, 4, witness), after(trace, 4, witness)
                np.testing.assert_array_equal(a, b)
                compared += 1
                assert a[:, text_cols].any()  # the text columns are read, not all masked
    assert compared > 40
