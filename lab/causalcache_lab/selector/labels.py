"""Selector labels: true policy utilities of complete exact-B allocations (paper, the selector section).

For each decision state ``(trajectory, t)`` and budget ``B`` the labeller (any :class:`~causalcache_memory.
policy.Policy`) scores, as complete rendered prompts through ``policy.score``:

* the anchor ``Q(Recent-B)``;
* singleton utilities ``Q(Recent-B \\ {r} ∪ {j})`` for *every* distant event ``j`` and *every* recent
  slot ``r`` (``all_slots``, the default: the beam may swap out any recent slot, the newest included, so
  the labels cover every first move of the search; ``all_slots: false`` keeps only the oldest slot);
* set utilities along a greedy teacher path: from the best single swap, further swaps
  ``Q(S \\ {r} ∪ {j})`` are scored for the most useful candidates, and the path moves to the best one
  while it improves. Every set utility is a fresh full-set score, never a sum of singleton gains.

A record stores *groups*: ``{"base": S, "q_base": Q(S), "out": r, "cands": [j...], "q": [Q(S\\{r}∪{j})...]}``.
The implied training target for candidate ``j`` under conditioning set ``C = S \\ {r}`` is
``Δ(j | C) - Δ(r | C) = Q(C ∪ {j}) - Q(S)``.

Storage: JSON Lines, a header line (format, version, labeller name, config hash) then one record per
``(state, B)``. Appending resumes an interrupted run: states already present are skipped, and a torn
last line is dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from causalcache_lab.selector import prompt_cap as pc
from causalcache_lab.selector.label_reference import check_reference_labeller, reference_target
from causalcache_lab.selector.labellers import (
    SYNTHETIC_SOURCES,
    check_labeller,
    label_source,
    policy_of,
)
from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.config.strict import refuse_renamed
from causalcache_memory.errors import ConfigError
from causalcache_memory.render.prompt import render_prompt

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy
    from causalcache_memory.trace import Trace

__all__ = [
    "LABELS_FORMAT",
    "LABELS_VERSION",
    "SYNTHETIC_SOURCES",
    "LabelConfig",
    "check_labeller",
    "decision_states",
    "label_source",
    "label_state",
    "labels_header",
    "policy_of",
    "read_labels",
    "run_labelling",
]

LABELS_FORMAT = "causalcache-selector-labels"
LABELS_VERSION = 1


logger = logging.getLogger("causalcache_lab.selector.labels")


class LabelConfig(BaseModel):
    """What to label.

    Attributes:
        budgets: budgets ``B`` to label each state at.
        all_slots: score swaps out of every recent slot (default; matches the search), not only the
            oldest one.
        path_length: maximum number of swaps on a teacher path (0 disables paths; capped at ``B``).
        path_candidates: distant events (best singletons) tried at each teacher-path step.
        min_distant: a state is labelled only if it has at least this many events outside Recent-B.
        stride: label every ``stride``-th decision of a trajectory.
        max_states_per_trajectory: cap per trajectory and budget (None = no cap).
        batch_size: prompts per ``policy.score`` call.
        target: which gold field is the teacher-forced target (``response`` = the verbatim ``r_t``).
        prompt_cap: cheaper labels (:mod:`~causalcache_lab.selector.prompt_cap`; replaces
            ``all_slots``/``path_length``/``path_candidates``); None (default) = full labelling.
        reference: the action every allocation is scored against. ``recorded`` (default): the recorded
            step (sensible only for successful episodes). ``full_history``: the labeller's own action
            when it sees the last ``reference_images`` past steps at full fidelity (one generation per
            state), so a failed episode labels too: at a step where Recent-B lacks a screen the
            full-history policy reads, the swap that restores it raises ``Q`` (RESULTS.md 9g).
        reference_images: past steps shown in the ``full_history`` reference prompt (the most recent
            ones; bounds its length for a real VLM: ~2.7k tokens per 1080p screenshot for Qwen2.5-VL).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    budgets: tuple[int, ...] = (1, 2, 4)
    all_slots: bool = True
    path_length: int = Field(3, ge=0)
    path_candidates: int = Field(8, ge=1)
    min_distant: int = Field(1, ge=1)
    stride: int = Field(1, ge=1)
    max_states_per_trajectory: int | None = None
    batch_size: int = Field(16, ge=1)
    target: str = "response"
    prompt_cap: pc.PromptCap | None = None
    reference: Literal["recorded", "full_history"] = "recorded"
    reference_images: int = Field(16, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return refuse_renamed(data, {"prompt_budget": "prompt_cap"})  # refused by name

    def config_hash(self) -> str:
        # fields at the defaults they were added with stay out, so older label files still resume
        exclude = {"prompt_cap"} if self.prompt_cap is None else set()
        if self.reference == "recorded":
            exclude |= {"reference", "reference_images"}
        dump = self.model_dump(exclude=exclude)
        return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()[:16]


def decision_states(trajectory: Trajectory, budget: int, config: LabelConfig) -> list[int]:
    """Decision indices ``t`` of ``trajectory`` to label at ``budget``."""
    first = budget + 1 + config.min_distant  # t - 1 - B >= min_distant
    ts = list(range(first, len(trajectory) + 1, config.stride))
    if config.max_states_per_trajectory is not None and len(ts) > config.max_states_per_trajectory:
        step = len(ts) / config.max_states_per_trajectory
        ts = [ts[int(i * step)] for i in range(config.max_states_per_trajectory)]
    return ts


class _SetScorer:
    """Scores complete exact-B sets of one state through ``policy.score`` (deduplicated, batched)."""

    def __init__(
        self,
        policy: Policy,
        archive: ScreenshotArchive,
        trace: Trace,
        budget: int,
        target: str,
        batch_size: int,
    ) -> None:
        self.policy, self.archive, self.trace = policy, archive, trace
        self.budget, self.target, self.batch_size = budget, target, batch_size
        self.cache: dict[frozenset[int], float] = {}
        self.prompts_scored = 0

    def __call__(self, sets: Sequence[Iterable[int]]) -> list[float]:
        keys = [frozenset(s) for s in sets]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            prompts = [
                render_prompt(
                    self.trace,
                    make_allocation(sorted(k), t=self.trace.t, budget=self.budget, allocator="label"),
                ).bind(self.archive)
                for k in chunk
            ]
            values = self.policy.score(prompts, [self.target] * len(chunk))
            if len(values) != len(chunk):
                raise ValueError(f"policy.score returned {len(values)} scores for {len(chunk)} prompts")
            self.cache.update(zip(chunk, (float(v) for v in values), strict=True))
            self.prompts_scored += len(chunk)
        return [self.cache[k] for k in keys]


def label_state(
    policy: Policy,
    archive: ScreenshotArchive,
    trajectory: Trajectory,
    t: int,
    budget: int,
    config: LabelConfig,
    *,
    prior: pc.CandidatePrior | None = None,
    references: dict | None = None,
) -> dict[str, Any]:
    """Label one ``(state, B)`` (in full, or under ``config.prompt_cap`` with ``prior``); the JSON record.
    ``references`` caches a full-history reference across the budgets of one state."""
    trace = trajectory.trace_at(t)
    target, reference = reference_target(policy, archive, trajectory, t, config, cache=references)
    score = _SetScorer(policy, archive, trace, budget, target, config.batch_size)
    recent = recent_b(t, budget)
    cheap, extra = pc.capped_labels(score, config.prompt_cap, prior, archive, trajectory, t, trace, _group)
    anchor, groups, path = cheap or _full_labels(score, recent, config)  # full if no budget or no prior
    return {
        "kind": "state",
        "key": state_key(trajectory.trajectory_id, t, budget),
        "trajectory_id": trajectory.trajectory_id,
        "t": t,
        "budget": budget,
        "recent": list(recent),
        "anchor": anchor,
        "groups": groups,
        "path": path,
        "prompts_scored": score.prompts_scored,
        **({"reference": reference} if reference else {}),
        **extra,
    }


def _full_labels(score: _SetScorer, recent: tuple[int, ...], config: LabelConfig) -> tuple[float, list, list]:
    rset = frozenset(recent)
    distant = [j for j in range(1, score.trace.t) if j not in rset]
    anchor = score([recent])[0]
    slots = list(recent) if config.all_slots else [min(recent)]
    groups: list[dict[str, Any]] = []
    best_single: dict[int, float] = {}
    for r in slots:
        sets = [(rset - {r}) | {j} for j in distant]
        q = score(sets)
        groups.append(_group(recent, anchor, r, distant, q, "singleton"))
        for j, v in zip(distant, q, strict=True):
            best_single[j] = max(v, best_single.get(j, -float("inf")))
    path = [{"set": list(recent), "q": anchor}]
    current, q_current = rset, anchor
    steps = min(config.path_length, len(recent))
    for step in range(steps):
        if step == 0:
            moves = [(g["out"], j, v) for g in groups for j, v in zip(g["cands"], g["q"], strict=True)]
        else:
            cands = [j for j in sorted(best_single, key=lambda j: -best_single[j]) if j not in current]
            cands = cands[: config.path_candidates]
            moves = []
            for r in sorted(current & rset):
                if not cands:
                    break
                q = score([(current - {r}) | {j} for j in cands])
                groups.append(_group(sorted(current), q_current, r, cands, q, "path"))
                moves.extend((r, j, v) for j, v in zip(cands, q, strict=True))
        step_to = pc.path_step(moves, q_current)
        if step_to is None:
            break
        r, j, q_current = step_to
        current = (current - {r}) | {j}
        path.append({"set": sorted(current), "q": q_current})
    return anchor, groups, path


def _group(
    base: Sequence[int], q_base: float, out: int, cands: Sequence[int], q: Sequence[float], source: str
) -> dict[str, Any]:
    return {
        "base": list(base),
        "q_base": q_base,
        "out": out,
        "cands": list(cands),
        "q": list(q),
        "source": source,
    }


def state_key(trajectory_id: str, t: int, budget: int) -> str:
    return f"{trajectory_id}#{t}#B{budget}"


# ---------------------------------------------------------------------------------------------- storage
def read_labels(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(header, records)`` of a labels file; a torn last line (interrupted write) is ignored."""
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                break  # torn write
            data = json.loads(line)
            if lineno > 1:
                records.append(data)
            else:
                _check_header(path, header := data)
    if header is None:
        raise ConfigError(f"labels file {path} is empty; it has no header line")
    return header, records


def _check_header(path: str | Path, header: dict[str, Any]) -> None:
    if header.get("format") != LABELS_FORMAT or header.get("version") != LABELS_VERSION:
        raise ConfigError(
            f"{path} is not a selector labels file of version {LABELS_VERSION} "
            f"(format={header.get('format')!r}, version={header.get('version')!r}); relabel into a new file"
        )


def labels_header(policy: Any, config: LabelConfig) -> dict[str, Any]:
    """The first line of a labels file: format, labeller, config (and its hash), source, time written."""
    return {
        "kind": "header",
        "format": LABELS_FORMAT,
        "version": LABELS_VERSION,
        "labeller": getattr(policy, "name", type(policy).__name__),
        "config_hash": config.config_hash(),
        "config": config.model_dump(),
        "source": label_source(policy),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _open_for_append(path: Path, header: dict[str, Any]) -> tuple[set[str], Any]:
    """Open ``path`` to append, with the keys it holds; a file with no complete line (its header was cut
    by an interrupted start, and records follow the header's newline) is written again: nothing is lost."""
    done: set[str] = set()
    if path.exists() and path.stat().st_size > 0 and b"\n" in path.read_bytes():
        old, records = read_labels(path)
        if old.get("config_hash") != header["config_hash"] or old.get("labeller") != header["labeller"]:
            raise ConfigError(
                f"labels file {path} was written by labeller {old.get('labeller')!r} with config hash "
                f"{old.get('config_hash')!r}, but this run is {header['labeller']!r} / {header['config_hash']!r}; "
                "write to a new output file (or restore the original config) to resume"
            )
        done = {r["key"] for r in records}
        with open(path, "rb+") as fh:  # drop a torn last line so appends start on a fresh line
            data = fh.read()
            fh.truncate(data.rfind(b"\n") + 1)
        return done, open(path, "a", encoding="utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "w", encoding="utf-8")
    fh.write(json.dumps(header) + "\n")
    fh.flush()
    return done, fh


def _planned(
    trajectories: Sequence[Trajectory], config: LabelConfig
) -> Iterator[tuple[Trajectory, int, int]]:
    for traj in trajectories:
        for budget in config.budgets:
            for t in decision_states(traj, budget, config):
                yield traj, t, budget


def run_labelling(
    policy: Policy,
    archive: ScreenshotArchive,
    trajectories: Sequence[Trajectory],
    output: str | Path,
    config: LabelConfig | None = None,
    *,
    progress: bool = True,
    max_states: int | None = None,
    force_labeller: bool = False,
) -> dict[str, int]:
    """Label every planned ``(state, B)`` into ``output``, skipping those already there.

    ``max_states`` stops after that many *new* records (useful for chunked runs). Returns counts
    ``{"planned", "skipped", "written", "prompts"}`` (with a full-history reference also
    ``reference_generations`` and ``reference_fallbacks``: unparsable references, logged as a warning). The
    simulated policy is refused for data not from the synthetic world unless ``force_labeller``
    (:func:`check_labeller`).
    """
    check_labeller(policy, trajectories, force=force_labeller)
    config = config or LabelConfig()
    check_reference_labeller(policy, config.reference)
    path = Path(output)
    done, fh = _open_for_append(path, labels_header(policy, config))
    plan = list(_planned(trajectories, config))
    todo = [p for p in plan if state_key(p[0].trajectory_id, p[1], p[2]) not in done]
    counts = {"planned": len(plan), "skipped": len(plan) - len(todo), "written": 0, "prompts": 0}
    prior = pc.make_prior(config.prompt_cap, archive) if config.prompt_cap is not None else None
    bar = _progress(len(todo), progress)
    refs: dict = {}  # one full-history reference per state, whatever its budgets
    try:
        for traj, t, budget in todo:
            if max_states is not None and counts["written"] >= max_states:
                break
            labeller = policy_of(policy, traj)
            record = label_state(labeller, archive, traj, t, budget, config, prior=prior, references=refs)
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")
            fh.flush()
            counts["written"] += 1
            counts["prompts"] += record["prompts_scored"]
            bar.update(1)
        os.fsync(fh.fileno())
    finally:
        fh.close()
        bar.close()
    if refs:  # one generation per state (config.reference = full_history), whatever its budgets
        counts["reference_generations"] = len(refs)
        counts["reference_fallbacks"] = sum("fallback" in entry for _, entry in refs.values())
    if counts.get("reference_fallbacks"):
        logger.warning(
            "labels: the full-history reference was unparsable on %d of %d states; those states were "
            "scored against the recorded step instead (their records say so under reference.fallback)",
            counts["reference_fallbacks"],
            counts["reference_generations"],
        )
    return counts


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc="selector labels", unit="state", disable=not enabled)
