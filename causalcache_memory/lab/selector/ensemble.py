"""A seed ensemble of set scorers: their mean as one module (``train.ensemble``; PyTorch, imported on use).

``Δ̂(j | S) = (1/E) Σ_e Δ̂_e(j | S)`` over ``E >= 2`` members
(:class:`~causalcache_memory.lab.selector.model.SetScorerModel`, one architecture). The inputs and the
output are a single scorer's (``events (N, F)``, ``sets (K, M)``, ``set_mask (K, M)``, ``context (1, C)``
-> ``scores (K, N)``), so the ensemble exports to one ONNX graph that the run time reads as it reads one
scorer; parameters are named ``members.<e>.<parameter>``. Kept apart from ``model.py`` so that a single
scorer's export (whose node metadata cites ``model.py``'s lines) is unchanged by it.
"""

from __future__ import annotations

from collections.abc import Sequence

from causalcache_memory._optional import require
from causalcache_memory.lab.selector.model import SetScorerModel

torch = require("torch", purpose="training the learned selector")

__all__ = ["EnsembleScorer", "Scorer"]


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
