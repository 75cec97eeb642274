"""Fixtures for HGKV tests: a tiny offline Qwen2.5-VL model, an in-memory archive, colour-recall data."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    return build_tiny_qwen_vl(tmp_path_factory.mktemp("hgkv-tiny") / "qwen2_5_vl", family="qwen2_5_vl")


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest single-threaded on a shared 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def load_policy(tiny_dir):
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    def load(**kwargs):
        return TransformersPolicy.from_pretrained(tiny_dir, max_new_tokens=4, **kwargs)

    return load


@pytest.fixture
def randomize():
    """``randomize(adapter)``: random non-zero adapter weights (so a zero B cannot make a test pass)."""
    import torch

    def apply(adapter, scale: float = 0.5, seed: int = 1) -> None:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in adapter.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * scale)

    return apply
