"""Everything the config names can be built: archive, every policy runtime, every allocator."""

from __future__ import annotations

import pytest

from causalcache_memory.config import parse_config
from causalcache_memory.factory import build_archive, build_controller
from causalcache_memory.runtime.registry import build_policy


def test_archive_from_config(tmp_path, make_png) -> None:
    cfg = parse_config({"archive": {"url": str(tmp_path / "a"), "formats": ["png"], "max_pixels": 10_000}})
    archive = build_archive(cfg.archive)
    sha = archive.put(make_png()).sha256
    assert archive.get_bytes(sha) == make_png()
    mem = build_archive(parse_config({"archive": {"url": "memory://factory-test"}}).archive)
    assert mem.get_bytes(mem.put(make_png()).sha256) == make_png()


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"kind": "simulated"}, "SimulatedPolicy"),
        ({"kind": "sglang", "sglang": {"urls": ["http://127.0.0.1:9"], "max_retries": 0}}, "SGLangPolicy"),
        ({"kind": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}, "OpenAIPolicy"),
    ],
)
def test_policy_runtimes_from_config(policy, expected) -> None:
    built = build_policy(parse_config({"policy": policy}).policy)
    assert type(built).__name__ == expected
    assert callable(built.generate) and callable(built.score)


def test_transformers_runtime_from_config(tmp_path) -> None:
    pytest.importorskip("transformers")
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    model = build_tiny_qwen_vl(tmp_path / "tiny")
    cfg = parse_config({"policy": {"kind": "transformers", "transformers": {"model_path": str(model)}}})
    assert type(build_policy(cfg.policy)).__name__ == "TransformersPolicy"


@pytest.mark.parametrize("name", ["recent", "summary_only", "random", "rgb", "selector"])
def test_controller_for_every_allocator(tmp_path, name) -> None:
    cfg = parse_config(
        {
            "allocation": {"allocator": name},
            "archive": {"url": str(tmp_path / "a")},
            "policy": {"kind": "simulated"},
        }
    )
    controller = build_controller(cfg, policy=build_policy(cfg.policy))
    assert controller.allocator.name == name
    assert controller.allocator.uses_witness == (name == "selector")
    controller.close()
