"""HGKV training across processes (``torchrun``, DDP-style data parallelism; gloo on CPU, nccl on GPU).

:func:`train_did_ddp` runs :func:`~causalcache_lab.hgkv.train.train_did` unchanged in every process
and splits its work, so the result equals one process at the same global batch:

* every rank draws the same global batch (``train_did`` seeds its sampler with ``config.seed``); a
  :class:`ShardedScorer` scores rank ``r``'s contiguous block of it with gradients and all-gathers the
  other blocks' scores as constants, so the loss value is the full-batch loss on every rank;
* the loss of one step is ``mean_g ℓ_g + λ·||ΔW||²`` over the batch's groups (one stratum of ``B`` per
  step, :func:`~causalcache_lab.hgkv.did.did_loss`), so the gradient of rank ``r`` holds exactly its
  groups' share ``(1/N)·Σ_{g∈r} ∇ℓ_g``; the ``λ·||ΔW||²`` gradient is kept on rank 0 only (the other
  ranks see the penalty's value detached). Summing the gradients over ranks (``all_reduce``, run by an
  optimizer pre-step hook, the place DDP's bucket hooks would reach) gives the one-process gradient,
  and every rank then takes the same AdamW step;
* the frozen-base scores and every dev evaluation are split the same way and gathered, so all ranks
  select the same checkpoint; ``on_checkpoint`` runs on rank 0 only.

Only adapter weights train: the base model must be frozen (``HGKVAdapter.attach(freeze_base=True)``),
which is checked before anything runs.

Run (``RECIPE`` as for ``causalcache train hgkv``)::

    torchrun --nproc-per-node 2 -m causalcache_lab.hgkv.ddp RECIPE.yaml
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from causalcache_lab.hgkv.train import TrainConfig, TrainResult, train_did
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_lab.hgkv.did import DiDStats
    from causalcache_lab.hgkv.groups import ReplacementGroup
    from causalcache_lab.hgkv.train import GroupScorer
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

__all__ = ["ShardedScorer", "main", "shard_bounds", "train_did_ddp"]


def shard_bounds(n: int, rank: int, world: int) -> tuple[int, int]:
    """``[start, stop)`` of rank ``rank``'s contiguous block of ``n`` items (blocks of ``ceil(n/world)``)."""
    size = math.ceil(n / world) if n else 0
    return min(rank * size, n), min((rank + 1) * size, n)


def _gather_rows(local: torch.Tensor, n: int, world: int) -> list[torch.Tensor]:
    """Every rank's block of rows (padded to one size for the collective, trimmed after)."""
    size = math.ceil(n / world) if n else 0
    padded = torch.zeros(size, local.shape[1], dtype=torch.float64)
    padded[: local.shape[0]] = local.detach().cpu().to(torch.float64)  # float32 values stay exact
    blocks = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(blocks, padded)
    out = []
    for r in range(world):
        start, stop = shard_bounds(n, r, world)
        out.append(blocks[r][: stop - start].to(local.dtype))
    return out


class ShardedScorer:
    """A :class:`GroupScorer` whose calls score this rank's block of the groups and gather the rest."""

    def __init__(self, scorer: GroupScorer, *, rank: int, world: int) -> None:
        self.inner = scorer
        self.policy = scorer.policy
        self.rank, self.world = rank, world

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def scores(self, groups: Sequence[ReplacementGroup], *, grad: bool = False) -> torch.Tensor:
        """``(groups, 3)`` scores; this rank's rows carry gradients, the others are constants."""
        start, stop = shard_bounds(len(groups), self.rank, self.world)
        local = (
            self.inner.scores(groups[start:stop], grad=grad)
            if stop > start
            else torch.zeros(0, 3, device=self.policy.model.device)
        )
        blocks = _gather_rows(local, len(groups), self.world)
        blocks[self.rank] = local
        device = local.device
        return torch.cat([b.to(device) for b in blocks])

    def scores_chunked(self, groups: Sequence[ReplacementGroup], chunk: int = 8) -> np.ndarray:
        start, stop = shard_bounds(len(groups), self.rank, self.world)
        if stop > start:
            local = self.inner.scores_chunked(groups[start:stop], chunk)
        else:
            local = np.zeros((0, 3), dtype=np.float32)
        blocks = _gather_rows(torch.as_tensor(local), len(groups), self.world)
        return torch.cat(blocks).numpy()


@contextlib.contextmanager
def _sum_gradients(params: Sequence[torch.nn.Parameter]) -> Iterator[None]:
    """Before every optimizer step: ``grad <- sum over ranks of grad`` for ``params``."""

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    handle = register_optimizer_step_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextlib.contextmanager
def _penalty_on_rank0(adapter: HGKVAdapter, rank: int) -> Iterator[None]:
    if rank == 0:
        yield
        return
    original = adapter.l2_penalty
    adapter.l2_penalty = lambda: original().detach()  # type: ignore[method-assign]
    try:
        yield
    finally:
        del adapter.l2_penalty  # back to the class method


def _check_frozen_base(scorer: GroupScorer, adapter: HGKVAdapter) -> None:
    own = {id(p) for p in adapter.parameters()}
    trainable = [n for n, p in scorer.policy.model.named_parameters() if p.requires_grad and id(p) not in own]
    if trainable:
        raise ConfigError(
            f"{len(trainable)} base-model parameters are trainable (e.g. {trainable[:3]}); HGKV training "
            "updates only the adapter: attach it with freeze_base=True"
        )


def train_did_ddp(
    scorer: GroupScorer,
    adapter: HGKVAdapter,
    train: Sequence[ReplacementGroup],
    dev: Sequence[ReplacementGroup],
    config: TrainConfig | None = None,
    *,
    on_checkpoint: Callable[[int, dict[int, DiDStats]], None] | None = None,
) -> TrainResult:
    """:func:`train_did` in every process of an initialised process group (see the module docstring)."""
    if not dist.is_available() or not dist.is_initialized():
        raise ConfigError("train_did_ddp needs torch.distributed initialised (run it under torchrun)")
    config = config or TrainConfig()
    rank, world = dist.get_rank(), dist.get_world_size()
    _check_frozen_base(scorer, adapter)
    if config.batch_size < world:
        raise ConfigError(
            f"batch_size={config.batch_size} is the global batch and must be >= the {world} processes"
        )
    sharded = ShardedScorer(scorer, rank=rank, world=world)
    keep = on_checkpoint if rank == 0 else None
    with _sum_gradients(adapter.parameters()), _penalty_on_rank0(adapter, rank):
        return train_did(sharded, adapter, train, dev, config, on_checkpoint=keep)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """``torchrun ... -m causalcache_lab.hgkv.ddp RECIPE.yaml``: the recipe's arm, data parallel."""
    import json
    from pathlib import Path

    from causalcache_lab.hgkv.recipe import load_recipe
    from causalcache_lab.hgkv.run import prepare, training_setup

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(
            "usage: torchrun --nproc-per-node N -m causalcache_lab.hgkv.ddp RECIPE.yaml",
            file=sys.stderr,
        )
        return 2
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        recipe = load_recipe(args[0])
        prepared = prepare(recipe)
        train, dev, adapter, scorer, config = training_setup(recipe, prepared)
        out = Path(recipe.output_dir)
        result = train_did_ddp(
            scorer,
            adapter,
            train,
            dev,
            config,
            on_checkpoint=lambda step, _: adapter.save_pretrained(out / "best"),
        )
        if dist.get_rank() == 0:
            out.mkdir(parents=True, exist_ok=True)
            adapter.save_pretrained(out / "final")
            log = {
                "selected_step": result.selected_step,
                "history": result.history,
                "world": dist.get_world_size(),
            }
            (out / "train_log.json").write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
            print(f"selected step {result.selected_step}; wrote {out}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":  # pragma: no cover - run by torchrun
    sys.exit(main())
