"""Selector-labelling throughput of a random Qwen2.5-VL with the 7B model's shapes, bf16, on one GPU.

The cost table of docs/LEARN.md gives prompts per labelled state; this script gives prompts per second
for a 7B-sized VLM, so the two multiply into GPU hours. It runs the product's own labelling code
(``run_labelling`` with :class:`TransformersPolicy`, the agreement scorer over its ``generate``) on a
synthetic 1920x1080 desktop trajectory whose screens carry drawn text (stored beside each screenshot, as
the memory stores ``screen_text``), at ``B = 4``:

* ``teacher_forced_full``: every prompt the label defaults plan (anchor, every recent slot x distant
  event, greedy teacher path);
* ``teacher_forced_budget``: ``labels.prompt_cap`` at its defaults (at most 10 prompts per state);
* ``agreement_budget``: agreement labels under the same budget, ``k`` greedy generations of at most 32
  new tokens per prompt (random weights: a generation usually runs to the cap, an upper bound);
* ``teacher_forced_budget_full_history`` (``--full-history-states N``): the budgeted labels scored against
  the labeller's own action with the last 16 past steps restored (``labels.reference: full_history``):
  one extra generation per state with up to 16 screenshots in its prompt (RESULTS.md 9h's recipe).

The model is built from a config (no download): Qwen2.5-VL-7B's language model (28 layers, hidden 3584,
vocabulary 152,064) and its full vision tower (32 blocks, windowed attention), random bf16 weights,
with the tiny offline tokenizer of ``runtime/tiny.py`` (the prompt's *text* is shorter in tokens than
with Qwen's tokenizer; image tokens, which dominate, are exact: 2,691 per 1080p screenshot at Qwen's
default ``max_pixels``). Prints one JSON object and writes it to ``--out`` after every part, so a timeout
keeps what was measured::

    python lab/tests/gpu/bench_label_throughput.py --out label_throughput.json     # CUDA, bf16
    python lab/tests/gpu/bench_label_throughput.py --tiny                          # CPU smoke test

``--vision-cache-mb`` sets the policy's vision-encoder output cache (default 512 MiB, as the runtime;
0 = off, every image of every prompt encoded). The cache is emptied before every part, and each part
reports its counters (``vision_cache``: hits, misses, images encoded, evictions). ``--compare-no-cache``
runs the budgeted teacher-forced part a second time with the cache off, in the same process on the same
model (``teacher_forced_budget_no_cache``), and reports how far its labels are from the cached run's
(``cache_vs_no_cache``: largest score difference, states that pick the same best swap).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "gpu"))
from bench_hgkv_prefill import CONFIG_7B, _import_project

#: Qwen2.5-VL-7B's vision tower (config.json of the released model)
VISION_7B = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_chans": 3,
    "out_hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
    "hidden_act": "silu",
}
#: Qwen2.5-VL's image processor defaults: a 1080p screenshot becomes 39 x 69 = 2,691 image tokens
QWEN_MIN_PIXELS, QWEN_MAX_PIXELS = 56 * 56, 28 * 28 * 16384
SCREEN = (1920, 1080)
WORDS = (
    "Order Desk Lamp Invoice Shipping Address Settings Display Dark mode Total Cart Checkout Search "
    "Results Profile Account Password Notifications Calendar Meeting Room Budget Report Export"
).split()


def build_policy(work: Path, tiny: bool, max_new_tokens: int, vision_cache_mb: int = 512):
    """The policy under test: the tiny offline model (``tiny``) or a 7B-shaped random one on CUDA."""
    import transformers

    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    base = TransformersPolicy.from_pretrained(
        build_tiny_qwen_vl(work / "tiny"), max_new_tokens=max_new_tokens, vision_cache_mb=vision_cache_mb
    )
    if tiny:
        return base
    tiny_cfg = base.model.config
    ids = {
        name: getattr(tiny_cfg, name)
        for name in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    }
    text = dict(CONFIG_7B["text"], bos_token_id=None, eos_token_id=base.im_end_id)
    cfg = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=VISION_7B, **ids)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.Qwen2_5_VLForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
    image_processor = base.processor.image_processor
    image_processor.min_pixels, image_processor.max_pixels = QWEN_MIN_PIXELS, QWEN_MAX_PIXELS
    if isinstance(getattr(image_processor, "size", None), dict):
        image_processor.size = {"shortest_edge": QWEN_MIN_PIXELS, "longest_edge": QWEN_MAX_PIXELS}
    return TransformersPolicy(
        model.eval(),
        base.processor,
        family="qwen2_5_vl",
        name="random-qwen2.5-vl-7b-shaped",
        max_new_tokens=max_new_tokens,
        vision_cache_mb=vision_cache_mb,
    )


def screen(step: int, rng: random.Random) -> tuple[object, str]:
    """A 1920x1080 screenshot with a title bar, panels and lines of text; returns (image, its text)."""
    from PIL import Image, ImageDraw

    image = Image.new(
        "RGB", SCREEN, (rng.randrange(200, 256), rng.randrange(200, 256), rng.randrange(200, 256))
    )
    draw = ImageDraw.Draw(image)
    lines = [f"Window {step}: " + " ".join(rng.sample(WORDS, 3))]
    draw.rectangle((0, 0, SCREEN[0], 40), fill=(40, 40, 60))
    draw.text((12, 12), lines[0], fill=(255, 255, 255))
    for row in range(12):
        y = 80 + 70 * row
        box = (60 + rng.randrange(0, 400), y, 900 + rng.randrange(0, 900), y + 50)
        draw.rectangle(box, outline=(90, 90, 90), fill=(rng.randrange(150, 256),) * 3)
        line = f"{' '.join(rng.sample(WORDS, 4))} #{rng.randrange(10000, 99999)}"
        draw.text((box[0] + 8, y + 18), line, fill=(0, 0, 0))
        lines.append(line)
    return image, "\n".join(lines)


def build_trajectory(archive, steps: int, seed: int = 0):
    """One successful desktop trajectory of ``steps`` clicks/typing on 1080p screens with stored text."""
    from causalcache_lab.data.trajectory import Step, Trajectory
    from causalcache_memory.actions.model import Action

    rng = random.Random(seed)
    shas = []
    for t in range(steps + 1):
        image, text = screen(t, rng)
        sha = archive.put(image).sha256
        archive.put_text(sha, text)
        shas.append(sha)
    out = []
    for t in range(steps):
        x, y = round(rng.uniform(0.05, 0.95), 3), round(rng.uniform(0.05, 0.95), 3)
        if t % 4 == 3:
            action = Action(type="type", text=f"#{rng.randrange(10000, 99999)}")
            call = f"pyautogui.typewrite('{action.text}')"
        else:
            action = Action(type="click", x=x, y=y)
            call = f"pyautogui.click(x={x}, y={y})"
        response = f"Thought: step {t + 1}, I look for the {rng.choice(WORDS)} field.\nAction: {call}"
        out.append(
            Step(action=action, response=response, screenshot_before=shas[t], screenshot_after=shas[t + 1])
        )
    goal = "Find the order number of the Desk Lamp in the invoice and type it into the Checkout search box."
    return Trajectory("bench-0", goal, "desktop", SCREEN, tuple(out), success=True)


class PromptMeter:
    """Counts forward passes and prompt tokens of ``policy`` (wraps ``target_logprobs`` and ``generate``)."""

    def __init__(self, policy, image_token_id: int) -> None:
        self.policy, self.image_token_id = policy, image_token_id
        self.widths: list[int] = []
        self.image_tokens: list[int] = []
        self.images: list[int] = []  # images per forward row (prompt)
        scored, generate = policy.target_logprobs, policy.generate

        def target_logprobs(batch, **kw):
            for row, prompt in zip(batch.input_ids, batch.prompts, strict=True):
                self.widths.append(int(row.shape[0]))
                self.image_tokens.append(int((row == self.image_token_id).sum()))
                self.images.append(len(prompt.image_spans))
            return scored(batch, **kw)

        def generate_(prompt):
            generation = generate(prompt)
            self.widths.append(int(generation.meta.get("prompt_tokens", 0)))
            self.images.append(len(prompt.images))
            return generation

        policy.target_logprobs, policy.generate = target_logprobs, generate_
        self.vision_seconds = 0.0
        visual = getattr(getattr(policy.model, "model", policy.model), "visual", None)
        if visual is not None:  # time the vision tower (synchronised hooks: measurement only)
            visual.register_forward_pre_hook(self._vision_start)
            visual.register_forward_hook(self._vision_end)

    def _vision_start(self, module, args) -> None:
        sync()
        self._t0 = time.perf_counter()

    def _vision_end(self, module, args, output) -> None:
        sync()
        self.vision_seconds += time.perf_counter() - self._t0

    def reset(self) -> None:
        self.widths.clear()
        self.image_tokens.clear()
        self.images.clear()
        self.vision_seconds = 0.0


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_part(name, scorer, archive, trajectory, config, work: Path, meter: PromptMeter) -> dict:
    from causalcache_lab.selector.labels import run_labelling

    meter.reset()
    cache = meter.policy.vision_cache
    if cache is not None:
        cache.clear()  # every part starts cold, as a fresh labelling run would
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    sync()
    start = time.perf_counter()
    counts = run_labelling(scorer, archive, [trajectory], work / f"{name}.jsonl", config, progress=False)
    sync()
    seconds = time.perf_counter() - start
    states = max(counts["written"], 1)
    part = {
        "states": counts["written"],
        "prompts": counts["prompts"],
        "prompts_per_state": round(counts["prompts"] / states, 1),
        "seconds": round(seconds, 2),
        "seconds_per_state": round(seconds / states, 2),
        "prompts_per_s": round(counts["prompts"] / seconds, 3),
        "forward_rows": len(meter.widths),
        "mean_prompt_tokens": round(sum(meter.widths) / max(len(meter.widths), 1)),
        "mean_image_tokens_scored": (
            round(sum(meter.image_tokens) / len(meter.image_tokens)) if meter.image_tokens else None
        ),
        "batch_size": config.batch_size,
        "vision_tower_share": round(meter.vision_seconds / seconds, 3),
        "images_per_prompt": (round(sum(meter.images) / len(meter.images), 2) if meter.images else None),
    }
    if cache is not None:
        stats = cache.stats()
        part["vision_cache"] = {
            "hits": stats.hits,
            "misses": stats.misses,
            "images_encoded": stats.images_encoded,
            "evictions": stats.evictions,
            "entries": stats.entries,
            "mib": round(stats.bytes / 2**20, 1),
        }
    if torch.cuda.is_available():
        part["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    return part


def _label_scores(path: Path) -> dict[str, tuple[list[float], tuple]]:
    """Per state key: every score of the record (anchor, group scores, path scores) and its best swap."""
    out = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") != "state":
            continue
        scores, best = [record["anchor"]], (record["anchor"], None)
        for group in record["groups"]:
            scores.append(group["q_base"])
            for cand, q in zip(group["cands"], group["q"], strict=True):
                scores.append(q)
                best = max(best, (q, (group["out"], cand)), key=lambda item: item[0])
        scores += [step["q"] for step in record["path"]]
        out[record["key"]] = (scores, best[1])
    return out


def compare_labels(cached: Path, uncached: Path) -> dict:
    """How far the labels of two runs of the same states are apart (vision cache on vs off)."""
    a, b = _label_scores(cached), _label_scores(uncached)
    keys = sorted(set(a) & set(b))
    diffs = [abs(x - y) for k in keys for x, y in zip(a[k][0], b[k][0], strict=False)]
    return {
        "states": len(keys),
        "scores_compared": len(diffs),
        "max_abs_score_diff": max(diffs) if diffs else None,
        "same_best_swap": sum(a[k][1] == b[k][1] for k in keys),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the tiny offline model on CPU (smoke test)")
    parser.add_argument("--steps", type=int, default=20, help="trajectory length (decision t ~ steps)")
    parser.add_argument("--full-states", type=int, default=2, help="states labelled in full (0: skip)")
    parser.add_argument("--budget-states", type=int, default=3, help="states labelled under the budget")
    parser.add_argument("--agreement-states", type=int, default=1)
    parser.add_argument(
        "--full-history-states",
        type=int,
        default=0,
        help="states labelled under the budget against the full-history reference (16 screenshots, 0: skip)",
    )
    parser.add_argument("--k", type=int, default=2, help="agreement generations per prompt")
    parser.add_argument("--batch-size", type=int, default=4, help="prompts per forward (1 on OOM)")
    parser.add_argument("--out", default=None, help="JSON file written after every part")
    parser.add_argument(
        "--vision-cache-mb",
        type=int,
        default=512,
        help="vision-encoder output cache of the policy in MiB (0: off, every image re-encoded)",
    )
    parser.add_argument(
        "--compare-no-cache",
        action="store_true",
        help="rerun the budgeted teacher-forced part with the vision cache off and compare the labels",
    )
    args = parser.parse_args()
    if not args.tiny and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --tiny for the CPU smoke test")
    _import_project()
    import transformers

    from causalcache_lab.learn.agreement import AgreementScorer, make_sampler
    from causalcache_lab.selector.labels import LabelConfig
    from causalcache_lab.selector.prompt_cap import PromptCap
    from causalcache_memory.archive.local import LocalArchive

    work = Path(tempfile.mkdtemp(prefix="label-throughput-"))
    result: dict = {
        "machine": torch.cuda.get_device_name(0) if not args.tiny else platform.processor() or "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model": "tiny offline Qwen2.5-VL (CPU)" if args.tiny else "Qwen2.5-VL-7B-shaped, random, bf16",
        "B": 4,
        "steps": args.steps,
        "vision_cache_mb": args.vision_cache_mb,
        "errors": {},
    }

    def dump() -> None:
        text = json.dumps(result, indent=1)
        if args.out:
            Path(args.out).write_text(text)

    start = time.perf_counter()
    policy = build_policy(work, args.tiny, max_new_tokens=32, vision_cache_mb=args.vision_cache_mb)
    sync()
    result["build_s"] = round(time.perf_counter() - start, 1)
    result["parameters_b"] = round(sum(p.numel() for p in policy.model.parameters()) / 1e9, 2)
    archive = LocalArchive(work / "archive")
    trajectory = build_trajectory(archive, args.steps)
    meter = PromptMeter(policy, policy.tokens.image_pad)
    base = LabelConfig(budgets=(4,), batch_size=args.batch_size)
    budget = PromptCap()
    agreement = AgreementScorer(make_sampler(policy), k=args.k, temperature=None)
    parts = [
        ("warmup", policy, base.model_copy(update={"max_states_per_trajectory": 1, "prompt_cap": budget})),
        (
            "teacher_forced_full",
            policy,
            base.model_copy(update={"max_states_per_trajectory": args.full_states}),
        ),
        (
            "teacher_forced_budget",
            policy,
            base.model_copy(update={"max_states_per_trajectory": args.budget_states, "prompt_cap": budget}),
        ),
        (
            f"agreement_budget_k{args.k}",
            agreement,
            base.model_copy(
                update={
                    "max_states_per_trajectory": args.agreement_states,
                    "prompt_cap": budget,
                    "target": "action_json",
                }
            ),
        ),
    ]
    if args.full_history_states:  # the target generated with the last 16 steps restored, per state
        reference = {"reference": "full_history", "max_states_per_trajectory": args.full_history_states}
        parts.insert(
            3, ("teacher_forced_budget_full_history", policy, parts[2][2].model_copy(update=reference))
        )
    if args.compare_no_cache and policy.vision_cache is not None:
        parts.insert(3, ("teacher_forced_budget_no_cache", policy, parts[2][2]))
    for name, scorer, config in parts:
        if config.max_states_per_trajectory == 0:
            continue
        cache = policy.vision_cache
        if name.endswith("_no_cache"):
            policy.vision_cache = None
        try:
            try:
                result[name] = run_part(name, scorer, archive, trajectory, config, work, meter)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                config = config.model_copy(update={"batch_size": 1})
                (work / f"{name}.jsonl").unlink(missing_ok=True)
                result[name] = run_part(name, scorer, archive, trajectory, config, work, meter)
                result[name]["note"] = f"batch {args.batch_size} ran out of memory; batch 1"
        except Exception:  # a failed part is reported, the others still run
            result["errors"][name] = traceback.format_exc(limit=6)
        finally:
            policy.vision_cache = cache
        if name.endswith("_no_cache") and name in result:
            result["cache_vs_no_cache"] = compare_labels(
                work / "teacher_forced_budget.jsonl", work / f"{name}.jsonl"
            )
        dump()
        print(f"[bench_label_throughput] {name}: {result.get(name)}", file=sys.stderr, flush=True)
    print(json.dumps(result, indent=1))
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
