"""Matched-budget replacement groups for DiD supervision (paper, "Per-B Fidelity-Restoration Supervision").

A decision point ``t`` of a successful trajectory qualifies when its target action ``a_t`` recurs at an
earlier step ``i < t`` under full-action equivalence. The screenshot preceding that earlier occurrence,
``v_{i-1} = x_i``, is the restoration candidate ``j+ = i - 1`` (its age is ``t - j+``). For each budget
``B`` with ``age >= B + 2`` three exact-B allocations share summaries, current screen and target:

* **recent**: ``Recent-B = {t-B, ..., t-1}``;
* **relevant**: ``Recent-(B-1) + {j+}`` (the oldest recent slot replaced by the candidate);
* **wrong**: ``Recent-(B-1) + {j-}`` where ``j-`` is the event nearest in age to ``j+`` (also outside the
  recent window, ``age >= B + 2``) whose following action ``a_{j-+1}`` is *not* equivalent to ``a_t``.

Only single-slot (``k = 1``) replacement is built ("Why single-slot replacement"). Splits are
trajectory-disjoint and deterministic: :func:`~causalcache_lab.data.split.trajectory_split`, the
one split that selector training (``split_by: hash``) uses too.

Real data (:mod:`causalcache_lab.data`): a step whose action did not parse is never a target, a
recurrence or a wrong-restore witness (its equivalence is unknown); steps whose ``metadata.clicks``
differ (an AgentNet triple click vs a click) are not equivalent. Groups at ``held_out_budgets`` (the
paper's ``B = 8``) are built with ``held_out = True`` and are never used for training. Each record also
names ``target_step`` and ``earlier_step`` in the dataset's own step ids and, when written, the arms'
event sets (``arms``, 1-based event indices; ``arm_steps``, the dataset step ids of those events).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from causalcache_lab.data.split import Split, trajectory_split
from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_memory._jsonl import read_jsonl, write_jsonl
from causalcache_memory.actions.equivalence import Tolerance
from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import Allocation, make_allocation, recent_b
from causalcache_memory.errors import ConfigError

__all__ = [
    "ARMS",
    "GROUP_FORMAT_VERSION",
    "MINING_TOLERANCE",
    "MiningReport",
    "ReplacementGroup",
    "assign_split",
    "load_groups",
    "mine_groups",
    "save_groups",
]

GROUP_FORMAT_VERSION = 1
ARMS = ("recent", "relevant", "wrong")
#: the one trajectory split (mining, ``data stats`` and ``train selector`` share it)
assign_split = trajectory_split
Equivalence = Callable[[Action, Action], bool]


@dataclass(frozen=True, slots=True)
class ReplacementGroup:
    """One matched-budget group.

    Attributes:
        trajectory_id: the source trajectory (the split unit).
        t: decision index (1-based); the target is ``a_t`` with response ``target``.
        budget: ``B``; every arm carries exactly ``B`` history images.
        candidate: ``j+``, the target-specific restoration event.
        wrong: ``j-``, the age-matched non-equivalent event.
        recurrence: ``i``, the earlier step whose action is equivalent to the target.
        target: the target response ``r_t`` scored by teacher forcing.
        split: ``train``/``dev``/``test``.
        target_step: the dataset's id of step ``t`` (None for data without step ids).
        earlier_step: the dataset's id of step ``i``, the earlier equivalent action.
        held_out: built at a held-out budget (never used for training).
    """

    trajectory_id: str
    t: int
    budget: int
    candidate: int
    wrong: int
    recurrence: int
    target: str
    split: Split
    target_step: str | None = None
    earlier_step: str | None = None
    held_out: bool = False

    def selected(self, arm: str) -> tuple[int, ...]:
        """History events of ``arm`` (``recent``, ``relevant`` or ``wrong``), ascending."""
        keep = recent_b(self.t, self.budget - 1)
        if arm == "recent":
            return recent_b(self.t, self.budget)
        if arm == "relevant":
            return tuple(sorted((*keep, self.candidate)))
        if arm == "wrong":
            return tuple(sorted((*keep, self.wrong)))
        raise ConfigError(f"arm={arm!r} is not one of {', '.join(ARMS)}")

    def allocation(self, arm: str) -> Allocation:
        return make_allocation(self.selected(arm), t=self.t, budget=self.budget, allocator=f"did:{arm}")

    def to_dict(self, trajectory: Trajectory | None = None) -> dict[str, Any]:
        """The record; with the source ``trajectory`` also the arms' event sets in its step ids."""
        out: dict[str, Any] = {"version": GROUP_FORMAT_VERSION, **asdict(self)}
        out["trajectory_id"] = self.trajectory_id
        out["arms"] = {arm: list(self.selected(arm)) for arm in ARMS}
        if trajectory is not None:
            ids = [s.step_id if s.step_id is not None else str(k) for k, s in enumerate(trajectory.steps, 1)]
            out["arm_steps"] = {arm: [ids[j - 1] for j in self.selected(arm)] for arm in ARMS}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplacementGroup:
        if data.get("version", GROUP_FORMAT_VERSION) != GROUP_FORMAT_VERSION:
            raise ConfigError(
                f"replacement group version {data.get('version')!r} is not {GROUP_FORMAT_VERSION}"
            )
        fields = {k: v for k, v in data.items() if k not in ("version", "arms", "arm_steps")}
        return cls(**fields)


@dataclass(frozen=True)
class MiningReport:
    """Yield of :func:`mine_groups`.

    Attributes:
        decision_points: decision points of successful trajectories scanned.
        recurring: decision points whose target recurs earlier (any age).
        per_budget: groups built per ``B`` (held-out budgets included).
        no_wrong: per ``B``, states dropped because no age-matched non-equivalent event exists.
        per_split: groups per split (training budgets only).
        held_out_budgets: budgets built but held out from training.
        unparsed_steps: steps of successful trajectories skipped as unparsed.
        split_trajectories: successful trajectories per split.
    """

    trajectories: int
    decision_points: int
    recurring: int
    per_budget: dict[int, int]
    no_wrong: dict[int, int]
    per_split: dict[str, int]
    held_out_budgets: tuple[int, ...] = ()
    unparsed_steps: int = 0
    split_trajectories: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        per_b = ", ".join(
            f"B={b}: {n}" + (" (held out)" if b in self.held_out_budgets else "")
            for b, n in sorted(self.per_budget.items())
        )
        return (
            f"{self.trajectories} trajectories, {self.decision_points} decision points, "
            f"{self.recurring} with an earlier equivalent action; groups {per_b}; splits {self.per_split}"
        )


#: full-action equivalence tolerance for mining: text and keys exact, pointers within the radius
MINING_TOLERANCE = Tolerance(text="exact")


def _library_equivalence(platform: str, tolerance: Tolerance | None = None) -> Equivalence:
    """Full-action equivalence of :mod:`causalcache_memory.actions` for the trajectory's platform."""
    from causalcache_memory.actions import actions_equivalent

    mode = "mobile" if platform == "mobile" else "desktop"
    tol = tolerance or MINING_TOLERANCE
    return lambda ref, other: actions_equivalent(ref, other, platform=mode, tolerance=tol)


def _step_equivalence(equivalent: Equivalence) -> Callable[[Step, Step], bool | None]:
    """Equivalence of two steps: None when unknown (either action unparsed), else ``equivalent`` on the
    actions, and False when their ``metadata.clicks`` differ (triple vs single click)."""

    def same(ref: Step, other: Step) -> bool | None:
        if not ref.parsed or not other.parsed:
            return None
        if ref.metadata.get("clicks", 1) != other.metadata.get("clicks", 1):
            return False
        return bool(equivalent(ref.action, other.action))

    return same


def _wrong_event(
    traj: Trajectory, t: int, budget: int, candidate: int, same: Callable[[Step, Step], bool | None]
) -> int | None:
    """Event nearest in age to ``candidate`` (outside the window) whose next action is not ``a_t``."""
    target = traj.steps[t - 1]
    options = [
        j
        for j in range(1, t - budget - 1)  # age t - j >= B + 2
        if j != candidate and same(target, traj.steps[j]) is False  # a_{j+1} is steps[j]
    ]
    if not options:
        return None
    return min(options, key=lambda j: (abs(j - candidate), -j))


def mine_groups(
    trajectories: Iterable[Trajectory],
    *,
    budgets: Sequence[int] = (1, 2, 4),
    equivalent: Equivalence | None = None,
    dev: float = 0.15,
    test: float = 0.15,
    salt: str = "",
    held_out_budgets: Sequence[int] = (),
    tolerance: Tolerance | None = None,
) -> tuple[list[ReplacementGroup], MiningReport]:
    """Replacement groups from the successful trajectories, and the yield per ``B``.

    ``equivalent(reference, other)`` defaults to :func:`causalcache_memory.actions.actions_equivalent`
    with the trajectory's platform and ``tolerance`` (default :data:`MINING_TOLERANCE`; the target
    ``a_t`` is the reference). For each decision point the most recent qualifying earlier occurrence is
    used (one group per ``(trajectory, t, B)``). ``held_out_budgets`` are mined too, flagged
    ``held_out``.
    """
    if any(int(b) < 1 for b in (*budgets, *held_out_budgets)):
        raise ConfigError(
            f"budgets {list(budgets)} and held-out budgets {list(held_out_budgets)} must be >= 1"
        )
    overlap = set(budgets) & set(held_out_budgets)
    if overlap:
        raise ConfigError(f"budget(s) {sorted(overlap)} cannot be both trained on and held out")
    all_budgets = (*budgets, *held_out_budgets)
    held = set(held_out_budgets)
    groups: list[ReplacementGroup] = []
    per_budget: Counter[int] = Counter({b: 0 for b in all_budgets})
    no_wrong: Counter[int] = Counter({b: 0 for b in all_budgets})
    split_trajs: Counter[str] = Counter()
    n_traj = n_points = n_recurring = n_unparsed = 0
    for traj in trajectories:
        if not traj.success:
            continue
        n_traj += 1
        same = _step_equivalence(equivalent or _library_equivalence(traj.platform, tolerance))
        split = assign_split(traj.trajectory_id, dev=dev, test=test, salt=salt)
        split_trajs[split] += 1
        n_unparsed += sum(not s.parsed for s in traj.steps)
        for t in range(2, len(traj.steps) + 1):
            step_t = traj.steps[t - 1]
            if not step_t.parsed or step_t.screenshot_before is None:
                continue
            n_points += 1
            earlier = [i for i in range(2, t) if same(step_t, traj.steps[i - 1])]
            if earlier:
                n_recurring += 1
            for budget in all_budgets:
                usable = [i for i in earlier if t - (i - 1) >= budget + 2]
                if not usable:
                    continue
                i = max(usable)
                wrong = _wrong_event(traj, t, budget, i - 1, same)
                if wrong is None:
                    no_wrong[budget] += 1
                    continue
                group = ReplacementGroup(
                    traj.trajectory_id,
                    t,
                    budget,
                    i - 1,
                    wrong,
                    i,
                    step_t.response,
                    split,
                    target_step=step_t.step_id,
                    earlier_step=traj.steps[i - 1].step_id,
                    held_out=budget in held,
                )
                for arm in ARMS:
                    group.allocation(arm)  # enforce exact-B on every arm
                groups.append(group)
                per_budget[budget] += 1
    report = MiningReport(
        trajectories=n_traj,
        decision_points=n_points,
        recurring=n_recurring,
        per_budget=dict(per_budget),
        no_wrong=dict(no_wrong),
        per_split=dict(Counter(g.split for g in groups if not g.held_out)),
        held_out_budgets=tuple(held_out_budgets),
        unparsed_steps=n_unparsed,
        split_trajectories=dict(split_trajs),
    )
    return groups, report


def save_groups(
    path: str | Path, groups: Iterable[ReplacementGroup], trajectories: dict[str, Trajectory] | None = None
) -> int:
    """Write groups as JSON Lines (with ``trajectories`` by id, also the arms in dataset step ids)."""
    by_id = trajectories or {}
    return write_jsonl(path, (group.to_dict(by_id.get(group.trajectory_id)) for group in groups))


def load_groups(path: str | Path) -> Iterator[ReplacementGroup]:
    return read_jsonl(path, ReplacementGroup.from_dict, what="replacement group", error=ConfigError)
