"""OpenAIPolicy against the loopback chat endpoint: request shapes, vLLM prompt logprobs, clear errors."""

from __future__ import annotations

import pytest
from loopback import MemoryArchive, OpenAILoopback, SGLangLoopback, free_port_url, make_prompt

from causalcache_memory.errors import ConfigError, PolicyError, PolicyUnavailableError
from causalcache_memory.runtime._http import PolicyRequestRejectedError
from causalcache_memory.runtime.chat_format import openai_messages
from causalcache_memory.runtime.openai_client import OpenAIPolicy, PromptLogprobsUnsupportedError
from causalcache_memory.runtime.sglang_client import SGLangPolicy

TARGET = "pyautogui.click(x=0.3, y=0.4)"


@pytest.fixture
def prompt(make_png):
    archive = MemoryArchive()
    return make_prompt(
        archive, history=[make_png((1, 2, 3)), make_png((4, 5, 6))], current=make_png((9, 9, 9))
    )


def _policy(server, **kw) -> OpenAIPolicy:
    kw.setdefault("timeout_s", 5)
    kw.setdefault("max_retries", 0)
    kw.setdefault("backoff_s", 0.001)
    kw.setdefault("check_images", False)  # the image probe's requests are tested in test_image_check.py
    return OpenAIPolicy(server.url + "/v1", "fake-vl", **kw)


def test_generate_request_shape(prompt, monkeypatch):
    monkeypatch.setenv("TEST_KEY_ENV", "sk-test")
    with OpenAILoopback() as server, _policy(server, api_key_env="TEST_KEY_ENV", max_tokens=40) as policy:
        gen = policy.generate(prompt)
        path, payload, headers = server.requests[-1]
    assert path == "/v1/chat/completions"
    assert payload["model"] == "fake-vl" and payload["temperature"] == 0 and payload["max_tokens"] == 40
    assert payload["messages"] == openai_messages(prompt)
    assert {k.lower(): v for k, v in headers.items()}["authorization"] == "Bearer sk-test"
    assert gen.response and gen.meta["prompt_tokens"] > 0 and gen.meta["finish_reason"] == "stop"


def test_no_auth_header_without_key(prompt, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAILoopback() as server, _policy(server) as policy:
        policy.generate(prompt)
        headers = {k.lower() for k in server.requests[-1][2]}
    assert "authorization" not in headers


def test_vllm_prompt_logprobs_score_matches_sglang(prompt, make_png):
    other = make_prompt(MemoryArchive(), history=[make_png((7, 7, 7))], current=make_png((9, 9, 9)))
    with OpenAILoopback(prompt_logprobs="vllm") as oa, SGLangLoopback() as sg:
        # an OpenAI-compatible server gets no image roles: compare with a stock (role-unaware) SGLang
        sg.role_aware = False
        with _policy(oa, target_suffix="<|im_end|>") as openai, SGLangPolicy(sg.url, timeout_s=5) as sglang:
            got = openai.score([prompt, other], [TARGET, "pyautogui.write('x')"])
            want = sglang.score([prompt, other], [TARGET, "pyautogui.write('x')"])
            scoring = [r[1] for r in oa.requests if "prompt_logprobs" in r[1]]
    # both fakes share one model and one chat layout, so teacher forcing must agree exactly
    assert got == pytest.approx(want, abs=1e-12)
    assert scoring[0]["continue_final_message"] is True and scoring[0]["add_generation_prompt"] is False
    assert scoring[0]["messages"][-1] == {"role": "assistant", "content": TARGET + "<|im_end|>"}


def test_prompt_length_is_cached(prompt):
    with OpenAILoopback() as server, _policy(server) as policy:
        policy.score([prompt], [TARGET])
        policy.score([prompt], ["pyautogui.write('y')"])
        n_len_requests = sum(1 for r in server.requests if "prompt_logprobs" not in r[1])
    assert n_len_requests == 1


@pytest.mark.parametrize("mode", ["ignore", "reject"])
def test_no_prompt_logprobs_is_a_clear_error(prompt, mode):
    with OpenAILoopback(prompt_logprobs=mode) as server, _policy(server) as policy:
        with pytest.raises(PromptLogprobsUnsupportedError, match="no prompt logprobs") as info:
            policy.score([prompt], [TARGET])
    message = str(info.value)
    assert "SGLangPolicy" in message and "TransformersPolicy" in message and server.url in message
    assert isinstance(info.value, NotImplementedError)


def test_prompt_logprobs_false_sends_nothing(prompt):
    with OpenAILoopback() as server, _policy(server, prompt_logprobs=False) as policy:
        with pytest.raises(PromptLogprobsUnsupportedError, match="prompt_logprobs=False"):
            policy.score([prompt], [TARGET])
        assert server.requests == []


def test_unknown_model_is_rejected(prompt):
    with OpenAILoopback() as server:
        with OpenAIPolicy(server.url + "/v1", "other-model", timeout_s=5, max_retries=2) as policy:
            with pytest.raises(PolicyRequestRejectedError, match=r"HTTP 404.*does not exist"):
                policy.generate(prompt)
        assert len(server.requests) == 1


def test_too_many_images_refused_before_sending(prompt):
    with OpenAILoopback() as server, _policy(server, max_images_per_prompt=1) as policy:
        with pytest.raises(PolicyError, match="3 images but max_images_per_prompt=1"):
            policy.generate(prompt)
        with pytest.raises(PolicyError, match="max_images_per_prompt=1"):
            policy.score([prompt], [TARGET])
        assert server.requests == []


def test_down_and_retry(prompt):
    with OpenAIPolicy(free_port_url() + "/v1", "m", timeout_s=0.5, max_retries=0) as policy:
        with pytest.raises(PolicyUnavailableError, match="1 attempt"):
            policy.generate(prompt)
    with OpenAILoopback() as server, _policy(server, max_retries=2) as policy:
        server.faults.extend(["500", "429"])
        assert policy.generate(prompt).response


def test_constructor_validation():
    with pytest.raises(ConfigError) as info:
        OpenAIPolicy("localhost:8000", "", max_tokens=0)
    assert len(info.value.errors) == 3
