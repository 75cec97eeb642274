"""Per-image roles: request parsing, the radix key of history images, the processor mixin, self-check."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from sglang_fakes import FakeItem, padded_ids

from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime.sglang_server.plugin import RoleAwareProcessorMixin
from causalcache_memory.runtime.sglang_server.roles import (
    ROLE_KEY,
    ROLES_KWARG,
    apply_roles,
    history_items,
    parse_roles,
)
from causalcache_memory.runtime.sglang_server.selfcheck import gateway_self_check, self_check

TEXT = list(range(60))  # ids of a prompt with images at [10, 25] and [35, 50]


def items_for(*features: bytes) -> list[FakeItem]:
    spans = [(10, 25), (35, 50)]
    out = [FakeItem(offsets=[spans[k]], feature=f) for k, f in enumerate(features)]
    for item in out:
        item.set_pad_value()
    return out


def key(roles, features=(b"screen-a", b"screen-b")) -> list[int]:
    """The radix key (padded ids) SGLang would build for the prompt with these roles."""
    items = items_for(*features)
    apply_roles(items, list(roles))
    return padded_ids(TEXT, items)


def reuse(cached: list[int], new: list[int]) -> int:
    """Tokens a radix cache holding ``cached`` reuses for ``new`` (longest common prefix)."""
    n = 0
    while n < min(len(cached), len(new)) and cached[n] == new[n]:
        n += 1
    return n


def test_parse_roles_single_and_batch():
    assert parse_roles({ROLES_KWARG: ["history", "current"]}, rid="x", n_images=2) == ["history", "current"]
    batch = {ROLES_KWARG: {"a": ["current"], "b": ["history", "current"]}}
    assert parse_roles(batch, rid="b", n_images=2) == ["history", "current"]
    assert parse_roles(None, rid="a", n_images=1) is None
    assert parse_roles({"other": 1}, rid="a", n_images=1) is None
    with pytest.raises(ConfigError, match="rid 'c'"):
        parse_roles(batch, rid="c", n_images=1)
    with pytest.raises(ConfigError, match="2 image roles but carries 3"):
        parse_roles({ROLES_KWARG: ["history", "current"]}, rid="x", n_images=3)
    with pytest.raises(ConfigError, match="not one of"):
        parse_roles({ROLES_KWARG: ["past"]}, rid="x", n_images=1)


def test_current_image_keeps_the_stock_key_and_history_gets_its_own():
    stock = padded_ids(TEXT, items_for(b"screen-a", b"screen-b"))
    assert key(("current", "current")) == stock  # a no-history request is exactly a stock request
    flagged = key(("history", "current"))
    assert flagged[:10] == stock[:10] and flagged[10:26] != stock[10:26]
    assert flagged[26:] == stock[26:]  # the current image keeps its key


def test_cached_current_image_is_not_matched_as_history_and_vice_versa():
    as_current = key(("current", "current"))
    as_history = key(("history", "current"))
    assert reuse(as_current, as_history) == 10  # the text before the image only
    assert reuse(as_history, as_current) == 10
    assert reuse(as_history, key(("history", "current"))) == len(TEXT)  # same role: full reuse


def test_pass_one_and_pass_two_share_the_text_before_the_first_history_image():
    pass1 = key(("history", "current"), (b"screen-a", b"screen-now"))
    pass2 = key(("history", "current"), (b"screen-z", b"screen-now"))  # the witness swapped a history image
    assert reuse(pass1, pass2) == 10


def test_history_items_refuse_a_history_tag_without_the_history_key():
    items = items_for(b"screen-a", b"screen-b")
    apply_roles(items, ["history", "current"])
    assert history_items(items) == [items[0]]
    items[0].set_hash(items[0].hash)  # e.g. caller mm_hashes re-keyed it after the processor
    with pytest.raises(ConfigError, match="history radix key"):
        history_items(items)


# ---------------------------------------------------------------------- processor mixin
@dataclass
class FakeOutput:
    mm_items: list[FakeItem]
    input_ids: list[int]
    padded_input_ids: list[int] | None = None

    @staticmethod
    def build_padded_input_ids(input_ids, mm_items):
        if any(item.pad_value is None for item in mm_items):
            return None
        return padded_ids(input_ids, mm_items)


class StockProcessor:
    """Like SGLang's Qwen-VL processor: items unhashed (hashed later) or hashed with pre-padded ids."""

    def __init__(self, hashed: bool) -> None:
        self.hashed = hashed

    async def process_mm_data_async(self, image_data, input_text, request_obj, *args, **kwargs):
        items = [
            FakeItem(offsets=[(10, 25)], feature=image_data[0].encode()),
            FakeItem(offsets=[(35, 50)], feature=image_data[1].encode()),
        ]
        if self.hashed:
            for item in items:
                item.set_pad_value()
        return FakeOutput(items, list(TEXT), FakeOutput.build_padded_input_ids(TEXT, items))


class Processor(RoleAwareProcessorMixin, StockProcessor):
    pass


@dataclass
class Req:
    rid: str
    mm_processor_kwargs: dict[str, Any] | None = field(default=None)


@pytest.mark.parametrize("hashed", [True, False])
def test_processor_rekeys_history_images_and_rebuilds_padded_ids(hashed):
    proc = Processor(hashed)
    req = Req("r1", {ROLES_KWARG: {"r1": ["history", "current"], "r2": ["current", "current"]}})
    out = asyncio.run(proc.process_mm_data_async(["a", "b"], "t", req))
    assert out.mm_items[0].model_specific_data[ROLE_KEY] == "history"
    assert ROLE_KEY not in out.mm_items[1].model_specific_data
    assert out.padded_input_ids == padded_ids(TEXT, out.mm_items)
    stock = asyncio.run(StockProcessor(True).process_mm_data_async(["a", "b"], "t", req))
    assert reuse(stock.padded_input_ids, out.padded_input_ids) == 10


def test_processor_without_history_roles_is_the_stock_processor():
    for kwargs in (None, {ROLES_KWARG: ["current", "current"]}):
        out = asyncio.run(Processor(True).process_mm_data_async(["a", "b"], "t", Req("r", kwargs)))
        stock = asyncio.run(StockProcessor(True).process_mm_data_async(["a", "b"], "t", Req("r", kwargs)))
        assert out.padded_input_ids == stock.padded_input_ids
        assert all(ROLE_KEY not in item.model_specific_data for item in out.mm_items)


# ---------------------------------------------------------------------- start-up self-check
class FakeServer:
    """``/generate`` with a radix cache over padded ids; ``plugin`` says whether roles/adapter are active."""

    def __init__(self, *, plugin: bool, adapter: bool = True, radix: bool = True) -> None:
        self.plugin, self.adapter, self.radix = plugin, adapter, radix
        self.cached: list[list[int]] = []

    def __call__(self, path: str, payload: dict[str, Any]) -> Any:
        if path == "/flush_cache":
            self.cached.clear()
            return {}
        sent = (payload.get("mm_processor_kwargs") or {}).get(ROLES_KWARG)  # a gateway may drop it
        roles = sent if self.plugin and sent else ["current", "current"]
        ids = key(roles)
        limit = len(ids) - 1
        if payload.get("return_logprob"):
            limit = min(limit, payload["logprob_start_len"])
        hit = max([reuse(c, ids) for c in self.cached] or [0]) if self.radix else 0
        self.cached.append(ids)
        meta = {"prompt_tokens": len(ids), "cached_tokens": min(hit, limit)}
        if payload.get("return_logprob"):
            shift = 0.5 if (self.plugin and self.adapter and "history" in roles) else 0.0
            meta["input_token_logprobs"] = [
                [None if i == 0 else -1.0 - (shift if i > 10 else 0.0), t, None] for i, t in enumerate(ids)
            ]
        return {"text": "x", "meta_info": meta}


def test_self_check_passes_with_the_plugin_active():
    report = self_check("http://fake", adapter=True, post=FakeServer(plugin=True))
    assert report.ok, report.summary()
    assert report.checks == {"roles_in_radix_key": True, "adapter_changes_history": True}


@pytest.mark.parametrize(
    "server",
    [FakeServer(plugin=False), FakeServer(plugin=True, adapter=False)],
    ids=["stock-server", "processor-only"],
)
def test_self_check_refuses_when_the_plugin_is_not_active(server):
    report = self_check("http://fake", adapter=True, post=server)
    assert not report.ok
    assert "NO" in report.summary()


def test_self_check_without_adapter_or_radix_cache_proves_nothing():
    assert self_check("http://fake", adapter=False, post=FakeServer(plugin=True)).ok
    report = self_check("http://fake", adapter=False, post=FakeServer(plugin=True, radix=False))
    assert not report.ok and "not proven" in report.summary()


# GenerateReqInput fields smg 1.13 sets when it rebuilds a /generate request for a gRPC worker; anything
# else (mm_processor_kwargs, rid) is dropped. In HTTP mode it forwards the body and adds "model".
GRPC_KNOWN_FIELDS = (
    "text",
    "input_ids",
    "image_data",
    "sampling_params",
    "return_logprob",
    "logprob_start_len",
)


class FakeGateway:
    """The gateway in front of one worker: ``http`` forwards the body, ``grpc`` keeps known fields only."""

    def __init__(self, worker: FakeServer, mode: str) -> None:
        self.worker, self.mode = worker, mode
        self.seen: list[dict[str, Any]] = []

    def __call__(self, path: str, payload: dict[str, Any]) -> Any:
        if self.mode == "grpc":
            payload = {k: v for k, v in payload.items() if k in GRPC_KNOWN_FIELDS}
        else:
            payload = {**payload, "model": "unknown"}
        self.seen.append(payload)
        return self.worker(path, payload)


def test_gateway_self_check_passes_through_an_http_mode_gateway():
    gateway = FakeGateway(FakeServer(plugin=True), "http")
    report = gateway_self_check("http://gw", adapter=True, post=gateway)
    assert report.ok, report.summary()
    assert any(ROLES_KWARG in p.get("mm_processor_kwargs", {}) for p in gateway.seen)


@pytest.mark.parametrize("adapter", [True, False])
def test_gateway_self_check_fails_when_the_gateway_strips_the_roles(adapter):
    worker = FakeServer(plugin=True)
    assert self_check("http://worker", adapter=adapter, post=worker).ok  # the server alone is fine
    report = gateway_self_check("http://gw", adapter=adapter, post=FakeGateway(worker, "grpc"))
    assert not report.ok
    assert report.checks["roles_in_radix_key"] is False
    assert "through the gateway http://gw" in report.summary() and "HTTP mode" in report.summary()
