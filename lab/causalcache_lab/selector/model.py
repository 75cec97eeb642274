"""The set-conditional marginal scorer ``Δ̂(j | S)`` (PyTorch; imported only on use).

Two towers (paper, the selector section):

* event tower: ``h_j = MLP(x_j)`` over the per-event features ``x_j`` (``(N, F) -> (N, D)``), giving an
  embedding ``e_j = W_e h_j`` and a bias ``b_j = w_b · h_j``;
* context tower: for each conditioning set ``S_k`` (given as padded event indices), the mean- and
  max-pooled ``h`` of its members plus the state context ``c`` (budget, position, witness type):
  ``q_k = W_q relu(W_m mean_k + W_x max_k + W_c c)`` — split Linear layers instead of a concat.

``Δ̂(j | S_k) = <e_j, q_k> + b_j``, computed as ``Q @ E^T + b^T`` of shape ``(K, N)``. Only differences
``Δ̂(j | C) - Δ̂(r | C)`` within one conditioning set are trained and used (see ``labels``), so the
absolute level is free.

Inputs (all float32 but ``sets``): ``events (N, F)``, ``sets (K, M)`` int64 event rows (0-based, padding
any valid row), ``set_mask (K, M)`` 1 for members, ``context (1, C)``. Output ``scores (K, N)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from causalcache_memory._optional import require
from causalcache_memory.selector.features import NUM_CONTEXT, NUM_FEATURES, feature_index

torch = require("torch", purpose="training the learned selector")
nn = torch.nn

__all__ = ["ScorerConfig", "SetScorerModel"]


@dataclass(frozen=True)
class ScorerConfig:
    """Architecture. ``drop_features`` are zeroed inside the model (kept in the exported graph)."""

    num_features: int = NUM_FEATURES
    num_context: int = NUM_CONTEXT
    hidden: int = 64
    embed: int = 32
    drop_features: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


class SetScorerModel(nn.Module):
    """``Δ̂(j | S)`` for every event ``j`` and every conditioning set ``S_k`` (see module doc)."""

    def __init__(self, config: ScorerConfig | None = None) -> None:
        super().__init__()
        cfg = config or ScorerConfig()
        self.config = cfg
        keep = torch.ones(cfg.num_features)
        for name in cfg.drop_features:
            keep[feature_index(name)] = 0.0
        self.register_buffer("feature_keep", keep)
        self.event1 = nn.Linear(cfg.num_features, cfg.hidden)
        self.event2 = nn.Linear(cfg.hidden, cfg.embed)
        self.event_emb = nn.Linear(cfg.embed, cfg.embed)
        self.event_bias = nn.Linear(cfg.embed, 1)
        self.ctx_mean = nn.Linear(cfg.embed, cfg.hidden)
        self.ctx_max = nn.Linear(cfg.embed, cfg.hidden, bias=False)
        self.ctx_state = nn.Linear(cfg.num_context, cfg.hidden, bias=False)
        self.ctx_out = nn.Linear(cfg.hidden, cfg.embed)

    def forward(self, events, sets, set_mask, context):  # type: ignore[no-untyped-def]
        """``events (N, F)``, ``sets (K, M)``, ``set_mask (K, M)``, ``context (1, C)`` -> ``(K, N)``."""
        h = torch.relu(self.event2(torch.relu(self.event1(events * self.feature_keep))))  # (N, D)
        emb = self.event_emb(h)  # (N, D)
        bias = self.event_bias(h)  # (N, 1)
        members = h[sets]  # (K, M, D)
        m = set_mask.unsqueeze(-1)  # (K, M, 1)
        count = m.sum(1)  # (K, 1)
        mean = (members * m).sum(1) / count.clamp(min=1.0)
        mx = (members + (m - 1.0) * 1e4).amax(1) * (count > 0).to(members.dtype)
        q = torch.relu(self.ctx_mean(mean) + self.ctx_max(mx) + self.ctx_state(context))  # (K, H)
        q = self.ctx_out(q)  # (K, D)
        return q @ emb.transpose(0, 1) + bias.transpose(0, 1)  # (K, N)


def pack_sets(
    sets: Sequence[Sequence[int]], width: int | None = None
) -> tuple[list[list[int]], list[list[float]]]:
    """Pad 1-based event sets to 0-based row indices ``(K, M)`` and a member mask ``(K, M)``."""
    m = max([len(s) for s in sets] + [width or 0, 1])
    rows = [[j - 1 for j in s] + [0] * (m - len(s)) for s in sets]
    mask = [[1.0] * len(s) + [0.0] * (m - len(s)) for s in sets]
    return rows, mask
