"""``allocation.compare`` and ``causalcache compare`` (lab/learn/compare.py): two selectors on live episodes."""

from __future__ import annotations

import json
import logging

import pytest

from causalcache_lab.learn.compare import DEPLOYED_SELECTOR, compare_arms, compare_threads
from causalcache_memory.allocation.registry import COMPARED_SELECTOR, build_allocator
from causalcache_memory.config import parse_config
from causalcache_memory.errors import ConfigError


def outcomes(deployed: tuple[int, int], compared: tuple[int, int]) -> list[tuple[str, bool]]:
    """``(successes, episodes)`` per arm -> per-episode outcomes."""
    out = [(DEPLOYED_SELECTOR, i < deployed[0]) for i in range(deployed[1])]
    return out + [(COMPARED_SELECTOR, i < compared[0]) for i in range(compared[1])]


def test_a_deployed_selector_that_loses_is_called_worse_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="causalcache_lab.learn.compare"):
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


def triggered_outcomes(
    deployed: tuple[int, int], compared: tuple[int, int], untriggered: tuple[int, int]
) -> list[tuple[str, bool, bool]]:
    """Triggered ``(successes, episodes)`` per arm, and ``untriggered`` ``(successes, episodes)`` in each
    arm (the same in both, as the design makes them)."""
    out = [(DEPLOYED_SELECTOR, i < deployed[0], True) for i in range(deployed[1])]
    out += [(COMPARED_SELECTOR, i < compared[0], True) for i in range(compared[1])]
    for arm in (DEPLOYED_SELECTOR, COMPARED_SELECTOR):
        out += [(arm, i < untriggered[0], False) for i in range(untriggered[1])]
    return out


def test_the_triggered_episodes_show_a_loss_the_whole_arms_do_not():
    data = triggered_outcomes((12, 40), (24, 40), (60, 110))
    everything = compare_arms([o[:2] for o in data])
    assert everything.verdict == "not shown" and everything.analysis == "all episodes"
    assert everything.triggered is None
    result = compare_arms(data)
    assert result.analysis == "triggered" and result.verdict == "worse"
    assert (result.delta, result.ci) == (everything.delta, everything.ci)  # the all-episode figures stay
    trig = result.triggered
    assert trig.deployed.episodes == trig.compared.episodes == 40 and trig.share == pytest.approx(80 / 300)
    assert trig.delta == pytest.approx(-0.30) and trig.ci[1] < 0.0
    assert result.delta == pytest.approx(trig.share * trig.delta)  # Δ = ρ · Δ_T
    assert "where the two disagreed (triggered)" in result.message and "12/40" in result.message
    assert json.loads(json.dumps(result.to_dict()))["triggered"]["compared"]["rate"] == pytest.approx(0.6)


def test_the_needed_episodes_shrink_with_the_triggered_share():
    data = triggered_outcomes((20, 40), (20, 40), (60, 110))
    needed = lambda r: int(r.message.split("about ")[1].split()[0])  # noqa: E731
    trig, everything = compare_arms(data), compare_arms([o[:2] for o in data])
    assert trig.verdict == everything.verdict == "not shown"
    assert needed(trig) < needed(everything) / 2


def test_episodes_without_shadow_decisions_fall_back_to_all_episodes():
    data = [*triggered_outcomes((12, 40), (24, 40), (60, 110)), (DEPLOYED_SELECTOR, True, None)]
    result = compare_arms(data)
    assert result.analysis == "all episodes" and result.triggered is None and result.verdict == "not shown"
    assert "(1 of 301 episodes have no shadow decisions: judged on all episodes)" in result.message
    plain = compare_arms([o[:2] for o in data])
    assert "(no episode has shadow decisions: judged on all episodes)" in plain.message


def test_selectors_that_never_disagree_have_nothing_to_compare():
    data = triggered_outcomes((0, 0), (0, 0), (30, 50))
    result = compare_arms(data)
    assert result.verdict == "not shown" and "same sets at every step of all 100 episodes" in result.message
    assert compare_arms(triggered_outcomes((0, 0), (0, 0), (3, 5))).verdict == "too few"
    few = compare_arms(triggered_outcomes((1, 10), (9, 10), (30, 50)))
    assert few.verdict == "too few" and few.triggered.ci[1] < 0.0


def _strict(text: str) -> dict:
    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_figures_that_do_not_exist_are_null_in_json_never_nan():
    # no triggered episode: the triggered arms' rates, delta and interval do not exist
    data = _strict(json.dumps(compare_arms(triggered_outcomes((0, 0), (0, 0), (30, 50))).to_dict()))
    trig = data["triggered"]
    assert trig["deployed"]["rate"] is None and trig["delta"] is None and trig["ci"] == [None, None]
    assert data["deployed"]["rate"] == pytest.approx(0.6) and trig["share"] == 0.0
    empty = _strict(json.dumps(compare_arms(outcomes((0, 0), (3, 5))).to_dict()))
    assert empty["deployed"]["rate"] is None and empty["compared"]["rate"] == pytest.approx(0.6)


def test_shadow_disagreement_is_read_from_the_records_in_step_order():
    from causalcache_lab.learn.threads import shadow_disagrees

    rec = lambda t, sel, shadow: {"t": t, "allocator": "selector", "selected": sel, "shadow_selected": shadow}  # noqa: E731
    assert shadow_disagrees([rec(2, [1], [1]), rec(3, [1, 2], [2, 1])]) is False  # order within a set ignored
    assert shadow_disagrees([rec(3, [2], [1]), rec(2, [1], None)]) is None  # t = 2 first: unknown
    assert shadow_disagrees([rec(3, [2], None), rec(2, [1], [0])]) is True  # decided before the gap
    assert shadow_disagrees([{"t": 2, "allocator": "selector", "selected": [1]}]) is None  # no shadow
    assert shadow_disagrees([{"t": 1, "selected": []}]) is False  # no decision at all


def test_each_of_several_looks_uses_a_wider_interval():
    data = outcomes((45, 100), (60, 100))
    once, ten = compare_arms(data), compare_arms(data, looks=10)
    assert once.confidence == pytest.approx(0.95) and ten.confidence == pytest.approx(0.995)
    assert ten.ci[0] < once.ci[0] and ten.ci[1] > once.ci[1] and ten.looks == 10
    assert "(99.5%)" in ten.message and "(95%)" in once.message
    loser = outcomes((30, 100), (45, 100))
    assert compare_arms(loser).verdict == "worse" and compare_arms(loser, looks=20).verdict == "not shown"
    for bad in (0, 1.5, True):
        with pytest.raises(ConfigError, match=rf"looks={bad!r} must be a whole number >= 1"):
            compare_arms(data, looks=bad)


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
    from causalcache_lab.learn.threads import threads_to_trajectories
    from causalcache_memory.allocation.explore import explores
    from causalcache_memory.cli.main import main

    config = parse_config({"allocation": {"compare": {"share": 0.5, "seed": 3}}})
    allocation = build_allocator(config.allocation)
    assert allocation.base.name == DEPLOYED_SELECTOR and allocation.explorer.name == COMPARED_SELECTOR
    recorded = thread_recorder(tmp_path, 8, allocation=allocation)
    labels = dict(recorded.outcomes)
    result = compare_threads(str(recorded.checkpointer), str(recorded.archive), labels)
    trajs, _ = threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    assert all(t.metadata["shadow_disagrees"] is False for t in trajs)  # one bundled selector, twice
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
    assert main([*args, "--success", str(path), "--looks", "3"]) == 0
    assert "(98.3%)" in capsys.readouterr().out
    assert main([*args, "--success", str(path), "--json"]) == 0  # never disagreeing: no triggered figures
    printed = capsys.readouterr().out
    assert _strict(printed[printed.index("{") :])["triggered"]["delta"] is None
    with pytest.raises(ConfigError, match="not 'all'"):
        compare_threads(str(recorded.checkpointer), str(recorded.archive), "all")
    # errors name the command's own option, not learn's setting, and do not offer 'all'
    missing = str(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match=r"^--success='.*nope\.json' cannot be read .*success$"):
        compare_threads(str(recorded.checkpointer), str(recorded.archive), missing)
    with pytest.raises(ConfigError, match=r"^--success names 1 thread\(s\) the checkpointer does not hold"):
        compare_threads(str(recorded.checkpointer), str(recorded.archive), {**labels, "ghost": True})
    bad = tmp_path / "bad.csv"
    bad.write_text("thread,ok\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^--success: .*bad\.csv needs the header 'thread_id,success'"):
        compare_threads(str(recorded.checkpointer), str(recorded.archive), str(bad))


def test_recorded_threads_with_shadow_decisions_are_judged_on_the_triggered_episodes(
    thread_recorder, tmp_path
):
    from causalcache_lab.learn.threads import threads_to_trajectories
    from causalcache_memory.allocation import RandomAllocator, RecentAllocator
    from causalcache_memory.allocation.explore import ExploringAllocator

    # two allocators that disagree on some steps, under the names allocation.compare gives its arms
    deployed, compared = RecentAllocator(), RandomAllocator(seed=4)
    deployed.name, compared.name = DEPLOYED_SELECTOR, COMPARED_SELECTOR  # type: ignore[misc]
    allocation = ExploringAllocator(deployed, compared, share=0.5, seed=3, shadow=True)
    recorded = thread_recorder(tmp_path, 8, allocation=allocation)
    trajs, _ = threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    flags = {t.trajectory_id: t.metadata["shadow_disagrees"] for t in trajs}  # every thread has one
    assert set(flags.values()) <= {True, False} and any(flags.values())
    result = compare_threads(str(recorded.checkpointer), str(recorded.archive), dict(recorded.outcomes))
    assert result.analysis == "triggered"
    trig = result.triggered
    assert trig.deployed.episodes + trig.compared.episodes == sum(flags.values())
    assert trig.share == pytest.approx(sum(flags.values()) / 8)
