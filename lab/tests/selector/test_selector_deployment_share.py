"""The pass-2 share held on the deployment's own decisions (``selector.share_window``, issue 24)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.beam import beam_search
from causalcache_memory.selector.threshold import DeploymentThreshold, Thresholds


def _rule(budget: float = 0.15, window: int = 200, dev: float = 0.5, warmup: int | None = None):
    return DeploymentThreshold(Thresholds(dev, {4: dev + 0.1}), budget, window, warmup=warmup)


def test_warmup_uses_the_dev_threshold_per_memory_budget() -> None:
    rule = _rule(window=100)  # warm-up min(100, 20) = 20
    for i in range(19):
        rule.observe(4, 0.01 * i)
    assert rule.threshold(4) == (pytest.approx(0.6), "dev")  # B = 4's own dev threshold
    assert rule.threshold(2) == (0.5, "dev")  # no decisions at B = 2: pooled dev threshold
    rule.observe(4, 0.19)
    assert rule.threshold(4)[1] == "deployment"
    assert rule.threshold(2)[1] == "dev"  # windows are per B


def test_threshold_is_the_order_statistic_that_at_most_the_budget_share_exceeds() -> None:
    rng = np.random.default_rng(0)
    gains = rng.normal(0.0, 0.2, size=300)
    rule = _rule(budget=0.15, window=200)
    for g in gains:
        rule.observe(4, float(g))
    tau, source = rule.threshold(4)
    window = gains[-200:]
    assert source == "deployment"
    assert (window > tau).sum() <= math.floor(0.15 * 200)  # at most the budget's share exceeds it
    assert (window >= tau).sum() >= math.floor(0.15 * 200)  # and it is the tightest such threshold
    assert tau == pytest.approx(np.sort(window)[200 - 30 - 1])


def test_a_stream_from_a_shifted_distribution_fires_at_the_budget_not_at_the_dev_rate() -> None:
    """Dev threshold 0.6 would fire on almost none of these gains; the deployment rule fires ~15%."""
    rng = np.random.default_rng(1)
    rule = _rule(budget=0.15, window=200)
    fired = []
    for _ in range(3000):
        tau, _ = rule.threshold(4)
        g = float(rng.normal(0.05, 0.05))
        fired.append(g > tau)
        rule.observe(4, g)
    after_warmup = np.mean(fired[50:])
    assert np.mean(fired[:20]) == 0.0  # the dev threshold admits nothing here
    assert 0.12 <= after_warmup <= 0.17, after_warmup


def test_never_below_the_papers_rule_and_zero_budget_never_fires() -> None:
    rule = _rule(budget=0.5, window=60)
    for _ in range(60):
        rule.observe(4, -0.3)  # every predicted gain negative
    assert rule.threshold(4) == (0.0, "deployment")
    none = _rule(budget=0.0, window=60)
    for g in np.linspace(0, 1, 60):
        none.observe(4, float(g))
    assert none.threshold(4) == (math.inf, "deployment")
    everything = _rule(budget=1.0, window=60)
    for g in np.linspace(0.1, 1, 60):
        everything.observe(4, float(g))
    assert everything.threshold(4) == (0.0, "deployment")


def test_non_finite_gains_are_not_counted_and_the_window_slides() -> None:
    rule = _rule(window=50)
    for _ in range(19):
        rule.observe(4, 1.0)
    rule.observe(4, float("-inf"))  # no distant event: nothing to compare
    rule.observe(4, float("nan"))
    assert rule.threshold(4)[1] == "dev"
    for _ in range(50):
        rule.observe(4, 0.2)  # the old 1.0s slid out of the window
    assert rule.threshold(4)[0] == pytest.approx(0.2)


@pytest.mark.parametrize("window", [0, -3, True, 2.5, "200"])
def test_bad_window_is_refused_naming_the_field(window) -> None:
    with pytest.raises(SelectorError, match="share_window"):
        DeploymentThreshold(Thresholds(0.5), 0.15, window)


def test_config_validates_share_window() -> None:
    from causalcache_memory.config import parse_config
    from causalcache_memory.errors import ConfigError

    cfg = parse_config({"allocation": {"allocator": "selector", "selector": {"share_window": None}}})
    assert cfg.allocation.selector.share_window is None
    with pytest.raises(ConfigError, match="share_window"):
        parse_config({"allocation": {"allocator": "selector", "selector": {"share_window": 0}}})


def test_beam_reports_the_top_first_swap_gain_whatever_the_threshold() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(size=12)

    def scorer(conds):
        return np.tile(base, (len(conds), 1))

    free = beam_search(scorer, t=13, budget=4, min_gain=0.0)
    blocked = beam_search(scorer, t=13, budget=4, min_gain=1e9)
    expected = base[:8].max() - base[8:12].min()  # best distant event in for the weakest of Recent-4 (9..12)
    assert blocked.selected == (9, 10, 11, 12) and blocked.gain == 0.0
    assert free.top_gain == pytest.approx(expected) and blocked.top_gain == pytest.approx(expected)


def test_allocator_switches_from_dev_to_deployment_threshold(trained) -> None:
    from selector_synth import make_trajectories

    from causalcache_memory.allocation.base import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    trajs, _ = make_trajectories(12, length=14, seed=7)
    rolling = SelectorAllocator(out, ood_guard=False, share_window=20, second_pass_share=0.3)
    fixed = SelectorAllocator(out, ood_guard=False, share_window=None, second_pass_share=0.3)
    explicit = SelectorAllocator(out, ood_guard=False, min_gain=0.0)
    assert explicit.deployment is None and fixed.deployment is None
    tops: list[float] = []
    sources = []
    for traj in trajs:
        for t in range(7, 15):
            ctx = AllocationContext(traj.trace_at(t), 4, witness=traj.steps[t - 1].action)
            got, ref = rolling.allocate(ctx), fixed.allocate(ctx)
            sources.append(got.info["threshold_from"])
            assert ref.info["threshold_from"] == "fixed"
            if len(tops) < 20:  # warm-up: the same decision as the dev threshold
                assert got.selected == ref.selected and got.info["min_gain"] == ref.info["min_gain"]
            else:
                window = np.sort(tops[-20:])
                assert got.info["min_gain"] == pytest.approx(max(window[20 - 6 - 1], 0.0))
                assert got.k > 0 or got.info["top_gain"] <= got.info["min_gain"]
            tops.append(got.info["top_gain"])
    assert sources[:20] == ["dev"] * 20 and set(sources[20:]) == {"deployment"}


def test_concurrent_threads_share_one_window_without_losing_decisions() -> None:
    """The threads of one memory decide concurrently through one allocator: every observation counts once."""
    import threading

    rule = _rule(budget=0.15, window=10_000)
    rng = np.random.default_rng(5)
    streams = [rng.normal(size=500) for _ in range(8)]

    def work(gains: np.ndarray) -> None:
        for g in gains:
            rule.threshold(4)
            rule.observe(4, float(g))

    threads = [threading.Thread(target=work, args=(s,)) for s in streams]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    everything = np.sort(np.concatenate(streams))
    tau, source = rule.threshold(4)
    assert source == "deployment"
    assert tau == pytest.approx(
        max(everything[4000 - 600 - 1], 0.0)
    )  # all 4,000 observations are in the window
