"""``causalcache data import|stats|mine`` on an AgentNet fixture."""

from __future__ import annotations

import json

from data_builders import write_agentnet

from causalcache_memory.cli.main import main

CODES = [
    "computer.wait()",
    "pyautogui.click(x=0.5, y=0.3)",
    'pyautogui.write(message="hello")',
    "pyautogui.click(x=0.1, y=0.1)",
    'pyautogui.write(message="world")',
    "pyautogui.hotkey(['ctrl', 's'])",
    "pyautogui.scroll(-3)",
    "pyautogui.click(x=0.505, y=0.302)",
    "pyautogui.explode()",
]


def test_import_stats_mine(tmp_path, capsys) -> None:
    tasks = [
        {"task_id": f"task-{k}", "instruction": f"Do thing {k}", "codes": CODES, "task_completed": k != 3}
        for k in range(6)
    ]
    src = write_agentnet(tmp_path / "an", tasks)
    out = tmp_path / "ds"
    assert main(["data", "import", "agentnet", str(src), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "6 trajectories (5 successful), 54 steps" in text and "6 unparsed actions kept" in text
    assert "x_(T+1) in 6" in text and "explode" in text
    assert main(["data", "import", "agentnet", str(src), "--out", str(out)]) == 1  # refuses to overwrite
    assert "already exists" in capsys.readouterr().err

    assert main(["data", "stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tasks"] == 6 and stats["steps"] == 54 and stats["successes"] == 5
    assert stats["unparsed_actions"] == 6 and sum(stats["splits"].values()) == 5
    assert "groups_per_budget" not in stats

    groups = tmp_path / "groups.jsonl"
    assert main(["data", "mine", str(out), "--out", str(groups), "--salt", "s"]) == 0
    assert "B=8: 0 (held out)" in capsys.readouterr().out
    records = [json.loads(line) for line in groups.read_text().splitlines()]
    assert len(records) == 15  # 5 successful trajectories x t=8 x B in {1, 2, 4}
    rec = next(r for r in records if r["budget"] == 4)
    assert rec["trajectory_id"].startswith("task-") and rec["split"] in ("train", "dev", "test")
    assert (rec["target_step"], rec["earlier_step"]) == ("7", "1")  # AgentNet indices, 0-based
    assert rec["arms"] == {"recent": [4, 5, 6, 7], "relevant": [1, 5, 6, 7], "wrong": [2, 5, 6, 7]}
    assert rec["arm_steps"]["relevant"] == ["0", "4", "5", "6"]
    assert main(["data", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "B=1: 5, B=2: 5, B=4: 5" in text and "unparsed actions: 6" in text
    assert main(["data", "mine", str(out), "--out", str(groups), "--radius", "0.0001"]) == 0
    assert "B=1: 0" in capsys.readouterr().out  # 0.505 vs 0.5 is outside a tiny radius
