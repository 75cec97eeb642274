"""``transformers serve`` that can load the tiny models' image-only processor:
``python transformers_serve.py [transformers serve options]``.

The Qwen-VL processors of transformers 5 require a video processor, which needs torchvision (not a
dependency here). The tiny model directories name ``ImageOnlyQwen2_5_VLProcessor`` /
``ImageOnlyQwen3VLProcessor`` (image processor + tokenizer) in ``processor_config.json``; this launcher
registers those names with ``AutoProcessor`` (under a key config of their own, so no stock model type
changes) and then runs the unmodified ``transformers serve`` command in this process.
"""

from __future__ import annotations

import sys


def register_image_only_processors() -> None:
    import transformers

    from causalcache_memory.runtime.qwen_encoding import image_only_processor_class

    for family in ("qwen2_5_vl", "qwen3_vl"):
        cls = image_only_processor_class(family)
        key = type(f"{cls.__name__}Key", (transformers.PretrainedConfig,), {"model_type": f"cc_{family}_img"})
        transformers.AutoProcessor.register(key, cls, exist_ok=True)


if __name__ == "__main__":
    register_image_only_processors()
    from transformers.cli.transformers import main

    sys.argv = ["transformers", "serve", *sys.argv[1:]]
    main()
