"""What a labelled state's scores are the likelihood (or agreement) *of*: its reference action.

``labels.reference`` (:class:`~causalcache_lab.selector.labels.LabelConfig`):

* ``recorded`` (default): the recorded step ``r_t`` (``labels.target: response``) or its action as JSON
  (``action_json``). Sound for successful episodes only: in a failed episode the recorded action at the
  step that needed an old screen is the wrong guess, which the policy finds most likely when that screen
  is absent (docs/LEARN.md).
* ``full_history``: the labeller's own greedy action when it sees the last ``reference_images`` past steps
  at full fidelity -- one generation per state. Every allocation ``S`` is then scored by how well it
  reproduces what the policy does with (nearly) everything in view, so a failed episode labels too: where
  Recent-B lacks a screen the full-history policy reads, restoring it raises ``Q``. On a 200-episode
  devage recording this gave 110 states with a gain instead of 14 (RESULTS.md 9g). The gold witness of the
  selector's features is then that action too (:func:`~causalcache_lab.selector.examples.build_examples`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.errors import ConfigError
from causalcache_memory.render.prompt import render_prompt

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_lab.selector.labels import LabelConfig
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["check_reference_labeller", "reference_target", "target_text"]


def check_reference_labeller(policy: Any, reference: str) -> None:
    """Refuse, before anything is written, a ``full_history`` reference with a labeller that cannot act."""
    if reference == "full_history" and not callable(getattr(policy, "generate", None)):
        raise ConfigError(
            f"labels.reference=full_history needs a labeller that can act (a generate method); "
            f"{getattr(policy, 'name', type(policy).__name__)!r} has none: use reference: recorded"
        )


def target_text(trajectory: Trajectory, t: int, target: str) -> str:
    """The recorded step ``t`` as the scored target (``response`` or ``action_json``)."""
    step = trajectory.steps[t - 1]
    return _as_target(step.response, step.action, target)


def _as_target(response: str, action: Any, target: str) -> str:
    if target == "response":
        return response
    if target == "action_json":
        return json.dumps(action.to_dict(), sort_keys=True)
    raise ConfigError(f"labels.target={target!r} is not supported; use 'response' or 'action_json'")


def reference_target(
    policy: Policy,
    archive: ScreenshotArchive,
    trajectory: Trajectory,
    t: int,
    config: LabelConfig,
    *,
    cache: dict[tuple[str, int], tuple[str, dict[str, Any]]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(target text, record entry)`` of state ``t`` (module doc); the entry is empty for ``recorded``.

    ``full_history``: one greedy generation with the last ``min(t - 1, config.reference_images)`` past steps
    restored; an unparsable generation falls back to the recorded step (the entry's ``fallback`` says why).
    ``cache`` (keyed by trajectory and ``t``) keeps one generation per state when it is labelled at several
    budgets ``B``.
    """
    recorded = target_text(trajectory, t, config.target)
    if config.reference == "recorded":
        return recorded, {}
    key = (trajectory.trajectory_id, t)
    if cache is not None and key in cache:
        return cache[key]
    shown = list(range(max(1, t - config.reference_images), t))
    allocation = make_allocation(shown, t=t, budget=len(shown), allocator="reference")
    generation = policy.generate(render_prompt(trajectory.trace_at(t), allocation).bind(archive))
    entry: dict[str, Any] = {"kind": "full_history", "images": len(shown)}
    if generation.action is None:
        entry["fallback"] = f"unparsable reference: {generation.parse_error}"
        out = recorded, entry
    else:
        entry["action"] = generation.action.to_dict()
        entry["agrees_with_recorded"] = generation.action == trajectory.steps[t - 1].action
        out = _as_target(generation.response, generation.action, config.target), entry
    if cache is not None:
        cache[key] = out
    return out
