"""Agreement and evidence labellers: the utilities they give and the labels file they write."""

from __future__ import annotations

import json

import pytest

from causalcache_lab.learn.agreement import (
    AgreementScorer,
    ChatModelSampler,
    OpenAISampler,
    PolicySampler,
    make_sampler,
)
from causalcache_lab.learn.evidence import EvidenceScorer, evidence_from_groups, evidence_from_links
from causalcache_lab.learn.threads import threads_to_trajectories
from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling
from causalcache_memory.actions.equivalence import actions_equivalent
from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.archive.local import LocalArchive
from causalcache_memory.errors import ConfigError
from causalcache_memory.policy import Generation
from causalcache_memory.render.prompt import render_prompt

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def data(recorded):  # type: ignore[no-untyped-def]
    trajs, _ = threads_to_trajectories(
        str(recorded.checkpointer), str(recorded.archive), None, source="synthetic-world"
    )
    return sorted(trajs, key=len)[-1], LocalArchive(recorded.archive), trajs


def _prompt(traj, archive, t, selected, budget=2):  # type: ignore[no-untyped-def]
    trace = traj.trace_at(t)
    return render_prompt(trace, make_allocation(selected, t=t, budget=budget, allocator="test")).bind(archive)


def _gold(traj, t):  # type: ignore[no-untyped-def]
    return json.dumps(traj.steps[t - 1].action.to_dict())


def _other_response(traj, t, platform):  # type: ignore[no-untyped-def]
    gold = traj.steps[t - 1].action
    for step in traj.steps:
        if not actions_equivalent(gold, step.action, platform=platform):
            return step.response
    raise AssertionError("every step has the same action")


def test_langchain_chat_model_agreement_rate(data) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    traj, archive, _ = data
    t = len(traj)
    right, wrong = traj.steps[t - 1].response, _other_response(traj, t, traj.platform)
    model = FakeListChatModel(responses=[right, wrong, right, right])
    scorer = AgreementScorer(ChatModelSampler(model), k=4, temperature=0.9, platform=traj.platform)
    prompt = _prompt(traj, archive, t, recent_b(t, 2))
    assert scorer.score([prompt], [_gold(traj, t)]) == [0.75]
    assert scorer.samples == 4
    assert scorer.label_source == {
        "source": "agreement",
        "model": "FakeListChatModel",
        "k": 4,
        "temperature": 0.9,
    }


def test_chat_sampler_binds_the_temperature(data) -> None:
    from langchain_core.messages import AIMessage

    traj, archive, _ = data
    t = len(traj)
    seen = []

    class Model:
        def bind(self, **kw):  # type: ignore[no-untyped-def]
            seen.append(kw)
            return self

        def invoke(self, messages):  # type: ignore[no-untyped-def]
            return AIMessage(content=traj.steps[t - 1].response)

    gen = ChatModelSampler(Model()).sample(
        _prompt(traj, archive, t, recent_b(t, 2)), temperature=0.3, index=0
    )
    assert seen == [{"temperature": 0.3}]
    assert actions_equivalent(traj.steps[t - 1].action, gen.action, platform=traj.platform)


def test_openai_sampler_sends_the_temperature() -> None:
    calls = []

    class Endpoint:
        name = "served-model"

        def generate(self, prompt, *, temperature):  # type: ignore[no-untyped-def]
            calls.append(temperature)
            return Generation("r", None, "unparsed")

    scorer = AgreementScorer(OpenAISampler(Endpoint()), k=3, temperature=0.6, platform="desktop")
    target = json.dumps({"type": "back"})
    assert scorer.score([object()], [target]) == [0.0]  # type: ignore[list-item]
    assert calls == [0.6, 0.6, 0.6]


def test_black_box_simulated_policies_agree_more_with_the_evidence(data) -> None:
    from causalcache_lab.world.family import policy_for_world

    traj, archive, _ = data
    policies = [policy_for_world("train-00", s) for s in range(3)]
    scorer = AgreementScorer(make_sampler(policies), k=3, temperature=None, platform=traj.platform)
    assert isinstance(scorer.sampler, PolicySampler)
    t = len(traj)
    rates = scorer.score([_prompt(traj, archive, t, recent_b(t, 2))], [_gold(traj, t)])
    assert rates[0] in (0.0, 1 / 3, 2 / 3, 1.0)


def test_make_sampler_refuses_what_it_cannot_sample() -> None:
    with pytest.raises(ConfigError, match=r"LangChain chat model, an OpenAIPolicy"):
        make_sampler(42)


def test_agreement_needs_action_targets() -> None:
    scorer = AgreementScorer(PolicySampler([object()]), k=1, platform="desktop")
    with pytest.raises(ConfigError, match=r"labels.target: action_json"):
        scorer.score([object()], ["Thought: click"])  # type: ignore[list-item]


def test_agreement_labels_file_records_its_source(data, tmp_path) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    traj, archive, _ = data
    model = FakeListChatModel(responses=[s.response for s in traj.steps])
    scorer = AgreementScorer(ChatModelSampler(model), k=2, temperature=0.5, platform=traj.platform)
    cfg = LabelConfig(
        budgets=(2,), path_length=0, all_slots=False, max_states_per_trajectory=1, target="action_json"
    )
    counts = run_labelling(scorer, archive, [traj], tmp_path / "l.jsonl", cfg, progress=False)
    header, records = read_labels(tmp_path / "l.jsonl")
    assert counts["written"] == 1 == len(records)
    assert header["source"] == {
        "source": "agreement",
        "model": "FakeListChatModel",
        "k": 2,
        "temperature": 0.5,
    }
    rec = records[0]
    assert all(0.0 <= q <= 1.0 for g in rec["groups"] for q in g["q"])


def test_teacher_forced_is_the_default_source(data, tmp_path) -> None:
    from causalcache_lab.world.family import policy_for_world

    traj, archive, _ = data
    cfg = LabelConfig(budgets=(2,), path_length=0, all_slots=False, max_states_per_trajectory=1)
    run_labelling(policy_for_world("train-00", 0), archive, [traj], tmp_path / "l.jsonl", cfg, progress=False)
    header, _ = read_labels(tmp_path / "l.jsonl")
    assert header["source"]["source"] == "teacher_forced" and header["source"]["k"] is None


# ------------------------------------------------------------------------------------------ evidence
def _links_for(traj, tmp_path):  # type: ignore[no-untyped-def]
    data = json.loads((FIXTURES / "links.json").read_text())
    data["episodes"][0]["trajectory_id"] = traj.trajectory_id
    path = tmp_path / "links.json"
    path.write_text(json.dumps(data))
    return path


def test_links_fixture_maps_to_the_event_that_restores_the_screen(data, tmp_path) -> None:
    traj, _, _ = data
    ev = evidence_from_links(_links_for(traj, tmp_path), [traj])
    # fixture: step 2 is critical evidence for step 9 (step 3 -> 7 is not critical)
    assert ev == {(traj.trajectory_id, 9): {1}}
    assert evidence_from_links(_links_for(traj, tmp_path), [traj], screen="after") == {
        (traj.trajectory_id, 9): {2}
    }


def test_links_with_unknown_steps_are_refused(data, tmp_path) -> None:
    traj, _, _ = data
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "episodes": [
                    {
                        "trajectory_id": traj.trajectory_id,
                        "links": [{"from": "99", "to": "3", "is_critical": True}],
                    }
                ]
            }
        )
    )
    with pytest.raises(ConfigError, match=r"from='99'.*not a step id"):
        evidence_from_links(path, [traj])


def test_evidence_labels_value_restoring_the_evidence(data, tmp_path) -> None:
    traj, archive, _ = data
    scorer = EvidenceScorer({(traj.trajectory_id, 9): {1}})
    cfg = LabelConfig(budgets=(2,), path_length=0, all_slots=True)
    run_labelling(scorer, archive, scorer.trajectories([traj]), tmp_path / "e.jsonl", cfg, progress=False)
    header, records = read_labels(tmp_path / "e.jsonl")
    assert header["source"]["source"] == "evidence"
    rec = next(r for r in records if r["t"] == 9)
    assert rec["anchor"] == 0.0  # Recent-2 = (7, 8) does not hold event 1
    for g in rec["groups"]:
        assert {j: q for j, q in zip(g["cands"], g["q"], strict=True)} == {
            j: float(j == 1) for j in g["cands"]
        }
    other = next(r for r in records if r["t"] != 9)
    assert all(q == 0.0 for g in other["groups"] for q in g["q"])


def test_mined_groups_give_the_candidate(tmp_path) -> None:
    path = tmp_path / "groups.jsonl"
    rows = [
        {"trajectory_id": "a", "t": 9, "candidate": 3, "budget": 1},
        {"trajectory_id": "a", "t": 9, "candidate": 3, "budget": 2},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert evidence_from_groups(path) == {("a", 9): {3}}
    path.write_text('{"trajectory_id": "a"}\n')
    with pytest.raises(ConfigError, match=r"groups.jsonl:1 needs trajectory_id, t and candidate"):
        evidence_from_groups(path)


def test_openai_endpoint_samples_at_the_stated_temperature(make_png) -> None:
    import sys

    sys.path.insert(0, str(FIXTURES.parents[3] / "tests" / "runtime"))
    from loopback import MemoryArchive, OpenAILoopback, make_prompt

    from causalcache_memory.runtime.openai_client import OpenAIPolicy

    prompt = make_prompt(MemoryArchive(), history=[make_png((1, 2, 3))], current=make_png((9, 9, 9)))
    with OpenAILoopback() as server:
        policy = OpenAIPolicy(server.url + "/v1", "fake-vl", timeout_s=5, max_retries=0, check_images=False)
        try:
            scorer = AgreementScorer(make_sampler(policy), k=2, temperature=0.8, platform="desktop")
            scorer.score([prompt], [json.dumps({"type": "back"})])
            policy.generate(prompt)  # the policy's own decoding stays greedy
        finally:
            scorer.close()  # closes the endpoint's pool
        temps = [payload["temperature"] for _, payload, _ in server.requests]
    assert temps == [0.8, 0.8, 0]
