"""A YAML config with relative paths works from another working directory (run, then resume there)."""

from __future__ import annotations

import user_agent as ua

from causalcache_memory.integrations.langgraph import CausalCacheMemory


def test_yaml_relative_paths_work_from_another_directory(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "causalcache.yaml").write_text(
        "budget: 2\n"
        "allocation: {allocator: recent}\n"
        "archive: {url: state/archive}\n"
        "checkpointer: {kind: sqlite, path: state/checkpoints.sqlite}\n"
    )
    monkeypatch.chdir(project)
    memory = CausalCacheMemory.from_yaml("causalcache.yaml")
    graph = ua.build_agent(memory, steps=6, checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("y1"))

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # resume from another directory, same YAML
    memory = CausalCacheMemory.from_yaml("../project/causalcache.yaml", allocation="recent")
    graph = ua.build_agent(memory, steps=9, checkpointer=memory.checkpointer())
    assert len(memory.trace(graph, ua.run_config("y1"))) == 6  # found the archive and the checkpoints
    graph.invoke({}, ua.run_config("y1"))  # continue the episode to 9 steps
    assert len(memory.trace(graph, ua.run_config("y1"))) == 9
    assert not (elsewhere / ".causalcache").exists() and not (elsewhere / "state").exists()
    assert (project / "state" / "archive").is_dir()
