"""How much of pass 2's prefill the radix cache can reuse (CPU; docs/RUNTIMES.md quotes its output).

Text tokens come from the tiny model's tokenizer (:func:`causalcache_memory.runtime.tiny.build_tiny_qwen_vl`,
a byte-level BPE with ~400 entries, so text counts are larger than Qwen's 151k-entry tokenizer would give);
image tokens from Qwen2.5-VL arithmetic at 1080p (``smart_resize`` to 1092 x 1932, 28-pixel merged patches:
39 x 69 = 2691 per screenshot). The prompt is the paper's order (system, goal + every summary, the ``B``
retained turns oldest first, the current turn); pass 2 differs from pass 1 in the allocation only.

    python tests/gpu/prefix_reuse_tokens.py [--t 30] [--budget 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile

IMAGE_TOKENS_1080P = 39 * 69


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--t", type=int, default=30, help="decision index (t - 1 past events)")
    parser.add_argument("--budget", type=int, default=4)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from causalcache_memory.actions.model import Action
    from causalcache_memory.allocation.base import make_allocation
    from causalcache_memory.render import render_prompt
    from causalcache_memory.runtime.chat_format import QWEN_VL
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl
    from causalcache_memory.trace import Trace

    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(build_tiny_qwen_vl(f"{tmp}/tiny"))
    trace = Trace("Open the settings page and enable dark mode for every account", episode_id="e")
    trace.observe("0" * 64)
    for i in range(1, args.t):
        trace.record(
            Action("click", x=0.01 * i, y=0.5), f"pyautogui.click(x={0.01 * i:.3f}, y=0.500)", f"{i:064x}"
        )
    t, b = trace.t, args.budget

    def tokens(selected: list[int]) -> list[int]:
        allocation = make_allocation(selected, t=t, budget=len(selected), allocator="x")
        prompt = render_prompt(trace, allocation)
        text = QWEN_VL.format(prompt.messages).text
        ids: list[int] = []
        pieces = text.split("<|image_pad|>")
        for k, piece in enumerate(pieces):
            ids += tok(piece, add_special_tokens=False)["input_ids"]
            if k < len(pieces) - 1:
                # distinct ids per image (stand-ins for SGLang's per-image radix sentinels)
                image = prompt.images[k].sha256
                ids += [10**6 + int(image[:6], 16)] * IMAGE_TOKENS_1080P
        return ids

    def reuse(a: list[int], c: list[int]) -> int:
        n = 0
        while n < min(len(a), len(c)) and a[n] == c[n]:
            n += 1
        return n

    recent = list(range(t - b, t))
    cases = {
        "swap_oldest": [t - b - 3, *recent[1:]],  # the witness replaces the oldest retained turn
        "swap_newest": [*recent[:-1], t - b - 3],  # ... or the newest (the allocation is sorted)
    }
    pass1 = tokens(recent)
    out = {"t": t, "budget": b, "image_tokens": IMAGE_TOKENS_1080P, "pass1_tokens": len(pass1)}
    header = reuse(pass1, tokens([t - b - 5, t - b - 4, t - b - 3, t - b - 2]))
    out["header_tokens"] = header
    for name, selected in cases.items():
        pass2 = tokens(sorted(selected))
        n = reuse(pass1, pass2)
        out[name] = {"pass2_tokens": len(pass2), "reused": n, "reused_pct": round(100 * n / len(pass2), 1)}
    # other retained-turn orders, from the measured pieces (header H, current turn C, one retained turn R)
    one = len(tokens([t - 1]))
    turn = (len(pass1) - one) / (b - 1)
    current_turn = round(one - header - turn)
    out["current_turn_tokens"] = current_turn
    out["retained_turn_tokens"] = round(turn, 1)
    total = len(pass1)
    out["replaced_slot_last"] = {
        "reused": round(header + (b - 1) * turn),
        "reused_pct": round(100 * (header + (b - 1) * turn) / total, 1),
    }
    cur_image = IMAGE_TOKENS_1080P + 8  # the current screenshot and its framing, moved before the turns
    out["current_screen_first"] = {
        "reused": header + cur_image,
        "reused_pct": round(100 * (header + cur_image) / total, 1),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
