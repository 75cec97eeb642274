"""The leave-one-generator-out harness: a tiny run end to end, the could-swap accounting, the sealed set."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from causalcache_lab.eval.world_agent import EpisodeOutcome
from causalcache_lab.worlds_ext.harness import (
    ExtEvalSettings,
    ExtScreenText,
    could_swap_decline,
    run_ext_eval,
    sealed_set,
)
from causalcache_memory.errors import ConfigError


def test_the_sealed_set_is_committed_and_refused_without_the_flag():
    sealed = sealed_set()
    assert set(sealed["generators"]) == {"desktop", "web", "mobile", "terminal"}
    assert set(sealed["whole"]) == {"terminal", "title-line"}
    assert len(sealed["policies"]) >= 2 and sealed["task_seeds"] and sealed["policy_seeds"]
    with pytest.raises(ConfigError, match="sealed set"):
        ExtEvalSettings("web", "noisy", task_seed=sealed["task_seeds"][0])
    with pytest.raises(ConfigError, match="sealed set"):
        ExtEvalSettings("web", "noisy", policy_seeds=(0, sealed["policy_seeds"][-1]))
    ExtEvalSettings("web", "noisy", task_seed=sealed["task_seeds"][0], sealed=True)  # the final run may


def test_bad_settings_name_the_field_and_the_choices():
    with pytest.raises(ConfigError, match=r"generator=.tablet.*desktop, web, mobile"):
        ExtEvalSettings("tablet", "noisy")
    with pytest.raises(ConfigError, match="policy='greedy'"):
        ExtEvalSettings("web", "greedy")
    with pytest.raises(ConfigError, match="arms"):
        ExtEvalSettings("web", "noisy", arms=("recent", "rgb"))


def _outcome(split: str, log: list[dict]) -> EpisodeOutcome:
    return EpisodeOutcome("t", split, "causalcache", 4, True, len(log), 0.0, log)


def test_could_swap_counts_only_two_pass_decisions_with_a_longer_history_than_b():
    log = [
        {"t": 3, "proposal": {}, "fallback": "ood"},  # t - 1 = 2 <= B: no swap was possible
        {"t": 6, "proposal": {}, "fallback": "ood", "ood_refit": "refit"},  # declined after the refit
        {"t": 7, "proposal": {}, "fallback": None, "k": 1, "ood_refit": "refit", "witness_kept": [5]},
        {"t": 8, "fallback": "ood"},  # not a two-pass decision
    ]
    got = could_swap_decline([_outcome("memory_critical", log), _outcome("control", log[:2])], budget=4)
    assert got["memory_critical"] == {
        "could_swap": 2,
        "declined_ood": 1,
        "decline_rate": 0.5,
        "after_refit": 2,
        "declined_after_refit": 1,
        "swap_rate": 0.5,
        "witness_refused": 1,  # the witness-source check refused a set (guard try 2) ...
        "witness_refused_recent": 0,  # ... and the re-search still swapped
    }
    assert got["control"]["could_swap"] == 1 and got["control"]["decline_rate"] == 1.0
    assert got["all"]["could_swap"] == 3


def test_a_tiny_run_reports_every_arm_split_and_contrast(tmp_path):
    settings = ExtEvalSettings(
        "mobile",
        "same-line",
        tasks_per_split=1,
        task_seed=21,
        policy_seeds=(0,),
        arms=("recent", "random", "oracle", "causalcache", "causalcache_noguard"),
    )
    r = run_ext_eval(settings, tmp_path)
    assert set(r["arms"]) == set(settings.arms)
    assert r["arms"]["oracle"]["memory_critical"]["success"] == 1.0  # the evidence restored: solved
    assert r["arms"]["recent"]["memory_critical"]["success"] == 0.0  # by construction
    assert {"memory_critical", "control"} <= set(r["contrasts_by_arm"]["causalcache"])
    assert "causalcache" in r["contrasts_vs_random"]
    assert set(r["could_swap"]) == {"causalcache", "causalcache_noguard"}
    assert r["could_swap"]["causalcache_noguard"]["all"]["declined_ood"] == 0  # the guard is off
    assert len(r["episodes"]) == 2 * len(settings.arms)
    assert r["meta"]["text_format"] == "android-xml"
    # the tool's tables read the same dict
    path = tmp_path / "results.json"
    path.write_text(json.dumps(r))
    tool = _tool()
    rows = tool.summary([str(path)]).split("\n")
    assert len(rows) == 2 + len(settings.arms) and rows[3].startswith("| mobile x same-line | random |")
    assert "| oracle | memory_critical | 1.00 |" in tool.table(r)


def _tool():
    path = Path(__file__).resolve().parents[2] / "tools" / "ext_eval.py"
    spec = importlib.util.spec_from_file_location("ext_eval", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_selectors_text_source_serialises_registered_screens_in_their_format():
    from causalcache_lab.worlds_ext import generate_ext_tasks
    from causalcache_lab.worlds_ext.expert import play
    from causalcache_lab.worlds_ext.screen import render

    screen = play(generate_ext_tasks("desktop", 1, 2)[0]).screens[2]
    source = ExtScreenText()
    assert source.get_text(render(screen)[1]).startswith('menubar "" [0,0,640,14]')
    assert source.get_text("f" * 64) is None


def test_the_try2_arm_is_the_library_default_and_the_causalcache_arm_the_guard_before_it(tmp_path):
    """Every selector arm pins its guard keys, so the harness's arms mean what they meant when measured;
    ``causalcache_try2`` is the deployed default since the switch (docs/notebook/results/guard_rule_try2.md)."""
    from causalcache_lab.worlds_ext.harness import _memory
    from causalcache_lab.worlds_ext.policies import policy
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.selector.allocator import SelectorAllocator

    settings = ExtEvalSettings("desktop", "noisy", tasks_per_split=1)

    def guard(arm: str) -> tuple:
        _, allocator = _memory(arm, 4, policy("noisy", 0), LocalArchive(str(tmp_path / arm)), settings)
        return guard_of(allocator)

    assert guard("causalcache_try2") == guard_of(SelectorAllocator()) == (True, True, True, 64)
    assert guard("causalcache") == (True, False, False, None)
    assert guard("causalcache_refit") == (True, False, False, 64)
    assert guard("causalcache_noguard")[:2] == (False, False)


def guard_of(a) -> tuple:
    """(covariate guard on, witness check, open warm-up, refit warm-up or None) of a selector allocator."""
    return a.ood_guard, a.witness_check, a.open_warmup, a.refit.warmup if a.refit else None
