"""Small CPU fakes mirroring the SGLang 0.5.23 objects the plugin reads (no ``sglang`` import).

* :class:`FakeItem` ~ ``managers/schedule_batch.py:MultimodalDataItem`` (``hash``, ``pad_value``,
  ``pad_values``, ``offsets`` = absolute inclusive spans, ``model_specific_data``, ``set_hash``,
  ``set_pad_value``, ``padding_values``); sentinels derived like SGLang's ``_compute_pad_values``.
* :class:`FakeBatch` ~ ``model_executor/forward_batch_info.py:ForwardBatch`` (``forward_mode``,
  ``mm_inputs``, ``extend_prefix_lens_cpu``, ``extend_seq_lens_cpu``).
* :class:`FakeStockModel` ~ SGLang's Qwen-VL model: ``model.layers[i].self_attn.qkv_proj`` is one fused
  linear (Q, K, V columns), attention reads a per-request K/V cache (so chunked prefill and radix hits
  can be replayed), and its forward has SGLang's traps: it clamps ``input_ids`` in place and clears
  ``forward_batch.mm_inputs``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

SHIFT = 1_000_000
MASK62 = (1 << 62) - 1


def stock_pad_values(hash_value: int) -> tuple[int, ...]:
    digest = hashlib.sha256(b"fake-wide-pad" + hash_value.to_bytes(8, "big")).digest()
    return tuple(SHIFT + (int.from_bytes(digest[i : i + 8], "big") & MASK62) for i in range(0, 32, 8))


@dataclass
class FakeItem:
    offsets: list[tuple[int, int]]
    feature: bytes = b""
    modality: str = "image"
    hash: int | None = None
    pad_value: int | None = None
    pad_values: tuple[int, ...] | None = None
    identity: bytes | None = None
    model_specific_data: dict[str, Any] = field(default_factory=dict)

    def is_image(self) -> bool:
        return self.modality == "image"

    def set_hash(self, value: int) -> None:
        self.hash = value & ((1 << 64) - 1)
        self.identity = None
        self.pad_values = stock_pad_values(self.hash)
        self.pad_value = self.pad_values[0]

    def set_pad_value(self) -> None:
        if self.pad_value is None:
            self.set_hash(int.from_bytes(hashlib.sha256(self.feature).digest()[:8], "big"))

    def padding_values(self) -> tuple[int, ...]:
        return self.pad_values or (self.pad_value,)

    def padding_sequence(self, length: int) -> list[int]:
        values = self.padding_values()
        reps, rem = divmod(length, len(values))
        return list(values) * reps + list(values[:rem])


@dataclass
class FakeMMInputs:
    mm_items: list[FakeItem]


class FakeMode:
    def __init__(self, name: str) -> None:
        self.name = name

    def is_extend(self) -> bool:
        return self.name in ("extend", "mixed", "target_verify")

    def is_target_verify(self) -> bool:
        return self.name == "target_verify"

    def is_decode(self) -> bool:
        return self.name == "decode"


@dataclass
class FakeBatch:
    forward_mode: FakeMode
    mm_inputs: list[FakeMMInputs | None] | None
    extend_prefix_lens_cpu: list[int] | None
    extend_seq_lens_cpu: list[int] | None
    rids: list[str]
    extend_prefix_lens: Any = None
    extend_seq_lens: Any = None


def padded_ids(text_ids: list[int], items: list[FakeItem]) -> list[int]:
    """``text_ids`` with every item's span replaced by its sentinels (SGLang's ``pad_mm_tokens``)."""
    out = list(text_ids)
    for item in items:
        for start, end in item.offsets:
            out[start : end + 1] = item.padding_sequence(end - start + 1)
    return out


class FakeAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.hidden_size = hidden
        self.total_num_heads = heads
        self.num_heads = heads
        self.head_dim = head_dim
        self.num_kv_heads = kv_heads
        self.q_size = heads * head_dim
        self.kv_size = kv_heads * head_dim
        self.qkv_proj = nn.Linear(hidden, self.q_size + 2 * self.kv_size, bias=True)
        self.o_proj = nn.Linear(self.q_size, hidden, bias=False)


class FakeLayer(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.self_attn = FakeAttention(hidden, 4, 2, hidden // 4)
        self.mlp = nn.Linear(hidden, hidden)


class _Config:
    def __init__(self, model_type: str) -> None:
        self.model_type = model_type


class FakeStockModel(nn.Module):
    """Tiny causal LM with a fused ``qkv_proj`` and a per-request K/V cache (``self.cache[rid][layer]``)."""

    def __init__(
        self, *, num_layers: int = 4, hidden: int = 32, vocab: int = 97, model_type: str = "qwen2_5_vl"
    ) -> None:
        super().__init__()
        self.config = _Config(model_type)
        self.vocab = vocab
        self.model = nn.Module()
        self.model.embed = nn.Embedding(vocab, hidden)
        self.model.layers = nn.ModuleList(FakeLayer(hidden) for _ in range(num_layers))
        self.cache: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.loaded = False

    def load_weights(self, weights: Any) -> None:
        self.loaded = True

    def _attend(
        self, layer: FakeLayer, x: torch.Tensor, rids: list[str], lens: list[int], li: int
    ) -> torch.Tensor:
        """One fused ``qkv_proj`` over every token of the batch (as SGLang), attention per request."""
        attn = layer.self_attn
        qkv = attn.qkv_proj(x)
        q_all, k_new, v_new = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], dim=-1)
        outs, start = [], 0
        for rid, n in zip(rids, lens, strict=True):
            q, k, v = q_all[start : start + n], k_new[start : start + n], v_new[start : start + n]
            start += n
            store = self.cache.setdefault(rid, [])
            if len(store) <= li:
                store.append((k[:0], v[:0]))
            k_all, v_all = torch.cat([store[li][0], k]), torch.cat([store[li][1], v])
            store[li] = (k_all, v_all)
            total, d = k_all.shape[0], attn.head_dim
            group = attn.num_heads // attn.num_kv_heads
            qh = q.reshape(n, attn.num_heads, d)
            kh = k_all.reshape(total, attn.num_kv_heads, d).repeat_interleave(group, 1)
            vh = v_all.reshape(total, attn.num_kv_heads, d).repeat_interleave(group, 1)
            scores = torch.einsum("nhd,thd->hnt", qh, kh) / d**0.5
            pos = torch.arange(total - n, total).unsqueeze(1)
            scores = scores.masked_fill(torch.arange(total).unsqueeze(0) > pos, float("-inf"))
            outs.append(torch.einsum("hnt,thd->nhd", scores.softmax(-1), vh).reshape(n, attn.q_size))
        return attn.o_proj(torch.cat(outs))

    @torch.no_grad()
    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, forward_batch: FakeBatch
    ) -> torch.Tensor:
        ids = input_ids % self.vocab  # SGLang embeds image sentinels separately, then clamps in place
        input_ids.clamp_(max=self.vocab - 1)
        forward_batch.mm_inputs = None
        h = self.model.embed(ids)
        if forward_batch.forward_mode.is_decode():
            lens = [1] * len(forward_batch.rids)
        else:
            lens = list(forward_batch.extend_seq_lens_cpu)
        for li, layer in enumerate(self.model.layers):
            h = h + self._attend(layer, h, forward_batch.rids, lens, li)
            h = h + torch.tanh(layer.mlp(h))
        return h
