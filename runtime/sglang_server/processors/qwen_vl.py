"""SGLang 0.5.23's Qwen-VL processor plus per-image roles in the radix key.

See :class:`~causalcache_memory.runtime.sglang_server.plugin.RoleAwareProcessorMixin` and
:mod:`causalcache_memory.runtime.sglang_server.roles`.
"""

from __future__ import annotations

from sglang.srt.managers.schedule_batch import _MM_WIDE_PAD_MASK, MM_PAD_SHIFT_VALUE
from sglang.srt.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration
from sglang.srt.models.qwen3_vl import Qwen3VLForConditionalGeneration
from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor

from causalcache_memory.runtime.sglang_server.plugin import RoleAwareProcessorMixin

__all__ = ["CausalCacheQwenVLProcessor"]


class CausalCacheQwenVLProcessor(RoleAwareProcessorMixin, QwenVLImageProcessor):
    models = [Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration]  # noqa: RUF012 (SGLang's API)
    _pad_shift = MM_PAD_SHIFT_VALUE
    _pad_mask = _MM_WIDE_PAD_MASK
