"""The missing-screen-text warning of the decision monitor (causalcache_memory.decisions.stats, issue 24).

The bundled selector was trained reading each screen's text; a deployment that never gives it text runs
it degraded. The allocator reports the groups its model reads that no event had (``info["masked"]``) and
the memory warns once when screen text was missing on most decisions that could swap.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest
from decision_runs import run

from causalcache_memory import Action, Generation, make_allocation
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.config import parse_config
from causalcache_memory.controller import MemoryController
from causalcache_memory.decisions.stats import TEXT_DOCS, DecisionMonitor, DecisionStats
from causalcache_memory.errors import ConfigError
from causalcache_memory.factory import build_controller
from causalcache_memory.selector import SelectorAllocator
from causalcache_memory.selector.allocator import bundled_model_path
from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2
from causalcache_memory.selector.schema import TEXT_FEATURES


class TypePolicy:
    name = "fake"

    def generate(self, prompt) -> Generation:
        return Generation(response="Action: type 42", action=Action("type", text="42"))


class MaskedAllocator:
    """Keeps Recent-B and reports ``masked`` by decision index ``t`` (None: every group available) where a
    swap was possible (the selector featurizes only those decisions)."""

    name = "selector"
    uses_witness = True

    def __init__(self, masked) -> None:
        self.masked = masked

    def allocate(self, ctx: AllocationContext):
        recent = list(RecentAllocator().allocate(ctx).selected)
        pattern = self.masked(ctx.t) if len(recent) < ctx.t - 1 else None
        info = {"masked": pattern} if pattern else {}
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name, info=info)


def text_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("screen text was missing")]


def selector_memory(archive, allocator=None, **idle) -> MemoryController:
    section = {"window": 5, "no_swap_window": None, **idle}
    config = parse_config({"budget": 2, "allocation": {"idle_warning": section}})
    ctl = build_controller(
        config, policy=TypePolicy(), archive=archive, allocator=allocator or SelectorAllocator()
    )
    ctl.selector_timeout_s = None  # a loaded test machine must not turn a decision into a time-out
    return ctl


def test_the_bundled_selector_without_screen_text_warns_once_with_the_numbers(archive) -> None:
    ctl = selector_memory(archive)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run(ctl, archive, 7)  # B = 2: t = 4..7 could swap, one short of the window of 5
        assert text_warnings(caught) == [] and ctl.monitor.warned_text is None
        run(ctl, archive, 20, episode="ep2")  # the memory's 5th could-swap decision warns; not again
    (message,) = text_warnings(caught)
    assert (
        "missing on 5 of the last 5 decisions where a swap was possible (100%, above the 50% limit)"
        in message
    )
    assert (
        "'selector' was trained reading each screen's text" in message and "RESULTS.md section 8" in message
    )
    assert "`screen_text`" in message and "archive.ocr.engine" in message and TEXT_DOCS in message
    assert ctl.monitor.warned_text == message
    could = [r for r in records if r["t"] - 1 > r["budget"]]
    assert could and all("text" in r["masked"].split("+") for r in could)  # what the selector reported
    assert (
        DecisionStats.from_records(records).without_text
        == len(could)
        == ctl.monitor.stats()["ep"].without_text
    )


def test_no_warning_when_the_archive_stores_screen_text(archive) -> None:
    for i, sha in enumerate(archive.shots):
        archive.put_text(sha, f"Orders\nOrder #{100200 + i}\nDesk Lamp\nTrack package")
    ctl = selector_memory(archive)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run(ctl, archive, 30)
    assert text_warnings(caught) == [] and ctl.monitor.warned_text is None
    assert all("text" not in (r.get("masked") or "") for r in records)
    assert ctl.monitor.stats()["ep"].without_text == 0


def _rewritten_bundle(tmp_path, *, drop_text: bool, guard: bool = True):
    """The bundled scorer with its metadata changed: trained without the text features, and/or exported
    without a guard (the groups it reads then come from its features, not from the guard's)."""
    onnx = pytest.importorskip("onnx")
    proto = onnx.load(str(bundled_model_path()))
    props = {p.key: p for p in proto.metadata_props}
    if drop_text:
        props["causalcache.drop_features"].value = json.dumps(list(TEXT_FEATURES))
    if not guard:
        proto.metadata_props.remove(props["causalcache.ood"])
    else:  # what training gives when the text columns are dropped: the guard watches no text group
        ood = json.loads(props["causalcache.ood"].value)
        ood["mask_groups"] = {g: cols for g, cols in ood["mask_groups"].items() if g != "text"}
        ood["mask_thresholds"] = {k: v for k, v in ood["mask_thresholds"].items() if "text" not in k}
        props["causalcache.ood"].value = json.dumps(ood)
    path = tmp_path / "selector.onnx"
    onnx.save(proto, str(path))
    return path


@pytest.mark.parametrize("guard", [True, False])
def test_no_warning_for_a_model_without_text_features(archive, tmp_path, guard) -> None:
    selector = SelectorAllocator(_rewritten_bundle(tmp_path, drop_text=True, guard=guard))
    assert "text" not in selector.model.read_groups  # read from the model's metadata, not a name
    ctl = selector_memory(archive, selector)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run(ctl, archive, 30)
    assert text_warnings(caught) == [] and ctl.monitor.warned_text is None
    assert all("text" not in (r.get("masked") or "") for r in records)


def test_a_model_that_reads_text_is_told_by_its_guard_or_its_dropped_features(tmp_path) -> None:
    bundled = SelectorAllocator()
    assert set(bundled.model.read_groups) == {"app", "text"}  # image statistics off in the bundle
    unguarded = SelectorAllocator(_rewritten_bundle(tmp_path, drop_text=False, guard=False))
    assert set(unguarded.model.read_groups) == {"app", "text"}  # no guard: the features not dropped


def test_the_fallback_and_the_missing_text_warnings_each_fire_once(archive) -> None:
    # every state out of distribution for the model's guard judging every decision (the guard before try 2)
    ctl = selector_memory(archive, SelectorAllocator(ood_scale=1e-9, **GUARD_BEFORE_TRY2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 15)
        run(ctl, archive, 15, episode="ep2")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and len(text_warnings(caught)) == 1
    assert ctl.monitor.warned is not None and "fell back to Recent-B on 5 of the last 5" in ctl.monitor.warned
    assert ctl.monitor.warned_text == text_warnings(caught)[0]


def test_at_or_below_the_share_no_warning_above_it_one(archive) -> None:
    half = MaskedAllocator(lambda t: "app+text" if t % 2 else "app")  # text missing on every other one
    monitor = DecisionMonitor(window=6, missing_text_share=0.5, no_swap_window=None)
    ctl = MemoryController(policy=TypePolicy(), archive=archive, allocator=half, budget=2, monitor=monitor)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 30)
    assert text_warnings(caught) == [] and monitor.stats()["ep"].without_text == 13  # odd t in 4..30
    monitor = DecisionMonitor(window=6, missing_text_share=0.4, no_swap_window=None)
    ctl = MemoryController(policy=TypePolicy(), archive=archive, allocator=half, budget=2, monitor=monitor)
    with pytest.warns(match=r"missing on 3 of the last 6 decisions .*\(50%, above the 40% limit\)"):
        run(ctl, archive, 30)


def test_null_share_or_disabled_never_warns_about_text(archive) -> None:
    always = MaskedAllocator(lambda t: "text")
    for section in ({"missing_text_share": None}, {"enabled": False}):
        config = parse_config(
            {"budget": 2, "allocation": {"idle_warning": {"no_swap_window": None, **section}}}
        )
        ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=always)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(ctl, archive, 30)
        assert text_warnings(caught) == [] and ctl.monitor.warned_text is None
        assert ctl.monitor.stats()["ep"].without_text == 27  # still counted (t = 4..30 featurized)


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        (1.0, ["allocation.idle_warning.missing_text_share: got 1.0", "[0, 1)", "null"]),
        (-0.1, ["missing_text_share: got -0.1", "e.g. 0.5"]),
        ("half", ['allocation.idle_warning.missing_text_share: got "half"', "valid number"]),
    ],
)
def test_missing_text_share_config_errors_name_the_field_value_and_fix(value, fragments) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"allocation": {"idle_warning": {"missing_text_share": value}}})
    for fragment in fragments:
        assert fragment in str(info.value)


def test_missing_text_share_reaches_the_monitor_and_is_checked(archive) -> None:
    config = parse_config({"allocation": {"idle_warning": {"missing_text_share": 0.3}}})
    ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=RecentAllocator())
    assert ctl.monitor.missing_text_share == 0.3
    off = parse_config({"allocation": {"idle_warning": {"missing_text_share": None}}})
    assert off.allocation.idle_warning.missing_text_share is None
    for bad in (1.0, True, "0.5"):
        with pytest.raises(
            ConfigError, match=re.escape(f"missing_text_share={bad!r} must be a share in [0, 1)")
        ):
            DecisionMonitor(missing_text_share=bad)
