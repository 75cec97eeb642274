"""One conformance suite for every policy runtime (the ``Policy`` protocol).

Adding a runtime is one entry in :data:`RUNTIMES`: a factory ``(stack, request) -> RuntimeCase`` that
starts whatever it needs (``stack`` is an ExitStack closed after the test; ``request`` is the pytest
fixture request, for ``request.getfixturevalue(...)`` of e.g. a tiny model directory).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest
from loopback import MemoryArchive, OpenAILoopback, SGLangLoopback, make_prompt

from causalcache_memory.policy import Generation, Policy
from causalcache_memory.runtime.openai_client import OpenAIPolicy, PromptLogprobsUnsupportedError
from causalcache_memory.runtime.sglang_client import SGLangPolicy


@dataclass
class RuntimeCase:
    """A policy under test.

    Attributes:
        policy: the runtime.
        supports_score: False when ``score`` must raise ``score_error`` instead.
        score_error: the error type a non-scoring runtime raises.
    """

    policy: Policy
    supports_score: bool = True
    score_error: type[Exception] = PromptLogprobsUnsupportedError


def _sglang(stack: ExitStack, request: pytest.FixtureRequest) -> RuntimeCase:
    server = stack.enter_context(SGLangLoopback())
    policy = stack.enter_context(SGLangPolicy(server.url, model_name="fake", timeout_s=5, max_retries=0))
    return RuntimeCase(policy)


def _openai(stack: ExitStack, request: pytest.FixtureRequest) -> RuntimeCase:
    # like OpenAI or SGLang /v1: no prompt logprobs -> score raises the clear error
    server = stack.enter_context(OpenAILoopback(prompt_logprobs="ignore"))
    policy = stack.enter_context(OpenAIPolicy(server.url + "/v1", "fake-vl", timeout_s=5, max_retries=0))
    return RuntimeCase(policy, supports_score=False)


def _openai_vllm(stack: ExitStack, request: pytest.FixtureRequest) -> RuntimeCase:
    # advertises vLLM's prompt_logprobs extension -> scoring works
    server = stack.enter_context(OpenAILoopback(prompt_logprobs="vllm"))
    policy = stack.enter_context(OpenAIPolicy(server.url + "/v1", "fake-vl", timeout_s=5, max_retries=0))
    return RuntimeCase(policy)


def _transformers(stack: ExitStack, request: pytest.FixtureRequest) -> RuntimeCase:
    # the embedded runtime on the tiny offline Qwen2.5-VL model (session fixture in conftest.py)
    return RuntimeCase(request.getfixturevalue("policy"))


RUNTIMES: dict[str, Callable[[ExitStack, pytest.FixtureRequest], RuntimeCase]] = {
    "transformers": _transformers,
    "sglang": _sglang,
    "openai": _openai,
    "openai-vllm": _openai_vllm,
}


@pytest.fixture(params=sorted(RUNTIMES))
def policy_runtime(request: pytest.FixtureRequest) -> Iterator[RuntimeCase]:
    with ExitStack() as stack:
        yield RUNTIMES[request.param](stack, request)


@pytest.fixture
def prompts(make_png):
    archive = MemoryArchive()
    current = make_png((200, 10, 10), text="now")
    h1, h2, h3 = (make_png((10 * i, 80, 40), text=f"h{i}") for i in (1, 2, 3))
    return {
        "a": make_prompt(archive, history=[h1, h2], current=current),
        "b": make_prompt(archive, history=[h1, h3], current=current),  # differs only in one history image
        "c": make_prompt(archive, history=[h2], current=current, goal="Close the window"),
    }


def _scores(case: RuntimeCase, prompts, targets) -> list[float] | None:
    """The runtime's scores, or None for a runtime that does not score, after checking that it raises
    its documented error (that check is the whole contract for such a runtime: the test passes, it is
    not skipped)."""
    if not case.supports_score:
        with pytest.raises(case.score_error, match="no prompt logprobs"):
            case.policy.score(prompts, targets)
        return None
    return case.policy.score(prompts, targets)


def test_is_a_policy(policy_runtime):
    assert isinstance(policy_runtime.policy, Policy)
    assert isinstance(policy_runtime.policy.name, str) and policy_runtime.policy.name


def test_generate_returns_generation(policy_runtime, prompts):
    start = time.perf_counter()
    gen = policy_runtime.policy.generate(prompts["a"])
    wall = time.perf_counter() - start
    assert isinstance(gen, Generation)
    assert isinstance(gen.response, str) and gen.response
    assert 0 < gen.latency_s <= wall  # the call's own duration, not a constant or a clock reading
    if gen.action is None:
        assert isinstance(gen.parse_error, str) and gen.parse_error
    else:
        assert gen.parse_error is None
    again = policy_runtime.policy.generate(prompts["a"])
    assert again.response == gen.response  # greedy decoding is deterministic


def test_score_is_mean_loglik(policy_runtime, prompts):
    targets = ["pyautogui.click(x=0.3, y=0.4)", "pyautogui.write('hi')", "pyautogui.press('enter')"]
    scores = _scores(policy_runtime, [prompts["a"], prompts["b"], prompts["c"]], targets)
    if scores is None:
        return
    assert len(scores) == 3
    assert all(isinstance(s, float) and math.isfinite(s) and s <= 0 for s in scores)


def test_score_batch_matches_single(policy_runtime, prompts):
    batch = [prompts["a"], prompts["b"], prompts["c"]]
    targets = ["pyautogui.click(x=0.3, y=0.4)"] * 3
    scores = _scores(policy_runtime, batch, targets)
    if scores is None:
        return
    singles = [policy_runtime.policy.score([p], [t])[0] for p, t in zip(batch, targets, strict=True)]
    assert scores == pytest.approx(singles, abs=1e-9)


def test_score_sees_history_images(policy_runtime, prompts):
    target = "pyautogui.click(x=0.3, y=0.4)"
    scores = _scores(policy_runtime, [prompts["a"], prompts["b"]], [target, target])
    if scores is None:
        return
    a, b = scores
    assert a != b  # the prompts differ only in one history screenshot


def test_score_rejects_mismatched_lengths(policy_runtime, prompts):
    with pytest.raises(ValueError, match="targets"):
        policy_runtime.policy.score([prompts["a"]], ["x", "y"])
