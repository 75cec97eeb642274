"""A seed ensemble of set scorers: their mean as one module (``train.ensemble``; PyTorch, imported on use).

``Δ̂(j | S) = (1/E) Σ_e Δ̂_e(j | S)`` over ``E >= 2`` members
(:class:`~causalcache_lab.selector.model.SetScorerModel`, one architecture). The inputs and the
output are a single scorer's (``events (N, F)``, ``sets (K, M)``, ``set_mask (K, M)``, ``context (1, C)``
-> ``scores (K, N)``), so the ensemble exports to one ONNX graph that the run time reads as it reads one
scorer; parameters are named ``members.<e>.<parameter>``.

Training (:func:`fit_members`, called by :func:`~causalcache_lab.selector.train.train_selector`)
fits member ``e`` with seed ``seed + e`` (its own initialisation, shuffling and mask draws) and its own
epoch chosen on dev; the members share the target scale (the training set's, or the base's). The mean is
then one model: the pass-2 frontiers, the threshold and the metrics are computed from its predictions, the
OOD guard from the features. ``metadata["ensemble"]`` records ``{members, seeds, epochs}``; with ``E > 1``
``best_epoch`` is the list of the members' epochs and ``history`` the list of their histories. Fine-tuning
(``init_from``): a single base starts every member; an ensemble base of ``E`` members starts member ``e``
from its member ``e`` and needs ``train.ensemble: E`` (:func:`check_base_members`). Kept apart from ``model.py`` so that a single
scorer's export (whose node metadata cites ``model.py``'s lines) is unchanged by it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from causalcache_lab.selector.model import SetScorerModel
from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError

torch = require("torch", purpose="training the learned selector")

__all__ = ["EnsembleScorer", "Scorer", "check_base_members", "fit_members"]


class EnsembleScorer(torch.nn.Module):
    """The mean of ``E >= 2`` member scorers of one architecture; ``config`` is their shared one."""

    def __init__(self, members: Sequence[SetScorerModel]) -> None:
        super().__init__()
        configs = {m.config for m in members}
        if len(members) < 2 or len(configs) != 1:
            raise ValueError(
                f"an ensemble needs >= 2 members of one architecture, got {len(members)} of {len(configs)}"
            )
        self.config = members[0].config
        self.members = torch.nn.ModuleList(members)

    def forward(self, events, sets, set_mask, context):  # type: ignore[no-untyped-def]
        """Same shapes as :meth:`SetScorerModel.forward`; the members' scores ``(K, N)`` averaged."""
        total = self.members[0](events, sets, set_mask, context)
        for member in self.members[1:]:
            total = total + member(events, sets, set_mask, context)
        return total / len(self.members)


#: a trained scorer: one model or the mean of several (the same forward)
Scorer = SetScorerModel | EnsembleScorer


#: ``fit(seed, member, log) -> (model, target scale, best epoch, history)``: one member's training
MemberFit = Callable[[int, int, Any], tuple[SetScorerModel, float, int, list]]


def fit_members(
    fit: MemberFit, seed: int, members: int, log: Any = None
) -> tuple[Scorer, float, int | list[int], list, dict[str, Any]]:
    """``members`` fits (seeds ``seed + e``) -> ``(model, scale, epoch(s), history(ies), record)``.

    One member: that scorer, its epoch and history as they are. Several: their mean
    (:class:`EnsembleScorer`) and the lists of the members' epochs and histories. ``record`` is
    ``metadata["ensemble"]``.
    """
    seeds = [seed + e for e in range(members)]
    fits = []
    for e, member_seed in enumerate(seeds):
        member_log = log
        if log and members > 1:
            prefix = f"member {e + 1}/{members} (seed {member_seed}): "
            member_log = lambda msg, prefix=prefix: log(prefix + msg)  # noqa: E731
        fits.append(fit(member_seed, e, member_log))
    record = {"members": members, "seeds": seeds, "epochs": [f[2] for f in fits]}
    if members == 1:
        return (*fits[0], record)
    model = EnsembleScorer([f[0] for f in fits])
    model.eval()
    return model, fits[0][1], record["epochs"], [f[3] for f in fits], record


def check_base_members(base_members: int, ensemble: int, spec: str) -> None:
    """Refuse fine-tuning an ensemble base of ``E`` members into another ``train.ensemble`` than ``E``."""
    if base_members > 1 and ensemble != base_members:
        raise ConfigError(
            f"train.init_from={spec!r} is an ensemble of {base_members} scorers but train.ensemble={ensemble}; "
            f"set train.ensemble: {base_members} to fine-tune each member from its own, or fine-tune from a "
            "single scorer, or train from scratch (train.init_from: null)"
        )
