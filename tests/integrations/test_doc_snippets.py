"""Every Python snippet of README "Use it in your agent" and docs/LANGGRAPH.md runs, in order, in one
namespace (like a notebook), plus the documented ``causalcache report`` command lines.

The snippets call the user's own code by these names, provided here: ``take_screenshot()`` (PNG bytes of a
1920x1080 screen), ``vlm`` (a chat model replying with PyAutoGUI code in pixel coordinates), ``chat_vlm``
(the same model calling a ``click`` tool with pixel arguments) and ``run_pyautogui(code)``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
import user_agent as ua
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from causalcache_memory.cli.main import main as cli_main
from causalcache_memory.errors import CausalCacheWarning

ROOT = Path(__file__).resolve().parents[2]
REPLIES = {
    1: "pyautogui.click(412, 88)",
    2: "pyautogui.click(1650, 1040)",
    3: "Let me look at the screen again.",  # unparseable: recorded all the same
    4: "pyautogui.write('invoice')",
    5: "pyautogui.press('enter')",
}
CLICKS = {1: (412, 88), 2: (1650, 1040), 3: (1919, 1079)}


def reply(t: int) -> str:
    return REPLIES.get(t, "pyautogui.click(0.5, 0.5)")


class FakeVLM:
    def invoke(self, messages: list[Any]) -> AIMessage:
        return AIMessage(content=reply(ua.step_of(messages)))

    async def ainvoke(self, messages: list[Any]) -> AIMessage:
        return self.invoke(messages)


class FakeToolVLM(BaseChatModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "doc-tools"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolVLM:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        t = ua.step_of(messages)
        if t not in CLICKS:
            message = AIMessage(content="done")
        else:
            x, y = CLICKS[t]
            message = AIMessage(
                content="", tool_calls=[{"name": "click", "args": {"x": x, "y": y}, "id": f"c{t}"}]
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def report_commands(text: str) -> list[list[str]]:
    lines = [ln.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for ln in b.splitlines()]
    return [shlex.split(ln, comments=True)[1:] for ln in lines if ln.startswith("causalcache report")]


@pytest.fixture
def namespace(monkeypatch) -> dict[str, Any]:
    """The globals of a module registered in sys.modules (LangGraph resolves schema hints through it)."""
    module = types.ModuleType("doc_snippets_module")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    shots = iter(range(10_000))
    module.__dict__.update(
        take_screenshot=lambda: ua.screen(next(shots)),
        vlm=FakeVLM(),
        chat_vlm=FakeToolVLM(),
        run_pyautogui=lambda code: None,
    )
    return module.__dict__


def _run(blocks: list[str], namespace: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalCacheWarning)  # a loaded CI box may hit the selector time limit
        for i, block in enumerate(blocks):
            try:
                exec(compile(block, f"<snippet {i + 1}>", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"snippet {i + 1} failed: {type(exc).__name__}: {exc}\n{block}") from exc


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "causalcache.yaml", tmp_path / "examples" / "causalcache.yaml")
    (tmp_path / "causalcache.yaml").write_text("budget: 4\n")
    return tmp_path


def test_readme_use_it_in_your_agent_snippet_runs(workdir, namespace, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it in your agent", 1)[1].split("\n## ", 1)[0]
    blocks = python_blocks(section)
    assert blocks
    _run(blocks, namespace)
    trace = namespace["memory"].trace(namespace["graph"], namespace["config"])
    assert trace.summaries()[:2] == ["1. click (412, 88)", "2. click (1650, 1040)"]
    assert len(trace) == 5 and trace.events[2].unparsed
    out = capsys.readouterr().out
    assert "Action(type='click'" in out
    # the README's short form: only the set fields (issue 51 item 4)
    assert re.search(r"^Action\(type='click', x=[0-9.]+, y=[0-9.]+\)$", out, re.M), out
    for args in report_commands(section):
        assert cli_main([*args, "--out", str(workdir / "readme.html")]) == 0


def test_langgraph_doc_snippets_run(workdir, namespace, capsys):
    doc = (ROOT / "docs" / "LANGGRAPH.md").read_text(encoding="utf-8")
    blocks = python_blocks(doc)
    assert len(blocks) >= 8
    _run(blocks, namespace)
    out = capsys.readouterr().out
    assert "6 events" in out and "reply not parsed" in out
    commands = report_commands(doc)
    assert len(commands) == 2
    for args in commands:
        if "--out" not in args:
            args = [*args, "--out", str(workdir / "doc.html")]
        assert cli_main(args) == 0
    assert (workdir / "episode-1.html").is_file()
