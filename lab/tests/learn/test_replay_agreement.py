"""Prompts rebuilt from recorded threads carry what the live prompt carried (issue 55, item 1).

A black-box agent recorded through the live controller is replayed, state by state, through the agreement
sampler: the same model gives the same reply, so the replayed action must agree with the recorded one on
(nearly) every state, whichever coordinate format the agent writes. Before the rebuilt prompts carried the
recorded screen size, pixel clicks were parsed on the 0-1000 grid and every click state disagreed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_core")
sys.path.insert(0, str(Path(__file__).parent))
from scripted import record_scripted

from causalcache_lab.learn.agreement import AgreementScorer, make_sampler
from causalcache_lab.learn.threads import threads_to_trajectories
from causalcache_lab.selector.label_reference import target_text
from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.render.prompt import render_prompt

SIZE = (1280, 800)
#: points spread over the screen, most of them with both values under 1000 (the grid's trap)
_PIXELS = [(652, 392), (40, 760), (1210, 35), (333, 512), (900, 120), (75, 80), (1000, 700), (640, 400)]


def _script(fmt: str, episodes: int = 3) -> dict[str, list[str]]:
    script = {}
    for e in range(episodes):
        replies = []
        for i, (x, y) in enumerate(_PIXELS[e:] + _PIXELS[:e]):
            if fmt == "pixel":
                point = f"{x}, {y}"
            elif fmt == "thousand":
                point = f"{round(x / (SIZE[0] - 1) * 1000)}, {round(y / (SIZE[1] - 1) * 1000)}"
            else:
                point = f"{x / (SIZE[0] - 1):.4f}, {y / (SIZE[1] - 1):.4f}"
            action = f"pyautogui.click({point})" if i % 4 != 3 else f"pyautogui.write('value {e}-{i}')"
            replies.append(f"Thought: step {i}.\nAction: {action}")
        script[f"task {fmt} {e}: fill the form"] = replies
    return script


def _labeller(model, coords: str):  # type: ignore[no-untyped-def]
    """What the team names as its labeller: the chat model, wrapped with its coordinate convention when
    it is not ``auto`` (the grid cannot be told from pixels on a 1280-pixel screen)."""
    if coords == "auto":
        return model
    from causalcache_memory.integrations.langgraph.policies import ChatModelPolicy

    return ChatModelPolicy(model, coords=coords)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fmt", "coords"), [("pixel", "auto"), ("thousand", "thousand"), ("relative", "auto")]
)
def test_replayed_actions_agree_with_the_recorded_ones(tmp_path: Path, fmt: str, coords: str) -> None:
    from causalcache_memory.archive.local import LocalArchive

    rec = record_scripted(tmp_path / fmt, _script(fmt), size=SIZE, coords=coords)
    trajectories, _ = threads_to_trajectories(str(rec.checkpointer), str(rec.archive), None)
    archive = LocalArchive(rec.archive)
    scorer = AgreementScorer(make_sampler(_labeller(rec.model, coords)), k=1, temperature=None)
    agreed = states = 0
    budget = 2
    for traj in trajectories:
        assert traj.screen_size == SIZE
        for t in range(1, len(traj) + 1):
            trace = traj.trace_at(t)
            allocation = make_allocation(recent_b(t, budget), t=t, budget=budget, allocator="label")
            prompt = render_prompt(trace, allocation).bind(archive)
            assert prompt.prompt.meta.get("screen_size") == SIZE  # the recorded size of x_t
            target = target_text(traj, t, "action_json")
            agreed += scorer.score([prompt], [target])[0] == 1.0
            states += 1
    assert states == 3 * len(_PIXELS) and rec.model.calls == states
    assert agreed >= 0.95 * states, f"{fmt}: {agreed} of {states} replayed states agree"


def test_rebuilt_summaries_are_the_recorded_ones(tmp_path: Path) -> None:
    """The history lines of a rebuilt prompt are the ones the live prompt showed (pixel points included)."""
    rec = record_scripted(tmp_path, _script("pixel", episodes=1), size=SIZE)
    from causalcache_lab.learn.threads import thread_states
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.trace.store import TraceStore

    (traj,), _ = threads_to_trajectories(str(rec.checkpointer), str(rec.archive), None)
    state = next(iter(thread_states(str(rec.checkpointer)).values()))
    live = TraceStore(LocalArchive(rec.archive)).load_trace(state["cc_head"])
    rebuilt = traj.trace_at(len(traj))
    assert rebuilt.summaries() == live.summaries()[: len(traj) - 1]
    assert [e.screen_size for e in rebuilt.events] == [e.screen_size for e in live.events][: len(traj) - 1]
