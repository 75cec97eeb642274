"""A server that accepts images but drops them is detected (OpenAI and SGLang clients).

The dropping servers are the loopback fakes with one token per ``<|image_pad|>``: the image becomes its
bare placeholder (3 tokens framed), as ``transformers serve`` does with a tokenizer-only processor."""

from __future__ import annotations

import pytest
from loopback import FakeModel, MemoryArchive, OpenAILoopback, SGLangLoopback, make_prompt

from causalcache_memory.errors import ConfigError, ImagesIgnoredError
from causalcache_memory.render.messages import Message, RenderedPrompt, TextPart
from causalcache_memory.runtime.image_check import PROBE_TEXT, ImageCheck
from causalcache_memory.runtime.openai_client import OpenAIPolicy
from causalcache_memory.runtime.sglang_client import SGLangPolicy

TARGET = "pyautogui.click(x=0.3, y=0.4)"


@pytest.fixture
def prompt(make_png):
    archive = MemoryArchive()
    return make_prompt(
        archive, history=[make_png((1, 2, 3)), make_png((4, 5, 6))], current=make_png((9, 9, 9))
    )


def _text_only(prompt):
    """``prompt`` without its images (the same text messages)."""
    messages = tuple(
        Message(m.role, tuple(p for p in m.parts if isinstance(p, TextPart)) or (TextPart("-"),))
        for m in prompt.prompt.messages
    )
    rendered = RenderedPrompt(messages, (), prompt.prompt.allocation, prompt.prompt.goal)
    return rendered.bind(MemoryArchive())


def _openai(server, **kw) -> OpenAIPolicy:
    return OpenAIPolicy(server.url + "/v1", "fake-vl", timeout_s=5, max_retries=0, **kw)


def _sglang(server, **kw) -> SGLangPolicy:
    return SGLangPolicy(server.url, timeout_s=5, max_retries=0, **kw)


def _probes(server) -> list:
    return [r for r in server.requests if PROBE_TEXT in str(r[1])]


@pytest.mark.parametrize("app", [OpenAILoopback, SGLangLoopback])
def test_server_dropping_images_raises_a_named_error(app, prompt):
    make = _openai if app is OpenAILoopback else _sglang
    with app(model=FakeModel(image_tokens=1)) as server, make(server) as policy:
        with pytest.raises(ImagesIgnoredError, match=r"ignores images: .* added 3 prompt tokens"):
            policy.generate(prompt)
        with pytest.raises(ImagesIgnoredError):  # remembered: no second probe, no blind answer
            policy.generate(prompt)
        assert len(_probes(server)) == 2 and len(server.requests) == 2


@pytest.mark.parametrize("app", [OpenAILoopback, SGLangLoopback])
def test_server_encoding_images_is_probed_once_then_trusted(app, prompt):
    make = _openai if app is OpenAILoopback else _sglang
    with app() as server, make(server) as policy:
        first = policy.generate(prompt)
        second = policy.generate(prompt)
        assert first.response == second.response
        assert len(_probes(server)) == 2 and len(server.requests) == 4


def test_scoring_is_checked_too(prompt):
    with OpenAILoopback(model=FakeModel(image_tokens=1)) as server, _openai(server) as policy:
        with pytest.raises(ImagesIgnoredError):
            policy.score([prompt], [TARGET])
    with SGLangLoopback(model=FakeModel(image_tokens=1)) as server, _sglang(server) as policy:
        with pytest.raises(ImagesIgnoredError):
            policy.score([prompt], [TARGET])


def test_text_only_prompts_and_disabled_checks_send_no_probe(prompt):
    text_only = _text_only(prompt)
    with OpenAILoopback(model=FakeModel(image_tokens=1)) as server:
        with _openai(server) as policy:
            policy.generate(text_only)
        with _openai(server, check_images=False) as policy:
            policy.generate(prompt)  # the caller's choice: answered blind, as before
        assert _probes(server) == []


def test_the_verdict_threshold_and_its_validation():
    check = ImageCheck(min_image_tokens=5)
    assert check.verdict("s", 105, 100) is None
    assert isinstance(check.verdict("s", 104, 100), ImagesIgnoredError)
    with pytest.raises(ConfigError, match="min_image_tokens=0"):
        ImageCheck(min_image_tokens=0)
