"""Real-format replay with known evidence (issue 54 item 5): the bundled selector, guard on, over the
committed fixtures of four public formats (tests/fixtures/real_formats, built by
tools/real_format_fixtures.py): which event it restores at the use step, and how many could-swap decisions
its guard declines, with the screen text read through the normaliser (and, for comparison, as is)."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import pytest

from causalcache_memory import Action, Generation, Trace
from causalcache_memory.archive import LocalArchive
from causalcache_memory.config import parse_config
from causalcache_memory.decision_counts import swap_possible
from causalcache_memory.factory import build_controller
from causalcache_memory.selector import SelectorAllocator
from causalcache_memory.selector.screen_text import ScreenTextCache

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real_formats"
TASKS = sorted(FIXTURES.glob("*/task*/task.json"))
BUDGET = 4


class ReplayPolicy:
    """Emits the recorded action of the decision at hand (the trajectory's own next action)."""

    name = "replay"

    def __init__(self, actions: list[dict], trace: Trace) -> None:
        self.actions, self.trace = actions, trace

    def generate(self, prompt) -> Generation:
        a = self.actions[self.trace.t - 1]
        action = Action(
            a["type"], x=a.get("x"), y=a.get("y"), text=a.get("text"), keys=tuple(a.get("keys", ()))
        )
        if a.get("direction"):
            action = Action(a["type"], x=a["x"], y=a["y"], direction=a["direction"])
        return Generation(response=f"Action: {a}", action=action)


def replay(path: Path, root: Path, *, normalize: bool = True) -> dict:
    """Replay one fixture task through a controller with the bundled selector (B = 4, guard on)."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    archive = LocalArchive(str(root / path.parent.parent.name / path.parent.name))
    shas = []
    for name, text in zip(spec["screens"], spec["screen_texts"], strict=True):
        sha = archive.put((path.parent / name).read_bytes()).sha256
        archive.put_text(sha, text)
        shas.append(sha)
    trace = Trace(spec["goal"], episode_id=f"{spec['source']}-{path.parent.name}", platform=spec["platform"])
    trace.observe(shas[0], size=tuple(spec["screen_size"]))
    selector = SelectorAllocator(screen_text=ScreenTextCache(archive, normalize=normalize))
    config = parse_config({"budget": BUDGET, "allocation": {"idle_warning": {"enabled": False}}})
    ctl = build_controller(
        config, policy=ReplayPolicy(spec["actions"], trace), archive=archive, allocator=selector
    )
    ctl.selector_timeout_s = None
    records = []
    for t in range(1, len(spec["actions"]) + 1):
        decision = ctl.decide(trace)
        records.append({**decision.to_record(), "selected": list(decision.allocation.selected)})
        ctl.record(trace, decision, shas[t], screen_size=tuple(spec["screen_size"]))
    ctl.close()
    could = [r for r in records if swap_possible(r["t"], r["budget"])]
    use = records[spec["use_t"] - 1]
    return {
        "task": f"{spec['source']}/{path.parent.name}",
        "split": spec["split"],
        "evidence": spec["evidence_event"],
        "restored_at_use": sorted(use["selected"]),
        "evidence_restored": spec["evidence_event"] in use["selected"] if spec["evidence_event"] else None,
        "could_swap": len(could),
        "declined": sum(r.get("fallback") == "ood" for r in could),
        "swaps": sum(r["k"] > 0 for r in could),
        "far_groups": Counter(r.get("ood_group") for r in could if r.get("fallback") == "ood"),
    }


def summarize(rows: list[dict]) -> dict:
    memory = [r for r in rows if r["split"] == "memory_critical"]
    control = [r for r in rows if r["split"] == "control"]
    could = sum(r["could_swap"] for r in rows)
    return {
        "declined_share": sum(r["declined"] for r in rows) / could,
        "evidence_restored": sum(bool(r["evidence_restored"]) for r in memory) / len(memory),
        "control_no_swap": 1 - sum(r["swaps"] for r in control) / sum(r["could_swap"] for r in control),
    }


@pytest.fixture(scope="module")
def replays(tmp_path_factory) -> dict[bool, list[dict]]:
    root = tmp_path_factory.mktemp("replay")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test reads the records, not the warnings
        return {norm: [replay(p, root / str(norm), normalize=norm) for p in TASKS] for norm in (True, False)}


def test_the_fixtures_are_small_and_cover_four_formats() -> None:
    assert {p.parent.parent.name for p in TASKS} == {"agentnet", "osworld", "mobileworld", "androidcontrol"}
    assert all(png.stat().st_size < 4096 for png in FIXTURES.rglob("*.png"))
    for path in TASKS:
        spec = json.loads(path.read_text(encoding="utf-8"))
        assert len(spec["screens"]) == len(spec["actions"]) + 1 == len(spec["screen_texts"])
        if spec["evidence_event"]:  # the value typed at the use step is on the evidence screen only
            value = spec["actions"][spec["use_t"] - 1]["text"]
            shown = [k for k, text in enumerate(spec["screen_texts"]) if value in text]
            assert shown == [spec["evidence_event"]]


def test_replay_reports_what_was_restored_and_declined(replays, capsys) -> None:
    rows = replays[True]
    assert len(rows) == len(TASKS) and all(r["could_swap"] == 12 - 1 - BUDGET for r in rows)
    for r in rows:
        assert len(r["restored_at_use"]) == BUDGET and 0 <= r["declined"] <= r["could_swap"]
    with capsys.disabled():
        for norm in (True, False):
            print(f"\nnormaliser {'on' if norm else 'off'}: {summarize(replays[norm])}")
            for r in replays[norm]:
                print(" ", {k: (dict(v) if isinstance(v, Counter) else v) for k, v in r.items()})


def test_the_normaliser_declines_less_and_what_is_accepted_restores_the_evidence(replays) -> None:
    on, off = summarize(replays[True]), summarize(replays[False])
    assert on["declined_share"] < off["declined_share"]
    assert on["control_no_swap"] >= 0.90
    accepted = [r for r in replays[True] if r["split"] == "memory_critical" and r["declined"] == 0]
    assert accepted and all(r["evidence_restored"] for r in accepted)  # the scorer's ranking transfers


@pytest.mark.xfail(
    strict=True,
    reason="issue 54 item 1: accessibility dumps carry no status-bar clock, so their screens hold no value "
    "where every training screen had one (the worlds' fixed 09:41), and the guard's text group declines "
    "them (OSWorld and AndroidControl fixtures: 7 of 7 each); with a clock line added they pass",
)
def test_done_when_on_the_real_format_fixtures(replays) -> None:
    """Issue 54's done-when: at most 20% declined; evidence restored at the use step in at least two thirds
    of memory tasks; no swap on at least 90% of control decisions."""
    got = summarize(replays[True])
    assert got["declined_share"] <= 0.20, got
    assert got["evidence_restored"] >= 2 / 3, got
    assert got["control_no_swap"] >= 0.90, got
