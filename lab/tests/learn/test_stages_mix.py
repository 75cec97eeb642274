"""Stage folders (skip, rerun, atomic publish) and the weighted mix of label sources."""

from __future__ import annotations

import json

import pytest

from causalcache_lab.learn.mix import mix_labels
from causalcache_lab.learn.stages import Stages


def test_stage_is_skipped_only_when_its_inputs_are_unchanged(tmp_path) -> None:
    stages = Stages(tmp_path)
    runs = []

    def work(folder):  # type: ignore[no-untyped-def]
        runs.append(folder.name)
        (folder / "out.txt").write_text(str(len(runs)))
        return {"n": len(runs)}

    first = stages.run("s", {"a": 1}, work)
    assert not first.skipped and (tmp_path / "s/out.txt").read_text() == "1"
    again = stages.run("s", {"a": 1}, work)
    assert again.skipped and again.result == {"n": 1} and len(runs) == 1
    changed = stages.run("s", {"a": 2}, work)
    assert not changed.skipped and (tmp_path / "s/out.txt").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no partial or stale folder left


def test_an_interrupted_stage_is_invisible_and_resumes_in_its_partial_folder(tmp_path) -> None:
    stages = Stages(tmp_path)

    def crash(folder):  # type: ignore[no-untyped-def]
        (folder / "progress.txt").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stages.run("labels", {"a": 1}, crash)
    assert stages.manifest("labels") is None and not (tmp_path / "labels").exists()

    def resume(folder):  # type: ignore[no-untyped-def]
        return {"found": (folder / "progress.txt").read_text()}

    assert stages.run("labels", {"a": 1}, resume).result == {"found": "half"}
    # a partial folder of other inputs is not resumed
    with pytest.raises(KeyboardInterrupt):
        stages.run("x", {"a": 1}, crash)
    assert stages.run("x", {"a": 2}, lambda f: {"fresh": not (f / "progress.txt").exists()}).result == {
        "fresh": True
    }


def _labels(path, source, records):  # type: ignore[no-untyped-def]
    header = {"kind": "header", "format": "causalcache-selector-labels", "version": 1, "labeller": source,
              "config_hash": "x", "config": {}, "source": {"source": source, "model": "m", "k": None, "temperature": None}}  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in [header, *records]))
    return path


def _record(key, q_base, qs):  # type: ignore[no-untyped-def]
    group = {"base": [3, 4], "q_base": q_base, "out": 3, "cands": list(range(1, len(qs) + 1)), "q": qs}
    return {"key": key, "trajectory_id": key.split("#")[0], "t": 5, "budget": 2, "anchor": q_base,
            "groups": [group], "path": [{"set": [3, 4], "q": q_base}]}  # fmt: skip


def test_sources_are_scaled_to_unit_gains_and_weighted(tmp_path) -> None:
    tf = _labels(
        tmp_path / "tf.jsonl",
        "teacher_forced",
        [_record(f"a{i}#5#B2", -2.0, [-1.0, -3.0]) for i in range(40)],
    )
    ag = _labels(
        tmp_path / "ag.jsonl", "agreement", [_record(f"b{i}#5#B2", 0.5, [0.75, 0.5]) for i in range(40)]
    )
    header, records = mix_labels(
        {"teacher_forced": tf, "agreement": ag}, {"teacher_forced": 1.0, "agreement": 0.5}
    )
    described = {d["name"]: d for d in header["config"]["sources"]}
    assert described["teacher_forced"]["scale"] == pytest.approx(1.0)
    assert described["agreement"]["scale"] == pytest.approx(0.25)
    assert described["teacher_forced"]["used"] == 40
    assert 10 <= described["agreement"]["used"] <= 30  # weight 0.5: about half, chosen by a stable hash
    ag_rec = next(r for r in records if r["key"].startswith("b"))
    g = ag_rec["groups"][0]
    assert [q - g["q_base"] for q in g["q"]] == pytest.approx([1.0, 0.0])  # agreement gains in unit size
    _, records2 = mix_labels(
        {"teacher_forced": tf, "agreement": ag}, {"teacher_forced": 2.0, "agreement": 0.5}
    )
    assert len([r for r in records2 if r["key"].startswith("a")]) == 80
    assert [r["key"] for r in records2 if r["key"].startswith("b")] == [
        r["key"] for r in records if r["key"].startswith("b")
    ]


@pytest.mark.parametrize(
    ("oracle", "fire", "match"),
    [
        (0.0, 0.0, "no swap that helps on dev"),
        (float("nan"), 0.0, "no swap that helps on dev"),
        (0.2, 0.0, "admits no dev swap"),
        (0.2, 0.1, None),
    ],
)
def test_a_selector_that_will_not_swap_is_reported(oracle, fire, match, caplog) -> None:
    from causalcache_lab.learn.pipeline import _idle_warnings

    meta = {"metrics": {"dev": {"oracle": oracle}}, "calibration": {"min_gain": 0.3, "dev_fire_rate": fire}}
    with caplog.at_level("WARNING", logger="causalcache_lab.learn"):
        warnings = _idle_warnings(meta)
    if match is None:
        assert warnings == [] and not caplog.records
    else:
        assert len(warnings) == 1 and match in warnings[0] and match in caplog.text


def test_the_cli_offers_the_pipeline_stages() -> None:
    from causalcache_lab.cli.learn import STAGES as CLI_STAGES
    from causalcache_lab.learn.pipeline import STAGES

    assert CLI_STAGES == STAGES
