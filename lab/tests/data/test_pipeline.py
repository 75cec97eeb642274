"""End to end on test-made AgentNet data with the tiny offline Qwen-VL model:
import -> mine -> train HGKV -> label with the adapted policy -> train the selector (ONNX export) ->
CausalCacheMemory.from_yaml with that policy and selector runs a LangGraph episode."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from data_builders import write_agentnet
from typing_extensions import TypedDict

from causalcache_lab.hgkv.groups import assign_split
from causalcache_memory.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("langgraph")

CODES = [
    "computer.wait()",
    "pyautogui.click(x=0.5, y=0.3)",
    'pyautogui.write(message="hello")',
    "pyautogui.click(x=0.1, y=0.1)",
    'pyautogui.write(message="world")',
    "pyautogui.hotkey(['ctrl', 's'])",
    "pyautogui.moveTo(x=0.505, y=0.302)\npyautogui.click()",
    'computer.terminate(status="success")',
]


class State(TypedDict, total=False):
    goal: str
    steps: int


def _salt(ids: list[str]) -> str:
    """A split salt giving at least two train and one dev trajectory (deterministic search)."""
    for k in range(200):
        splits = [assign_split(i, dev=0.3, test=0.1, salt=f"s{k}") for i in ids]
        if splits.count("train") >= 2 and splits.count("dev") >= 1:
            return f"s{k}"
    raise AssertionError("no salt")


@pytest.fixture
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(before)


def test_real_data_pipeline(tmp_path, one_thread, capsys) -> None:
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    ids = [f"task-{k}" for k in range(8)]
    tasks = [
        {
            "task_id": i,
            "instruction": f"Save the note {k}",
            "codes": CODES,
            "task_completed": True,
            "size": (56, 56),
        }
        for k, i in enumerate(ids)
    ]
    src = write_agentnet(tmp_path / "agentnet", tasks)
    data = tmp_path / "dataset"
    groups = tmp_path / "groups.jsonl"
    salt = _salt(ids)
    # 1. import and mine (B = 1 trained, B = 2 held out)
    assert main(["data", "import", "agentnet", str(src), "--out", str(data)]) == 0
    mine = ["data", "mine", str(data), "--out", str(groups), "--budgets", "1", "--held-out", "2"]
    assert main([*mine, "--dev", "0.3", "--test", "0.1", "--salt", salt]) == 0
    records = [json.loads(line) for line in groups.read_text().splitlines()]
    assert {r["budget"] for r in records} == {1, 2} and all(
        r["held_out"] == (r["budget"] == 2) for r in records
    )
    assert all((r["target_step"], r["earlier_step"]) == ("6", "1") for r in records)

    # 2. train HGKV from a recipe on the imported data
    model = build_tiny_qwen_vl(tmp_path / "tiny", family="qwen2_5_vl")
    hgkv_recipe = tmp_path / "hgkv.yaml"
    hgkv_recipe.write_text(
        yaml.safe_dump(
            {
                "model": str(model),
                "archive": str(data / "archive"),
                "data": {
                    "trajectories": [str(data / "trajectories.jsonl")],
                    "groups": str(groups),
                    "budgets": [1],
                    "held_out_budgets": [2],
                },
                "train": {"steps": 2, "eval_every": 1, "batch_size": 2, "bootstrap_reps": 100},
                "render": {"short_summaries": True},
                "output_dir": str(tmp_path / "hgkv"),
            }
        )
    )
    code = main(["train", "hgkv", "--recipe", str(hgkv_recipe)])
    assert code in (0, 3)  # 3: no checkpoint passed the dev gates (weights in final/)
    adapter = tmp_path / "hgkv" / ("best" if code == 0 else "final")
    assert (adapter / "adapter_model.safetensors").is_file()
    log = json.loads((tmp_path / "hgkv" / "train_log.json").read_text())
    assert log["groups"]["train"] >= 2 and log["groups"]["dev"] >= 1
    did = tmp_path / "did.json"
    args = ["eval", "did", "--recipe", str(hgkv_recipe), "--adapter", f"hgkv={adapter}", "--bootstrap", "100"]
    assert main([*args, "--json", str(did)]) == 0
    assert set(json.loads(did.read_text())["adapters"]["hgkv"]) == {"1", "2"}  # held-out B = 2 evaluated

    # 3. label with the adapted policy, 4. train the selector and export it to ONNX
    sel_recipe = tmp_path / "selector.yaml"
    sel_recipe.write_text(
        yaml.safe_dump(
            {
                "data": {"trajectories": str(data / "trajectories.jsonl")},
                "archive": {"url": str(data / "archive")},
                "policy": {
                    "factory": "causalcache_memory.runtime.transformers_policy:TransformersPolicy.from_pretrained",
                    "kwargs": {"path": str(model), "adapter": str(adapter), "max_new_tokens": 4},
                },
                "labels": {
                    "output": str(tmp_path / "labels.jsonl"),
                    "budgets": [1],
                    "path_length": 1,
                    "path_candidates": 2,
                    "max_states_per_trajectory": 1,
                },
                "train": {
                    "output_dir": str(tmp_path / "selector"),
                    "epochs": 2,
                    "description": "pipeline test",
                    # the split data mine used (one split function), and a smoke run's minimums
                    "splits": [0.6, 0.3, 0.1],
                    "split_salt": salt,
                    "min_train_states": 2,
                    "min_dev_states": 1,
                },
                "ladder": {
                    "budgets": [1],
                    "rules": ["learned", "random"],
                    "max_states_per_trajectory": 1,
                    "bootstrap": 50,
                    "split": "all",
                },
            }
        )
    )
    assert main(["label", "selector", "--recipe", str(sel_recipe), "--no-progress", "--max-states", "4"]) == 0
    assert "4 new records" in capsys.readouterr().out
    # resumable: a second run adds the remaining states and skips the four already there
    assert main(["label", "selector", "--recipe", str(sel_recipe), "--no-progress"]) == 0
    assert "(4 already present of 8 planned)" in capsys.readouterr().out
    assert main(["train", "selector", "--recipe", str(sel_recipe), "--skip-ablation"]) == 0
    onnx_path = tmp_path / "selector" / "selector.onnx"
    assert onnx_path.is_file()
    meta = json.loads((tmp_path / "selector" / "metadata.json").read_text())
    assert meta["data_description"] == "pipeline test" and meta["labels"]["labeller"]
    ladder = tmp_path / "ladder.json"
    assert main(["eval", "ladder", "--recipe", str(sel_recipe), "--json", str(ladder), "--no-progress"]) == 0
    assert ladder.is_file()

    # 5. deploy: the adapted policy and the trained selector from one YAML, in a LangGraph episode
    from langgraph.graph import END, START, StateGraph
    from PIL import Image

    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    config = tmp_path / "causalcache.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "budget": 1,
                "allocation": {
                    "allocator": "selector",
                    "selector": {"model_path": str(tmp_path / "selector")},
                },
                "archive": {"url": str(tmp_path / "deploy-archive")},
                "policy": {
                    "kind": "transformers",
                    "transformers": {
                        "model_path": str(model),
                        "adapter_path": str(adapter),
                        "max_new_tokens": 8,
                    },
                },
                "checkpointer": {"kind": "memory"},
            }
        )
    )
    memory = CausalCacheMemory.from_yaml(config)

    def shoot(state: State) -> bytes:
        buf = io.BytesIO()
        Image.new("RGB", (56, 56), (40 * state.get("steps", 0) % 256, 90, 160)).save(buf, format="PNG")
        return buf.getvalue()

    def act(state: State) -> dict:
        return {"steps": state.get("steps", 0) + 1}

    builder = StateGraph(State)
    builder.add_node("observe", memory.observe_node(shoot))
    builder.add_node("decide", memory.decide_node(schema=State))
    builder.add_node("act", act)
    builder.add_edge(START, "observe")
    builder.add_edge("observe", "decide")
    builder.add_edge("decide", "act")
    builder.add_conditional_edges(
        "act", lambda s: END if s.get("steps", 0) >= 4 else "observe", ["observe", END]
    )
    graph = builder.compile(checkpointer=memory.checkpointer())
    run = {"configurable": {"thread_id": "pipeline"}, "recursion_limit": 50}
    final = graph.invoke({"goal": "Save the note 1", "steps": 0}, run)
    assert final["steps"] == 4
    log = memory.episode_log(graph, run)
    assert len(log) == 4 and all(len(r["selected"]) <= 1 for r in log)
    trace = memory.trace(graph, run)
    assert trace is not None and len(trace) >= 3
