"""Training states collated into tensor blocks for the set scorer (PyTorch; imported only on use).

:func:`collate` stacks the events of several :class:`~causalcache_lab.selector.examples.StateExample`
into one ``events (N, F)`` block and offsets every index into it: ``sets (K, M)`` / ``mask (K, M)``
(:func:`~causalcache_lab.selector.model.pack_sets`, one row per conditioning set), ``context
(K, C)`` (the state's row repeated per set), ``group`` / ``cand`` / ``out`` (per label entry: its set, its
candidate and evicted event rows), ``y`` (targets) and ``pairs (L, 2)`` (ranking pairs of entries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causalcache_lab.selector.examples import StateExample
from causalcache_lab.selector.model import pack_sets
from causalcache_memory._optional import require

torch = require("torch", purpose="training the learned selector")

__all__ = ["batches", "collate"]


def collate(examples: Sequence[StateExample]) -> dict[str, Any]:
    """Collate states into one block: events stacked, indices offset, one context row per set."""
    events, rows, masks, ctx, group, cand, out, ys, pairs = [], [], [], [], [], [], [], [], []
    state, recent, decision, path = [], [], [], []
    n_off = k_off = l_off = d_off = 0
    width = max(len(c) for ex in examples for c in ex.conds) if examples else 1
    for ex in examples:
        r, m = pack_sets(ex.conds, width)
        events.append(ex.events)
        rows.append(np.asarray(r, dtype=np.int64) + n_off)
        masks.append(np.asarray(m, dtype=np.float32))
        ctx.append(np.repeat(ex.context, len(ex.conds), axis=0))
        group.append(ex.group + k_off)
        cand.append(ex.cand + n_off)
        out.append(ex.out + n_off)
        ys.append(ex.y)
        pairs.append(ex.pairs + l_off)
        state.append(np.full(len(ex.y), len(state), dtype=np.int64))
        from_recent = ex.from_recent if len(ex.from_recent) else np.zeros(len(ex.conds), bool)
        recent.append(from_recent[ex.group] & (ex.cand != ex.out))
        # later decisions of the teacher path (their base set is not Recent-B); none when unknown
        per_group = ex.decision if len(ex.decision) else np.zeros(len(ex.conds), np.int64)
        decision.append(per_group[ex.group] + d_off)
        path.append(
            ~from_recent[ex.group] & (ex.cand != ex.out) if len(ex.decision) else np.zeros(len(ex.y), bool)
        )
        d_off += int(per_group.max()) + 1 if len(per_group) else 1
        n_off += len(ex.events)
        k_off += len(ex.conds)
        l_off += len(ex.y)
    cat = np.concatenate
    return {
        "events": torch.from_numpy(cat(events).astype(np.float32)),
        "sets": torch.from_numpy(cat(rows)),
        "mask": torch.from_numpy(cat(masks)),
        "context": torch.from_numpy(cat(ctx).astype(np.float32)),
        "group": torch.from_numpy(cat(group)),
        "cand": torch.from_numpy(cat(cand)),
        "out": torch.from_numpy(cat(out)),
        "y": torch.from_numpy(cat(ys)),
        "pairs": torch.from_numpy(cat(pairs).reshape(-1, 2)),
        # per entry: its state in the block, and whether it is a swap out of Recent-B (decision loss)
        "state": torch.from_numpy(cat(state) if state else np.zeros(0, np.int64)),
        "recent": torch.from_numpy(cat(recent).astype(bool) if recent else np.zeros(0, bool)),
        "states": len(examples),
        # per entry: its decision (a state's base set) in the block, and whether it is a later swap of the
        # teacher path (the decision loss's path term)
        "decision": torch.from_numpy(cat(decision).astype(np.int64) if decision else np.zeros(0, np.int64)),
        "path": torch.from_numpy(cat(path).astype(bool) if path else np.zeros(0, bool)),
        "decisions": d_off,
    }


def batches(examples: Sequence[StateExample], size: int) -> list[dict[str, Any]]:
    """Consecutive blocks of ``size`` states, each :func:`collate`-d."""
    return [collate(examples[i : i + size]) for i in range(0, len(examples), size)]
