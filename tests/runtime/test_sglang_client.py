"""SGLangPolicy against the loopback /generate server: request shapes, scoring math, faults, routing."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from loopback import FakeModel, MemoryArchive, SGLangLoopback, decode_image, free_port_url, make_prompt

from causalcache_memory.errors import (
    ConfigError,
    PolicyError,
    PolicyInputError,
    PolicyResponseError,
    PolicyUnavailableError,
)
from causalcache_memory.render import ImagePart, Message, TextPart
from causalcache_memory.runtime._http import PolicyRequestRejectedError, get_field
from causalcache_memory.runtime.chat_format import (
    QWEN_VL,
    ChatFormat,
    ChatText,
    chatml_render,
    lookup_chat_format,
    register_chat_format,
)
from causalcache_memory.runtime.sglang_client import SGLangPolicy, rendezvous_route

TARGET = "pyautogui.click(x=0.3, y=0.4)"


@pytest.fixture
def server():
    with SGLangLoopback(slow_s=1.0) as srv:
        yield srv


@pytest.fixture
def archive():
    return MemoryArchive()


@pytest.fixture
def prompt(archive, make_png):
    return make_prompt(
        archive, history=[make_png((1, 2, 3)), make_png((4, 5, 6))], current=make_png((9, 9, 9))
    )


def _policy(url, **kw) -> SGLangPolicy:
    kw.setdefault("timeout_s", 5)
    kw.setdefault("max_retries", 0)
    kw.setdefault("backoff_s", 0.001)
    kw.setdefault("check_images", False)  # the image probe's requests are tested in test_image_check.py
    return SGLangPolicy(url, **kw)


# ---------------------------------------------------------------------- chat format
def test_qwen_chat_format_layout():
    messages = [
        Message("system", (TextPart("sys"),)),
        Message("user", (TextPart("look "), ImagePart(0), TextPart(" and "), ImagePart(1))),
        Message("assistant", (TextPart("done"),)),
    ]
    chat = QWEN_VL.format(messages)
    pad = "<|vision_start|><|image_pad|><|vision_end|>"
    assert chat.text == (
        "<|im_start|>system\nsys<|im_end|>\n"
        f"<|im_start|>user\nlook {pad} and {pad}<|im_end|>\n"
        "<|im_start|>assistant\ndone<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert chat.image_indices == (0, 1)
    assert QWEN_VL.target_text("x") == "x<|im_end|>"


def test_chat_format_registry(monkeypatch):
    import causalcache_memory.runtime.chat_format as chat_format_module

    # the registry is process-global: the test's registration must not leak into later tests
    monkeypatch.setattr(chat_format_module, "CHAT_FORMATS", chat_format_module.CHAT_FORMATS.copy())
    assert lookup_chat_format("qwen-vl") is QWEN_VL
    with pytest.raises(ConfigError, match="not a registered chat format"):
        lookup_chat_format("llama")
    with pytest.raises(ConfigError, match="not a registered chat format"):
        lookup_chat_format("test-upper")
    custom = ChatFormat("test-upper", lambda msgs: chatml_render(msgs), "<|im_end|>")
    register_chat_format(custom)
    assert lookup_chat_format("test-upper") is custom
    with pytest.raises(ConfigError, match="already registered"):
        register_chat_format(custom)


def test_custom_chat_format_is_used(server, prompt):
    def render(messages):
        chat = chatml_render(messages)
        return ChatText("PREFIX" + chat.text, chat.image_indices)

    with _policy(server.url, chat_format=ChatFormat("prefixed", render, "<|im_end|>")) as policy:
        policy.generate(prompt)
    assert server.requests[-1][1]["text"].startswith("PREFIX<|im_start|>system")


def test_chat_format_missing_image_is_refused(server, prompt):
    def drop_images(messages):
        return ChatText(chatml_render(messages).text, ())

    with _policy(server.url, chat_format=ChatFormat("broken", drop_images, "")) as policy:
        with pytest.raises(ValueError, match="declares 3 images"):
            policy.generate(prompt)
    assert server.requests == []


# ---------------------------------------------------------------------- generate
def test_generate_request_shape(server, prompt):
    with _policy(server.url, max_new_tokens=64) as policy:
        gen = policy.generate(prompt)
    path, payload, _ = server.requests[-1]
    assert path == "/generate"
    assert payload["text"].endswith("<|im_start|>assistant\n")
    assert payload["sampling_params"] == {"temperature": 0, "max_new_tokens": 64}
    assert [decode_image(u) for u in payload["image_data"]] == [prompt.image_bytes(i) for i in range(3)]
    assert all(u.startswith("data:image/png;base64,") for u in payload["image_data"])
    assert gen.meta["server"] == server.url and gen.meta["prompt_tokens"] > 0
    assert gen.meta["finish_reason"] == "stop"


def test_generate_truncates_at_max_new_tokens(server, prompt):
    with _policy(server.url, max_new_tokens=5) as policy:
        gen = policy.generate(prompt)
    assert len(gen.response) == 5 and gen.meta["finish_reason"] == "length"


def test_unparsable_response_gives_parse_error(prompt):
    with SGLangLoopback(model=FakeModel(responder=lambda d: "I am not sure what to do")) as srv:
        with _policy(srv.url) as policy:
            gen = policy.generate(prompt)
    assert gen.response == "I am not sure what to do"
    assert gen.action is None and isinstance(gen.parse_error, str) and gen.parse_error


def test_parsable_response_gives_action(server, prompt):
    with _policy(server.url, platform="desktop", screen_size=(1280, 800)) as policy:
        gen = policy.generate(prompt)
    assert gen.parse_error is None and gen.action is not None and gen.action.type == "click"


# ---------------------------------------------------------------------- image roles and order
def test_generate_sends_one_role_per_image_in_declared_order(server, prompt):
    with _policy(server.url) as policy:
        policy.generate(prompt)
    payload = server.requests[-1][1]
    assert payload["mm_processor_kwargs"] == {"causalcache_image_roles": ["history", "history", "current"]}
    assert len(payload["image_data"]) == len(payload["mm_processor_kwargs"]["causalcache_image_roles"])


def test_out_of_order_prompt_sends_images_in_declared_order_like_the_transformers_runtime(server, prompt):
    """The transformers runtime hands its processor ``prompt.pil_images()`` (declared order); so does this."""
    import dataclasses

    from causalcache_memory.render import RenderedPrompt

    inner = prompt.prompt
    messages = list(inner.messages)
    last = messages[-1]
    swapped = tuple(ImagePart(0) if isinstance(p, ImagePart) else p for p in last.parts)
    messages[-1] = Message(last.role, swapped)
    first_hist = next(k for k, m in enumerate(messages) if any(isinstance(p, ImagePart) for p in m.parts))
    messages[first_hist] = Message(
        messages[first_hist].role,
        tuple(ImagePart(2) if isinstance(p, ImagePart) else p for p in messages[first_hist].parts),
    )
    shuffled = dataclasses.replace(inner, messages=tuple(messages))
    assert isinstance(shuffled, RenderedPrompt)
    bound = shuffled.bind(prompt.archive)
    assert QWEN_VL.format(bound.messages).image_indices != (0, 1, 2)
    with _policy(server.url) as policy:
        policy.generate(bound)
    payload = server.requests[-1][1]
    assert [decode_image(u) for u in payload["image_data"]] == [bound.image_bytes(i) for i in range(3)]
    assert payload["mm_processor_kwargs"]["causalcache_image_roles"] == [r.role for r in bound.images]


def test_score_batch_maps_each_rid_to_its_roles(server, archive, make_png, prompt):
    other = make_prompt(archive, history=[], current=make_png((7, 7, 7)))
    with _policy(server.url) as policy:
        policy.score([prompt, other], [TARGET, TARGET])
    for _, payload, _ in server.requests:
        rids = payload["rid"]
        assert len(set(rids)) == 2
        assert payload["mm_processor_kwargs"]["causalcache_image_roles"] == {
            rids[0]: ["history", "history", "current"],
            rids[1]: ["current"],
        }


def test_roles_change_the_score_on_a_role_aware_server_only(archive, make_png, prompt):
    with SGLangLoopback() as aware, SGLangLoopback() as stock:
        stock.role_aware = False
        with _policy(aware.url) as a, _policy(stock.url) as b:
            s_aware, s_stock = a.score([prompt], [TARGET])[0], b.score([prompt], [TARGET])[0]
    assert s_aware == pytest.approx(_expected_score(aware.model, prompt, TARGET), abs=1e-12)
    assert s_stock == pytest.approx(_expected_score(stock.model, prompt, TARGET, roles=False), abs=1e-12)
    assert s_aware != s_stock


def test_generation_reports_cached_tokens(server, archive, make_png, prompt):
    with _policy(server.url) as policy:
        cold = policy.generate(prompt)
        warm = policy.generate(prompt)
        other = policy.generate(
            make_prompt(
                archive, history=[make_png((5, 5, 5)), make_png((4, 5, 6))], current=make_png((9, 9, 9))
            )
        )
    assert cold.cached_tokens == 0 and cold.meta["cached_tokens"] == 0
    assert warm.cached_tokens == warm.meta["prompt_tokens"] - 1
    # a different first history image: reuse stops where the prompts diverge, before that image
    assert 0 < other.cached_tokens < warm.cached_tokens


def test_decision_record_lists_cached_tokens_per_pass():
    from causalcache_memory.allocation.base import make_allocation
    from causalcache_memory.controller import StepDecision
    from causalcache_memory.policy import Generation

    allocation = make_allocation([1, 2], t=4, budget=2, allocator="test")
    one = Generation("a", None, cached_tokens=0, meta={"prompt_tokens": 900})
    two = Generation("b", None, cached_tokens=310, meta={"prompt_tokens": 905})
    record = StepDecision(
        t=4, generation=two, allocation=allocation, proposal=one, second_pass=True
    ).to_record()
    assert record["cached_tokens"] == [0, 310] and record["prompt_tokens"] == [900, 905]
    single = StepDecision(t=4, generation=one, allocation=allocation, proposal=one).to_record()
    assert single["cached_tokens"] == [0]
    plain = StepDecision(t=4, generation=Generation("c", None), allocation=allocation).to_record()
    assert "cached_tokens" not in plain


# ---------------------------------------------------------------------- score
def _expected_score(model: FakeModel, prompt, target: str, *, roles: bool = True) -> float:
    chat = QWEN_VL.format(prompt.messages)
    images = [prompt.image_bytes(i) for i in range(len(prompt.images))]  # declared order
    declared = [ref.role for ref in prompt.images] if roles else None
    p = model.tokenize(chat.text, images, declared)
    full = model.tokenize(chat.text + target + "<|im_end|>", images, declared)
    lps = model.logprobs(full)[len(p) :]
    return sum(lps) / len(lps)


def test_score_matches_teacher_forcing(server, archive, make_png, prompt):
    other = make_prompt(archive, history=[make_png((7, 7, 7))], current=make_png((9, 9, 9)))
    targets = [TARGET, "pyautogui.press('enter')"]
    with _policy(server.url) as policy:
        scores = policy.score([prompt, other], targets)
    expected = [_expected_score(server.model, p, t) for p, t in zip([prompt, other], targets, strict=True)]
    assert scores == pytest.approx(expected, abs=1e-12)
    assert all(s < 0 for s in scores)


def test_score_requests_and_prompt_length_cache(server, prompt):
    with _policy(server.url) as policy:
        first = policy.score([prompt, prompt], [TARGET, "pyautogui.write('a')"])
        assert len(server.requests) == 2  # one prompt-length batch + one scoring batch
        lengths, scoring = server.requests[0][1], server.requests[1][1]
        assert isinstance(lengths["text"], list) and len(lengths["text"]) == 2
        assert lengths["sampling_params"]["max_new_tokens"] == 0 and "return_logprob" not in lengths
        assert scoring["return_logprob"] is True
        assert scoring["sampling_params"]["max_new_tokens"] == 0
        assert scoring["text"][0] == lengths["text"][0] + TARGET + "<|im_end|>"
        assert len(scoring["image_data"]) == 2 and len(scoring["image_data"][0]) == 3
        p_len = server.model.tokenize(lengths["text"][0], [prompt.image_bytes(i) for i in range(3)])
        assert scoring["logprob_start_len"] == [len(p_len) - 1] * 2
        again = policy.score([prompt], [TARGET])  # prompt length cached: scoring request only
    assert len(server.requests) == 3 and again[0] == first[0]


def test_score_chunks_batches(server, prompt):
    with _policy(server.url, score_batch_size=2) as policy:
        scores = policy.score([prompt] * 5, [TARGET] * 5)
    scoring = [r for r in server.requests if r[1].get("return_logprob")]
    assert [len(r[1]["text"]) for r in scoring] == [2, 2, 1]
    assert len(set(scores)) == 1


def test_score_argument_errors(server, prompt):
    with _policy(server.url) as policy:
        with pytest.raises(PolicyInputError, match="targets"):
            policy.score([prompt], [TARGET, TARGET])
        with pytest.raises(PolicyInputError, match="non-empty"):
            policy.score([prompt], [""])
    assert server.requests == []


def test_score_rejects_short_logprob_list(server, prompt, monkeypatch):
    with _policy(server.url) as policy:
        policy.score([prompt], [TARGET])  # warm the prompt-length cache
        original = server._one

        def truncated(*args, **kwargs):
            out = original(*args, **kwargs)
            if "input_token_logprobs" in out["meta_info"]:
                out["meta_info"]["input_token_logprobs"] = out["meta_info"]["input_token_logprobs"][:2]
            return out

        monkeypatch.setattr(server, "_one", truncated)
        with pytest.raises(PolicyResponseError, match="input logprobs were returned"):
            policy.score([prompt], [TARGET])


# ---------------------------------------------------------------------- faults
def test_retries_then_success(server, prompt):
    server.faults.extend(["500", "429", "500"])
    with _policy(server.url, max_retries=3) as policy:
        gen = policy.generate(prompt)
    assert gen.response and len(server.faults) == 0


def test_retries_exhausted(server, prompt):
    server.faults.extend(["500"] * 3)
    with _policy(server.url, max_retries=2) as policy:
        with pytest.raises(PolicyUnavailableError, match=r"3 attempt\(s\).*HTTP 500"):
            policy.generate(prompt)


def test_server_down_fails_fast(prompt):
    url = free_port_url()
    start = time.monotonic()
    with _policy(url, timeout_s=0.5, max_retries=1) as policy:
        with pytest.raises(PolicyUnavailableError) as info:
            policy.generate(prompt)
    assert time.monotonic() - start < 5
    assert url in str(info.value) and "2 attempt(s)" in str(info.value)
    assert isinstance(info.value, ConnectionError)


def test_slow_server_times_out(server, prompt):
    server.faults.append("slow")
    with _policy(server.url, timeout_s=0.2) as policy:
        with pytest.raises(PolicyUnavailableError, match="timed out"):
            policy.generate(prompt)


def test_malformed_json(server, prompt):
    server.faults.append("malformed")
    with _policy(server.url) as policy:
        with pytest.raises(PolicyResponseError, match=r"not valid JSON.*unterminated"):
            policy.generate(prompt)


def test_missing_fields(server, prompt):
    server.faults.append("missing")
    with _policy(server.url) as policy:
        with pytest.raises(PolicyResponseError, match=r"no field `text`.*unexpected"):
            policy.generate(prompt)


def test_client_error_is_not_retried(server, prompt):
    with _policy(server.url, max_retries=3, sampling_params={"bogus": 1}) as policy:
        with pytest.raises(PolicyRequestRejectedError, match=r"HTTP 400.*unknown sampling params") as info:
            policy.generate(prompt)
    assert info.value.status_code == 400 and len(server.requests) == 1


def test_too_many_images_refused_before_sending(server, prompt):
    with _policy(server.url, max_images_per_prompt=2) as policy:
        with pytest.raises(PolicyError, match="3 images but max_images_per_prompt=2"):
            policy.generate(prompt)
        with pytest.raises(PolicyError, match="max_images_per_prompt=2"):
            policy.score([prompt], [TARGET])
    assert server.requests == []


def test_constructor_validation():
    with pytest.raises(ConfigError) as info:
        SGLangPolicy(["localhost:1", "localhost:1"], max_new_tokens=0, score_batch_size=0)
    assert len(info.value.errors) == 5  # two bad URLs, duplicates, two bad numbers


def test_get_field_types():
    assert get_field({"a": [{"b": 3}]}, "a.0.b", url="u", kind=int) == 3
    with pytest.raises(PolicyResponseError, match="should be int"):
        get_field({"a": True}, "a", url="u", kind=int)


# ---------------------------------------------------------------------- routing
def test_rendezvous_is_stable_and_spread():
    urls = [f"http://127.0.0.1:{p}" for p in (1, 2, 3)]
    picks = [rendezvous_route(f"episode-{i}", urls) for i in range(60)]
    assert picks == [rendezvous_route(f"episode-{i}", urls) for i in range(60)]
    assert all(v >= 10 for v in Counter(picks).values()) and len(set(picks)) == 3
    # removing one server only moves that server's episodes
    moved = [
        p for i, p in enumerate(picks) if p != urls[2] and rendezvous_route(f"episode-{i}", urls[:2]) != p
    ]
    assert moved == []


def test_sticky_routing_across_servers(archive, make_png):
    with SGLangLoopback() as s1, SGLangLoopback() as s2, SGLangLoopback() as s3:
        servers = {s.url: s for s in (s1, s2, s3)}
        current = make_png((9, 9, 9))
        with _policy(list(servers)) as policy:
            used = {}
            for i in range(12):
                ep = f"ep-{i}"
                for step in range(2):
                    p = make_prompt(archive, history=[make_png((i, step, 1))], current=current, episode_id=ep)
                    used.setdefault(ep, set()).add(policy.generate(p).meta["server"])
            assert all(len(v) == 1 for v in used.values())
            assert len(set().union(*used.values())) >= 2
            assert policy.route(route_key="ep-3") == next(iter(used["ep-3"]))
            # scoring splits the batch by episode server; values equal one-server scoring
            prompts = [
                make_prompt(archive, history=[make_png((i, 0, 1))], current=current, episode_id=f"ep-{i}")
                for i in range(6)
            ]
            routed = policy.score(prompts, [TARGET] * 6)
        for s in servers.values():
            s.requests.clear()
        with _policy(s1.url) as single:
            assert single.score(prompts, [TARGET] * 6) == pytest.approx(routed, abs=1e-12)


# ---------------------------------------------------------------------- real server
@pytest.mark.sglang_server
def test_real_sglang_server(archive, make_png):
    url = os.environ.get("CAUSALCACHE_SGLANG_URL")
    if not url:
        pytest.skip("set CAUSALCACHE_SGLANG_URL to run against a real SGLang server")
    prompt = make_prompt(
        archive,
        history=[make_png((30, 60, 90), (224, 224), "prev")],
        current=make_png((200, 200, 200), (224, 224)),
    )
    other = make_prompt(
        archive,
        history=[make_png((90, 10, 10), (224, 224), "x")],
        current=make_png((200, 200, 200), (224, 224)),
    )
    with SGLangPolicy(url, timeout_s=120, max_new_tokens=32) as policy:
        gen = policy.generate(prompt)
        assert isinstance(gen.response, str) and gen.meta["prompt_tokens"] > 0
        scores = policy.score([prompt, other], [TARGET, TARGET])
        single = policy.score([other], [TARGET])
    assert all(s <= 0 for s in scores)
    assert single[0] == pytest.approx(scores[1], abs=1e-2)
