"""One action parser: every importer's fixtures, read again by the runtime reply parser, give the same
:class:`Action` the importer stored (issue 25: the AgentNet importer used to accept forms the runtime
rejected, so deployed events differed from training events)."""

from __future__ import annotations

import json

import pytest
from data_builders import write_agentnet, write_androidcontrol, write_mobileworld_task, write_osworld_example
from test_agentnet import CODES
from test_mobile import MW_ACTIONS
from test_osworld import OSWORLD_STEPS

from causalcache_lab.data.loaders.agentnet import load_agentnet
from causalcache_lab.data.loaders.jsonl import load_jsonl
from causalcache_lab.data.loaders.mobileworld import load_mobileworld
from causalcache_lab.data.loaders.osworld import load_osworld
from causalcache_memory.actions import parse_action
from causalcache_memory.errors import ActionParseError

ANDROID_ACTIONS = [
    {"action_type": "open_app", "app_name": "Photos"},
    {"action_type": "click", "x": 107, "y": 0},
    {"action_type": "scroll", "direction": "down"},
    "not json at all",
    {"action_type": "navigate_back"},
]
JSONL_ACTIONS = [
    "computer.triple_click(x=0.3, y=0.4)",
    "pyautogui.hotkey(['ctrl', 'end'])",
    "pyautogui.hotkey('ctrl', 'end')",
    '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [0.5, 0.5]}}'
    "</tool_call>",
    {"action": "click", "coordinate": [0.25, 0.75]},
    "Thought: done\nAction: DONE",
]


def _same_as_runtime(traj, raws, platform: str) -> int:
    """Parse each stored raw action with the runtime parser under the trajectory's recorded coordinate
    system; parsed steps must give the importer's action, unparsed ones must be refused. Returns how
    many steps were compared."""
    assert len(traj.steps) == len(raws)
    coords = traj.metadata.get("coords") or "auto"
    for step, raw in zip(traj.steps, raws, strict=True):
        if step.parsed:
            got = parse_action(raw, platform=platform, screen_size=traj.screen_size, coords=coords)
            assert got == step.action, (raw, got, step.action)
        else:
            with pytest.raises(ActionParseError):
                parse_action(raw, platform=platform, screen_size=traj.screen_size, coords=coords)
    return len(raws)


def test_agentnet_fixture(tmp_path, archive) -> None:
    src = write_agentnet(
        tmp_path, [{"task_id": "t", "instruction": "g", "codes": CODES, "task_completed": True}]
    )
    (traj,) = load_agentnet(src, archive).trajectories
    assert traj.metadata["coords"] == "relative"
    assert _same_as_runtime(traj, CODES, "desktop") == len(CODES)
    assert sum(s.parsed for s in traj.steps) == len(CODES) - 1  # only the frobnicate call is unparsed


def test_osworld_fixture(tmp_path, archive) -> None:
    write_osworld_example(tmp_path / "r", "chrome", "ex-1", OSWORLD_STEPS)
    (traj,) = load_osworld(tmp_path / "r", archive).trajectories
    assert traj.metadata["coords"] == "absolute"
    _same_as_runtime(traj, [a for _, a in OSWORLD_STEPS], "desktop")


def test_mobileworld_fixture(tmp_path, archive) -> None:
    write_mobileworld_task(tmp_path / "mw", "task", MW_ACTIONS)
    (traj,) = load_mobileworld(tmp_path / "mw", archive).trajectories
    assert traj.metadata["coords"] == "absolute"
    _same_as_runtime(traj, MW_ACTIONS, "mobile")


def test_androidcontrol_fixture(tmp_path, archive) -> None:
    pytest.importorskip("tfrecord")
    from causalcache_lab.data.loaders.androidcontrol import load_androidcontrol

    path = write_androidcontrol(
        tmp_path / "shard", [{"episode_id": 7, "goal": "g", "actions": ANDROID_ACTIONS}]
    )
    (traj,) = load_androidcontrol(path, archive).trajectories
    raws = [a if isinstance(a, str) else json.dumps(a) for a in ANDROID_ACTIONS]
    _same_as_runtime(traj, raws, "mobile")


def test_jsonl_fixture(tmp_path, archive) -> None:
    from data_builders import png

    steps = []
    for k, action in enumerate(JSONL_ACTIONS):
        (tmp_path / f"{k}.png").write_bytes(png(k))
        steps.append({"action": action, "screenshot": f"{k}.png"})
    record = {"trajectory_id": "r", "goal": "g", "success": True, "steps": steps}
    src = tmp_path / "logs.jsonl"
    src.write_text(json.dumps(record) + "\n", encoding="utf-8")
    (traj,) = load_jsonl(src, archive).trajectories
    assert all(s.parsed for s in traj.steps)
    assert traj.steps[0].action.amount == 3 and traj.steps[1].action.keys == ("ctrl", "end")
    _same_as_runtime(traj, JSONL_ACTIONS, "auto")
