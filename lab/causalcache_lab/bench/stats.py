"""Small helpers shared by the benchmark scenarios: percentiles and the machine description."""

from __future__ import annotations

import functools
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["machine_info", "owns_workdir", "percentiles"]

F = TypeVar("F", bound=Callable[..., Any])


def owns_workdir(fn: F) -> F:
    """Give a scenario a temporary ``workdir`` (removed afterwards) when the caller passes none."""

    @functools.wraps(fn)
    def wrapper(*args: Any, workdir: Any = None, **kwargs: Any) -> Any:
        if workdir is not None:
            return fn(*args, workdir=workdir, **kwargs)
        with tempfile.TemporaryDirectory(prefix="causalcache-bench-") as tmp:
            return fn(*args, workdir=tmp, **kwargs)

    return wrapper  # type: ignore[return-value]


def percentiles(samples_ms: Sequence[float], *, digits: int = 3) -> dict[str, float]:
    """``{"p50", "p95", "p99", "mean", "n"}`` of millisecond samples (linear interpolation between ranks)."""
    if not samples_ms:
        return {"p50": math.nan, "p95": math.nan, "p99": math.nan, "mean": math.nan, "n": 0}
    data = sorted(samples_ms)

    def q(p: float) -> float:
        pos = (len(data) - 1) * p
        lo, hi = math.floor(pos), math.ceil(pos)
        return data[lo] + (data[hi] - data[lo]) * (pos - lo)

    return {
        "p50": round(q(0.50), digits),
        "p95": round(q(0.95), digits),
        "p99": round(q(0.99), digits),
        "mean": round(sum(data) / len(data), digits),
        "n": len(data),
    }


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """What the figures were measured on: cores, CPU model, Python and library versions."""
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "onnxruntime": _version("onnxruntime"),
        "pillow": _version("pillow"),
        "numpy": _version("numpy"),
        "langgraph": _version("langgraph"),
        "causalcache_memory": _version("causalcache-memory"),
    }
