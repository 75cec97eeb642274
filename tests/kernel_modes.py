"""Run HGKV tests through the torch reference or the fused Triton kernel (under Triton's CPU interpreter)."""

from __future__ import annotations

import pytest

KERNEL_MODES = ("torch", "triton")


def select_kernel(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Select ``mode`` for every HGKV update made while the test runs (CPU tensors: the interpreter).

    ``TRITON_INTERPRET`` is read when the kernel is first compiled for a mode, so setting it here (after
    ``triton`` may already be imported) is enough; the kernel module keeps one build per mode.
    """
    monkeypatch.setenv("CAUSALCACHE_HGKV_KERNEL", mode)
    if mode == "triton":
        pytest.importorskip("triton", reason="the fused HGKV kernel needs triton (`pip install triton`)")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
