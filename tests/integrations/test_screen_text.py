"""The ``screen_text`` key: a screenshot node's (or a GUI tool's) text reaches the archive beside the
screenshot, off the decision path; graph state and prompts never hold it; OCR fills in when configured."""

from __future__ import annotations

import base64
import logging
import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from lg_support import KeyChatModel, Screens, relaxed_config, screen_png
from typing_extensions import TypedDict

from causalcache_memory.archive import FsspecArchive
from causalcache_memory.archive._texts import MAX_TEXT_BYTES
from causalcache_memory.archive.deferred import DeferredArchive
from causalcache_memory.config import CausalCacheConfig
from causalcache_memory.errors import MissingDependencyError, ScreenTextError
from causalcache_memory.integrations.langgraph import STATE_KEYS, CausalCacheMemory, CausalCacheState

SECRET = "ORDER-A1042-SECRET"


class State(TypedDict, total=False):
    goal: str
    messages: list[Any]
    step: int


def text_of(step: int) -> str:
    return f"Orders window · step {step} · {SECRET}-{step}"


def _graph(memory: CausalCacheMemory, *, steps: int, text: Any = text_of, prompts: list | None = None):
    def shoot(state: State) -> dict[str, Any]:
        update: dict[str, Any] = {"screen": screen_png(state.get("step", 0))}
        if text is not None:
            update["screen_text"] = text(state.get("step", 0))
        return update

    def model(state: State) -> dict[str, Any]:
        if prompts is not None:
            prompts.append(state["messages"])
        return {"messages": [AIMessage("pyautogui.click(10, 10)")]}

    def act(state: State) -> dict[str, Any]:
        return {"step": state.get("step", 0) + 1}

    builder = StateGraph(State)
    builder.add_node("observe", memory.observe_node(shoot))
    builder.add_node("decide", memory.decide_node(model))
    builder.add_node("act", act)
    builder.add_edge(START, "observe")
    builder.add_conditional_edges("observe", lambda s: END if s.get("step", 0) >= steps else "decide")
    builder.add_edge("decide", "act")
    builder.add_edge("act", "observe")
    from langgraph.checkpoint.memory import InMemorySaver

    return builder.compile(checkpointer=InMemorySaver())


CFG = {"configurable": {"thread_id": "t1"}, "recursion_limit": 100}


def _run(graph: Any, memory: CausalCacheMemory) -> tuple[dict[str, Any], Any]:
    """Run one thread; its final state (all channels) and its trace."""
    graph.invoke({"goal": "refund the lamp", "step": 0}, CFG)
    return graph.get_state(CFG).values, memory.trace(graph, CFG)


def _texts(archive: Any, memory: CausalCacheMemory, trace: Any) -> list[str | None]:
    memory.flush_writes()
    assert memory.screen_texts.drain(30)
    memory.flush_writes()
    shas = [e.pre_screenshot for e in trace.events] + [trace.current_screenshot]
    return [archive.get_text(sha) for sha in shas]


def _strings(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_strings(v) for v in value)
    content = getattr(value, "content", value)
    return content if isinstance(content, str) else " ".join(_strings(c) for c in content or [])


def test_screen_text_reaches_the_archive_and_never_state_or_prompts(archive):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    prompts: list[Any] = []
    graph = _graph(memory, steps=4, prompts=prompts)
    state, trace = _run(graph, memory)
    assert _texts(archive, memory, trace) == [text_of(i) for i in range(5)]
    assert "screen_text" not in state or state["screen_text"] is None  # input only: never kept in state
    assert SECRET not in repr(state)
    assert len(prompts) == 4 and all(SECRET not in _strings(p) for p in prompts)  # never in a prompt
    assert memory.screen_texts.counts["given"] == 5
    assert "screen_text" in CausalCacheState.__annotations__ and "screen_text" not in STATE_KEYS


def test_screen_text_is_written_on_the_writer_thread(archive, monkeypatch):
    threads: list[str] = []
    original = type(archive).put_text

    def spy(self: Any, sha: str, text: str) -> None:
        threads.append(threading.current_thread().name)
        original(self, sha, text)

    monkeypatch.setattr(type(archive), "put_text", spy)
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    _run(_graph(memory, steps=2), memory)
    memory.flush_writes()
    assert len(threads) == 3 and all(name.startswith("causalcache-write") for name in threads)


def test_a_non_deferrable_archive_gets_its_text_in_the_background(tmp_path):
    import uuid

    archive = FsspecArchive(f"memory://cc-text-tests/{uuid.uuid4().hex}")
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    _, trace = _run(_graph(memory, steps=2), memory)
    assert not isinstance(memory._controller().archive, DeferredArchive)
    assert _texts(archive, memory, trace) == [text_of(i) for i in range(3)]


def test_screen_text_of_the_wrong_type_names_the_key_and_the_node(archive):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    graph = _graph(memory, steps=1, text=lambda step: {"tree": "not a string"})
    with pytest.raises(
        ScreenTextError, match=r"node 'shoot' returned 'screen_text' = dict value: it must be a str"
    ):
        graph.invoke({"goal": "g", "step": 0}, CFG)


def test_a_text_over_the_cap_is_cut_with_one_warning(archive, caplog):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    graph = _graph(memory, steps=2, text=lambda step: f"{step}" + "é" * MAX_TEXT_BYTES)
    with caplog.at_level(logging.WARNING, logger="causalcache_memory"):
        _, trace = _run(graph, memory)
    texts = _texts(archive, memory, trace)
    assert all(len(t.encode()) <= MAX_TEXT_BYTES and t.endswith("é") for t in texts)
    assert [t[0] for t in texts] == ["0", "1", "2"]
    cut = [r for r in caplog.records if "over the archive's cap" in r.getMessage()]
    assert len(cut) == 1 and str(MAX_TEXT_BYTES) in cut[0].getMessage()


class GatedOcr:
    """A fake OCR engine that waits for ``gate`` (a slow engine) and notes its thread."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.threads: list[str] = []

    def read(self, image: bytes) -> str:
        assert self.gate.wait(30)
        self.threads.append(threading.current_thread().name)
        return f"ocr of {len(image)} bytes"


def test_ocr_runs_in_the_background_and_never_holds_a_step(archive):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    engine = GatedOcr()
    memory.screen_texts.engine = engine
    _, trace = _run(_graph(memory, steps=3, text=None), memory)  # OCR still blocked
    assert len(trace) == 3 and not engine.threads  # every step ran while no OCR had finished
    engine.gate.set()
    texts = _texts(archive, memory, trace)
    assert all(t is not None and t.startswith("ocr of ") for t in texts)
    assert engine.threads and all(name.startswith("causalcache-ocr") for name in engine.threads)
    assert memory.screen_texts.counts["ocr"] == 4  # each screen once
    memory.screen_texts.submit(memory._controller().archive, trace.current_screenshot, None)
    assert memory.screen_texts.drain(30) and memory.screen_texts.counts["cached"] == 1  # text known: no OCR


def test_without_text_or_an_engine_a_screen_has_no_text(archive):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    assert memory.screen_texts.engine is None  # default: archive.ocr.engine none
    _, trace = _run(_graph(memory, steps=1, text=None), memory)
    assert _texts(archive, memory, trace) == [None, None]


def test_the_agents_text_is_used_and_no_ocr_runs(archive):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    engine = memory.screen_texts.engine = GatedOcr()
    engine.gate.set()
    _, trace = _run(_graph(memory, steps=1), memory)
    assert _texts(archive, memory, trace) == [text_of(0), text_of(1)] and engine.threads == []


def test_a_missing_ocr_engine_names_the_extra(monkeypatch):
    import causalcache_memory.archive.ocr as ocr

    monkeypatch.setattr(ocr, "is_available", lambda module: False)
    config = CausalCacheConfig(archive={"ocr": {"engine": "rapidocr"}})
    with pytest.raises(MissingDependencyError, match=r"pip install 'causalcache-memory\[ocr\]'"):
        CausalCacheMemory(config=config, allocation="recent")
    config = CausalCacheConfig(archive={"ocr": {"engine": "tesseract"}})
    with pytest.raises(MissingDependencyError, match="apt-get install tesseract-ocr"):
        CausalCacheMemory(config=config, allocation="recent")


def test_create_agent_tool_text_from_the_artifact(archive):
    screens = Screens()

    @tool(response_format="content_and_artifact")
    def click(x: float, y: float, target: str = "") -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Click on the screen."""
        screens.act({"type": "click", "target": target})
        data = base64.b64encode(screens.screenshot()).decode()
        blocks = [
            {"type": "text", "text": "done"},
            {"type": "image", "base64": data, "mime_type": "image/png"},
        ]
        return blocks, {"screen_text": text_of(screens.index), "window": "orders"}

    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive, allocation="recent")
    model = KeyChatModel(screens=screens, steps=3)
    agent = create_agent(model, tools=[click], middleware=[memory.middleware()])
    url = "data:image/png;base64," + base64.b64encode(screens.screenshot()).decode()
    first = HumanMessage(
        content=[{"type": "text", "text": "go"}, {"type": "image_url", "image_url": {"url": url}}]
    )
    state = agent.invoke({"messages": [first]}, {"recursion_limit": 50})
    texts = _texts(archive, memory, memory.trace(state))
    assert texts == [None] + [text_of(i) for i in range(1, 4)]  # the first screen came as a message
    tool_messages = [m for m in state["messages"] if m.type == "tool"]
    assert tool_messages and all(m.artifact == {"window": "orders"} for m in tool_messages)
    assert SECRET not in repr(state)


class LineOcr:
    """A fake OCR engine that reads one boxed line on every screen (the top-left quarter's width)."""

    name = "lines"

    def read_lines(self, image: Any, *, cancel: Any = None, screen: Any = None) -> list[Any]:
        from causalcache_memory.archive.ocr import OcrLine

        height, width = image.shape[:2]
        return [OcrLine("Refund button", (0, 0, width // 2, height // 4))]

    def read(self, image: bytes) -> str:
        return "Refund button"


def test_the_deployed_selector_reads_the_ocr_writers_line_boxes_beside_the_archives_text(archive):
    memory = CausalCacheMemory(config=relaxed_config(), budget=2, archive=archive)  # the selector
    memory.screen_texts.engine = LineOcr()
    _, trace = _run(_graph(memory, steps=2, text=None), memory)
    assert _texts(archive, memory, trace) == ["Refund button"] * 3
    extractor = memory.allocation._extractor_for(memory._controller().archive)  # type: ignore[attr-defined]
    lines = extractor.screen_text.lines(trace.current_screenshot)
    assert lines is not None and [text for text, _ in lines] == ["Refund button"]
    x0, y0, x1, y1 = lines[0][1]
    assert (x0, y0) == (0.0, 0.0) and 0.4 < x1 <= 0.5 and 0.2 < y1 <= 0.25
    assert extractor.screen_text.lines("0" * 64) is None  # a screen the writer did not read: no boxes
