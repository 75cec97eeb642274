"""Which selector model the benchmarks run: the bundled one, or a throwaway scorer of the same shape.

The latency of the learned selector depends on the scorer's architecture and on how many beam steps
its weights make the search take, not on what it learned. When this installation bundles no trained
model, :func:`benchmark_selector_model` exports a *throwaway*
:class:`~causalcache_lab.selector.model.SetScorerModel` (seeded random weights) through the same
:func:`~causalcache_lab.selector.export.export_onnx` path a trained model takes, so its graph,
inputs and metadata are exactly a trained model's. Results produced with it say so (``selector_model``
in the JSON). Needs the ``[torch]`` extra.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from causalcache_memory._optional import require

__all__ = ["benchmark_selector_model", "write_throwaway_selector"]


def write_throwaway_selector(path: str | Path, *, hidden: int = 64, embed: int = 32, seed: int = 0) -> Path:
    """Export a random-weight :class:`SetScorerModel` (seeded) with the library's feature schema to ``path``."""
    torch = require("torch", purpose="building the benchmark's throwaway selector model")
    from causalcache_lab.selector.export import export_onnx
    from causalcache_lab.selector.model import ScorerConfig, SetScorerModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SetScorerModel(ScorerConfig(hidden=hidden, embed=embed))
    return export_onnx(model, path, metadata={"data_description": "none: random weights for benchmarks"})


def benchmark_selector_model(workdir: str | Path | None = None) -> tuple[Path, str]:
    """``(path, provenance)``: the bundled model if shipped, else a throwaway one written under ``workdir``.

    ``provenance`` is ``"bundled"`` or ``"throwaway (random weights, same architecture)"``.
    """
    from causalcache_memory.errors import SelectorError
    from causalcache_memory.selector.allocator import bundled_model_path

    try:
        return bundled_model_path(), "bundled"
    except SelectorError:
        pass
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="causalcache-bench-"))
    path = write_throwaway_selector(folder / "selector.onnx")
    return path, "throwaway (random weights, same architecture)"
