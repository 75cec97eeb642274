"""One process of the 2-process DiD training test (``torchrun --standalone --nproc-per-node 2``), and the
shared setup of the one-process reference run (test_hgkv_ddp.py).

``ddp_worker.py MODEL_DIR OUT_DIR``: train with train_did_ddp; rank 0 writes ``OUT_DIR/ddp.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))  # tests/memory_archive.py

import torch

from causalcache_lab.hgkv.train import TrainConfig

CONFIG = TrainConfig(steps=3, lr=2e-2, batch_size=4, eval_every=2, seed=0, bootstrap_reps=50)


def setup(model_dir: str):
    """``(scorer, adapter, train, dev)`` on the tiny model and 12 colour-recall trajectories."""
    from memory_archive import DictArchive

    from causalcache_lab.hgkv.groups import mine_groups
    from causalcache_lab.hgkv.synthetic import colour_recall_trajectories, same_click, short_summary
    from causalcache_lab.hgkv.train import GroupScorer
    from causalcache_memory.render.prompt import RenderOptions
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    torch.set_num_threads(1)
    torch.manual_seed(0)
    archive = DictArchive()
    trajs = colour_recall_trajectories(archive, 12, seed=0)
    groups, _ = mine_groups(trajs, equivalent=same_click)
    policy = TransformersPolicy.from_pretrained(model_dir, max_new_tokens=4)
    adapter = HGKVAdapter.attach(policy.model, HGKVConfig(gated=True))
    policy.adapter = adapter
    scorer = GroupScorer(
        policy,
        {t.trajectory_id: t for t in trajs},
        archive,
        options=RenderOptions(system_prompt="GUI agent."),
        summarizer=short_summary,
    )
    train = [g for g in groups if g.split == "train"][:8]
    dev = [g for g in groups if g.split == "dev"][:4]
    return scorer, adapter, train, dev


def main(model_dir: str, out_dir: str) -> int:
    import torch.distributed as dist

    from causalcache_lab.hgkv.ddp import train_did_ddp

    dist.init_process_group("gloo")
    try:
        scorer, adapter, train, dev = setup(model_dir)
        result = train_did_ddp(scorer, adapter, train, dev, CONFIG)
        if dist.get_rank() == 0:
            state = {k: v.detach().clone() for k, v in adapter.state_dict().items()}
            torch.save({"state": state, "history": result.history}, Path(out_dir) / "ddp.pt")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
