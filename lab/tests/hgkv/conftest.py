"""The lab's HGKV test fixtures: the library's (tiny model, policy loader) plus the synthetic recall
groups and their scorer."""

from __future__ import annotations

import pytest
from lab_fixtures import library_fixtures
from memory_archive import DictArchive

pytest.importorskip("torch")
pytest.importorskip("transformers")

globals().update(library_fixtures("hgkv"))


@pytest.fixture(scope="session")
def recall_data():
    """40 colour-recall trajectories, their archive and mined groups."""
    from causalcache_lab.hgkv.groups import mine_groups
    from causalcache_lab.hgkv.synthetic import colour_recall_trajectories, same_click

    archive = DictArchive()
    trajs = colour_recall_trajectories(archive, 40, seed=0)
    groups, report = mine_groups(trajs, equivalent=same_click)
    return {"archive": archive, "trajectories": trajs, "groups": groups, "report": report}


@pytest.fixture
def make_scorer(recall_data):
    from causalcache_lab.hgkv.synthetic import short_summary
    from causalcache_lab.hgkv.train import GroupScorer
    from causalcache_memory.render.prompt import RenderOptions

    def make(policy):
        return GroupScorer(
            policy,
            {t.trajectory_id: t for t in recall_data["trajectories"]},
            recall_data["archive"],
            options=RenderOptions(system_prompt="GUI agent."),
            summarizer=short_summary,
        )

    return make
