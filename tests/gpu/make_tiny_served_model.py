"""Build the tiny random Qwen2.5-VL and a random non-zero HGKV adapter for the SGLang GPU checks.

python tests/gpu/make_tiny_served_model.py /tmp/cc        # -> /tmp/cc/tiny, /tmp/cc/adapter
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(root: str) -> None:
    import torch
    import transformers

    from causalcache_memory.runtime.hgkv import HGKVAdapter, HGKVConfig
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    model_dir = build_tiny_qwen_vl(Path(root) / "tiny", family="qwen2_5_vl", num_layers=8)
    model = transformers.AutoModelForImageTextToText.from_pretrained(model_dir)
    adapter = HGKVAdapter.attach(model, HGKVConfig(r=8, alpha=16.0, num_layers=8))
    torch.manual_seed(0)
    with torch.no_grad():
        for module in adapter.modules.values():
            module.B.normal_(0.0, 0.5)  # non-zero: the history flag must change the output
    out = adapter.save_pretrained(Path(root) / "adapter")
    print(model_dir, out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/cc")
