"""Exploration while recording: a stable share of episodes runs the exploring allocator, named in each record."""

from __future__ import annotations

import hashlib

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.allocation import AllocationContext, RandomAllocator, RecentAllocator
from causalcache_memory.allocation.explore import ExploringAllocator, explores
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.config import parse_config
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import AllocationError, ConfigError
from causalcache_memory.policy import Generation


def _sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def _trace(n: int, episode: str) -> Trace:
    trace = Trace("goal", episode_id=episode)
    trace.observe(_sha(f"{episode}-0"))
    for i in range(n):
        trace.record(Action("click", x=0.5, y=0.5), "r", _sha(f"{episode}-{i + 1}"))
    return trace


@pytest.mark.parametrize("share", [0.1, 0.3, 0.6])
def test_share_of_episodes_that_explore_matches_the_setting(share: float) -> None:
    episodes = [f"thread-{i}" for i in range(4000)]
    rate = sum(explores(e, share=share, seed=0) for e in episodes) / len(episodes)
    assert abs(rate - share) < 0.03  # binomial sd at n = 4000 is <= 0.008
    other_seed = {e for e in episodes if explores(e, share=share, seed=1)}
    assert other_seed != {e for e in episodes if explores(e, share=share, seed=0)}


def test_share_one_explores_every_episode() -> None:
    assert all(explores(f"e{i}", share=1.0) for i in range(200))


def test_every_decision_of_an_episode_uses_the_same_allocator() -> None:
    allocator = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=5), share=0.5, seed=2)
    names = {}
    for i in range(40):
        episode = f"ep-{i}"
        used = {allocator.allocate(AllocationContext(_trace(n, episode), 4)).allocator for n in range(6, 16)}
        assert len(used) == 1, (episode, used)
        names[episode] = used.pop()
        assert names[episode] == ("random" if explores(episode, share=0.5, seed=2) else "recent")
    assert set(names.values()) == {"random", "recent"}


def test_explored_episodes_show_older_screens() -> None:
    allocator = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=0), share=1.0)
    sets = [allocator.allocate(AllocationContext(_trace(20, f"ep-{i}"), 4)) for i in range(20)]
    assert any(not a.is_recent for a in sets)
    assert all(len(a.selected) == 4 for a in sets)


@pytest.mark.parametrize("share", [0, 0.0, -0.1, 1.5, True, "0.3"])
def test_bad_share_is_refused_naming_the_field(share: object) -> None:
    with pytest.raises(AllocationError, match=r"allocation\.explore\.share"):
        ExploringAllocator(RecentAllocator(), RandomAllocator(), share=share)  # type: ignore[arg-type]


def test_config_builds_the_exploring_allocator() -> None:
    config = parse_config(
        {
            "allocation": {"allocator": "recent", "explore": {"share": 0.3, "seed": 9}},
            "policy": {"kind": "simulated"},
        }
    )
    allocator = build_allocator(config.allocation)
    assert isinstance(allocator, ExploringAllocator)
    assert allocator.base.name == "recent" and allocator.explorer.name == "random"
    assert allocator.share == 0.3 and allocator.seed == 9 and allocator.explorer.seed == 9
    assert not allocator.uses_witness
    plain = parse_config({"allocation": {"allocator": "recent"}, "policy": {"kind": "simulated"}})
    assert build_allocator(plain.allocation).name == "recent"


@pytest.mark.parametrize(
    ("explore", "field"),
    [
        ({"share": 0}, "share"),
        ({"share": 1.2}, "share"),
        ({}, "share"),
        ({"share": 0.3, "allocator": "selector"}, "allocator"),
        ({"share": 0.3, "allocator": "nope"}, "allocator"),
        ({"share": 0.3, "rate": 2}, "rate"),
    ],
)
def test_bad_explore_config_is_an_error_naming_the_field(explore: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=rf"allocation\.explore\.{field}"):
        parse_config(
            {"allocation": {"allocator": "recent", "explore": explore}, "policy": {"kind": "simulated"}}
        )


class _EchoPolicy:
    name = "echo"

    def generate(self, prompt) -> Generation:
        return Generation(response="Action: back", action=Action("back"))

    def score(self, prompts, targets):  # pragma: no cover - not used here
        return [0.0 for _ in prompts]


def test_decision_records_name_the_allocator_that_chose_the_set(tmp_path, make_png) -> None:
    archive = LocalArchive(tmp_path / "a")
    allocator = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=1), share=0.5)
    seen = {}
    for i in range(12):
        trace = Trace("goal", episode_id=f"thread-{i}")
        shots = [archive.put(make_png((i, j * 20, 0))).sha256 for j in range(10)]
        trace.observe(shots[0])
        for sha in shots[1:]:
            trace.record(Action("back"), "r", sha)
        ctl = MemoryController(policy=_EchoPolicy(), archive=archive, allocator=allocator, budget=4)
        seen[trace.episode_id] = ctl.decide(trace).to_record()["allocator"]
    assert {e for e, name in seen.items() if name == "random"} == {e for e in seen if explores(e, share=0.5)}
    assert set(seen.values()) == {"random", "recent"}


class _Broken:
    name = "broken"
    uses_witness = False

    def allocate(self, ctx):
        raise RuntimeError("scorer file vanished")


def test_shadow_records_the_other_allocators_set_and_leaves_the_step_alone() -> None:
    plain = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=3), share=0.5, seed=1)
    shadowed = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=3), share=0.5, seed=1, shadow=True)
    for i in range(30):
        ctx = AllocationContext(_trace(12, f"ep-{i}"), 4)
        explored = explores(f"ep-{i}", share=0.5, seed=1)
        mine, other = shadowed.allocate(ctx), plain.allocate(ctx)
        assert (mine.selected, mine.allocator) == (other.selected, other.allocator)
        assert "shadow_selected" not in other.info
        recent = list(RecentAllocator().allocate(ctx).selected)
        if explored:  # Random ran: the shadow is Recent-B
            assert mine.info["shadow_selected"] == recent
        else:  # Recent ran: the shadow is Random's draw for this step
            assert mine.info["shadow_selected"] == list(RandomAllocator(seed=3).allocate(ctx).selected)


def test_a_failing_shadow_is_logged_recorded_as_null_and_counted(caplog) -> None:
    allocator = ExploringAllocator(RecentAllocator(), _Broken(), share=1e-9, shadow=True)
    with caplog.at_level("WARNING", logger="causalcache_memory.allocation.explore"):
        allocation = allocator.allocate(AllocationContext(_trace(10, "ep"), 4))
    assert allocation.allocator == "recent" and allocation.is_recent
    assert allocation.info["shadow_selected"] is None and allocator.shadow_failures == 1
    assert "shadow decision of 'broken' failed" in caplog.text and "scorer file vanished" in caplog.text


def test_compare_config_turns_shadow_on_by_default() -> None:
    assert build_allocator(parse_config({"allocation": {"compare": {"share": 0.5}}}).allocation).shadow
    off = parse_config({"allocation": {"compare": {"share": 0.5, "shadow": False}}}).allocation
    assert not build_allocator(off).shadow
    with pytest.raises(ConfigError, match="shadow"):
        parse_config({"allocation": {"compare": {"share": 0.5, "shadow": "sometimes"}}})


def test_shadow_sets_reach_the_decision_record(tmp_path, make_png) -> None:
    archive = LocalArchive(tmp_path / "a")
    allocator = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=1), share=0.5, shadow=True)
    trace = Trace("goal", episode_id="thread-0")
    shots = [archive.put(make_png((0, j * 20, 0))).sha256 for j in range(10)]
    trace.observe(shots[0])
    for sha in shots[1:]:
        trace.record(Action("back"), "r", sha)
    ctl = MemoryController(policy=_EchoPolicy(), archive=archive, allocator=allocator, budget=4)
    record = ctl.decide(trace).to_record()
    assert isinstance(record["shadow_selected"], list) and len(record["shadow_selected"]) == 4


class _Slow(RecentAllocator):
    name = "slow"

    def allocate(self, ctx):
        import time

        time.sleep(0.02)
        return super().allocate(ctx)


def test_a_shadow_that_would_overrun_the_time_limit_is_skipped(caplog) -> None:
    # the episode's own decision took 20 ms of a 30 ms limit: a shadow costing as much would overrun it
    allocator = ExploringAllocator(_Slow(), RandomAllocator(), share=1e-9, shadow=True, shadow_limit_s=0.03)
    with caplog.at_level("INFO", logger="causalcache_memory.allocation.explore"):
        allocation = allocator.allocate(AllocationContext(_trace(10, "ep"), 4))
    assert allocation.allocator == "slow" and allocation.info["shadow_selected"] is None
    assert allocator.shadow_skipped == 1 and allocator.shadow_failures == 0
    assert "shadow decision of 'random' skipped" in caplog.text
    first = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert first[0].levelname == "WARNING" and "raise allocation.selector.timeout_ms" in first[0].getMessage()
    caplog.clear()
    with caplog.at_level("INFO", logger="causalcache_memory.allocation.explore"):
        allocator.allocate(AllocationContext(_trace(11, "ep"), 4))
    assert allocator.shadow_skipped == 2 and [r.levelname for r in caplog.records] == ["INFO"]
    roomy = ExploringAllocator(_Slow(), RandomAllocator(), share=1e-9, shadow=True, shadow_limit_s=1.0)
    assert roomy.allocate(AllocationContext(_trace(10, "ep"), 4)).info["shadow_selected"] is not None
    built = build_allocator(parse_config({"allocation": {"compare": {"share": 0.5}}}).allocation)
    assert built.shadow_limit_s == pytest.approx(0.25)  # selector.timeout_ms, the controller's limit
