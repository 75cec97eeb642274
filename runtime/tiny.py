"""Tiny random-weight Qwen-VL model directories, built fully offline (tests, adapter work, benchmarks).

:func:`build_tiny_qwen_vl` writes a directory that :meth:`TransformersPolicy.from_pretrained` loads
exactly like a real checkpoint: ``config.json`` + weights, a byte-level BPE tokenizer trained in-process
on a fixed corpus (vocabulary ~400, the Qwen special tokens), a Qwen-style chat template and the image
processor config. Nothing is downloaded. The weights are random, so generations are garbage; shapes,
token layout and code paths are those of the real families.

Sizes: text hidden 64, ``num_layers`` decoder layers (>= 8), 4 heads, 2 KV heads, head_dim 16; vision
depth 2, hidden 32. A 1280x800 screenshot becomes a 4x6 patch grid after merge (24 image tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError

__all__ = ["QWEN_CHAT_TEMPLATE", "QWEN_SPECIAL_TOKENS", "TINY_FAMILIES", "build_tiny_qwen_vl"]

TINY_FAMILIES = ("qwen2_5_vl", "qwen3_vl")

#: special tokens of the Qwen-VL tokenizers, in the id order the tiny tokenizer gives them (0..7)
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

#: a Qwen-VL style chat template: string or list-of-blocks content with ``image`` and ``text`` blocks
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for block in message['content'] %}"
    "{% if block['type'] == 'image' or 'image' in block %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif block['type'] == 'text' %}{{ block['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = (
    "You are a GUI agent. Task: open the settings and enable dark mode. Action history (every past step):",
    "Screen after step 3: Current screen: What is the next action? Thought: I should click the button.",
    "pyautogui.click(x=0.512, y=0.231) pyautogui.typewrite('hello world') pyautogui.hotkey('ctrl', 'c')",
    '{"action": "click", "coordinate": [540, 1200]} {"action": "swipe", "direction": "up"} terminate',
    "1. click 'File' in Finder 2. type 'report.pdf' 3. scroll down 4. press enter 5. open_app Chrome",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?()[]{}'\"=+-*/_<>@#$%&",
)

_HIDDEN = 64
_HEADS = 4
_KV_HEADS = 2
_VISION_HIDDEN = 32


def _train_tokenizer(out_dir: Path) -> Any:
    tokenizers = require("tokenizers", purpose="the tiny test tokenizer")
    transformers = require("transformers", purpose="the tiny test tokenizer")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    bpe = tokenizers.Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(QWEN_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(_CORPUS) * 4, trainer=trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(QWEN_SPECIAL_TOKENS[1:]),
    )
    tokenizer.chat_template = QWEN_CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def _text_config(family: str, vocab: int, num_layers: int) -> dict[str, Any]:
    head_dim = _HIDDEN // _HEADS
    cfg: dict[str, Any] = {
        "vocab_size": vocab,
        "hidden_size": _HIDDEN,
        "intermediate_size": 128,
        "num_hidden_layers": num_layers,
        "num_attention_heads": _HEADS,
        "num_key_value_heads": _KV_HEADS,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "bos_token_id": None,
        "eos_token_id": 2,
        "pad_token_id": 0,
        # mrope_section sums to head_dim / 2 (temporal, height, width)
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
    }
    if family == "qwen3_vl":
        cfg["head_dim"] = head_dim
        cfg["rope_parameters"]["mrope_interleaved"] = True
    return cfg


def _vision_config(family: str) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "depth": 2,
        "hidden_size": _VISION_HIDDEN,
        "intermediate_size": 64,
        "num_heads": 2,
        "in_channels": 3,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": _HIDDEN,
    }
    if family == "qwen2_5_vl":
        cfg.update(patch_size=14, window_size=112, fullatt_block_indexes=[1])
    else:
        cfg.update(patch_size=16, num_position_embeddings=64, deepstack_visual_indexes=[0])
    return cfg


def _patch_size(family: str) -> int:
    return 14 if family == "qwen2_5_vl" else 16


def _quiet_save(transformers: Any, model: Any, out: Path) -> None:
    """``save_pretrained`` without the shard-writing progress bar (restored afterwards)."""
    hf_logging = transformers.utils.logging
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(out)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def build_tiny_qwen_vl(
    out_dir: str | Path,
    *,
    family: Literal["qwen2_5_vl", "qwen3_vl"] = "qwen2_5_vl",
    num_layers: int = 8,
    seed: int = 0,
) -> Path:
    """Write a tiny random-weight Qwen-VL model directory and return its path.

    Deterministic for a given ``(family, num_layers, seed)``. The directory holds ``config.json``,
    ``model.safetensors``, the tokenizer files (with the chat template) and
    ``preprocessor_config.json`` for ``Qwen2VLImageProcessorPil`` with at most ``(2 * patch)**2 * 24``
    pixels per image, so any screenshot becomes at most 24 image tokens (16 for a square one).
    """
    if family not in TINY_FAMILIES:
        raise ConfigError(
            f"family={family!r} is not a tiny Qwen-VL family; use one of {', '.join(TINY_FAMILIES)}"
        )
    if num_layers < 1:
        raise ConfigError(f"num_layers={num_layers} must be >= 1 (the HGKV adapter work uses >= 8)")
    torch = require("torch", purpose="building a tiny Qwen-VL model")
    transformers = require("transformers", purpose="building a tiny Qwen-VL model")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = _train_tokenizer(out)
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in QWEN_SPECIAL_TOKENS}
    config_cls = transformers.Qwen2_5_VLConfig if family == "qwen2_5_vl" else transformers.Qwen3VLConfig
    config = config_cls(
        text_config=_text_config(family, len(tokenizer), num_layers),
        vision_config=_vision_config(family),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    config.text_config.pad_token_id = ids["<|endoftext|>"]
    config.text_config.eos_token_id = ids["<|im_end|>"]
    config.eos_token_id = ids["<|im_end|>"]
    config.pad_token_id = ids["<|endoftext|>"]

    torch.manual_seed(seed)
    model = transformers.AutoModelForImageTextToText.from_config(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    _quiet_save(transformers, model, out)

    unit = _patch_size(family) * 2  # pixels per merged token side
    image_processor = transformers.Qwen2VLImageProcessorPil(
        patch_size=_patch_size(family),
        temporal_patch_size=2,
        merge_size=2,
        min_pixels=unit * unit,
        max_pixels=unit * unit * 24,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    image_processor.save_pretrained(out)
    return out
