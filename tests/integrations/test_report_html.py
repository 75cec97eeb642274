"""The thread report's HTML structure (issue 51 item 3; the browser checks are
lab/tests/services/test_report_browser.py): one row per decision with only the events shown with pixels,
the summary-only history collapsed, what changed since the previous row, the screen text under each card,
why a promoted step was restored, and each screenshot embedded once as a thumbnail and once at full
resolution for the lightbox."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
import report_thread as rt
from PIL import Image

from causalcache_memory.cli.main import main
from causalcache_memory.cli.report import write_thread_report
from causalcache_memory.timeline_html import text_matches


@pytest.fixture(scope="module")
def thread(tmp_path_factory):
    return rt.build(tmp_path_factory.mktemp("thread"))


@pytest.fixture(scope="module")
def page(thread, tmp_path_factory) -> str:
    trace, log, archive = thread
    out = tmp_path_factory.mktemp("page") / "report.html"
    return write_thread_report(trace, log, archive, out, thread="t-18").read_text(encoding="utf-8")


def rows(page: str) -> list[str]:
    return page.split('<section class="step">')[1:]


def test_one_row_per_decision_with_only_the_pixel_cards(page) -> None:
    found = rows(page)
    assert len(found) == rt.STEPS
    for t, row in enumerate(found, start=1):
        shown = min(rt.BUDGET, t - 1)
        assert row.count('data-fidelity="recent"') + row.count('data-fidelity="promoted"') == shown
        assert 'data-fidelity="summary"' not in row  # summary-only events are collapsed into one line
        assert row.count('class="card current"') == 1
        hidden = t - 1 - shown
        if hidden:
            assert "Summary only: e1" in row and f"({t - 1} summary line(s) in the prompt)" in row
    assert 'data-fidelity="promoted"' in found[8] and found[8].count('data-fidelity="promoted"') == 1


def test_each_row_says_what_changed_since_the_previous_one(page) -> None:
    found = rows(page)
    t9 = found[8]  # e2 promoted, e8 new; e4 and e5 left the pixel set
    assert "Since the previous row: pixels for e2, e8; back to summary: e4–e5" in t9
    assert re.search(r'data-fidelity="promoted"><div class="ehead">e2 · promoted <span class="tag new">', t9)
    assert t9.count('class="tag kept"') == 2  # e6, e7 kept
    assert "Since the previous row" not in found[0]


def test_screen_text_beside_each_card_and_why_a_step_was_restored(page) -> None:
    found = rows(page)
    for t, row in enumerate(found, start=1):
        assert row.count('class="stext"') == min(rt.BUDGET, t - 1) + 1  # every card, the current screen too
    t9 = found[8]
    assert f"Order code {rt.CODE}" in t9  # the restored screen's text, under its card
    why = re.search(r'<p class="why"[^>]*>(.*?)</p>', t9).group(1)
    assert "predicted gain +0.1834 alone" in why and "goal words: code, globex, invoice, order" in why
    assert "selector: predicted gain +0.1834 over Recent-B (threshold +0.0421)" in t9
    assert "Recent-B fallback: ood, far feature group &#x27;image&#x27;" in found[rt.DECLINED - 1]
    assert "best swap +0.0102 vs threshold +0.0421" in found[9]


def test_every_screenshot_is_embedded_once_small_and_once_at_full_resolution(page, thread) -> None:
    _, _, archive = thread
    classes = set(re.findall(r"\.(im\d+)\{background-image", page))
    assert len(classes) == rt.STEPS  # screens 0..17 are shown (18 follows the last decision), each once
    full = json.loads(
        re.search(r'<script id="cc-images" type="application/json">(.*?)</script>', page).group(1)
    )
    assert set(full) == classes
    stored = {archive.get_bytes(e.screenshot) for e in thread[0].events} | {
        archive.get_bytes(thread[0].event(1).pre_screenshot)
    }
    for url in full.values():
        mime, data = url.split(",", 1)
        assert mime == "data:image/png;base64"
        blob = base64.b64decode(data)
        assert blob in stored  # the stored bytes, not a re-encoding
        assert page.count(data[:200]) == 1  # once in the page, not per card
    targets = set(re.findall(r'data-full="(im\d+)"', page))
    assert targets == classes  # every thumbnail opens its own full image
    assert 'id="cc-lightbox" hidden' in page and "<script>" in page


def test_the_full_image_is_the_stored_screenshot(page, thread) -> None:
    trace, _, archive = thread
    full = json.loads(
        re.search(r'<script id="cc-images" type="application/json">(.*?)</script>', page).group(1)
    )
    blobs = {base64.b64decode(url.split(",", 1)[1]) for url in full.values()}
    assert archive.get_bytes(trace.event(2).screenshot) in blobs
    with Image.open(io.BytesIO(archive.get_bytes(trace.event(2).screenshot))) as image:
        assert image.size == rt.SIZE


def test_thumbs_only_and_a_missing_archive(thread, tmp_path, capsys) -> None:
    trace, log, archive = thread
    small = write_thread_report(trace, log, archive, tmp_path / "s.html", thread="t", full_images=False)
    text = small.read_text(encoding="utf-8")
    assert 'data-full="' not in text and "cc-images" not in text and f"Order code {rt.CODE}" in text
    none = write_thread_report(trace, log, None, tmp_path / "n.html", thread="t").read_text(encoding="utf-8")
    assert "no archive" in none and 'id="cc-lightbox"' not in none and 'class="stext"' not in none


def test_the_cli_flag(thread, tmp_path, capsys) -> None:
    import user_agent as ua

    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    (tmp_path / "cc.yaml").write_text(
        "budget: 2\nallocation: {allocator: recent}\narchive: {url: data/archive}\n"
        "checkpointer: {kind: sqlite, path: data/cp.sqlite}\n"
    )
    memory = CausalCacheMemory.from_yaml(tmp_path / "cc.yaml")
    graph = ua.build_agent(memory, steps=4, checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("flag-thread"))
    archive = str(tmp_path / "data" / "archive")
    for flags, full in (([], True), (["--thumbs-only"], False)):
        out = tmp_path / f"r{len(flags)}.html"
        assert (
            main(["report", "--archive", archive, "--thread", "flag-thread", "--out", str(out), *flags]) == 0
        )
        assert ("cc-images" in out.read_text(encoding="utf-8")) == full


def test_text_matches_name_goal_words_and_shared_values() -> None:
    text = "Invoice from Globex\nOrder code TK-3781\nTotal $412.00 for the order"
    found = text_matches(text, "Copy the order code from the Globex invoice", "Ticket TK-3781 form")
    assert found == {"goal": ["code", "globex", "invoice", "order"], "values": ["tk-3781"]}
    assert text_matches(None, "goal", "x") == {"goal": [], "values": []}
    assert text_matches("the and for", "the and for", None)["goal"] == []  # common words explain nothing
