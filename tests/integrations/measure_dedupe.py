"""Measure what ``dedupe_current_screen`` saves on the user-shaped agent (BENCHMARKS.md, "Prompt hygiene").

Runs tests/integrations/user_agent.py's 40-step pixel agent (1920x1080 screens, B = 4) with and without
the option and counts, over every model call, the images sent and their base64 payload bytes. Image
tokens of a VLM grow with the image count at a fixed resolution.

    python tests/integrations/measure_dedupe.py [--steps 40] [--allocator recent]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import user_agent as ua


class CountingModel(ua.ScriptedModel):
    def __init__(self) -> None:
        super().__init__()
        self.images = 0
        self.payload = 0
        self.calls = 0

    def __call__(self, messages: list[Any]) -> Any:
        self.calls += 1
        for message in messages:
            for block in message.content if isinstance(message.content, list) else []:
                if isinstance(block, dict) and block.get("type") == "image_url":
                    self.images += 1
                    self.payload += len(block["image_url"]["url"])
        return super().__call__(messages)


def measure(steps: int, allocator: str, dedupe: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as root:
        memory = ua.memory_for(root, allocation=allocator, dedupe_current_screen=dedupe)
        model = CountingModel()
        graph = ua.build_agent(memory, steps=steps, checkpointer=memory.checkpointer(), model=model)
        graph.invoke(ua.first_input(), ua.run_config("bench"))
        return {
            "calls": model.calls,
            "images_per_call": model.images / model.calls,
            "payload_kb_per_call": model.payload / model.calls / 1024,
        }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--allocator", default="recent")
    args = parser.parse_args()
    off = measure(args.steps, args.allocator, False)
    on = measure(args.steps, args.allocator, True)
    saving = 1 - on["images_per_call"] / off["images_per_call"]
    print(json.dumps({"off": off, "on": on, "image_saving": round(saving, 4)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
