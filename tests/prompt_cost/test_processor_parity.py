"""Token accounting against the tiny offline Qwen2.5-VL and Qwen3-VL processors: the same ids, on 100
rendered prompts each.

Each prompt comes from the project's renderer on a random episode (random responses, screenshot sizes
below ``min_pixels``, above ``max_pixels`` and of odd aspect ratios, random allocations, sometimes the
current screen sent once) and is encoded by the project's own path (``encode_prompt``). The accounting's
chunks, images expanded to ``<|image_pad|>`` runs, must equal the processor's ``input_ids`` token for token.
"""

from __future__ import annotations

import io
import json
import random

import pytest
from memory_archive import DictArchive

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.prompt_cost import PatchImageRule, account_prompt, hf_tokenize, image_sizes_of
from causalcache_memory.render import RenderOptions, render_prompt
from causalcache_memory.render.prompt import LAYOUTS
from causalcache_memory.trace import Trace

WORDS = [
    "click",
    "the",
    "Settings",
    "button",
    "é",
    "dark mode",
    "(x=0.51, y=0.2)",
    "\n",
    "  ",
    "日本",
    "'ok'",
]


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from causalcache_memory.runtime.qwen_encoding import QwenTokens, image_only_processor_class
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    family = request.param
    root = build_tiny_qwen_vl(tmp_path_factory.mktemp("tiny") / family, family=family, num_layers=1)
    tokenizer = transformers.AutoTokenizer.from_pretrained(root, local_files_only=True)
    image_processor = transformers.Qwen2VLImageProcessorPil.from_pretrained(root, local_files_only=True)
    processor = image_only_processor_class(family)(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )
    ids = {
        t: tokenizer.convert_tokens_to_ids(t) for t in ("<|image_pad|>", "<|vision_start|>", "<|vision_end|>")
    }
    tokens = QwenTokens(ids["<|image_pad|>"], ids["<|vision_start|>"], ids["<|vision_end|>"], 2)
    config = json.loads((root / "preprocessor_config.json").read_text())
    return processor, tokenizer, tokens, PatchImageRule.from_processor_config(config)


def _png(size: tuple[int, int], seed: int) -> bytes:
    from PIL import Image

    image = Image.new("RGB", size, (seed * 37 % 256, seed * 11 % 256, 90))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _size(rng: random.Random) -> tuple[int, int]:
    kind = rng.random()
    if kind < 0.2:
        return rng.randint(8, 40), rng.randint(8, 40)  # below min_pixels
    if kind < 0.4:
        return rng.randint(20, 60), rng.randint(300, 900)  # tall
    return rng.randint(100, 700), rng.randint(100, 500)  # usually above max_pixels


def _episode(rng: random.Random, archive: DictArchive, n: int) -> Trace:
    trace = Trace("Task " + " ".join(rng.choices(WORDS, k=rng.randint(1, 6))), episode_id=f"e{rng.random()}")
    size = _size(rng)
    trace.observe(archive.put(_png(size, rng.randint(0, 10**6))).sha256, size=size)
    for i in range(n):
        size = _size(rng)
        shot = archive.put(_png(size, rng.randint(0, 10**6))).sha256
        response = "".join(rng.choices(WORDS, k=rng.randint(0, 8)))
        trace.record(Action("click", x=0.1, y=0.2 + i / 100), response, shot, screenshot_size=size)
    return trace


def test_counts_equal_the_processor_on_100_rendered_prompts(tiny) -> None:
    from causalcache_memory.runtime.qwen_encoding import encode_prompt

    processor, tokenizer, tokens, rule = tiny
    unit = rule.patch_size * rule.merge_size  # the tiny fixture: 14 (Qwen2.5-VL) or 16 (Qwen3-VL) * 2
    assert (rule.min_pixels, rule.max_pixels) == (unit * unit, unit * unit * 24)
    rng = random.Random(50)
    checked = images_seen = 0
    grids = set()
    while checked < 100:
        archive = DictArchive()
        trace = _episode(rng, archive, rng.randint(0, 6))
        past = list(range(1, trace.t))
        for _ in range(5):
            selected = sorted(rng.sample(past, rng.randint(min(1, len(past)), min(3, len(past)))))
            allocation = make_allocation(selected, t=trace.t, budget=max(len(selected), 1), allocator="x")
            layout = LAYOUTS[checked % len(LAYOUTS)]  # every layout, the conversation included
            options = RenderOptions(dedupe_current_screen=rng.random() < 0.3, layout=layout)
            prompt = render_prompt(trace, allocation, options=options)
            encoded = encode_prompt(prompt.bind(archive), processor, tokens)
            counted = account_prompt(
                prompt, tokenize=hf_tokenize(tokenizer), image_rule=rule, image_sizes=image_sizes_of(trace)
            )
            expected: list[int] = []
            for chunk in counted.chunks:
                expected += [tokens.image_pad] * chunk.n if chunk.image is not None else list(chunk.ids)
            assert expected == encoded.input_ids.tolist()
            assert counted.total == encoded.length
            assert counted.image_tokens == sum(s.length for s in encoded.image_spans)
            assert sum(t + i for t, i in counted.parts.values()) == counted.total
            grids.update(tuple(g) for g in encoded.image_grid_thw.tolist())
            images_seen += len(prompt.images)
            checked += 1
    assert images_seen > 200 and len(grids) > 10  # the sizes exercised the rule's three branches


def test_parts_are_attributed_to_their_turns(tiny) -> None:
    _, tokenizer, _, rule = tiny
    archive = DictArchive()
    trace = _episode(random.Random(3), archive, 4)
    prompt = render_prompt(trace, make_allocation([1, 3], t=trace.t, budget=2, allocator="x"))
    counted = account_prompt(
        prompt, tokenize=hf_tokenize(tokenizer), image_rule=rule, image_sizes=image_sizes_of(trace)
    )
    assert list(counted.parts) == [
        "system",
        "summaries",
        "response:1",
        "screen:1",
        "response:3",
        "screen:3",
        "current",
        "generation",
    ]
    for j in (1, 3):
        w, h = trace.event(j).screenshot_size
        assert counted.parts[f"screen:{j}"][1] == rule.tokens(w, h)
        assert counted.parts[f"response:{j}"][1] == 0
    system = len(hf_tokenize(tokenizer)(f"<|im_start|>system\n{prompt.messages[0].text}<|im_end|>\n"))
    assert counted.parts["system"] == (system, 0)
