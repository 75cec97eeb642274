"""Done-when tests of issue 12 with a user-shaped agent (tests/integrations/user_agent.py, not the example):
pixel PyAutoGUI actions on 1920x1080 screens, 40 steps, SQLite checkpoints, unparseable replies; the same
agent with async nodes; SIGKILL and resume; two concurrent runs on one thread."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import user_agent as ua

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.errors import CausalCacheWarning, TraceConflictError
from causalcache_memory.integrations.langgraph import STEP_EVENT

STEPS = 40


def _expected_unparsed(steps: int) -> list[int]:
    return [t for t in range(1, steps + 1) if ua.reply_for(t) in (ua.UNPARSEABLE, ua.MALFORMED)]


def _check_complete_trace(memory, graph, thread: str, steps: int) -> None:
    cfg = ua.run_config(thread)
    trace = memory.trace(graph, cfg)
    log = memory.episode_log(graph, cfg)
    assert len(trace) == steps and len(log) == steps  # every executed step is an event
    unparsed = [e.index for e in trace.events if e.unparsed]
    assert unparsed == _expected_unparsed(steps) and len(unparsed) >= 5
    for event in trace.events:
        assert event.response == ua.reply_for(event.index)  # verbatim, parsed or not
        assert event.screen_size == (ua.WIDTH, ua.HEIGHT) == event.screenshot_size
        if event.unparsed:
            assert "reply not parsed" in event.summary and event.metadata["parse_error"]
            assert log[event.index - 1]["parse_error"] and log[event.index - 1]["action"] is None
        else:
            assert log[event.index - 1]["parse_error"] is None
    by_reply = {e.response: e for e in trace.events}
    click = by_reply["pyautogui.click(412, 88)"]
    assert click.summary.startswith(f"{click.index}. click (412, 88)")  # pixels, not the 0-1000 grid
    far = by_reply["Thought: open the archive folder.\nAction: pyautogui.click(1650, 1040)"]
    assert "click (1650, 1040)" in far.summary  # above 1000: parsed with the recorded screen size
    corner = by_reply["pyautogui.click(x=1919, y=1079)"]
    assert corner.action.pixel(ua.WIDTH, ua.HEIGHT) == (1919, 1079)
    drag = next(e for e in trace.events if e.action.type == "drag")
    assert "drag (10, 1070) -> (1910, 20)" in drag.summary
    state = graph.get_state(cfg).values
    executed = state["executed"]
    assert len(executed) == steps
    assert executed[click.index - 1] == ["click", [412, 88]]  # memory.action() from the user's node
    assert [i + 1 for i, x in enumerate(executed) if x is None] == unparsed


def test_pixel_agent_40_steps_sqlite_every_step_recorded(tmp_path):
    memory = ua.memory_for(str(tmp_path))
    model = ua.ScriptedModel()
    graph = ua.build_agent(memory, steps=STEPS, checkpointer=memory.checkpointer(), model=model)
    # no app labels and no screen text here: the default guard (try 2) does not judge before its refit on
    # 64 of this deployment's decisions (the guard before it judged these states without those feature
    # groups: tests/integrations/test_screen_text_example.py), so no idle warning (it would be an error
    # under filterwarnings = error); but the bundled selector was trained reading screen text, so the
    # memory warns once that it is missing (issue 24), with the counts and the fix
    with pytest.warns(CausalCacheWarning) as caught:
        graph.invoke(ua.first_input(), ua.run_config("t1"))
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("screen text was missing on 20 of the last 20 decisions where a swap was")
    assert "screen_text" in message and "archive.ocr" in message
    log = memory.episode_log(graph, ua.run_config("t1"))
    featurized = [r for r in log if "masked" in r]
    assert featurized and all(r["masked"] == "app+text" for r in featurized)
    assert all(r["ood_refit"] == "warmup" and r.get("fallback") != "ood" for r in featurized)
    assert memory.stats(graph, ua.run_config("t1")).without_text == len(
        featurized
    )  # causalcache report's count
    _check_complete_trace(memory, graph, "t1", STEPS)
    # one system message per model call, first in the list: the user's text then the memory's
    assert all(len(s) == 1 and s[0].startswith(ua.USER_SYSTEM + "\n\n") for s in model.systems)


def test_async_pixel_agent_under_ainvoke_and_custom_stream(tmp_path):
    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    graph = ua.build_agent(memory, steps=STEPS, checkpointer=memory.checkpointer(), use_async=True)
    asyncio.run(graph.ainvoke(ua.first_input(), ua.run_config("a1")))
    _check_complete_trace(memory, graph, "a1", STEPS)

    async def stream() -> list[dict]:
        return [
            chunk
            async for chunk in graph.astream(ua.first_input(), ua.run_config("a2"), stream_mode="custom")
        ]

    records = asyncio.run(stream())
    assert [r["t"] for r in records] == list(range(1, STEPS + 1))
    assert all(r["event"] == STEP_EVENT for r in records)
    assert records == memory.episode_log(graph, ua.run_config("a2"))


def test_async_agent_with_async_sqlite_saver_and_atrace(tmp_path):
    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    steps = 12

    async def main():
        async with memory.acheckpointer() as saver:
            graph = ua.build_agent(memory, steps=steps, checkpointer=saver, use_async=True)
            await graph.ainvoke(ua.first_input(), ua.run_config("s1"))
            trace = await memory.atrace(graph, ua.run_config("s1"))
            log = await memory.aepisode_log(graph, ua.run_config("s1"))
            with pytest.raises(Exception, match="atrace"):
                memory.trace(graph, ua.run_config("s1"))  # sync read inside the loop: names the fix
            return trace, log

    trace, log = asyncio.run(main())
    assert len(trace) == steps == len(log)
    assert [e.index for e in trace.events if e.unparsed] == _expected_unparsed(steps)


def _script(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    script = Path(__file__).with_name("user_agent.py")
    return subprocess.run(
        [sys.executable, str(script), "--root", str(tmp), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sigkill_mid_episode_then_resume_matches_an_uninterrupted_run(tmp_path):
    steps, kill = "16", "9"
    clean_root = tmp_path / "clean"  # the uninterrupted run, in this process
    memory = ua.memory_for(str(clean_root))
    graph = ua.build_agent(memory, steps=int(steps), checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("t1"))
    want = json.loads(json.dumps(ua.summary(memory, graph, "t1")))
    killed = _script(tmp_path / "crash", "--steps", steps, "--kill-at", kill)
    assert killed.returncode == -9  # SIGKILL inside the execute node of step 9
    resumed = _script(tmp_path / "crash", "--steps", steps, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    got = json.loads(resumed.stdout)
    assert len(got["events"]) == int(steps)
    # the selector decided every step (warm on resume): no timeout; "ood" is its decision to keep Recent-4
    assert all(f in (None, "ood") for f in got["fallback"])
    assert got["selected"] == want["selected"] and got["second_pass"] == want["second_pass"]
    assert got["events"] == want["events"]  # same summaries, responses, screenshots


def test_two_concurrent_runs_on_one_thread_one_fails_loudly_nothing_lost(tmp_path):
    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    barrier = threading.Barrier(2, timeout=30)
    steps = 10

    def gate(state):
        if state.get("step", 0) == 0:
            barrier.wait()  # both runs have read the thread's state before either writes it
        return None

    graph = ua.build_agent(memory, steps=steps, checkpointer=memory.checkpointer())
    inner = graph.nodes["observe"]
    original = inner.bound.func if hasattr(inner.bound, "func") else None
    assert original is not None

    def gated(state, runtime):
        gate(state)
        return original(state, runtime)

    inner.bound.func = gated
    outcomes: list[object] = []

    def run() -> None:
        try:
            outcomes.append(graph.invoke(ua.first_input(), ua.run_config("shared")))
        except Exception as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert len(outcomes) == 2 and len(errors) == 1, outcomes
    assert isinstance(errors[0], TraceConflictError) and "thread 'shared'" in str(errors[0])
    trace = memory.trace(graph, ua.run_config("shared"))
    assert len(trace) == steps  # the winner's every step is in the trace
    assert [e.response for e in trace.events] == [ua.reply_for(t) for t in range(1, steps + 1)]
