"""Evidence labels: utilities from data that marks which earlier step a decision needs.

The utility of an allocation ``S`` at decision ``t`` is 1 when ``S`` restores an evidence event of that
decision and 0 otherwise: ``Q_ev(S) = [S ∩ E_t ≠ ∅]``. :class:`EvidenceScorer` has the
:class:`~causalcache_memory.policy.Policy` shape, so the labelling path is the one of every other source
(:func:`~causalcache_lab.selector.labels.run_labelling`; anchor ``Q_ev(Recent-B)``, swaps scored
against it). No model is called.

Two sources of ``E_t``:

* **links** (AndroTMem-style ground truth), a JSON file (``lab/tests/learn/fixtures/links.json``)::

      {"episodes": [{"trajectory_id": "ep-7",
                     "links": [{"from": "3", "to": "9", "is_critical": true}]}]}

  ``from`` / ``to`` are step ids of the trajectory (``Step.step_id``; 1-based positions when the data
  has none), ``from`` earlier than ``to``. Only links with ``is_critical: true`` count. The evidence of
  the decision at step ``to`` is the event that restores the screen of step ``from``: with
  ``screen: before`` (default: the step *saw* the needed value) that is event ``from - 1``, whose
  post-action screenshot is ``x_from``; with ``screen: after`` event ``from`` itself.
* **groups** mined by ``causalcache data mine`` (:mod:`~causalcache_lab.hgkv.groups`): each line's
  ``candidate`` (the event before the earlier occurrence of the recurring action) is the evidence of its
  decision ``t``.

Only trajectories with at least one evidence entry are labelled; their other states get ``Q_ev = 0`` for
every set (no restorable evidence is known).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_memory._jsonl import json_lines
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["EvidenceMap", "EvidenceScorer", "evidence_from_groups", "evidence_from_links"]

#: ``{(trajectory_id, t): {evidence event indices}}``
EvidenceMap = dict[tuple[str, int], set[int]]


def _positions(traj: Trajectory) -> dict[str, int]:
    return {(s.step_id if s.step_id is not None else str(i)): i for i, s in enumerate(traj.steps, 1)}


def evidence_from_links(
    path: str | Path, trajectories: Iterable[Trajectory], *, screen: str = "before"
) -> EvidenceMap:
    """Evidence events from an AndroTMem-style links file (module doc); unknown ids are errors."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"evidence.links={str(path)!r} cannot be read as JSON ({exc})") from exc
    episodes = data.get("episodes") if isinstance(data, dict) else data
    if not isinstance(episodes, list):
        raise ConfigError(f"evidence.links: {path} must hold {{'episodes': [...]}} (see docs/LEARN.md)")
    trajs = {t.trajectory_id: t for t in trajectories}
    out: EvidenceMap = {}
    for n, ep in enumerate(episodes):
        tid = str(ep.get("trajectory_id"))
        if tid not in trajs:
            continue  # an episode outside the training data (e.g. failed, filtered out)
        pos = _positions(trajs[tid])
        for m, link in enumerate(ep.get("links") or []):
            if not link.get("is_critical"):
                continue
            where = f"{path}: episodes[{n}].links[{m}]"
            src, dst = (pos.get(str(link.get(k))) for k in ("from", "to"))
            if src is None or dst is None:
                raise ConfigError(
                    f"{where}: from={link.get('from')!r} / to={link.get('to')!r} is not a step id of "
                    f"trajectory {tid!r}; use the data's step ids"
                )
            if src >= dst:
                raise ConfigError(f"{where}: from={link.get('from')!r} must be an earlier step than to")
            event = src - 1 if screen == "before" else src
            if 1 <= event < dst:
                out.setdefault((tid, dst), set()).add(event)
    return out


def evidence_from_groups(path: str | Path) -> EvidenceMap:
    """Evidence events from mined groups (``causalcache data mine`` output): ``candidate`` at ``t``."""
    out: EvidenceMap = {}
    for lineno, line in json_lines(path):
        try:
            rec = json.loads(line)
            key = (str(rec["trajectory_id"]), int(rec["t"]))
            out.setdefault(key, set()).add(int(rec["candidate"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"evidence.groups: {path}:{lineno} needs trajectory_id, t and candidate ({exc})"
            ) from exc
    return out


class EvidenceScorer:
    """``score`` = 1 when the prompt's allocation restores an evidence event of its state, else 0."""

    name = "evidence"

    def __init__(self, evidence: Mapping[tuple[str, int], set[int]], *, origin: str = "") -> None:
        self.evidence = {k: frozenset(v) for k, v in evidence.items()}
        self.origin = origin

    @property
    def label_source(self) -> dict[str, Any]:
        return {"source": "evidence", "model": None, "k": None, "temperature": None, "origin": self.origin}

    def trajectories(self, trajectories: Sequence[Trajectory]) -> list[Trajectory]:
        """The trajectories with at least one evidence entry (the ones worth labelling)."""
        have = {tid for tid, _ in self.evidence}
        return [t for t in trajectories if t.trajectory_id in have]

    def generate(self, prompt: BoundPrompt) -> Any:
        raise ConfigError("evidence labels have no policy: EvidenceScorer only scores allocations")

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        out = []
        for p in prompts:
            meta = p.prompt.meta
            needed = self.evidence.get((str(meta.get("episode_id")), int(meta["t"])), frozenset())  # type: ignore[call-overload]
            out.append(1.0 if needed & set(p.prompt.allocation.selected) else 0.0)
        return out
