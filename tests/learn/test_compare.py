"""``allocation.compare`` and ``causalcache compare`` (lab/learn/compare.py): two selectors on live episodes."""

from __future__ import annotations

import json
import logging

import pytest

from causalcache_memory.allocation.registry import COMPARED_SELECTOR, build_allocator
from causalcache_memory.config import parse_config
from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.learn.compare import DEPLOYED_SELECTOR, compare_arms, compare_threads


def outcomes(deployed: tuple[int, int], compared: tuple[int, int]) -> list[tuple[str, bool]]:
    """``(successes, episodes)`` per arm -> per-episode outcomes."""
    out = [(DEPLOYED_SELECTOR, i < deployed[0]) for i in range(deployed[1])]
    return out + [(COMPARED_SELECTOR, i < compared[0]) for i in range(compared[1])]


def test_a_deployed_selector_that_loses_is_called_worse_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="causalcache_memory.lab.learn.compare"):
        result = compare_arms(outcomes((30, 100), (60, 100)))
    assert result.verdict == "worse" and result.delta == pytest.approx(-0.30)
    assert result.ci[0] < -0.30 < result.ci[1] < 0.0
    assert "WORSE" in result.message and "30/100" in result.message and "60/100" in result.message
    assert any(r.levelno == logging.WARNING and "switch back" in r.getMessage() for r in caplog.records)


def test_better_not_shown_and_too_few():
    assert compare_arms(outcomes((70, 100), (40, 100))).verdict == "better"
    even = compare_arms(outcomes((50, 100), (50, 100)))
    assert even.verdict == "not shown" and even.ci[0] < 0.0 < even.ci[1]
    needed = int(even.message.split("about ")[1].split()[0])
    assert needed > 100  # ±0.05 needs more than the 100 per arm that give about ±0.14
    few = compare_arms(outcomes((1, 10), (9, 10)))
    assert few.verdict == "too few" and few.ci[1] < 0.0  # the interval is reported all the same
    empty = compare_arms(outcomes((5, 30), (0, 0)))
    assert empty.verdict == "too few" and "allocation.compare" in empty.message


def test_other_allocators_are_left_out_and_counted():
    result = compare_arms([*outcomes((10, 30), (12, 30)), ("recent", True), ("random", False)])
    assert result.deployed.episodes == result.compared.episodes == 30
    assert result.left_out == {"allocator recent": 1, "allocator random": 1}
    assert json.loads(json.dumps(result.to_dict()))["compared"]["rate"] == pytest.approx(0.4)


def test_the_interval_is_seeded_and_its_level_checked():
    data = outcomes((40, 80), (30, 80))
    assert compare_arms(data, seed=3).ci == compare_arms(data, seed=3).ci
    assert compare_arms(data, confidence=0.99).ci[0] < compare_arms(data, confidence=0.8).ci[0]
    with pytest.raises(ConfigError, match=r"confidence=1\.5 must be in \(0, 1\)"):
        compare_arms(data, confidence=1.5)
    with pytest.raises(ConfigError, match=r"min_episodes=0 must be >= 1"):
        compare_arms(data, min_episodes=0)
    with pytest.raises(ConfigError, match=r"resamples=10 >= 100"):
        compare_arms(data, resamples=10)


def test_compare_needs_the_selector_and_not_explore():
    with pytest.raises(ConfigError, match=r"allocation\.compare compares two learned selectors.*'recent'"):
        parse_config({"allocation": {"allocator": "recent", "compare": {"share": 0.5}}})
    with pytest.raises(ConfigError, match=r"compare and allocation\.explore both"):
        parse_config({"allocation": {"compare": {"share": 0.5}, "explore": {"share": 0.2}}})
    with pytest.raises(ConfigError, match="share"):
        parse_config({"allocation": {"compare": {"share": 1.0}}})


# these recorded screens carry no text: the memory's missing-text warning is right and not under test here
@pytest.mark.filterwarnings("ignore:screen text was missing")
def test_recorded_threads_split_by_the_selector_each_episode_ran(thread_recorder, tmp_path, capsys):
    from causalcache_memory.allocation.explore import explores
    from causalcache_memory.cli.main import main
    from causalcache_memory.lab.learn.threads import threads_to_trajectories

    config = parse_config({"allocation": {"compare": {"share": 0.5, "seed": 3}}})
    allocation = build_allocator(config.allocation)
    assert allocation.base.name == DEPLOYED_SELECTOR and allocation.explorer.name == COMPARED_SELECTOR
    recorded = thread_recorder(tmp_path, 8, allocation=allocation)
    labels = dict(recorded.outcomes)
    result = compare_threads(str(recorded.checkpointer), str(recorded.archive), labels)
    trajs, _ = threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    compared = [t.trajectory_id for t in trajs if explores(t.metadata["episode_id"], share=0.5, seed=3)]
    assert 0 < len(compared) < 8  # both arms ran
    assert result.compared.episodes == len(compared) and result.deployed.episodes == 8 - len(compared)
    assert result.compared.successes == sum(labels[t] for t in compared)
    assert result.verdict == "too few"  # eight episodes do not judge anything
    path = tmp_path / "success.json"
    path.write_text(json.dumps(labels))
    args = ["compare", "--threads", str(recorded.checkpointer), "--archive", str(recorded.archive)]
    assert main([*args, "--success", str(path), "--fail-if-worse"]) == 0
    assert "too few episodes" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="not 'all'"):
        compare_threads(str(recorded.checkpointer), str(recorded.archive), "all")
