"""HGKV prefill overhead on a random-weight Qwen2.5-VL built from a 7B-sized config (no download).

Measures, for one retained-turn prompt (text header, ``--history`` history screenshots, the current
screenshot; 1080p images = 2691 tokens each, Qwen2.5-VL's 28-pixel merged patches on a 1092x1932 resize):

* language-model prefill latency of the frozen model, of the model with the transformers HGKV adapter
  wrapped but no history image (gate absent), and with the gate active on the history-image tokens
  (the transformers runtime: dense residual + ``torch.where``);
* the server-side masked K/V update (:class:`causalcache_memory.runtime.sglang_server.gating.ServerHGKV`:
  gather history rows, rank-8 residuals, scatter into the fused ``qkv_proj`` output) per adapted layer and
  for all adapted layers, next to one fused ``qkv_proj`` matmul of the same tokens.

Prints one JSON object. ``--tiny`` runs a tiny config on CPU (a smoke test of the script itself)::

    python tests/gpu/bench_hgkv_prefill.py                 # CUDA, bf16, 7B-sized config
    python tests/gpu/bench_hgkv_prefill.py --tiny          # CPU smoke test
    python tests/gpu/bench_hgkv_prefill.py --kernel auto   # with the fused Triton kernel (bench_hgkv_kernel.py)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

TOKENS_1080P = 39 * 69  # smart_resize(1080, 1920) to multiples of 28 -> 1092 x 1932 -> 39 x 69 merged patches

CONFIG_7B = {
    "text": {
        "vocab_size": 152064,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "max_position_embeddings": 128000,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
    },
    "vision": {
        "depth": 2,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "out_hidden_size": 3584,
    },
}
CONFIG_TINY = {
    "text": {
        "vocab_size": 256,
        "bos_token_id": None,
        "eos_token_id": None,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
    },
    "vision": {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64},
}


def layout(history: int, image_tokens: int, header: int, turn_text: int) -> tuple[int, list[tuple[int, int]]]:
    """Total tokens and the history-image spans of the paper's prompt order (header, turns, current)."""
    pos, spans = header, []
    for _ in range(history):
        pos += turn_text
        spans.append((pos, pos + image_tokens))
        pos += image_tokens
    pos += turn_text + image_tokens + turn_text  # the current turn and the generation prompt
    return pos, spans


def timed(fn, device: torch.device, repeats: int, warmup: int) -> float:
    """Median wall time of ``fn()`` in milliseconds (device synchronised)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def build(config: dict, device: torch.device, dtype: torch.dtype):
    import transformers

    cfg = transformers.Qwen2_5_VLConfig(text_config=config["text"], vision_config=config["vision"])
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.Qwen2_5_VLForConditionalGeneration._from_config(cfg, dtype=dtype)
    return model.eval()


def _import_project() -> None:
    """Make ``causalcache_memory`` importable from this checkout when it is not installed (the repository
    maps ``runtime/`` to ``causalcache_memory.runtime``)."""
    try:
        import causalcache_memory.runtime.hgkv
    except ModuleNotFoundError:
        import sys
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        sys.path.insert(0, str(root))
        import causalcache_memory

        causalcache_memory.__path__.append(str(root))  # causalcache_memory.runtime -> runtime/


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny config on CPU (smoke test)")
    parser.add_argument("--history", type=int, default=4, help="history screenshots B")
    parser.add_argument("--image-tokens", type=int, default=None, help="tokens per image (default: 1080p)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--kernel",
        choices=("auto", "triton", "torch"),
        default="torch",
        help="HGKV update path (CAUSALCACHE_HGKV_KERNEL); default torch = the figures of BENCHMARKS.md section 7",
    )
    args = parser.parse_args()
    import os

    os.environ["CAUSALCACHE_HGKV_KERNEL"] = args.kernel
    if args.tiny and args.kernel == "triton":
        os.environ["TRITON_INTERPRET"] = "1"

    _import_project()
    from causalcache_memory.runtime.hgkv import HGKVAdapter, HGKVConfig
    from causalcache_memory.runtime.sglang_server.adapter import ServerAdapterWeights
    from causalcache_memory.runtime.sglang_server.gating import ServerHGKV

    if args.tiny:
        device, dtype, config = torch.device("cpu"), torch.float32, CONFIG_TINY
        image_tokens, header, turn_text = args.image_tokens or 24, 40, 8
        args.repeats, args.warmup = min(args.repeats, 2), min(args.warmup, 1)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("CUDA is not available; run with --tiny for the CPU smoke test")
        device, dtype, config = torch.device("cuda"), torch.bfloat16, CONFIG_7B
        image_tokens, header, turn_text = args.image_tokens or TOKENS_1080P, 320, 30
    total, spans = layout(args.history, image_tokens, header, turn_text)
    model = build(config, device, dtype)
    lm = model.model.language_model
    text = config["text"]
    hidden, heads, kv_heads = text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]
    head_dim = hidden // heads
    q_size, kv_size = heads * head_dim, kv_heads * head_dim

    gen = torch.Generator(device="cpu").manual_seed(1)
    embeds = (torch.randn(1, total, hidden, generator=gen) * 0.02).to(device, dtype)
    positions = torch.arange(total, device=device).view(1, 1, -1).expand(3, 1, -1)
    mask = torch.zeros(1, total, dtype=torch.bool)
    for a, b in spans:
        mask[0, a:b] = True
    history_tokens = int(mask.sum())

    @torch.no_grad()
    def prefill() -> None:
        lm(inputs_embeds=embeds, position_ids=positions, use_cache=False)

    frozen_ms = timed(prefill, device, args.repeats, args.warmup)
    adapter = HGKVAdapter.attach(model, HGKVConfig(r=8, alpha=16.0, num_layers=8))
    with torch.no_grad():
        for module in adapter.modules.values():
            module.B.normal_(0.0, 0.02)
    wrapped_ms = timed(prefill, device, args.repeats, args.warmup)  # wrapped, gate absent
    adapter.state.mask = mask.to(device)
    try:
        hgkv_ms = timed(
            lambda: (adapter.state.prefilled.clear(), prefill()), device, args.repeats, args.warmup
        )
    finally:
        adapter.state.mask = None

    # server-side masked update on one layer's fused qkv output, from the same adapter's weights
    weights = {}
    for i in adapter.config.layers:
        k = adapter.modules[f"model.language_model.layers.{i}.self_attn.k_proj"]
        v = adapter.modules[f"model.language_model.layers.{i}.self_attn.v_proj"]
        weights[i] = (k.A.detach(), k.B.detach(), v.A.detach(), v.B.detach())
    server = ServerHGKV(ServerAdapterWeights(weights, 8, 16.0, "bench"), q_size=q_size, kv_size=kv_size)
    server._params = weights  # already on the device
    layer = adapter.config.layers[-1]
    x = embeds[0]
    fused = torch.nn.Linear(hidden, q_size + 2 * kv_size, bias=True, device=device, dtype=dtype)
    qkv = fused(x).detach()
    rows = mask[0].nonzero().squeeze(1).to(device)

    @torch.no_grad()
    def masked_update() -> None:
        server.update(layer, x, qkv, rows)

    @torch.no_grad()
    def qkv_matmul() -> None:
        fused(x)

    update_ms = timed(masked_update, device, args.repeats * 4, args.warmup)
    qkv_ms = timed(qkv_matmul, device, args.repeats * 4, args.warmup)
    result = {
        "machine": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "dtype": str(dtype).replace("torch.", ""),
        "config": "tiny" if args.tiny else "qwen2.5-vl-7b-sized (28 layers, hidden 3584, 28/4 heads), random",
        "prompt_tokens": total,
        "history_images": args.history,
        "tokens_per_image": image_tokens,
        "history_tokens": history_tokens,
        "adapted_layers": list(adapter.config.layers),
        "prefill_ms": {
            "frozen": round(frozen_ms, 3),
            "wrapped_no_history": round(wrapped_ms, 3),
            "hgkv_history_active": round(hgkv_ms, 3),
        },
        "hgkv_overhead_pct": round(100.0 * (hgkv_ms - frozen_ms) / frozen_ms, 2),
        "wrapped_no_history_overhead_pct": round(100.0 * (wrapped_ms - frozen_ms) / frozen_ms, 2),
        "server_masked_kv_update_ms": {
            "per_layer": round(update_ms, 4),
            "all_adapted_layers": round(update_ms * len(weights), 4),
            "fused_qkv_proj_per_layer": round(qkv_ms, 4),
        },
        "server_update_pct_of_frozen_prefill": round(100.0 * update_ms * len(weights) / frozen_ms, 3),
        "repeats": args.repeats,
        "kernel": args.kernel,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
