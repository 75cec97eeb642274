"""Training the selector across worlds: each world's labelling policy, and the world's OCR as screen text."""

from __future__ import annotations

import pytest

from causalcache_lab.world.env import GuiWorld
from causalcache_lab.world.family_tasks import generate_world_tasks
from causalcache_lab.world.vocab import encode
from causalcache_memory.errors import ConfigError


def test_world_screen_text_is_the_worlds_screen_text(tmp_path):
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_memory.archive import open_archive

    archive = open_archive(str(tmp_path / "a"))
    source = WorldScreenText(archive)
    for world_id in ("heldout-00", "train-01"):
        task = generate_world_tasks(1, 3, worlds=world_id)[0]
        world = GuiWorld(task, slips=False)
        png, _ = world.step(encode(world.spec.vocab, "open_app", task.steps[0].app))
        sha = archive.put(png).sha256
        assert source.get_text(sha) == "\n".join(e["text"] for e in world.screen_text())
        assert [t for t, _ in source.get_lines(sha)] == [e["text"] for e in world.screen_text()]
    assert source.get_text("0" * 64) is None  # unknown blob: no text, no error


def test_trajectories_of_mixed_vocabularies_are_labelled_by_their_own_worlds_policy(tmp_path):
    from causalcache_lab.selector.labels import LabelConfig, policy_of, read_labels, run_labelling
    from causalcache_lab.selector.recipe import world_setup
    from causalcache_lab.world.family import world_spec

    worlds = "train-00,train-02"
    assert world_spec("train-00").vocab != world_spec("train-02").vocab  # the premise of the test
    setup = world_setup(tasks=4, archive=str(tmp_path / "a"), worlds=worlds)
    trajs = setup["trajectories"]
    for traj in trajs:
        assert policy_of(setup["policy"], traj).vocab == world_spec(traj.metadata["world"]).vocab
    with pytest.raises(ConfigError, match="for_trajectory"):
        setup["policy"].score([], [])  # never scores a prompt without knowing its world
    out = tmp_path / "labels.jsonl"
    config = LabelConfig(budgets=(2,), path_length=1, max_states_per_trajectory=2)
    counts = run_labelling(setup["policy"], setup["archive"], trajs, out, config, progress=False)
    header, records = read_labels(out)
    assert counts["written"] == len(records) > 0 and header["labeller"] == setup["policy"].name
    assert {r["trajectory_id"] for r in records} <= {t.trajectory_id for t in trajs}
