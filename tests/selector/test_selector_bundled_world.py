"""Done-when of the selector issue on the real synthetic world with the *bundled* scorer.

Fresh tasks (a seed the scorer never saw, mobile = zero-shot for a desktop-trained scorer), the
simulated policy as labeller, every chosen set fully re-scored: the learned rule beats Random and RGB,
its interval excludes zero, and the inverted score is worse than Recent-B (interval below zero). The
stricter "intervals separate" criterion needs more held-out states than a unit test affords; it is
checked on 45 held-out trajectories in RESULTS.md (section 3).
"""

from __future__ import annotations

from causalcache_memory.archive import ThumbnailCache
from causalcache_memory.lab.selector.ladder import LadderConfig, run_ladder
from causalcache_memory.lab.selector.recipe import world_setup
from causalcache_memory.selector.allocator import bundled_model_path
from causalcache_memory.selector.onnx_scorer import OnnxSelector


def test_bundled_scorer_ladder_on_unseen_world_tasks(tmp_path) -> None:
    setup = world_setup(tasks=40, seed=4242, archive=str(tmp_path / "archive"), platform="mobile")
    learned = OnnxSelector(bundled_model_path())
    config = LadderConfig(rules=("learned", "random", "rgb", "inverted"), budgets=(2, 4), bootstrap=1000)
    result = run_ladder(
        setup["policy"],
        setup["archive"],
        setup["trajectories"],
        learned=learned,
        thumbnails=ThumbnailCache(setup["archive"], 32),
        config=config,
    )["results"]
    for b in ("2", "4"):
        learned = result["learned"][b]
        assert learned["ci95"][0] > 0.0, (b, learned)
        assert learned["margin"] > result["random"][b]["margin"] + 0.05, (b, result)
        assert learned["margin"] > result["rgb"][b]["margin"] + 0.05, (b, result)
        assert result["inverted"][b]["ci95"][1] < 0.0, (b, result)
