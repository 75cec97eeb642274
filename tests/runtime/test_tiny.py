"""The tiny offline Qwen-VL builder: loadable like a real model directory, small and deterministic."""

from __future__ import annotations

import hashlib
import json

import pytest

from causalcache_memory.runtime.tiny import QWEN_SPECIAL_TOKENS, build_tiny_qwen_vl

pytest.importorskip("transformers")

from causalcache_memory.errors import ConfigError


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_directory_has_a_real_model_layout(tiny_dirs, family) -> None:
    root = tiny_dirs[family]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json"):
        assert (root / name).is_file(), name
    config = json.loads((root / "config.json").read_text())
    assert config["model_type"] == family
    text = config["text_config"]
    assert text["num_hidden_layers"] >= 8
    assert (text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]) == (64, 4, 2)
    assert config["vision_config"]["depth"] == 2


def test_tokenizer_has_qwen_special_tokens_and_image_template(policy) -> None:
    tok = policy.tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS]
    assert len(set(ids)) == len(ids) and tok.unk_token_id not in ids
    assert ids[QWEN_SPECIAL_TOKENS.index("<|image_pad|>")] == policy.model.config.image_token_id
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "image": "x"}]}
    ]
    text = policy.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert (
        text
        == "<|im_start|>user\nhi<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n<|im_start|>assistant\n"
    )
    # a single special token each, never split by BPE
    assert tok("<|image_pad|><|im_end|>", add_special_tokens=False)["input_ids"] == [ids[6], ids[2]]


def test_screenshot_becomes_a_small_grid(policy) -> None:
    from PIL import Image

    out = policy.processor.image_processor(images=[Image.new("RGB", (1280, 800))], return_tensors="pt")
    t, h, w = out["image_grid_thw"][0].tolist()
    assert t == 1 and t * h * w // 4 <= 24  # at most 24 image tokens after the 2x2 merge


def test_build_is_deterministic_and_seeded(tmp_path) -> None:
    a = build_tiny_qwen_vl(tmp_path / "a", seed=3)
    b = build_tiny_qwen_vl(tmp_path / "b", seed=3)
    c = build_tiny_qwen_vl(tmp_path / "c", seed=4)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(a / name) == _digest(b / name), name
    assert _digest(a / "model.safetensors") != _digest(c / "model.safetensors")


def test_unknown_family_and_bad_layers_are_rejected(tmp_path) -> None:
    with pytest.raises(ConfigError, match="qwen2_5_vl, qwen3_vl"):
        build_tiny_qwen_vl(tmp_path, family="llava")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="num_layers"):
        build_tiny_qwen_vl(tmp_path, num_layers=0)
