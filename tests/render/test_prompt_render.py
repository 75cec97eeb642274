"""Retained-turn rendering: parity across allocations, golden text, wire formats, missing pixels."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from causalcache_memory import Action, Trace, make_allocation, render_prompt
from causalcache_memory.allocation import AllocationContext, RandomAllocator, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import PromptImageError, RenderError
from causalcache_memory.render import ImagePart, TextPart
from causalcache_memory.runtime.chat_format import openai_messages, qwen_messages

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def archive(tmp_path) -> LocalArchive:
    return LocalArchive(tmp_path / "archive")


def make_trace(archive: LocalArchive, make_png, n: int = 8) -> Trace:
    trace = Trace("Send the order number to Alice", episode_id="golden")
    trace.observe(archive.put(make_png((0, 0, 0))).sha256)
    for i in range(n):
        shot = archive.put(make_png((20 * i, 10, 200 - 10 * i))).sha256
        trace.record(
            Action("click", x=0.1 * (i % 9), y=0.5, target=f"Row {i}"),
            f"Thought: open row {i}.\nAction: click",
            shot,
            app="Shop" if i < 4 else "Messages",
            screen_size=(64, 48),
        )
    return trace


def test_parity_across_allocations(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    allocations = [
        RecentAllocator().allocate(AllocationContext(trace, 4)),
        make_allocation([1, 2, 3, 4], t=trace.t, budget=4, allocator="manual"),
        make_allocation([2, 5, 7, 8], t=trace.t, budget=4, allocator="manual"),
        RandomAllocator(1).allocate(AllocationContext(trace, 4)),
    ]
    prompts = [render_prompt(trace, a) for a in allocations]
    structures = {json.dumps(p.structure()) for p in prompts}
    assert len(structures) == 1
    for prompt, alloc in zip(prompts, allocations, strict=True):
        assert len(prompt.images) == len(alloc.selected) + 1
        assert [i.event_index for i in prompt.history_images] == list(alloc.selected)
        assert prompt.images[-1].role == "current"
        assert prompt.images[-1].sha256 == trace.current_screenshot
        # the system and summary messages are identical: every event is always summarized
        assert prompt.messages[:2] == prompts[0].messages[:2]
        summary_text = prompt.messages[1].text
        assert all(e.summary in summary_text for e in trace)
    # retained turns differ exactly in which events occupy them
    texts = [[m.text for m in p.messages] for p in prompts]
    assert texts[0] != texts[2]


def test_images_have_identical_resolution_across_allocations(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    for selected in ([5, 6, 7, 8], [1, 3, 6, 8]):
        bound = render_prompt(trace, make_allocation(selected, t=trace.t, budget=4, allocator="m")).bind(
            archive
        )
        assert {im.size for im in bound.pil_images()} == {(64, 48)}


def test_golden_prompt_text(archive, make_png) -> None:
    trace = make_trace(archive, make_png, n=5)
    prompt = render_prompt(trace, make_allocation([1, 4, 5], t=6, budget=3, allocator="m"))
    rendered = []
    for message in prompt.messages:
        parts = []
        for part in message.parts:
            parts.append(
                part.text
                if isinstance(part, TextPart)
                else f"<image {prompt.images[part.image].role} event={prompt.images[part.image].event_index}>"
            )
        rendered.append(f"[{message.role}]\n" + "\n".join(parts))
    text = "\n\n".join(rendered) + "\n"
    golden = (GOLDEN / "prompt_t6_b3.txt").read_text(encoding="utf-8")
    assert text == golden


def test_first_step_has_only_the_current_screen(archive, make_png) -> None:
    trace = make_trace(archive, make_png, n=0)
    prompt = render_prompt(trace, RecentAllocator().allocate(AllocationContext(trace, 4)))
    assert [i.role for i in prompt.images] == ["current"]
    assert "(no steps yet)" in prompt.messages[1].text


def test_openai_messages_resolve_pixels_only_on_request(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    prompt = render_prompt(trace, RecentAllocator().allocate(AllocationContext(trace, 2)))
    messages = openai_messages(prompt.bind(archive))
    urls = [
        b["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "image_url"
    ]
    assert len(urls) == 3
    payload = base64.b64decode(urls[-1].split(",", 1)[1])
    assert payload == archive.get_bytes(trace.current_screenshot)
    assert urls[0].startswith("data:image/png;base64,")
    assert messages[0]["role"] == "system" and isinstance(messages[0]["content"], str)


def test_qwen_messages_hold_pil_images_in_order(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    prompt = render_prompt(trace, make_allocation([2, 9 - 1], t=9, budget=2, allocator="m"))
    qwen = qwen_messages(prompt.bind(archive))
    images = [b["image"] for m in qwen for b in m["content"] if b["type"] == "image"]
    assert len(images) == 3
    assert images[0].getpixel((0, 0)) == (20, 10, 190)  # v_2 was drawn with i=1
    refs = qwen_messages(prompt.bind(archive), with_pixels=False)
    assert [b["image"] for m in refs for b in m["content"] if b["type"] == "image"] == [
        i.sha256 for i in prompt.images
    ]


def test_missing_screenshot_names_event_and_hash(tmp_path, archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    other = LocalArchive(tmp_path / "other")
    prompt = render_prompt(trace, RecentAllocator().allocate(AllocationContext(trace, 2)))
    with pytest.raises(PromptImageError, match=rf"event 7 \(sha256 {trace.event(7).screenshot}\)"):
        prompt.bind(other)


def test_corrupt_screenshot_names_event(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    sha = trace.event(8).screenshot
    blob = next(p for p in Path(archive.root).rglob(sha) if p.is_file())
    data = bytearray(blob.read_bytes())
    data[-20] ^= 0xFF
    blob.write_bytes(bytes(data))
    bound = render_prompt(trace, RecentAllocator().allocate(AllocationContext(trace, 2))).bind(archive)
    with pytest.raises(PromptImageError, match="event 8"):
        bound.image_bytes(1)


def test_allocation_for_another_step_rejected(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    with pytest.raises(RenderError, match="t=5"):
        render_prompt(trace, make_allocation([1, 2], t=5, budget=2, allocator="m"))


def test_part_indices_match_images(archive, make_png) -> None:
    trace = make_trace(archive, make_png)
    prompt = render_prompt(trace, RecentAllocator().allocate(AllocationContext(trace, 4)))
    seen = [p.image for m in prompt.messages for p in m.parts if isinstance(p, ImagePart)]
    assert seen == list(range(len(prompt.images)))
