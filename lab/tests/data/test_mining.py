"""Replacement-group mining on hand-checked trajectories (tolerance, age, wrong restore, held-out B)."""

from __future__ import annotations

import hashlib
from collections import defaultdict

import pytest

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_lab.hgkv.groups import ReplacementGroup, mine_groups
from causalcache_memory.actions import Tolerance, actions_equivalent, parse_pyautogui


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _traj(tid: str, codes: list[str | None], *, success: bool = True) -> Trajectory:
    """Steps from AgentNet-style code (None = an unparsed step); step ids are 10, 20, 30, ..."""
    steps = []
    for k, code in enumerate(codes, 1):
        unparsed = code is None
        steps.append(
            Step(
                action=parse_pyautogui(code or "computer.wait()", coords="relative"),
                response=code or "???",
                screenshot_before=_sha(f"{tid}/{k}"),
                screenshot_after=_sha(f"{tid}/{k + 1}"),
                step_id=str(10 * k),
                unparsed="???" if unparsed else None,
            )
        )
    return Trajectory(tid, "goal", "desktop", (1000, 1000), tuple(steps), success=success)


CODES_A = [
    "computer.wait()",  # 1
    "pyautogui.click(x=0.5, y=0.3)",  # 2
    'pyautogui.write(message="hello")',  # 3
    "pyautogui.click(x=0.1, y=0.1)",  # 4
    'pyautogui.write(message="world")',  # 5
    "pyautogui.hotkey('ctrl', 's')",  # 6
    "pyautogui.scroll(-3)",  # 7
    "pyautogui.moveTo(x=0.505, y=0.302)\npyautogui.click()",  # 8: same point as 2 within tolerance
    "pyautogui.click(x=0.53, y=0.3)",  # 9: near miss (0.03 from 2, 0.025 from 8)
    "pyautogui.typewrite('hello')",  # 10: same text as 3
    'pyautogui.write(message="Hello")',  # 11: text is exact: not 3
    "pyautogui.click(0.53, 0.30)",  # 12: same as 9, age 4 only
]


def _by_key(groups: list[ReplacementGroup]) -> dict[tuple[int, int], ReplacementGroup]:
    return {(g.t, g.budget): g for g in groups}


def test_hand_checked_groups() -> None:
    groups, report = mine_groups([_traj("A", CODES_A)], budgets=(1, 2, 4), held_out_budgets=(8,))
    got = _by_key(groups)
    # t=8 recurs at i=2 (different code, coordinates within 0.014); t=10 at i=3; t=12 at i=9 (age 4)
    assert sorted(got) == [(8, 1), (8, 2), (8, 4), (10, 1), (10, 2), (10, 4), (12, 1), (12, 2)]
    g = got[(8, 4)]
    assert (g.recurrence, g.candidate, g.target_step, g.earlier_step) == (2, 1, "80", "20")
    assert g.wrong == 2 and g.selected("relevant") == (1, 5, 6, 7) and g.selected("recent") == (4, 5, 6, 7)
    assert g.selected("wrong") == (2, 5, 6, 7)
    assert (got[(10, 1)].candidate, got[(10, 1)].wrong) == (2, 3)  # age tie: the younger event
    assert (got[(12, 1)].candidate, got[(12, 1)].wrong) == (8, 9)
    assert (got[(12, 2)].candidate, got[(12, 2)].wrong) == (8, 7)
    assert report.per_budget == {1: 3, 2: 3, 4: 2, 8: 0} and report.recurring == 3
    assert report.held_out_budgets == (8,)


def test_tolerance_is_configurable() -> None:
    wide = Tolerance(desktop_radius=0.05, text="exact")
    groups, _ = mine_groups([_traj("A", CODES_A)], budgets=(1,), tolerance=wide)
    assert (9, 1) in _by_key(groups)  # the near miss is inside the wider radius
    loose = Tolerance(text="normalized")
    groups, _ = mine_groups([_traj("A", CODES_A)], budgets=(1,), tolerance=loose)
    assert (11, 1) in _by_key(groups)  # "Hello" matches "hello" only when text is normalized


def test_age_and_wrong_restore_rules_hold() -> None:
    trajs = [_traj("A", CODES_A), _traj("A2", CODES_A[:1] + CODES_A[3:] + CODES_A[1:3] + CODES_A[7:])]
    by_id = {t.trajectory_id: t for t in trajs}
    groups, _ = mine_groups(trajs, budgets=(1, 2, 4))
    assert groups
    for g in groups:
        traj = by_id[g.trajectory_id]
        target = traj.steps[g.t - 1].action

        def eq(step_index: int, target=target, traj=traj) -> bool:
            return actions_equivalent(
                target, traj.steps[step_index - 1].action, tolerance=Tolerance(text="exact")
            )

        assert eq(g.recurrence) and g.candidate == g.recurrence - 1
        assert g.t - g.candidate >= g.budget + 2 and g.t - g.wrong >= g.budget + 2
        assert g.wrong != g.candidate and not eq(g.wrong + 1)  # the action after j- is not a_t
        eligible = [j for j in range(1, g.t - g.budget - 1) if j != g.candidate and not eq(j + 1)]
        assert min(abs(j - g.candidate) for j in eligible) == abs(g.wrong - g.candidate)
        assert (
            len(g.selected("recent")) == len(g.selected("relevant")) == len(g.selected("wrong")) == g.budget
        )


def test_held_out_budget_and_triple_click() -> None:
    codes = ["computer.wait()", "pyautogui.click(x=0.2, y=0.2)"]
    codes += [f'pyautogui.write(message="w{k}")' for k in range(3, 14)]
    codes += ["computer.triple_click(x=0.2, y=0.2)", "pyautogui.click(x=0.2, y=0.2)"]
    groups, report = mine_groups([_traj("B", codes)], budgets=(1, 2, 4), held_out_budgets=(8,))
    got = _by_key(groups)
    assert 14 not in {t for t, _ in got}  # a triple click is not a click
    assert {b for t, b in got if t == 15} == {1, 2, 4, 8}
    assert got[(15, 8)].held_out and not got[(15, 4)].held_out and got[(15, 8)].candidate == 1
    assert report.per_split == {got[(15, 1)].split: 3}  # held-out groups are not training units
    with pytest.raises(Exception, match="both trained on and held out"):
        mine_groups([], budgets=(1, 8), held_out_budgets=(8,))


def test_unparsed_and_failed_never_mined() -> None:
    codes = ["computer.wait()", "computer.wait()", *[f"pyautogui.write(message='{c}')" for c in "abcd"], None]
    groups, report = mine_groups([_traj("C", codes)], budgets=(1,))
    assert groups == [] and report.unparsed_steps == 1  # the placeholder 'wait' is not a target
    codes = [
        "computer.wait()",
        "computer.wait()",
        *[f"pyautogui.write(message='{c}')" for c in "abcd"],
        "computer.wait()",
    ]
    assert mine_groups([_traj("C", codes)], budgets=(1,))[0]  # the parsed twin is mined
    assert mine_groups([_traj("F", CODES_A, success=False)], budgets=(1,))[0] == []


def test_splits_are_trajectory_disjoint() -> None:
    trajs = [_traj(f"T{k}", CODES_A) for k in range(40)]
    groups, report = mine_groups(trajs, budgets=(1, 2))
    splits = defaultdict(set)
    for g in groups:
        splits[g.trajectory_id].add(g.split)
    assert all(len(s) == 1 for s in splits.values())
    assert {s for v in splits.values() for s in v} == {"train", "dev", "test"}
    assert sum(report.split_trajectories.values()) == 40
