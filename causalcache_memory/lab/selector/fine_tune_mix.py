"""Ship a point between the fine-tuned scorer and its base in weight space (``train.fine_tune_mix``).

Fine-tuning a scorer that already transfers on a few hundred of a team's states moves it far from the
base (40 epochs at ``lr`` 3e-4), and the dev split that picks the epoch is small: what ships can fit the
team's dev noise more than its screens. Interpolating the weights (WiSE-FT, Wortsman et al., 2022) keeps
part of the base's behaviour and part of what the team's data taught:

    θ = θ_base + α · (θ_tuned - θ_base),   0 < α <= 1

for every floating-point parameter and buffer (integer buffers are the tuned model's). ``α = 1`` ships
the fine-tuned weights unchanged; the target scale is the base's either way (fine-tuning keeps it). The
mixed model is what the fine-tune gate judges and what calibration, the metrics and the export see.
"""

from __future__ import annotations

import logging
from typing import Any

from causalcache_memory._optional import require

__all__ = ["mix_with_base"]

logger = logging.getLogger("causalcache_memory.lab.selector.fine_tune_mix")
torch = require("torch", purpose="training the learned selector")


def mix_with_base(tuned: Any, base: Any, alpha: float | None, best_epoch: Any, log: Any = None) -> Any:
    """``θ_base + α (θ_tuned - θ_base)`` as a new module in eval mode (module doc).

    ``tuned`` is the fine-tuned :class:`~causalcache_memory.lab.selector.model.SetScorerModel`, ``base``
    the :class:`~causalcache_memory.lab.selector.base_model.BaseSelector` it started from. Returned
    unchanged when there is no base, ``alpha`` is None or 1, ``best_epoch`` is 0 (the base itself won)
    or ``tuned`` is an ensemble (a list of epochs).
    """
    if base is None or alpha is None or alpha >= 1.0 or not best_epoch or isinstance(best_epoch, list):
        return tuned
    start = base.member_module(base.scorer).state_dict()
    mixed = {}
    for name, value in tuned.state_dict().items():
        if torch.is_floating_point(value):
            mixed[name] = start[name] + float(alpha) * (value - start[name])
        else:
            mixed[name] = value
    model = base.member_module(base.scorer)
    model.load_state_dict(mixed)
    message = f"fine-tune mix: shipping base + {alpha:g} x (epoch {best_epoch} - base) in weight space"
    logger.info("%s", message)
    if log:
        log(message)
    return model.eval()
