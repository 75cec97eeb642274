"""Splits and target edits of labelled ``StateExample`` lists, shared by the fine-tuning tests."""

from __future__ import annotations

import dataclasses

#: size-rule overrides for the smoke-sized fine-tuning tests
SMOKE = {"min_train_states": 2, "min_dev_states": 1}


def by_trajectory(examples):  # type: ignore[no-untyped-def]
    """Each trajectory's states to ``train`` or ``dev`` by a fixed rule on its id (``split_by: metadata``)."""
    return [
        dataclasses.replace(ex, data_split="train" if sum(map(ord, ex.trajectory_id)) % 2 else "dev")
        for ex in examples
    ]


def negated(examples):  # type: ignore[no-untyped-def]
    """Targets negated and ranking pairs reversed: a scorer fitted on these learns the wrong order."""
    return [dataclasses.replace(ex, y=-ex.y, pairs=ex.pairs[:, ::-1].copy()) for ex in examples]


def flipped_on_train(examples):  # type: ignore[no-untyped-def]
    """:func:`by_trajectory`, with the train states' targets negated and the dev states' kept."""
    split = by_trajectory(examples)
    train = negated([ex for ex in split if ex.data_split == "train"])
    it = iter(train)
    return [next(it) if ex.data_split == "train" else ex for ex in split]
