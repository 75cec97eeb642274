"""The HTML report and the plain-text table of closed-loop results."""

from __future__ import annotations

import copy
import re

import pytest

from causalcache_lab.eval.report import REPORT_FILENAME, contrast_sentences, format_table, write_report
from causalcache_memory.archive import LocalArchive

ARMS = ("summary_only", "recent", "random", "rgb", "causalcache")
SPLITS = ("all", "memory_critical", "control")
GOAL = 'Send the order code to Ana <script>alert("x")</script> & done'


def _cell(success: float, n: int) -> dict:
    return {
        "success": success,
        "ci95": [success - 0.1, success + 0.1],
        "n": n,
        "steps_mean": 7.5,
        "wall_s_mean": 0.25,
    }


def make_results(shas: list[str] | None = None, current: list[str] | None = None) -> dict:
    arms = {}
    for i, arm in enumerate(ARMS):
        base = 0.2 + 0.1 * i
        arms[arm] = {
            "all": _cell(base, 40),
            "memory_critical": _cell(base + 0.013, 20),
            "control": _cell(base - 0.011, 20),
            "k_profile": {"0": 0.75, "1": 0.25} if arm == "causalcache" else {"0": 1.0},
            "fire_rate": 0.25 if arm == "causalcache" else None,
            "added_model_ms_per_step": 3.5 if arm == "causalcache" else None,
        }
    results = {
        "meta": {
            "tasks": 40,
            "budget": 2,
            "seed": 7,
            "arms": list(ARMS),
            "platform": "linux",
            "wall_s": 12.5,
            "command": "causalcache demo --tasks 40 --out 'runs/a&b'",
            "machine": "2-core",
            "version": "0.1",
        },
        "arms": arms,
        "contrasts": {
            "all": {"delta": 0.2, "ci95": [0.05, 0.35]},
            "memory_critical": {"delta": 0.35, "ci95": [0.2, 0.5]},
            "control": {"delta": 0.01, "ci95": [-0.1, 0.12]},
            "interaction": {"delta": 0.34, "ci95": [0.15, 0.52]},
        },
        "episodes": [
            {"task_id": "t1", "split": "control", "arm": "recent", "success": True, "steps": 3, "wall_s": 0.1}
        ],
    }
    if shas is not None:
        results["showcase"] = make_showcase(shas, current or shas)
    return results


def make_showcase(shas: list[str], current: list[str]) -> dict:
    """Decisions t = 2..5 with B = 2: events 1..t-1, the last two recent, event 1 promoted at t = 5."""
    steps = []
    for t in range(2, 6):
        events = []
        for i in range(1, t):
            fid = "recent" if i >= t - 2 else "summary"
            if t == 5 and i == 1:
                fid = "promoted"
            if t == 5 and i == 3:
                fid = "summary"  # displaced by the promotion
            events.append(
                {
                    "index": i,
                    "summary": f"tapped <b>item {i}</b>",
                    "screenshot": shas[(i - 1) % len(shas)],
                    "fidelity": fid,
                }
            )
        steps.append(
            {
                "t": t,
                "summary_lines": [e["summary"] for e in events],
                "events": events,
                "current_screenshot": current[(t - 1) % len(current)],
                "action": f"click(x={t}, y=10)",
                "second_pass": t == 5,
                "k": int(t == 5),
                "proposal": "type('0000')" if t == 5 else None,
            }
        )
    return {
        "arm": "causalcache",
        "task_id": "cross-17",
        "goal": GOAL,
        "split": "memory_critical",
        "success": True,
        "budget": 2,
        "steps": steps,
    }


def expected_counts(results: dict) -> dict[str, int]:
    counts = {"summary": 0, "recent": 0, "promoted": 0}
    for step in results["showcase"]["steps"]:
        for event in step["events"]:
            counts[event["fidelity"]] += 1
    return counts


@pytest.fixture
def archive(tmp_path, make_png):
    arch = LocalArchive(tmp_path / "archive")
    shas = [
        arch.put(make_png((40 * i, 90, 200 - 30 * i), size=(360, 640), text=f"screen {i}")).sha256
        for i in range(5)
    ]
    return arch, shas


def test_report_contains_every_arm_split_and_escaped_text(tmp_path, archive):
    arch, shas = archive
    results = make_results(shas)
    path = write_report(results, tmp_path / "out", arch, plots=[])
    assert path == tmp_path / "out" / REPORT_FILENAME and path.is_file()
    page = path.read_text(encoding="utf-8")
    for label in ("Summary-only (B=0)", "Recent-2", "Random", "RGB similarity", "CausalCache"):
        assert label in page
    for split in ("All tasks", "Memory-critical", "Control"):
        assert split in page
    assert "<script>alert" not in page  # the page's own script is the lightbox's; the goal is escaped
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; done" in page
    assert "&lt;b&gt;item 1&lt;/b&gt;" in page
    assert "runs/a&amp;b" in page
    assert "CausalCache − Recent-2 on memory-critical tasks: +0.35 [0.20, 0.50]" in page
    assert "k0 75% k1 25%" in page
    assert "pass 2 fired" in page and "type(&#x27;0000&#x27;)" in page


def test_showcase_cards_per_fidelity_and_embedded_images(tmp_path, archive):
    arch, shas = archive
    results = make_results(shas)
    page = write_report(results, tmp_path, arch, plots=[]).read_text(encoding="utf-8")
    counts = expected_counts(results)
    assert counts["promoted"] == 1 and counts["recent"] > 0 and counts["summary"] > 0
    for fidelity in ("recent", "promoted"):
        assert page.count(f'data-fidelity="{fidelity}"') == counts[fidelity]
    assert 'data-fidelity="summary"' not in page  # summary-only events: one collapsed line per row
    assert page.count("Summary only: ") == len(results["showcase"]["steps"])
    assert page.count('class="card current"') == len(results["showcase"]["steps"])
    # every distinct screenshot used with pixels is embedded exactly once, then reused by class
    assert page.count("data:image/jpeg;base64,") == len(set(shas))
    assert "screenshot unavailable" not in page
    assert len(page) < 2_000_000


def test_missing_blob_and_no_archive_show_placeholders(tmp_path, archive):
    arch, shas = archive
    missing = "ab" * 32
    results = make_results([shas[0], missing], current=[missing])
    page = write_report(results, tmp_path / "a", arch, plots=[]).read_text(encoding="utf-8")
    assert "screenshot unavailable" in page
    assert page.count("data:image/jpeg;base64,") == 1
    page = write_report(make_results(shas), tmp_path / "b", None, plots=[]).read_text(encoding="utf-8")
    assert "no archive" in page and "data:image/jpeg" not in page


def test_report_without_optional_sections(tmp_path):
    results = make_results()
    del results["contrasts"]
    results["arms"]["rgb"]["control"] = None
    results["arms"]["random"]["all"]["success"] = float("nan")
    page = write_report(results, tmp_path, None, plots=[]).read_text(encoding="utf-8")
    assert "Episode timeline" not in page and "Contrasts" not in page
    assert "n/a" in page


def test_report_embeds_given_and_drawn_plots(tmp_path, make_png):
    png = tmp_path / "given.png"
    png.write_bytes(make_png())
    page = write_report(make_results(), tmp_path / "a", None, plots=[png]).read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 1
    pytest.importorskip("matplotlib")
    results = make_results()
    results["budget_curve"] = {
        "budgets": [0, 1, 2],
        "arms": {"recent": {"all": [0.1, 0.2, 0.3], "memory_critical": [0.0, 0.1, 0.2]}},
    }
    page = write_report(results, tmp_path / "b", None).read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 2
    assert (tmp_path / "b" / "split_bars.png").is_file()


def test_format_table_has_each_arms_numbers():
    results = make_results()
    table = format_table(results)
    lines = table.splitlines()
    for i, arm in enumerate(("Summary-only (B=0)", "Recent-2", "Random", "RGB similarity", "CausalCache")):
        row = next(line for line in lines if line.startswith(arm))
        base = 0.2 + 0.1 * i
        for value in (base, base + 0.013, base - 0.011):
            assert f"{value:.2f} [{value - 0.1:.2f}, {value + 0.1:.2f}]" in row
        assert "n=40" in row and "n=20" in row
    cc = next(line for line in lines if line.startswith("CausalCache "))
    assert "0.25" in cc and "k0 75% k1 25%" in cc
    assert (
        "CausalCache − Recent-2 on memory-critical tasks: +0.35 [0.20, 0.50] (95% interval excludes zero)"
        in table
    )
    assert re.search(r"control tasks: \+0\.01 \[-0\.10, 0\.12\] \(95% interval includes zero", table)


def test_contrast_sentences_and_bad_input():
    results = copy.deepcopy(make_results())
    results["contrasts"]["all"]["ci95"] = None
    lines = contrast_sentences(results)
    assert len(lines) == 4 and lines[0].endswith("+0.20 [n/a]")
    assert "interaction" in lines[-1]
    with pytest.raises(TypeError, match="results must be"):
        format_table([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thumb_width"):
        write_report(results, "unused", None, plots=[], thumb_width=2)


def test_split_tables_show_helped_harmed_fire_rate_and_non_inferiority():
    from causalcache_lab.eval.report_text import split_tables

    results = copy.deepcopy(make_results())
    assert split_tables(results) == ""  # no per-arm contrasts: no per-split tables
    results["meta"]["policy_seeds"] = [0, 1, 2]
    results["arms"]["causalcache"]["memory_critical"]["fire_rate"] = 0.61
    mc = {"delta": 0.3, "ci95": [0.1, 0.5], "n": 20, "helped": 7, "harmed": 1}
    ctrl = {"delta": -0.02, "ci95": [-0.08, 0.03], "n": 20, "helped": 0, "harmed": 2, "ni_margin": 0.05}
    ctrl["non_inferior"] = False
    results["contrasts_by_arm"] = {"causalcache": {"memory_critical": mc, "control": ctrl, "all": mc}}
    results["contrasts"]["control"] = ctrl
    tables = split_tables(results)
    mc_row = next(line for line in tables.splitlines() if line.startswith("CausalCache") and "0.61" in line)
    assert "+0.30 [0.10, 0.50]" in mc_row and " 7 " in mc_row and " 1 " in mc_row
    assert "mean over 3 policy seed(s)" in tables
    ctrl_row = [line for line in tables.splitlines() if line.startswith("CausalCache")][-1]
    assert ctrl_row.rstrip().endswith("no")
    sentence = next(line for line in contrast_sentences(results) if "control tasks" in line)
    assert "non-inferiority at margin 0.05 not shown" in sentence and "harmed 2 of 20" in sentence


def test_header_explains_every_figure_and_names_each_worlds_platform(tmp_path):
    results = make_results()
    meta = results["meta"]
    meta.update({"platform": "mobile", "policy_seeds": [0], "seed": 1234})
    meta["platforms"] = {"heldout-00": "desktop", "heldout-01": "desktop"}  # two desktop worlds
    page = write_report(results, tmp_path, None, plots=[]).read_text(encoding="utf-8")
    header = page[: page.index("<h2>Results</h2>")]
    assert "mobile" not in header and "desktop (heldout-00, heldout-01)" in header
    rows = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td><td class=\"what\">(.*?)</td></tr>", header)
    assert {label for label, _, _ in rows} >= {"task seed", "policy seeds", "budget B", "platform", "wall s"}
    assert all(what for _, _, what in rows)  # every figure has its explanation
    seed = next(what for label, value, what in rows if label == "task seed")
    assert "not a policy seed" in seed
    assert "added model ms/step: pass 2" in page  # the results table's column explained under it
    mixed = make_results()
    mixed["meta"]["platforms"] = {"w1": "desktop", "w2": "mobile"}
    page = write_report(mixed, tmp_path / "m", None, plots=[]).read_text(encoding="utf-8")
    assert "desktop (w1); mobile (w2)" in page


def test_platforms_per_world_from_the_tasks():
    from types import SimpleNamespace

    from causalcache_lab.eval.closed_loop import _platforms

    def task(world, platform):
        return SimpleNamespace(metadata={"world": world}, platform=platform)

    tasks = [task("a", "desktop"), task("a", "desktop"), task("b", "mobile"), task("c", "desktop")]
    tasks.append(task("c", "mobile"))
    assert _platforms(tasks) == {"a": "desktop", "b": "mobile", "c": "mixed"}
