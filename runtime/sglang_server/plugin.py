"""Mixins that turn SGLang's Qwen-VL model and processor classes into the HGKV-serving ones.

No ``sglang`` import here: :mod:`.models.qwen_vl` and :mod:`.processors.qwen_vl` combine these mixins with
SGLang 0.5.23's classes (registration is by class name), and the tests combine them with small fakes.

Environment (set by ``causalcache serve``):

* ``CAUSALCACHE_HGKV_ADAPTER``: adapter directory; unset serves the frozen model (roles still key the
  radix cache, no residual is computed).
* ``CAUSALCACHE_HGKV_EXPECT``: optional JSON ``{"r": 8, "alpha": 16, "num_layers": 8}`` the adapter must match.
* ``CAUSALCACHE_HGKV_VERIFY``: ``0`` skips the on-device check of the gated rows' ids.
* ``CAUSALCACHE_HGKV_KERNEL``: ``auto`` (default: the fused Triton K/V update on CUDA when triton is
  importable), ``triton`` or ``torch`` (the reference path); see :mod:`causalcache_memory.runtime.hgkv.kernel`.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime.sglang_server.roles import (
    DEFAULT_MASK,
    DEFAULT_SHIFT,
    HISTORY,
    apply_roles,
    parse_roles,
)

__all__ = ["ADAPTER_ENV", "EXPECT_ENV", "HGKVModelMixin", "RoleAwareProcessorMixin", "model_shape"]

ADAPTER_ENV = "CAUSALCACHE_HGKV_ADAPTER"
EXPECT_ENV = "CAUSALCACHE_HGKV_EXPECT"
logger = logging.getLogger("causalcache_memory.sglang_server")


def model_shape(model: Any) -> Any:
    """:class:`~.adapter.ModelShape` of a served SGLang Qwen-VL model (``model.model.layers[i].self_attn``)."""
    from causalcache_memory.runtime.sglang_server.adapter import ModelShape

    layers = model.model.layers
    attn = layers[0].self_attn
    tp = max(1, int(attn.total_num_heads) // max(1, int(attn.num_heads)))
    return ModelShape(
        model_type=str(model.config.model_type),
        num_layers=len(layers),
        hidden_size=int(attn.hidden_size),
        q_size=int(attn.q_size),
        kv_size=int(attn.kv_size),
        tp_size=tp,
    )


class HGKVModelMixin:
    """Loads the base weights, then the adapter; gates history-image tokens in each extend pass."""

    _causalcache_hgkv: Any = None

    def load_weights(self, weights: Any, *args: Any, **kwargs: Any) -> Any:
        result = super().load_weights(weights, *args, **kwargs)  # type: ignore[misc]
        self.attach_hgkv(os.environ.get(ADAPTER_ENV) or None)
        return result

    def attach_hgkv(self, directory: str | None, *, expect: dict[str, Any] | None = None) -> None:
        """Load and hook the adapter at ``directory`` (None: frozen). Refuses a mismatched adapter."""
        from causalcache_memory.runtime.hgkv.kernel import KERNEL_ENV
        from causalcache_memory.runtime.sglang_server.adapter import load_server_adapter
        from causalcache_memory.runtime.sglang_server.gating import ServerHGKV

        if self._causalcache_hgkv is not None or directory is None:
            if directory is None:
                logger.warning(
                    "causalcache: %s is unset; serving the frozen model (roles key the cache)", ADAPTER_ENV
                )
            return
        pp = getattr(getattr(self, "pp_group", None), "world_size", 1)
        if pp != 1:
            raise ConfigError(f"HGKV serving needs pipeline parallel size 1, got {pp}")
        if expect is None and os.environ.get(EXPECT_ENV):
            expect = json.loads(os.environ[EXPECT_ENV])
        shape = model_shape(self)
        weights = load_server_adapter(directory, shape, expect=expect)
        hgkv = ServerHGKV(weights, q_size=shape.q_size, kv_size=shape.kv_size)
        layers = self.model.layers  # type: ignore[attr-defined]
        hgkv.install(layers, device=layers[hgkv.layers[0]].self_attn.qkv_proj.weight.device)
        self._causalcache_hgkv = hgkv
        logger.warning(
            "causalcache: HGKV adapter %s active on layers %s (K/V update: %s=%s)",
            directory,
            list(hgkv.layers),
            KERNEL_ENV,
            hgkv.kernel,
        )

    def forward(self, input_ids: Any, positions: Any, forward_batch: Any, *args: Any, **kwargs: Any) -> Any:
        from causalcache_memory.runtime.sglang_server.gating import history_rows

        hgkv = self._causalcache_hgkv
        if hgkv is None:
            return super().forward(input_ids, positions, forward_batch, *args, **kwargs)  # type: ignore[misc]
        plan = history_rows(
            forward_batch, int(input_ids.shape[0]), shift=self._pad_shift, mask=self._pad_mask
        )
        with hgkv.active(plan, input_ids):
            return super().forward(input_ids, positions, forward_batch, *args, **kwargs)  # type: ignore[misc]

    _pad_shift = DEFAULT_SHIFT
    _pad_mask = DEFAULT_MASK


class RoleAwareProcessorMixin:
    """Reads per-image roles from ``mm_processor_kwargs`` and puts ``history`` into the images' radix key."""

    _pad_shift = DEFAULT_SHIFT
    _pad_mask = DEFAULT_MASK

    async def process_mm_data_async(
        self, image_data: Any, input_text: Any, request_obj: Any, *args: Any, **kwargs: Any
    ) -> Any:
        out = await super().process_mm_data_async(  # type: ignore[misc]
            image_data, input_text, request_obj, *args, **kwargs
        )
        images = image_data if isinstance(image_data, list) else ([image_data] if image_data else [])
        roles = parse_roles(
            getattr(request_obj, "mm_processor_kwargs", None),
            rid=getattr(request_obj, "rid", None),
            n_images=len(images),
        )
        if out is None or roles is None or HISTORY not in roles:
            return out  # no history image: exactly the stock processor's output
        for item in out.mm_items:
            if item.is_image() and item.pad_value is None:
                item.set_pad_value()  # the hash SGLang would compute later, now (as SGLANG_MM_PRECOMPUTE_HASH)
        apply_roles(out.mm_items, roles, shift=self._pad_shift, mask=self._pad_mask)
        # the parent pre-padded the ids with the stock sentinels; rebuild them with the role sentinels
        out.padded_input_ids = type(out).build_padded_input_ids(out.input_ids, out.mm_items)
        return out
