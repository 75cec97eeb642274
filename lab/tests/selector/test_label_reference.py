"""``labels.reference: full_history``: the labeller's own full-history action is the target of every score."""

from __future__ import annotations

from typing import ClassVar

import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ConfigError
from causalcache_memory.policy import Generation


class HindsightPolicy(MarkerPolicy):
    """Generates ``ref t=<t>`` (a click) and scores it high when the decision's oldest screen is shown."""

    name = "hindsight-policy"

    def __init__(self, useful, *, parse: bool = True) -> None:
        super().__init__(useful)
        self.parse = parse
        self.shown: list[tuple[int, ...]] = []
        self.targets: set[str] = set()

    def generate(self, prompt):
        t = prompt.prompt.allocation.t
        self.shown.append(tuple(i.event_index for i in prompt.prompt.history_images))
        response = f"ref t={t}"
        self.useful[response] = {prompt.prompt.history_images[0].sha256}
        if not self.parse:
            return Generation(response="no action here", action=None, parse_error="no Action: line")
        return Generation(response=response, action=Action("click", x=0.5, y=0.5))

    def score(self, prompts, targets):
        self.targets.update(targets)
        return super().score(prompts, targets)


@pytest.fixture
def trajs():
    return make_trajectories(3, length=12, seed=2)[0]


def test_full_history_labels_score_the_generated_action_and_record_it(trajs, tmp_path):
    policy = HindsightPolicy({})
    cfg = LabelConfig(budgets=(2,), reference="full_history", reference_images=5)
    counts = run_labelling(policy, DictArchive(), trajs, tmp_path / "l.jsonl", cfg, progress=False)
    _, records = read_labels(tmp_path / "l.jsonl")
    assert counts["reference_generations"] == counts["written"] == len(records) > 0
    assert policy.targets == {f"ref t={r['t']}" for r in records}  # never the recorded response
    for rec, shown in zip(records, policy.shown, strict=True):
        t = rec["t"]
        assert shown == tuple(range(max(1, t - 5), t))  # the last reference_images past steps
        assert rec["reference"] == {
            "kind": "full_history",
            "images": len(shown),
            "action": Action("click", x=0.5, y=0.5).to_dict(),
            "agrees_with_recorded": False,  # the recorded steps click at random points
        }
    # the generated target is worth restoring its screen: some swap out of Recent-B raises Q
    assert any(max(q - g["q_base"] for g in r["groups"] for q in g["q"]) > 0.5 for r in records)


def test_an_unparsable_reference_falls_back_to_the_recorded_step(trajs, tmp_path, caplog):
    policy = HindsightPolicy({}, parse=False)
    cfg = LabelConfig(budgets=(2,), reference="full_history")
    with caplog.at_level("WARNING", logger="causalcache_lab.selector.labels"):
        counts = run_labelling(policy, DictArchive(), trajs[:1], tmp_path / "l.jsonl", cfg, progress=False)
    assert counts["reference_fallbacks"] == counts["reference_generations"] == counts["written"] > 0
    assert f"unparsable on {counts['written']} of {counts['written']} states" in caplog.text
    _, records = read_labels(tmp_path / "l.jsonl")
    assert all(r["reference"]["fallback"].startswith("unparsable reference") for r in records)
    assert policy.targets == {trajs[0].steps[r["t"] - 1].response for r in records}


def test_recorded_reference_keeps_the_hash_older_label_files_resume_with(trajs, tmp_path):
    path = tmp_path / "l.jsonl"
    run_labelling(MarkerPolicy({}), DictArchive(), trajs[:1], path, LabelConfig(budgets=(2,)), progress=False)
    header, _ = read_labels(path)
    # the hash covers only the fields that existed before `reference` (a file written then resumes)
    assert LabelConfig(budgets=(2,), reference_images=3).config_hash() == header["config_hash"]
    assert LabelConfig(budgets=(2,), reference="full_history").config_hash() != header["config_hash"]
    with pytest.raises(ConfigError, match="config hash"):
        run_labelling(
            HindsightPolicy({}),
            DictArchive(),
            trajs[:1],
            path,
            LabelConfig(budgets=(2,), reference="full_history"),
            progress=False,
        )


def test_a_labeller_that_cannot_act_is_refused_for_a_full_history_reference(trajs, tmp_path):
    class ScoreOnly:
        name = "score-only"

        def score(self, prompts, targets):
            return [0.0] * len(prompts)

    with pytest.raises(ConfigError, match=r"labels\.reference"):
        run_labelling(
            ScoreOnly(),
            DictArchive(),
            trajs[:1],
            tmp_path / "l.jsonl",
            LabelConfig(budgets=(2,), reference="full_history"),
            progress=False,
        )
    assert not (tmp_path / "l.jsonl").exists()


def test_examples_take_the_reference_action_as_their_gold_witness(trajs, tmp_path):
    """The witness features describe the action the labels score: with a full-history reference that is
    the generated action, not the recorded step (a failed episode's recorded guess would contradict them)."""
    from causalcache_lab.selector.examples import build_examples
    from causalcache_memory.selector.features import FeatureExtractor

    class Spy(FeatureExtractor):
        seen: ClassVar[list] = []

        def __call__(self, trace, budget, ref=None):
            self.seen.append(ref)
            return super().__call__(trace, budget, ref)

    cfg = LabelConfig(budgets=(2,), reference="full_history", max_states_per_trajectory=2)
    run_labelling(HindsightPolicy({}), DictArchive(), trajs, tmp_path / "l.jsonl", cfg, progress=False)
    _, records = read_labels(tmp_path / "l.jsonl")
    build_examples(records, {t.trajectory_id: t for t in trajs}, extractor=Spy())
    assert Spy.seen and all(ref == Action("click", x=0.5, y=0.5) for ref in Spy.seen)
    Spy.seen.clear()
    run_labelling(
        MarkerPolicy({}),
        DictArchive(),
        trajs,
        tmp_path / "r.jsonl",
        LabelConfig(budgets=(2,)),
        progress=False,
    )
    _, plain = read_labels(tmp_path / "r.jsonl")
    build_examples(plain, {t.trajectory_id: t for t in trajs}, extractor=Spy())
    by_id = {t.trajectory_id: t for t in trajs}
    assert Spy.seen == [by_id[r["trajectory_id"]].steps[r["t"] - 1].action for r in plain]


def test_one_reference_generation_per_state_whatever_its_budgets(trajs, tmp_path):
    policy = HindsightPolicy({})
    cfg = LabelConfig(budgets=(2, 4), reference="full_history", path_length=0)
    counts = run_labelling(policy, DictArchive(), trajs, tmp_path / "l.jsonl", cfg, progress=False)
    _, records = read_labels(tmp_path / "l.jsonl")
    states = {(r["trajectory_id"], r["t"]) for r in records}
    assert len(records) > len(states)  # some states are labelled at both budgets
    assert len(policy.shown) == counts["reference_generations"] == len(states)
    by_state: dict = {}
    for r in records:  # every budget of a state scores the same reference
        assert by_state.setdefault((r["trajectory_id"], r["t"]), r["reference"]) == r["reference"]


def test_the_concurrent_labeller_refuses_a_labeller_that_cannot_act_and_shares_references(trajs, tmp_path):
    from causalcache_lab.selector.label_fleet import run_labelling_fleet

    class ScoreOnly:
        name = "score-only"

        def score(self, prompts, targets):
            return [0.0] * len(prompts)

    cfg = LabelConfig(budgets=(2, 4), reference="full_history", path_length=0)
    with pytest.raises(ConfigError, match=r"labels\.reference"):
        run_labelling_fleet(ScoreOnly(), DictArchive(), trajs, tmp_path / "f.jsonl", cfg, progress=False)
    assert not (tmp_path / "f.jsonl").exists()
    policy = HindsightPolicy({})
    run_labelling_fleet(
        policy, DictArchive(), trajs, tmp_path / "g.jsonl", cfg, concurrency=1, progress=False
    )
    _, records = read_labels(tmp_path / "g.jsonl")
    assert len(policy.shown) == len({(r["trajectory_id"], r["t"]) for r in records}) < len(records)
