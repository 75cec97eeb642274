"""Keep-base on boundary counts and with a base model that dropped features (issue 52).

``base_calibration`` ships the base's threshold and guard when its guard flags at most
``BASE_GUARD_MAX_FLAGGED`` (10%) of the team's train + dev states; ``base_guard_flags`` judges each state
as the base model sees it: with the base's ``drop_features`` zeroed in the state summary.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from causalcache_lab.selector.keep_base import (
    BASE_GUARD_MAX_FLAGGED,
    base_calibration,
    base_guard_flags,
)
from causalcache_memory.selector.features import FEATURE_SCHEMA, feature_index
from causalcache_memory.selector.ood import RobustGuard

NAMES = [n for n, _ in FEATURE_SCHEMA]
META = {"calibration": {"threshold": 0.25}, "ood": {"guard": "{}"}}


def _states(n: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(events=np.zeros((2, len(NAMES)), np.float32)) for _ in range(n)]


@pytest.mark.parametrize(
    ("n", "flagged", "kept"),
    [(10, 1, True), (10, 2, False), (100, 9, True), (100, 10, True), (100, 11, False), (20, 0, True)],
)
def test_the_base_is_kept_when_its_guard_flags_at_most_ten_percent(tmp_path, n, flagged, kept) -> None:
    assert BASE_GUARD_MAX_FLAGGED == 0.10
    flags = np.zeros(n, bool)
    flags[:flagged] = True
    half = n // 2
    parts = {"train": _states(half), "dev": _states(n - half), "test": _states(7)}  # test is not judged
    shipped, report = base_calibration(tmp_path / "selector.onnx", parts, (flags, META))
    assert report["kept"] is kept and report["states"] == n
    assert report["base_flagged"] == pytest.approx(flagged / n)
    assert (shipped == {"calibration": META["calibration"], "ood": META["ood"]}) if kept else shipped is None


def test_no_states_judged_means_the_base_is_not_kept(tmp_path) -> None:
    shipped, report = base_calibration(
        tmp_path / "selector.onnx", {"train": [], "dev": []}, (np.zeros(0, bool), META)
    )
    assert shipped is None and report["kept"] is False and report["base_flagged"] == 1.0


# ------------------------------------------------------------------ a base that dropped app_available
DROP = ["app_available"]
VARY = ["age_log", "goal_token_jaccard", "app_in_goal", "app_differs_current"]


def _events(rng: np.random.Generator, app_in_goal: float | None = None) -> np.ndarray:
    """Two event rows; app labels present (app_available 1), the varying columns drawn in [0, 1)."""
    ev = np.zeros((2, len(NAMES)), np.float32)
    for name in VARY:
        ev[:, feature_index(name)] = rng.uniform(0.0, 1.0, size=2)
    ev[:, feature_index("app_available")] = 1.0
    if app_in_goal is not None:
        ev[:, feature_index("app_in_goal")] = app_in_goal
    return ev


@pytest.fixture(scope="module")
def dropped_base(tmp_path_factory) -> tuple[object, list[SimpleNamespace]]:
    """A base trained without ``app_available``: its guard fitted on summaries with that column zeroed."""
    rng = np.random.default_rng(5)
    drop = [feature_index(n) for n in DROP]
    train = [_events(rng) for _ in range(60)]
    summaries = np.array([ev.astype(np.float64).mean(0) for ev in train])
    summaries[:, drop] = 0.0  # as the base saw them (state_summary with its drop)
    guard = RobustGuard.fit(NAMES, summaries, drop=drop)
    assert "app" in guard.mask_groups and feature_index("app_in_goal") in guard.columns
    root = tmp_path_factory.mktemp("dropped-base")
    meta = {
        "calibration": {"threshold": 0.1},
        "ood": {"guard": guard.to_json()},
        "train": {"drop_features": DROP},
    }
    (root / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    # team states: typical columns, but app_in_goal far outside training (which the base never judges:
    # with app_available dropped every state is of the "app" mask pattern, app columns unwatched)
    team = [SimpleNamespace(events=_events(rng, app_in_goal=40.0)) for _ in range(20)]
    return root / "selector.onnx", team


def test_base_guard_flags_zero_the_base_models_dropped_features_before_judging(dropped_base) -> None:
    onnx, team = dropped_base
    flags, meta = base_guard_flags(onnx, team)
    assert flags is not None and meta["train"]["drop_features"] == DROP
    # judged with app_available zeroed: the app group is masked and app_in_goal = 40 is not looked at
    assert flags.mean() <= BASE_GUARD_MAX_FLAGGED


def test_a_base_that_dropped_an_availability_column_is_kept_on_states_its_guard_accepts(dropped_base) -> None:
    onnx, team = dropped_base
    shipped, report = base_calibration(onnx, {"train": team[:10], "dev": team[10:]})
    assert report["kept"] is True and shipped is not None
    assert shipped["calibration"] == {"threshold": 0.1}


def test_a_base_without_metadata_or_guard_is_refitted(tmp_path) -> None:
    flags, meta = base_guard_flags(tmp_path / "selector.onnx", _states(3))
    assert flags is None and "no metadata.json" in meta["reason"]
    (tmp_path / "metadata.json").write_text(json.dumps({"calibration": {"threshold": 0.1}}), encoding="utf-8")
    shipped, report = base_calibration(tmp_path / "selector.onnx", {"train": _states(3)})
    assert shipped is None and report == {
        "kept": False,
        "reason": f"{tmp_path / 'metadata.json'} has no OOD guard",
    }


@pytest.mark.parametrize("n_flags", [299, 301])
def test_a_verdict_count_other_than_the_states_is_refused(tmp_path, n_flags) -> None:
    parts = {"train": _states(200), "dev": _states(100)}
    with pytest.raises(ValueError, match=rf"guard has {n_flags} verdicts for 300 train and dev states"):
        base_calibration(tmp_path / "selector.onnx", parts, (np.zeros(n_flags, bool), META))
    # 300 verdicts for 300 states (ints beyond CPython's small-int cache: compared by value)
    shipped, report = base_calibration(tmp_path / "selector.onnx", parts, (np.zeros(300, bool), META))
    assert shipped is not None and report["kept"] is True and report["states"] == 300


def test_a_base_with_a_guard_but_no_calibration_is_refitted_naming_its_metadata(
    dropped_base, tmp_path
) -> None:
    onnx, team = dropped_base
    meta = json.loads((onnx.parent / "metadata.json").read_text(encoding="utf-8"))
    del meta["calibration"]
    (tmp_path / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    shipped, report = base_calibration(tmp_path / "selector.onnx", {"train": team})
    assert shipped is None
    assert report == {"kept": False, "reason": f"{tmp_path / 'metadata.json'} has no calibration"}
