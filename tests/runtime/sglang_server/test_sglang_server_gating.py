"""The server-side HGKV gate on CPU fakes of SGLang 0.5.23: base equality, chunking, radix hits, decode.

The model tests run twice: with the torch reference update and with the fused Triton kernel selected
(``CAUSALCACHE_HGKV_KERNEL=triton`` under Triton's CPU interpreter; skipped without triton).
"""

from __future__ import annotations

import copy
import itertools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from adapter_files import write_adapter  # noqa: E402
from kernel_modes import KERNEL_MODES, select_kernel  # noqa: E402
from sglang_fakes import FakeBatch, FakeItem, FakeMMInputs, FakeMode, FakeStockModel, padded_ids  # noqa: E402

from causalcache_memory.errors import ImageSpanMismatchError  # noqa: E402
from causalcache_memory.runtime.sglang_server import gating  # noqa: E402
from causalcache_memory.runtime.sglang_server.plugin import HGKVModelMixin  # noqa: E402
from causalcache_memory.runtime.sglang_server.roles import apply_roles  # noqa: E402

LAYERS = 4
ADAPTED = (2, 3)


class Served(HGKVModelMixin, FakeStockModel):
    pass


@pytest.fixture(params=KERNEL_MODES)
def kernel(request, monkeypatch) -> str:
    select_kernel(monkeypatch, request.param)
    return request.param


@pytest.fixture
def models(tmp_path, kernel):
    torch.manual_seed(0)
    stock = FakeStockModel(num_layers=LAYERS)
    served = Served(num_layers=LAYERS)
    served.load_state_dict(stock.state_dict())
    attn = stock.model.layers[0].self_attn
    adapter = write_adapter(
        tmp_path / "adapter", layers=ADAPTED, num_layers=LAYERS, hidden=attn.hidden_size, kv=attn.kv_size
    )
    served.attach_hgkv(str(adapter))
    return stock, served


def prompt(roles: tuple[str, ...], *, seed: int = 1, length: int = 60):
    """Text ids with two 16-token images at [10, 25] and [35, 50]; roles applied like the processor."""
    gen = torch.Generator().manual_seed(seed)
    text = torch.randint(0, 90, (length,), generator=gen).tolist()
    items = [
        FakeItem(offsets=[(10, 25)], feature=b"screen-a"),
        FakeItem(offsets=[(35, 50)], feature=b"screen-b"),
    ]
    for item in items:
        item.set_pad_value()
    apply_roles(items, list(roles))
    return padded_ids(text, items), items


def extend(ids, items, rid, *, prefix=0, upto=None, mode="extend"):
    chunk = ids[prefix:upto]
    batch = FakeBatch(FakeMode(mode), [FakeMMInputs(items)], [prefix], [len(chunk)], [rid])
    return torch.tensor(chunk), batch


def run(model, ids, items, rid="r", **kw):
    input_ids, batch = extend(ids, items, rid, **kw)
    return model(input_ids, None, batch)


def test_no_history_image_is_bitwise_the_base_model(models):
    stock, served = models
    ids, items = prompt(("current", "current"))
    assert torch.equal(run(stock, ids, items), run(served, ids, items))
    for li in range(LAYERS):
        assert torch.equal(stock.cache["r"][li][0], served.cache["r"][li][0])


def test_history_flag_changes_only_history_tokens_and_later(models):
    stock, served = models
    ids, items = prompt(("history", "current"))
    out_s, out_h = run(stock, ids, items), run(served, ids, items)
    assert not torch.equal(out_s, out_h)
    assert torch.equal(out_s[:10], out_h[:10])  # text before the history image is untouched
    for li in range(LAYERS):
        k_s, k_h = stock.cache["r"][li][0], served.cache["r"][li][0]
        assert torch.equal(k_s[:10], k_h[:10])
        if li in ADAPTED:
            assert not torch.equal(k_s[10:26], k_h[10:26])
        else:
            assert torch.equal(k_s[:26], k_h[:26])  # unadapted layers: history K are the base K


def test_decode_adds_nothing(models, monkeypatch):
    stock, served = models
    ids, items = prompt(("history", "current"))
    run(served, ids, items)
    stock.cache = copy.deepcopy(served.cache)
    calls = []
    monkeypatch.setattr(gating.ServerHGKV, "update", lambda *a, **k: calls.append(a))
    step = FakeBatch(FakeMode("decode"), [FakeMMInputs(items)], None, None, ["r"])
    out_h = served(torch.tensor([5]), None, step)
    step = FakeBatch(FakeMode("decode"), [FakeMMInputs(items)], None, None, ["r"])
    assert torch.equal(out_h, stock(torch.tensor([5]), None, step))
    assert calls == []


@pytest.mark.parametrize("cuts", [(18,), (5, 18, 30), (26, 40)])
def test_chunked_prefill_equals_unchunked(models, cuts):
    _, served = models
    ids, items = prompt(("history", "current"))
    full = run(served, ids, items, rid="full")
    bounds = [0, *cuts, len(ids)]
    parts = [run(served, ids, items, rid="chunked", prefix=a, upto=b) for a, b in itertools.pairwise(bounds)]
    torch.testing.assert_close(torch.cat(parts), full, rtol=1e-5, atol=1e-4)
    for li in range(LAYERS):
        torch.testing.assert_close(
            served.cache["chunked"][li][0], served.cache["full"][li][0], rtol=1e-5, atol=1e-4
        )


def test_chunk_rows_cover_exactly_the_history_tokens():
    ids, items = prompt(("history", "current"))
    rows = []
    for a, b in ((0, 18), (18, 30), (30, len(ids))):
        _, batch = extend(ids, items, "r", prefix=a, upto=b)
        plan = gating.history_rows(batch, b - a)
        rows += [a + r for r in plan.rows] if plan else []
    assert rows == list(range(10, 26))


def test_radix_hit_inside_an_image(models):
    """A cached prefix that ends mid-image (another request's K/V) plus the rest equals a cold prefill."""
    _, served = models
    ids, items = prompt(("history", "current"))
    full = run(served, ids, items, rid="cold")
    served.cache["warm"] = [(k[:17], v[:17]) for k, v in served.cache["cold"]]
    rest = run(served, ids, items, rid="warm", prefix=17)
    torch.testing.assert_close(rest, full[17:], rtol=1e-5, atol=1e-4)
    _, batch = extend(ids, items, "warm", prefix=17)
    assert gating.history_rows(batch, len(ids) - 17).rows == list(range(0, 9))


def test_mixed_batch_leaves_no_history_request_unchanged(models):
    stock, served = models
    ids_a, items_a = prompt(("current", "current"), seed=3)
    ids_b, items_b = prompt(("history", "current"), seed=4)
    batch = FakeBatch(
        FakeMode("extend"),
        [FakeMMInputs(items_a), FakeMMInputs(items_b)],
        [0, 0],
        [len(ids_a), len(ids_b)],
        ["a", "b"],
    )
    out = served(torch.tensor(ids_a + ids_b), None, batch)
    alone = run(stock, ids_a, items_a, rid="a")
    assert torch.equal(out[: len(ids_a)], alone)


def test_gate_refuses_ids_that_are_not_the_history_sentinels(models):
    _, served = models
    ids, items = prompt(("history", "current"))
    ids[12] = 3  # a text id where the history image should be
    with pytest.raises(ImageSpanMismatchError, match="radix"):
        run(served, ids, items)


def test_verify_can_be_disabled(models):
    _, served = models
    served._causalcache_hgkv.verify = False
    ids, items = prompt(("history", "current"))
    ids[12] = 3
    run(served, ids, items)  # no check, no error


def test_target_verify_and_no_mm_inputs_compute_nothing():
    ids, items = prompt(("history", "current"))
    _, batch = extend(ids, items, "r", mode="target_verify")
    assert gating.history_rows(batch, len(ids)) is None
    batch.forward_mode, batch.mm_inputs = FakeMode("extend"), None
    assert gating.history_rows(batch, len(ids)) is None


def test_bf16_update_is_the_out_of_place_gated_sum(tmp_path):
    from causalcache_memory.runtime.sglang_server.adapter import ModelShape, load_server_adapter

    path = write_adapter(tmp_path / "a", layers=(0,), num_layers=1, hidden=32, kv=16)
    weights = load_server_adapter(path, ModelShape("qwen2_5_vl", 1, 32, 32, 16))
    server = gating.ServerHGKV(weights, q_size=32, kv_size=16)
    server._params = dict(weights.layers)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(12, 32, generator=gen).to(torch.bfloat16)
    base = torch.randn(12, 64, generator=gen).to(torch.bfloat16)
    qkv, rows = base.clone(), torch.tensor([2, 3, 4, 9])
    server.update(0, x, qkv, rows)
    a_k, b_k, a_v, b_v = weights.layers[0]
    want = base.clone()
    want[rows, 32:48] = base[rows, 32:48] + gating.kv_delta(x[rows], a_k, b_k, weights.scaling).to(
        torch.bfloat16
    )
    want[rows, 48:64] = base[rows, 48:64] + gating.kv_delta(x[rows], a_v, b_v, weights.scaling).to(
        torch.bfloat16
    )
    assert torch.equal(qkv, want) and not torch.equal(qkv, base)


def test_kernel_and_reference_agree_and_the_kernel_really_runs(tmp_path, monkeypatch):
    pytest.importorskip("triton", reason="the fused HGKV kernel needs triton (`pip install triton`)")
    ids, items = prompt(("history", "current"))
    outs, caches = {}, {}
    for mode in KERNEL_MODES:
        select_kernel(monkeypatch, mode)
        torch.manual_seed(0)
        served = Served(num_layers=LAYERS)
        attn = served.model.layers[0].self_attn
        path = write_adapter(
            tmp_path / mode, layers=ADAPTED, num_layers=LAYERS, hidden=attn.hidden_size, kv=attn.kv_size
        )
        served.attach_hgkv(str(path))
        launches: list[int] = []
        real = gating.fused_lowrank_update

        def counted(*a, _real=real, _launches=launches, **k):
            _launches.append(1)
            return _real(*a, **k)

        monkeypatch.setattr(gating, "fused_lowrank_update", counted)
        outs[mode] = run(served, ids, items)
        caches[mode] = served.cache["r"]
        monkeypatch.setattr(gating, "fused_lowrank_update", real)
        assert len(launches) == (len(ADAPTED) if mode == "triton" else 0)  # one launch per adapted layer
    torch.testing.assert_close(outs["triton"], outs["torch"], rtol=1e-5, atol=1e-5)
    for li in range(LAYERS):
        k_t, k_r = caches["triton"][li][0], caches["torch"][li][0]
        assert torch.equal(k_t[:10], k_r[:10])  # rows before the history image: bitwise
        torch.testing.assert_close(k_t, k_r, rtol=1e-5, atol=1e-5)
