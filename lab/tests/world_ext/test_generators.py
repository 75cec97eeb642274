"""The external-style generators: determinism, densities, text formats, and where the evidence sits."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from causalcache_lab.worlds_ext import GENERATORS, generate_ext_tasks, generator, parse_goal
from causalcache_lab.worlds_ext.expert import play
from causalcache_lab.worlds_ext.screen import REGISTRY, render

N = 12  # tasks per generator in these tests (6 memory-critical, 6 controls)


@pytest.fixture(scope="module")
def plays():
    return {g: [(t, play(t)) for t in generate_ext_tasks(g, N, 3)] for g in GENERATORS}


def _shows(screen, value):
    return any(value in e.text for e in screen.elements)


@pytest.mark.parametrize("gen", GENERATORS)
def test_tasks_and_screens_are_deterministic(gen):
    a, b = generate_ext_tasks(gen, 4, 5), generate_ext_tasks(gen, 6, 5)
    assert [t.goal for t in a] == [t.goal for t in b[:4]]  # task i does not depend on n
    assert a[0].goal != generate_ext_tasks(gen, 4, 6)[0].goal  # the seed matters
    first, second = play(a[0]), play(b[0])
    assert [render(s)[1] for s in first.screens] == [render(s)[1] for s in second.screens]
    text = generator(gen).serialize
    assert [text(s) for s in first.screens] == [text(s) for s in second.screens]


@pytest.mark.parametrize("gen", GENERATORS)
def test_the_expert_solves_every_task(plays, gen):
    for task, p in plays[gen]:
        assert task.check(p.world.state()), task.goal
        assert task.steps == tuple(parse_goal(task.goal))


@pytest.mark.parametrize("gen", GENERATORS)
def test_memory_critical_evidence_is_only_on_screens_recent4_does_not_hold(plays, gen):
    """At the decision that types the value (N), neither the current screen nor Recent-4 (events
    N-4..N-1) shows it; an older screen does (so the task is solvable by memory only)."""
    critical = [(t, p) for t, p in plays[gen] if t.split == "memory_critical"]
    assert len(critical) == N // 2
    for task, p in critical:
        value, n = task.needed_value, task.use_event
        assert value is not None
        shown = [j for j, s in enumerate(p.screens) if _shows(s, value)]
        assert task.evidence_event in shown
        before_use = [j for j in shown if j < n]  # screens 1..N-1 are events; screens[N-1] is x_N's v_{N-1}
        assert before_use and all(j < n - 4 for j in before_use), (task.goal, shown, n)


@pytest.mark.parametrize("gen", GENERATORS)
def test_value_controls_read_inside_recent4(plays, gen):
    spans = [(t, p) for t, p in plays[gen] if t.split == "control" and t.need is not None]
    for task, p in spans:
        assert task.use_event - task.evidence_event == 3
        assert _shows(p.screens[task.evidence_event], task.needed_value)


def test_densities_span_5_to_about_300_text_elements(plays):
    dens = {g: [s.text_lines() for _, p in plays[g] for s in p.screens] for g in GENERATORS}
    assert min(dens["mobile"]) >= 5 and max(dens["mobile"]) <= 30
    assert max(dens["desktop"]) >= 150  # the spreadsheet grid
    assert max(max(v) for v in dens.values()) <= 320
    assert max(dens["web"]) >= 40  # long lists


def test_desktop_text_is_an_accessibility_dump_with_bounds(plays):
    _, p = plays["desktop"][0]
    text = generator("desktop").serialize(p.screens[3])
    line = re.compile(r'^ *[a-z]+ "[^"]*" \[\d+,\d+,\d+,\d+\]$')
    assert all(line.match(x) for x in text.split("\n"))
    assert re.search(r'statictext "Mon \d+:\d\d"', text)  # the menu bar clock


def test_web_text_is_ocr_lines_with_browser_chrome(plays):
    _, p = plays["web"][0]
    text = generator("web").serialize(p.screens[2])
    lines = text.split("\n")
    assert lines[1].startswith("https://") or "https://" in lines[1]  # the URL bar's row
    assert "[" not in text  # no bounds: OCR lines only
    assert any("Privacy" in x for x in lines)  # the footer


def test_web_ocr_confusions_are_deterministic_and_rare():
    from causalcache_lab.worlds_ext.web import serialize

    task = generate_ext_tasks("web", 2, 9)[0]
    screens = play(task).screens
    clean = ["  ".join(e.text for e in row) for s in screens for row in s.rows()]
    noisy = [line for s in screens for line in serialize(s).split("\n")]
    assert len(clean) == len(noisy)
    changed = sum(a != b for a, b in zip(clean, noisy, strict=True))
    assert 0 < changed < 0.3 * len(clean)
    assert noisy == [line for s in screens for line in serialize(s).split("\n")]


def test_mobile_text_is_a_view_hierarchy(plays):
    _, p = plays["mobile"][0]
    text = generator("mobile").serialize(p.screens[2])
    root = ET.fromstring(text.split("\n", 1)[1])
    nodes = list(root.iter("node"))
    assert root.tag == "hierarchy" and len(nodes) == len(p.screens[2].elements)
    assert all(re.fullmatch(r"\[\d+,\d+\]\[\d+,\d+\]", n.get("bounds", "")) for n in nodes)
    assert any(n.get("resource-id") == "com.android.systemui:id/clock" for n in nodes)


def test_render_registers_the_screen_under_the_png_hash(plays):
    import hashlib

    _, p = plays["mobile"][1]
    png, sha = render(p.screens[1])
    assert hashlib.sha256(png).hexdigest() == sha and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert REGISTRY.get(sha) == p.screens[1]


def test_unknown_generator_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="desktop, web, mobile"):
        generate_ext_tasks("tablet", 2, 0)
    with pytest.raises(ValueError, match="not in the step language"):
        parse_goal("Open Bank; Fly to the moon.")
