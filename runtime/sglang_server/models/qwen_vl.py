"""Qwen2.5-VL and Qwen3-VL for SGLang 0.5.23 with the history-gated K/V adapter.

Named exactly like SGLang's classes, so ``SGLANG_EXTERNAL_MODEL_PACKAGE=causalcache_memory.runtime.
sglang_server.models`` makes them replace the built-in ones. Everything but the gate is SGLang's: see
:class:`~causalcache_memory.runtime.sglang_server.plugin.HGKVModelMixin`.
"""

from __future__ import annotations

from sglang.srt.managers.schedule_batch import _MM_WIDE_PAD_MASK, MM_PAD_SHIFT_VALUE
from sglang.srt.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration as _Qwen2_5_VL
from sglang.srt.models.qwen3_vl import Qwen3VLForConditionalGeneration as _Qwen3VL

from causalcache_memory.runtime.sglang_server.plugin import HGKVModelMixin

__all__ = ["EntryClass", "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration"]


class Qwen2_5_VLForConditionalGeneration(HGKVModelMixin, _Qwen2_5_VL):
    _pad_shift = MM_PAD_SHIFT_VALUE
    _pad_mask = _MM_WIDE_PAD_MASK


class Qwen3VLForConditionalGeneration(HGKVModelMixin, _Qwen3VL):
    _pad_shift = MM_PAD_SHIFT_VALUE
    _pad_mask = _MM_WIDE_PAD_MASK


EntryClass = [Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration]
