"""Finding 14: ``timeout_s`` is a deadline for the whole response; non-finite numbers are refused."""

from __future__ import annotations

import math
import time

import httpx
import pytest

from causalcache_memory.errors import PolicyResponseError, PolicyUnavailableError
from causalcache_memory.runtime._http import HttpClient
from causalcache_memory.runtime.openai_client import _entry_logprob
from causalcache_memory.runtime.sglang_client import _mean_logprob


def _trickling(chunks: int, every_s: float, sent: list[int]) -> httpx.MockTransport:
    body = b'{"text": "' + b"x" * (8 * chunks) + b'"}'

    def handler(request: httpx.Request) -> httpx.Response:
        def stream():
            for i in range(0, len(body), 8):
                time.sleep(every_s)
                sent.append(i)
                yield body[i : i + 8]

        return httpx.Response(200, content=stream())

    return httpx.MockTransport(handler)


def test_a_trickling_server_cannot_hold_a_call_past_its_deadline():
    sent: list[int] = []
    transport = _trickling(chunks=60, every_s=0.05, sent=sent)
    with HttpClient(timeout_s=0.5, max_retries=0, transport=transport) as client:
        with pytest.raises(PolicyUnavailableError, match=r"timed out: no complete response within 0\.5 s"):
            client.post_json("http://server/generate", {})
        at_error = len(sent)
    assert at_error < 40  # the caller gave up long before the server finished (61 chunks, ~3 s)


def test_retries_each_get_their_own_deadline():
    sent: list[int] = []
    sleeps: list[float] = []
    transport = _trickling(chunks=60, every_s=0.05, sent=sent)
    with HttpClient(timeout_s=0.3, max_retries=2, transport=transport, sleep=sleeps.append) as client:
        with pytest.raises(PolicyUnavailableError, match="after 3 attempt"):
            client.post_json("http://server/generate", {})
    assert len(sleeps) == 2


def test_a_fast_complete_response_is_returned():
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": 1.5}))
    with HttpClient(timeout_s=5, max_retries=0, transport=transport) as client:
        assert client.post_json("http://server/x", {}) == {"ok": 1.5}


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400"])
def test_non_finite_numbers_from_a_server_are_refused(literal):
    body = b'{"meta_info": {"input_token_logprobs": [[' + literal + b', 1, "a"]]}}'
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with HttpClient(timeout_s=5, max_retries=0, transport=transport) as client:
        with pytest.raises(PolicyResponseError, match="non-finite number"):
            client.post_json("http://server/generate", {})


@pytest.mark.parametrize("digits", [41, 4301, 100_000])
def test_a_huge_integer_in_a_reply_is_a_policy_response_error(digits):
    """Issue 56, finding 4: past 4,300 digits Python's decoder raised a bare ``ValueError`` that escaped
    ``HttpClient``; now any integer of more than 40 digits is a :class:`PolicyResponseError`."""
    body = b'{"meta_info": {"id": ' + b"9" * digits + b"}}"
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with HttpClient(timeout_s=5, max_retries=0, transport=transport) as client:
        with pytest.raises(PolicyResponseError, match=f"an integer of {digits} digits"):
            client.post_json("http://server/generate", {})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_logprob_parsers_refuse_non_finite_values(value):
    with pytest.raises(PolicyResponseError, match="finite"):
        _mean_logprob([[-0.5, 1, "a"], [value, 2, "b"]], url="http://s", item=0)
    with pytest.raises(PolicyResponseError, match="finite"):
        _entry_logprob({"7": {"logprob": value}}, 7, url="http://s", k=3)


# ---------------------------------------------------------------- issue 27, finding 7: bounded bodies
def test_deeply_nested_json_is_a_named_error_not_a_recursion_error():
    body = b'{"text": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with HttpClient(timeout_s=5, max_retries=0, transport=transport) as client:
        with pytest.raises(PolicyResponseError, match="nested deeper than max_json_depth=64"):
            client.post_json("http://server/generate", {})


def test_json_nesting_is_bounded_below_the_recursion_limit():
    from causalcache_memory.runtime._http import DEFAULT_MAX_JSON_DEPTH

    def nested(levels: int) -> bytes:
        return b"[" * levels + b"1" + b"]" * levels

    ok = httpx.MockTransport(lambda request: httpx.Response(200, content=nested(DEFAULT_MAX_JSON_DEPTH)))
    with HttpClient(timeout_s=5, max_retries=0, transport=ok) as client:
        value = client.post_json("http://server/x", {})
    for _ in range(DEFAULT_MAX_JSON_DEPTH):
        (value,) = value
    assert value == 1
    deep = httpx.MockTransport(
        lambda request: httpx.Response(200, content=nested(DEFAULT_MAX_JSON_DEPTH + 1))
    )
    with HttpClient(timeout_s=5, max_retries=0, transport=deep) as client:
        with pytest.raises(PolicyResponseError, match="nested deeper"):
            client.post_json("http://server/x", {})


def _endless(chunk: bytes, sent: list[int]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        def stream():
            yield b'{"text": "'
            for _ in range(10_000):  # 10 GB if read whole
                sent.append(len(chunk))
                yield chunk

        return httpx.Response(200, content=stream())

    return httpx.MockTransport(handler)


def test_a_huge_body_is_dropped_at_the_cap_with_a_named_error():
    from causalcache_memory.runtime._http import PolicyResponseTooLargeError

    sent: list[int] = []
    cap = 4 << 20
    with HttpClient(
        timeout_s=30, max_retries=2, transport=_endless(b"x" * (1 << 20), sent), max_response_bytes=cap
    ) as client:
        with pytest.raises(PolicyResponseTooLargeError, match="above max_response_bytes=4194304") as info:
            client.post_json("http://server/generate", {})
    assert info.value.limit == cap and info.value.url == "http://server/generate"
    assert sum(sent) <= cap + (1 << 20)  # read up to the cap once: not buffered whole, not retried


def test_an_announced_huge_body_is_refused_before_reading_it():
    from causalcache_memory.runtime._http import PolicyResponseTooLargeError

    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        def stream():
            sent.append(1)
            yield b"{}"

        return httpx.Response(200, content=stream(), headers={"content-length": str(200 << 20)})

    transport = httpx.MockTransport(handler)
    with HttpClient(timeout_s=5, max_retries=0, transport=transport, max_response_bytes=1 << 20) as client:
        with pytest.raises(PolicyResponseTooLargeError, match="announces 209715200 bytes"):
            client.post_json("http://server/generate", {})
    assert sent == []


def test_decoding_counts_against_the_deadline(monkeypatch):
    """The body used to be decoded after the deadline had been checked, so a slow decode overran it."""
    import json

    loads = json.loads

    def slow_loads(*args, **kwargs):
        time.sleep(1.5)
        return loads(*args, **kwargs)

    monkeypatch.setattr(json, "loads", slow_loads)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": 1}))
    with HttpClient(timeout_s=0.3, max_retries=0, transport=transport) as client:
        with pytest.raises(PolicyUnavailableError, match=r"no complete response within 0\.3 s"):
            client.post_json("http://server/x", {})
