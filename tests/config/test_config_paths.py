"""Relative paths in a YAML config resolve against the file's folder (causalcache_memory/config/paths.py)."""

from __future__ import annotations

from pathlib import Path

from causalcache_memory.config import load_config, parse_config
from causalcache_memory.config.paths import resolve_config_paths


def test_relative_paths_resolve_against_the_yaml_folder(tmp_path, monkeypatch):
    folder = tmp_path / "project" / "conf"
    folder.mkdir(parents=True)
    (folder / "cc.yaml").write_text(
        "archive: {url: ../data/archive}\n"
        "checkpointer: {path: cp.sqlite}\n"
        "allocation: {selector: {model_path: models/sel.onnx}}\n"
    )
    monkeypatch.chdir(tmp_path)  # somewhere else
    cfg = load_config(folder / "cc.yaml")
    assert cfg.archive.url == str((tmp_path / "project" / "data" / "archive").resolve())
    assert cfg.checkpointer.path == str((folder / "cp.sqlite").resolve())
    assert cfg.allocation.selector.model_path == str((folder / "models" / "sel.onnx").resolve())


def test_defaults_go_next_to_the_file_and_urls_absolute_paths_stay(tmp_path):
    (tmp_path / "a.yaml").write_text("budget: 2\n")
    cfg = load_config(tmp_path / "a.yaml")
    assert Path(cfg.archive.url) == (tmp_path / ".causalcache" / "archive").resolve()
    assert Path(cfg.checkpointer.path) == (tmp_path / ".causalcache" / "checkpoints.sqlite").resolve()
    raw = {
        "archive": {"url": "s3://bucket/screens"},
        "checkpointer": {"kind": "postgres", "uri": "postgresql://x"},
        "allocation": {"selector": {"model_path": "/abs/model.onnx"}},
    }
    out = resolve_config_paths(raw, tmp_path)
    assert out["archive"]["url"] == "s3://bucket/screens" and "path" not in out["checkpointer"]
    assert out["allocation"]["selector"]["model_path"] == "/abs/model.onnx"
    assert raw["checkpointer"] == {"kind": "postgres", "uri": "postgresql://x"}  # input not mutated
    assert resolve_config_paths({"checkpointer": {"path": ":memory:"}}, tmp_path)["checkpointer"]["path"] == (
        ":memory:"
    )
    assert resolve_config_paths(["not", "a", "mapping"], tmp_path) == ["not", "a", "mapping"]


def test_configs_built_in_code_keep_relative_paths():
    assert parse_config({"archive": {"url": "rel/archive"}}).archive.url == "rel/archive"
