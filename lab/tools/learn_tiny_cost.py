"""Labelling cost per state with the tiny offline Qwen-VL on CPU: teacher-forced and agreement (docs/LEARN.md).

    python lab/tools/learn_tiny_cost.py runs/learn_heldout/record --states 3 --k 2

Reads the recorded threads of ``lab/tools/learn_heldout.py`` (``checkpoints-recent-b4-s0.sqlite``,
``archive-recent-b4-s0``, ``success.json``), builds the tiny random-weight Qwen2.5-VL
(``runtime/tiny.py``) and labels one state of each of ``--states`` successful threads at B = 4, first
with teacher-forced scoring, then with agreement labels (``k`` greedy samples of 32 new tokens). The
weights are random, so the labels are meaningless; the prompts per second are what is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    from causalcache_lab.learn.agreement import AgreementScorer, make_sampler
    from causalcache_lab.learn.threads import load_success_labels, threads_to_trajectories
    from causalcache_lab.selector.labels import LabelConfig, run_labelling
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("record", help="the record folder of lab/tools/learn_heldout.py")
    p.add_argument("--states", type=int, default=3)
    p.add_argument("--k", type=int, default=2)
    args = p.parse_args(argv)
    rec = Path(args.record)
    work = Path(tempfile.mkdtemp(prefix="tiny-cost-"))
    start = time.perf_counter()
    policy = TransformersPolicy.from_pretrained(build_tiny_qwen_vl(work / "tiny-qwen"), max_new_tokens=32)
    result: dict = {"build_and_load_s": round(time.perf_counter() - start, 1)}
    trajs, _ = threads_to_trajectories(
        str(rec / "checkpoints-recent-b4-s0.sqlite"),
        str(rec / "archive-recent-b4-s0"),
        load_success_labels(rec / "success.json"),
        source="synthetic-world",
    )
    trajs = [t for t in trajs if t.success and len(t) >= 10][: args.states]
    archive = LocalArchive(rec / "archive-recent-b4-s0")
    cfg = LabelConfig(budgets=(4,), max_states_per_trajectory=1)
    agreement = AgreementScorer(make_sampler(policy), k=args.k, temperature=None)
    runs = [
        ("teacher_forced", policy, cfg),
        (f"agreement_k{args.k}", agreement, cfg.model_copy(update={"target": "action_json"})),
    ]
    for name, scorer, config in runs:
        t = time.perf_counter()
        counts = run_labelling(scorer, archive, trajs, work / f"{name}.jsonl", config, progress=False)
        secs = time.perf_counter() - t
        result[name] = {
            "states": counts["written"],
            "prompts": counts["prompts"],
            "seconds": round(secs, 1),
            "prompts_per_s": round(counts["prompts"] / secs, 2),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
