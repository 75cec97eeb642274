"""Screenshot stripping: every supported image form is archived and replaced by a reference."""

from __future__ import annotations

import base64
import operator
from typing import Annotated, get_type_hints

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from lg_support import screen_png
from PIL import Image
from typing_extensions import TypedDict

from causalcache_memory.errors import ImageRejectedError
from causalcache_memory.integrations.langgraph import (
    find_image_data,
    find_screenshot_refs,
    screenshot_ref,
    strip_images,
)
from causalcache_memory.integrations.langgraph.state import CausalCacheState, merge_schema


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    "block",
    [
        lambda d: {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(d)}},
        lambda d: {"type": "image_url", "image_url": "data:image/png;base64," + _b64(d)},
        lambda d: {"type": "image", "base64": _b64(d), "mime_type": "image/png"},
        lambda d: {"type": "image", "source_type": "base64", "data": _b64(d), "mime_type": "image/png"},
        lambda d: {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _b64(d)}},
    ],
    ids=["openai", "openai-str", "v1", "v0", "anthropic"],
)
def test_image_blocks_become_references(archive, block):
    png = screen_png(5)
    message = HumanMessage(content=[{"type": "text", "text": "hi"}, block(png)], id="m1")
    assert find_image_data(message)
    stripped, stored = strip_images({"messages": [message]}, archive.put)
    shas = [s.sha256 for s in stored]
    out = stripped["messages"][0]
    assert shas == [archive.put(png).sha256] and out.id == "m1"
    assert out.content[1] == {"type": "text", "text": screenshot_ref(shas[0])}
    assert find_screenshot_refs([out]) == shas and find_image_data(stripped) == []


def test_raw_values_pil_and_artifacts(archive):
    png = screen_png(6)
    pil = Image.new("RGB", (20, 10), (1, 2, 3))
    tool = ToolMessage(content="ok", tool_call_id="c1", artifact=png)
    stripped, stored = strip_images({"shot": png, "thumb": pil, "messages": [tool], "n": 3}, archive.put)
    shas = [s.sha256 for s in stored]
    assert len(shas) == 3 and stripped["shot"] == shas[0] and stripped["n"] == 3
    assert stripped["messages"][0].artifact == {"screenshot": shas[2]}
    assert all(sha in archive for sha in shas) and find_image_data(stripped) == []


def test_remote_urls_are_left_alone_and_garbage_is_rejected(archive):
    remote = HumanMessage(content=[{"type": "image_url", "image_url": {"url": "https://x/y.png"}}])
    assert strip_images(remote, archive.put) == (remote, [])
    with pytest.raises(ImageRejectedError):
        strip_images(b"not an image", archive.put)


class User(TypedDict):
    items: Annotated[list, operator.add]
    goal: str


def test_merge_schema_keeps_user_reducers():
    merged = merge_schema(User)
    hints = get_type_hints(merged, include_extras=True)
    assert set(hints) == {"items", "goal", *CausalCacheState.__annotations__}
    assert hints["items"].__metadata__ == (operator.add,) and merge_schema(None) is CausalCacheState


@pytest.mark.parametrize(
    ("body", "wire"),
    [
        (lambda b: b, True),  # the canonical encoding: the user's URL is the wire form
        (lambda b: b[:40] + "\n" + b[40:], False),  # a line break: decoded leniently, encoded again later
        (lambda b: b[:40] + " " + b[40:], False),
    ],
    ids=["canonical", "newline", "space"],
)
def test_data_urls_decode_to_the_same_bytes_and_only_canonical_ones_are_the_wire_form(body, wire):
    """The strict (SIMD) decoder keeps a canonical URL as the screenshot's wire form; a URL it refuses is
    decoded leniently to the same bytes and never sent to the model as it came."""
    from causalcache_memory.render.messages import WireBytes

    png = screen_png(8)
    url = "data:image/png;base64," + body(_b64(png))
    seen: list[bytes] = []

    def put(data):
        seen.append(data)
        return type("Stored", (), {"sha256": "ab" * 32})()

    strip_images([HumanMessage(content=[{"type": "image_url", "image_url": {"url": url}}])], put)
    assert seen == [png]
    assert isinstance(seen[0], WireBytes) is wire
    assert not wire or seen[0].data_url == url
