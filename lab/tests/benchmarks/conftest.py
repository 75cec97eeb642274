"""Fixtures of the benchmark suite: a throwaway selector model and small screens (fast in normal runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: screenshot size used by the suite's scenario tests (the CLI uses 1920x1080)
SMALL_SCREEN = (320, 180)


@pytest.fixture(scope="session")
def selector_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled selector if shipped, else a throwaway model of the same architecture."""
    pytest.importorskip("onnx")
    from causalcache_lab.bench.selector_model import benchmark_selector_model

    path, _ = benchmark_selector_model(tmp_path_factory.mktemp("selector"))
    return path
