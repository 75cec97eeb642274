"""Traces carry archive references, not screenshots: one create_agent step traced in-process.

The tracer is LangChain's own ``LangChainTracer`` with a LangSmith ``Client`` whose two upload calls
(``create_run`` / ``update_run``) are captured here instead of sent; LangSmith tracing is enabled, so the
middleware's ``wrap_*`` hook spans (``traceable``) are recorded too.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.tracers.langchain import LangChainTracer
from langsmith import Client
from langsmith._internal._serde import dumps_json
from langsmith.run_helpers import tracing_context
from PIL import Image
from pydantic import ConfigDict, Field

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.config import parse_config
from causalcache_memory.integrations.langgraph import CausalCacheMemory, find_image_data, tracing
from causalcache_memory.integrations.langgraph.images import _block_payload, _decode_b64
from causalcache_memory.integrations.langgraph.tracing import holds_images, redact_images, traced_messages

#: per-run payload bound for this test: far under LangSmith's own limits (megabytes), far over what a run
#: of references needs (a few KB), and under one screenshot of this test (~120 KB of base64)
RUN_LIMIT = 64 * 1024


def noisy_screen(index: int) -> bytes:
    """A 1280x720 PNG with a noisy panel (about 90 KB: PNG cannot squeeze noise), the same for an index."""
    image = Image.new("RGB", (1280, 720), (30 + index, 40, 50))
    image.paste(
        Image.frombytes("RGB", (200, 150), random.Random(index).randbytes(200 * 150 * 3)), (40 * index, 100)
    )
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


class CapturingClient(Client):
    """A LangSmith client whose uploads are kept in memory (what LangSmith would receive)."""

    def __init__(self) -> None:
        super().__init__(api_key="test", api_url="http://127.0.0.1:9", auto_batch_tracing=False)
        self.uploads: list[dict[str, Any]] = []

    def create_run(self, **kwargs: Any) -> None:
        self.uploads.append(kwargs)

    def update_run(self, run_id: Any, **kwargs: Any) -> None:
        self.uploads.append(kwargs)


class ImageCheckingModel(BaseChatModel):
    """Clicks ``steps`` times; records how many image blocks (with their bytes) each call received."""

    steps: int = 2
    images_seen: list = Field(default_factory=list)
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "image-checking"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ImageCheckingModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        blocks = [
            b for m in messages if isinstance(m.content, list) for b in m.content if isinstance(b, dict)
        ]
        self.images_seen.append(
            [hashlib.sha256(_decode_b64(p)).hexdigest() for b in blocks if (p := _block_payload(b))]
        )
        t = len(self.images_seen)
        if t > self.steps:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="done"))])
        call = {"name": "click", "args": {"x": 100 * t, "y": 200}, "id": f"call-{t}"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call]))])


def _memory(root: str, **kw: Any) -> CausalCacheMemory:
    config = parse_config({"budget": 2, "checkpointer": {"kind": "memory"}})
    archive = LocalArchive(os.path.join(root, "archive"))
    return CausalCacheMemory(config=config, archive=archive, allocation=RecentAllocator(), **kw)


def _run_traced(memory: CausalCacheMemory, *, tool_refs: bool) -> tuple[list[dict], ImageCheckingModel]:
    done: list[int] = []

    @tool
    def click(x: int, y: int) -> list:
        """Click at pixel (x, y); returns the new screen."""
        done.append(x)
        png = noisy_screen(len(done))
        if tool_refs:
            return memory.tool_screenshot(png, "clicked")
        import base64

        return [{"type": "image", "base64": base64.b64encode(png).decode(), "mime_type": "image/png"}]

    model = ImageCheckingModel()
    agent = create_agent(
        model, tools=[click], middleware=[memory.middleware()], checkpointer=memory.checkpointer()
    )
    client = CapturingClient()
    tracer = LangChainTracer(client=client, project_name="trace-policy")
    config = {"configurable": {"thread_id": "traced"}, "callbacks": [tracer]}
    first = memory.screenshot_message(noisy_screen(0), "Click twice")
    with tracing_context(enabled=True, client=client):
        agent.invoke({"messages": [first]}, config)
    tracer.wait_for_futures()
    assert len(memory.trace(agent, {"configurable": {"thread_id": "traced"}})) == 2  # both steps recorded
    return client.uploads, model


#: base64 of a PNG/JPEG/WEBP/GIF file anywhere in a payload (a data URL, a block, a repr)
B64_IMAGE = re.compile(r"(iVBORw0KGgo|/9j/|UklGR|R0lGOD)[A-Za-z0-9+/]{64,}")


def _serialized(value: Any) -> str:
    """The bytes LangSmith's client would upload for ``value`` (its own JSON serializer)."""
    return dumps_json(value).decode()


def _payloads(uploads: list[dict]) -> list[tuple[str, str]]:
    return [
        (
            f"{u.get('run_type')}:{u.get('name')}",
            _serialized({k: u.get(k) for k in ("inputs", "outputs")}),
        )
        for u in uploads
    ]


def test_one_agent_step_traced_through_create_agent_carries_no_image_data(tmp_path):
    memory = _memory(str(tmp_path))
    uploads, model = _run_traced(memory, tool_refs=True)
    names = {u.get("name") for u in uploads}
    assert {"CausalCacheMiddleware.wrap_model_call", "CausalCacheMiddleware.wrap_tool_call", "click"} <= names
    assert "ImageCheckingModel" in names  # the model call's own span, which holds the rendered prompt
    for name, payload in _payloads(uploads):
        assert not B64_IMAGE.search(payload), name
        assert len(payload) < RUN_LIMIT, (name, len(payload))
    # the model itself saw the pixels: the screens of every step, as archived
    assert [len(s) for s in model.images_seen] == [1, 2, 3]
    refs = "".join(p for _, p in _payloads(uploads))
    assert all(f"sha256:{sha}" in refs for sha in model.images_seen[-1])  # and the trace names them


def test_trace_images_true_records_the_pixels(tmp_path):
    """The control: without the policy the model span carries base64 screenshots over the limit."""
    uploads, _ = _run_traced(_memory(str(tmp_path), trace_images=True), tool_refs=True)
    llm = [p for name, p in _payloads(uploads) if name.startswith("llm:")]
    assert any(B64_IMAGE.search(p) for p in llm)
    assert max(len(p) for p in llm) > RUN_LIMIT


def test_a_tool_returning_image_blocks_keeps_them_only_in_its_own_span(tmp_path):
    """The tool's span records what the tool returned (documented); every other run holds references."""
    uploads, _ = _run_traced(_memory(str(tmp_path)), tool_refs=False)
    dirty = {name for name, p in _payloads(uploads) if B64_IMAGE.search(p)}
    assert dirty == {"tool:click"}


def test_redact_images_replaces_every_image_form_and_keeps_the_rest():
    png = noisy_screen(1)
    sha = hashlib.sha256(png).hexdigest()
    import base64

    b64 = base64.b64encode(png).decode()
    message = HumanMessage(
        [
            {"type": "text", "text": "goal"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}},
            {"type": "image", "base64": b64, "mime_type": "image/png"},
            {"type": "image", "source": {"type": "base64", "data": b64}},
        ]
    )
    value = {"messages": [message], "raw": png, "bare": b64, "n": 3, "keep": "plain text"}
    out = redact_images(value)
    assert not find_image_data(out)
    assert out["raw"] == out["bare"] == f"[screenshot sha256:{sha}]"
    assert out["messages"][0].content[0] == {"type": "text", "text": "goal"}
    assert all(b["text"] == f"[screenshot sha256:{sha}]" for b in out["messages"][0].content[1:])
    assert (out["n"], out["keep"]) == (3, "plain text")
    assert find_image_data(value)  # the input is not mutated
    clean = {"messages": [HumanMessage("no images")], "k": [1, 2]}
    assert redact_images(clean) is clean


def test_holds_images_agrees_with_the_redaction_and_hashes_nothing(monkeypatch):
    """Choosing which prompt messages to trace as references is on every step's path: it must not
    decode and hash each screenshot (that is done only when a tracer serializes the message)."""
    import base64

    b64 = base64.b64encode(noisy_screen(2)).decode()
    values = [
        [
            {"type": "text", "text": "goal"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}},
        ],
        [{"type": "image", "base64": b64, "mime_type": "image/png"}],
        {"nested": [("x", {"type": "image", "source": {"type": "base64", "data": b64}})]},
        [
            {"type": "text", "text": "no image here"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ],
        "plain text",
        {"k": [1, 2, None]},
    ]
    expected = [redact_images(v) is not v for v in values]
    assert expected == [True, True, True, False, False, False]

    def no_hashing(data: Any) -> str:
        raise AssertionError("an image was decoded and hashed on the step's path")

    monkeypatch.setattr(tracing, "_ref_of", no_hashing)
    assert [holds_images(v) for v in values] == expected
    traced = traced_messages([HumanMessage(values[0]), HumanMessage("text only")])
    assert type(traced[0]).__name__ == "TracedHumanMessage"
    assert type(traced[1]) is HumanMessage


def test_traced_messages_reach_the_model_unchanged_and_serialize_with_references():
    import base64

    from langchain_core.load import dumpd

    b64 = base64.b64encode(noisy_screen(2)).decode()
    message = HumanMessage([{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}])
    (traced,) = traced_messages([message])
    assert isinstance(traced, HumanMessage) and traced.content == message.content
    dumped = dumpd(traced)
    assert not find_image_data(dumped) and dumped["id"][-1] == "HumanMessage"
    assert find_image_data(dumpd(message))  # the plain message would carry the pixels


def test_the_memory_trace_policy_is_a_langgraph_trace_policy_for_nodes(tmp_path):
    types = pytest.importorskip("langgraph.types")
    if not hasattr(types, "TracePolicy"):
        pytest.skip("langgraph without TracePolicy")
    memory = _memory(str(tmp_path))
    policy = memory.trace_policy()
    assert isinstance(policy, types.TracePolicy)
    assert policy.process_inputs({"x": noisy_screen(3)})["x"].startswith("[screenshot sha256:")
    assert memory.middleware().trace_policy is not None
    assert _memory(str(tmp_path), trace_images=True).trace_policy() is None
