"""Cheaper selector labels under a prompt cap (lab/selector/prompt_cap.py, issue 25)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_lab.selector.labels import LabelConfig, label_state, read_labels, run_labelling
from causalcache_lab.selector.prompt_cap import PromptCap, ScreenTextPrior
from causalcache_memory.allocation import recent_b


class FixedPrior:
    """A prior from a function of the event index (deterministic); ``masked`` events get NaN."""

    name = "fixed"

    def __init__(self, value=lambda j: float(j % 5), masked: frozenset[int] = frozenset()) -> None:
        self.value, self.masked = value, masked
        self.calls = 0

    def __call__(self, trajectory, t, budget, trace) -> np.ndarray:
        self.calls += 1
        return np.array([np.nan if j in self.masked else self.value(j) for j in range(1, t)])


@pytest.fixture
def world():
    trajs, useful = make_trajectories(3, length=20, seed=7)
    return trajs, useful


def _states(trajs, budget):
    return [(traj, t) for traj in trajs for t in range(budget + 3, len(traj) + 1, 3)]


def _sets_of(record):
    """``frozenset -> Q`` of every prompt a record scored (anchor, groups' candidates)."""
    out = {frozenset(record["recent"]): record["anchor"]}
    for g in record["groups"]:
        for j, q in zip(g["cands"], g["q"], strict=True):
            out[frozenset(set(g["base"]) - {g["out"]} | {j})] = q
    return out


BUDGETS = [
    PromptCap(),
    PromptCap(candidates=12, explore=5, slots=4, path_length=4, path_candidates=6, max_prompts=7),
    PromptCap(candidates=3, explore=0, slots=2, path_length=3, path_candidates=3, max_prompts=12),
    PromptCap(candidates=20, explore=20, slots=4, path_length=4, path_candidates=8, max_prompts=2),
]


@pytest.mark.parametrize("budget", [1, 2, 4])
@pytest.mark.parametrize("cfg", BUDGETS)
def test_never_scores_more_prompts_than_the_cap(world, cfg, budget):
    trajs, useful = world
    policy = MarkerPolicy(useful)
    config = LabelConfig(prompt_cap=cfg)
    for traj, t in _states(trajs, budget):
        before = sum(len(c) for c in policy.calls)
        rec = label_state(policy, DictArchive(), traj, t, budget, config, prior=FixedPrior())
        sent = sum(len(c) for c in policy.calls) - before
        assert rec["prompts_scored"] == sent == len(_sets_of(rec)) <= cfg.max_prompts
        assert rec["prompt_cap"] == {"prior": "fixed", "fallback": None, "cap": cfg.max_prompts}


def test_cuts_prompts_well_below_full_labelling(world):
    trajs, useful = world
    policy = MarkerPolicy(useful)
    cheap = LabelConfig(prompt_cap=PromptCap())
    full = [
        label_state(policy, DictArchive(), tr, t, 4, LabelConfig())["prompts_scored"]
        for tr, t in _states(trajs, 4)
    ]
    capped = [
        label_state(policy, DictArchive(), tr, t, 4, cheap, prior=FixedPrior())["prompts_scored"]
        for tr, t in _states(trajs, 4)
    ]
    assert max(capped) <= 10 and sum(capped) * 3 < sum(full)


def test_labels_are_full_labels_prompts_with_identical_utilities(world):
    trajs, useful = world
    config = LabelConfig(prompt_cap=PromptCap(candidates=4, explore=2, slots=2, max_prompts=14))
    for budget in (2, 4):
        for traj, t in _states(trajs, budget):
            full = label_state(MarkerPolicy(useful), DictArchive(), traj, t, budget, LabelConfig())
            cheap = label_state(
                MarkerPolicy(useful), DictArchive(), traj, t, budget, config, prior=FixedPrior()
            )
            full_sets, cheap_sets = _sets_of(full), _sets_of(cheap)
            singles = [g for g in cheap["groups"] if g["source"] == "singleton"]
            assert [g["out"] for g in singles] == sorted(recent_b(t, budget))[: len(singles)]
            for g in singles:  # every singleton prompt is one full labelling scores, with its utility
                for j, q in zip(g["cands"], g["q"], strict=True):
                    assert full_sets[frozenset(set(g["base"]) - {g["out"]} | {j})] == q
            for s in cheap_sets.keys() & full_sets.keys():  # path prompts both scored: same utility
                assert cheap_sets[s] == full_sets[s]
            assert cheap["anchor"] == full["anchor"]


def test_falls_back_to_full_labelling_when_the_prior_is_masked(world):
    trajs, useful = world
    traj, t = trajs[0], 16
    config = LabelConfig(prompt_cap=PromptCap(max_prompts=5))
    full = label_state(MarkerPolicy(useful), DictArchive(), traj, t, 4, LabelConfig())
    masked = FixedPrior(masked=frozenset({3}))  # one distant event without a prior
    rec = label_state(MarkerPolicy(useful), DictArchive(), traj, t, 4, config, prior=masked)
    assert rec["prompt_cap"]["fallback"] == "prior unavailable"
    assert rec["groups"] == full["groups"] and rec["prompts_scored"] == full["prompts_scored"] > 5
    # a masked *recent* event does not matter: recent slots are always labelled
    fine = FixedPrior(masked=frozenset(recent_b(t, 4)))
    rec = label_state(MarkerPolicy(useful), DictArchive(), traj, t, 4, config, prior=fine)
    assert rec["prompt_cap"]["fallback"] is None and rec["prompts_scored"] <= 5


def test_screen_text_prior_without_any_text_falls_back_to_full(world, tmp_path):
    trajs, useful = world
    cfg = LabelConfig(budgets=(4,), max_states_per_trajectory=2, prompt_cap=PromptCap())
    counts = run_labelling(
        MarkerPolicy(useful), DictArchive(), trajs, tmp_path / "l.jsonl", cfg, progress=False
    )
    _, records = read_labels(tmp_path / "l.jsonl")
    assert counts["written"] == len(records) > 0
    assert all(r["prompt_cap"]["fallback"] == "prior unavailable" for r in records)  # DictArchive: no text
    full = label_state(MarkerPolicy(useful), DictArchive(), trajs[0], records[0]["t"], 4, LabelConfig())
    assert records[0]["groups"] == full["groups"]


def test_deterministic(world, tmp_path):
    trajs, useful = world
    cfg = LabelConfig(budgets=(2, 4), prompt_cap=PromptCap(candidates=2, explore=3, seed=5))
    outs = []
    for name in ("a", "b"):
        run_labelling(MarkerPolicy(useful), DictArchive(), trajs, tmp_path / name, cfg, progress=False)
        _, records = read_labels(tmp_path / name)
        outs.append(records)
    assert outs[0] == outs[1]
    other = LabelConfig(budgets=(2, 4), prompt_cap=PromptCap(candidates=2, explore=3, seed=6))
    traj, t = trajs[0], 19
    cands = [
        label_state(MarkerPolicy(useful), DictArchive(), traj, t, 4, c, prior=FixedPrior())["groups"][0][
            "cands"
        ]
        for c in (cfg, other)
    ]
    assert cands[0][:2] == cands[1][:2] and cands[0] != cands[1]  # the explore draw follows the seed


def test_prior_decides_which_candidates_are_labelled(world):
    trajs, useful = world
    traj, t = trajs[1], 20
    config = LabelConfig(prompt_cap=PromptCap(candidates=3, explore=0))
    rec = label_state(MarkerPolicy(useful), DictArchive(), traj, t, 4, config, prior=FixedPrior(lambda j: -j))
    assert rec["groups"][0]["cands"] == [1, 2, 3]  # the oldest events rank first under this prior


class _TextArchive(DictArchive):
    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def get_text(self, sha256: str) -> str | None:
        return self.texts[sha256] if isinstance(self.texts, defaultdict) else self.texts.get(sha256)


def test_screen_text_prior_ranks_screens_sharing_the_target_words(world):
    import dataclasses

    from causalcache_memory.actions import Action

    trajs, _ = world
    traj = trajs[0]
    t = 12
    steps = list(traj.steps)
    steps[t - 1] = dataclasses.replace(steps[t - 1], action=Action("type", text="code 4821"))
    traj = dataclasses.replace(traj, steps=tuple(steps))
    trace = traj.trace_at(t)
    texts = {e.screenshot: "Notes inbox settings" for e in trace.events}
    texts[trace.events[2].screenshot] = "Notes: the code is 4821"  # event 3 shows the value to type
    texts[trace.events[5].screenshot] = "copy the notes"  # event 6 shares goal words only
    prior = ScreenTextPrior(_TextArchive(texts))(traj, t, 4, trace)
    assert prior.shape == (t - 1,) and np.all(np.isfinite(prior))
    assert int(np.argmax(prior)) + 1 == 3 and prior[5] > prior[0]
    del texts[trace.events[4].screenshot]
    assert np.isnan(ScreenTextPrior(_TextArchive(texts))(traj, t, 4, trace)[4])


def test_config_hash_of_full_labelling_is_unchanged_and_the_cap_is_validated(tmp_path):
    from causalcache_lab.selector.recipe import load_recipe
    from causalcache_memory.errors import ConfigError

    # the hashes LabelConfig gave before prompt_cap existed (main at 19185e0): old files still resume
    assert LabelConfig().config_hash() == "de601761a832233a"
    assert LabelConfig(budgets=(2, 4), path_length=1).config_hash() == "aadd9be07f0b5a8c"
    assert LabelConfig(prompt_cap=PromptCap()).config_hash() != "de601761a832233a"
    path = tmp_path / "recipe.yaml"
    path.write_text("labels: {prompt_cap: {prior: selector, max_prompts: 8}}\n")
    assert load_recipe(path).labels.label_config().prompt_cap == PromptCap(prior="selector", max_prompts=8)
    path.write_text("labels: {prompt_cap: {prior: ocr, max_prompts: 1}}\n")
    with pytest.raises(ConfigError, match=r"labels\.prompt_cap\.prior.*labels\.prompt_cap\.max_prompts"):
        load_recipe(path)


def test_fleet_labels_under_a_prompt_cap_equal_sequential_ones(world, tmp_path):
    from causalcache_lab.selector.label_fleet import run_labelling_fleet

    trajs, useful = world
    cfg = LabelConfig(budgets=(2, 4), max_states_per_trajectory=3, prompt_cap=PromptCap())
    archive = _TextArchive(defaultdict(lambda: "copy the notes"))  # every screen has text: no fallback
    run_labelling(MarkerPolicy(useful), archive, trajs, tmp_path / "seq", cfg, progress=False)
    run_labelling_fleet(
        MarkerPolicy(useful), archive, trajs, tmp_path / "fleet", cfg, concurrency=3, progress=False
    )
    seq, fleet = (sorted(read_labels(tmp_path / n)[1], key=lambda r: r["key"]) for n in ("seq", "fleet"))
    assert seq == fleet and len(seq) > 0
    assert all(r["prompt_cap"]["fallback"] is None and r["prompts_scored"] <= 10 for r in seq)


def test_probe_counts_prompts_per_state_and_fallbacks():
    from causalcache_lab.selector.prompt_cap_probe import prompts_per_state

    records = [
        {"budget": 4, "prompts_scored": 10, "prompt_cap": {"fallback": None}},
        {"budget": 4, "prompts_scored": 30, "prompt_cap": {"fallback": "prior unavailable"}},
        {"budget": 2, "prompts_scored": 5},
    ]
    assert prompts_per_state(records) == {"B2": 5.0, "B4": 20.0, "all": 15.0, "fallback_share": 1 / 3}


def test_probe_refuses_the_field_name_from_before_the_rename_with_the_fix():
    from causalcache_lab.selector.prompt_cap_probe import prompts_per_state
    from causalcache_memory.errors import ConfigError

    old = {"key": "t1:9", "budget": 4, "prompts_scored": 10, "label_budget": {"fallback": None}}
    with pytest.raises(ConfigError, match=r"'t1:9'.*'label_budget', since renamed 'prompt_cap'.*sed -i"):
        prompts_per_state([old])


def test_slots_are_labelled_oldest_first_while_the_cap_allows(world):
    trajs, useful = world
    traj, t = trajs[0], 12  # B = 4: 7 distant events
    recent = sorted(recent_b(t, 4))

    def singles(**kw):
        cfg = LabelConfig(prompt_cap=PromptCap(**kw))
        rec = label_state(MarkerPolicy(useful), DictArchive(), traj, t, 4, cfg, prior=FixedPrior())
        return [(g["out"], len(g["cands"])) for g in rec["groups"] if g["source"] == "singleton"]

    assert singles() == [(recent[0], 7), (recent[1], 2)]  # 1 anchor + 7 + 2 = the cap of 10
    assert singles(slots=1) == [(recent[0], 7)]
    assert singles(candidates=2, explore=0, max_prompts=20) == [(r, 2) for r in recent]
