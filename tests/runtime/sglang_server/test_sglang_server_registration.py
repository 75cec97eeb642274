"""The SGLang-bound modules, imported against stand-in ``sglang`` modules, register like SGLang does."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from adapter_files import write_adapter  # noqa: E402
from sglang_fakes import FakeStockModel  # noqa: E402

from causalcache_memory.runtime.sglang_server import MODEL_PACKAGE, PROCESSOR_PACKAGE  # noqa: E402
from causalcache_memory.runtime.sglang_server.plugin import ADAPTER_ENV  # noqa: E402

NAMES = ("Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration")


@pytest.fixture
def fake_sglang(monkeypatch):
    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    for name in (
        "sglang",
        "sglang.srt",
        "sglang.srt.managers",
        "sglang.srt.models",
        "sglang.srt.multimodal",
        "sglang.srt.multimodal.processors",
    ):
        module(name)
    module(
        "sglang.srt.managers.schedule_batch", MM_PAD_SHIFT_VALUE=1_000_000, _MM_WIDE_PAD_MASK=(1 << 62) - 1
    )
    stock = {n: type(n, (FakeStockModel,), {}) for n in NAMES}
    module("sglang.srt.models.qwen2_5_vl", Qwen2_5_VLForConditionalGeneration=stock[NAMES[0]])
    module("sglang.srt.models.qwen3_vl", Qwen3VLForConditionalGeneration=stock[NAMES[1]])
    module(
        "sglang.srt.multimodal.processors.qwen_vl", QwenVLImageProcessor=type("QwenVLImageProcessor", (), {})
    )
    for pkg in (MODEL_PACKAGE, PROCESSOR_PACKAGE):
        for name in [m for m in sys.modules if m.startswith(pkg + ".")]:
            monkeypatch.delitem(sys.modules, name)
    return stock


def _entry_classes(package: str) -> dict[str, type]:
    """What ``sglang.srt.models.registry.import_model_classes`` collects (by class ``__name__``)."""
    found = {}
    for _, name, ispkg in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."):
        entry = getattr(importlib.import_module(name), "EntryClass", None) if not ispkg else None
        for cls in entry if isinstance(entry, list) else [entry] if entry else []:
            found[cls.__name__] = cls
    return found


def test_model_classes_are_named_like_sglangs_and_load_the_adapter(fake_sglang, tmp_path, monkeypatch):
    classes = _entry_classes(MODEL_PACKAGE)
    assert sorted(classes) == sorted(NAMES)
    cls = classes["Qwen2_5_VLForConditionalGeneration"]
    assert issubclass(cls, fake_sglang["Qwen2_5_VLForConditionalGeneration"])
    model = cls(num_layers=4)
    attn = model.model.layers[0].self_attn
    adapter = write_adapter(
        tmp_path / "a", layers=(2, 3), num_layers=4, hidden=attn.hidden_size, kv=attn.kv_size
    )
    monkeypatch.setenv(ADAPTER_ENV, str(adapter))
    model.load_weights([])
    assert model.loaded and model._causalcache_hgkv.layers == (2, 3)


def test_model_refuses_a_mismatched_adapter_at_load(fake_sglang, tmp_path, monkeypatch):
    from causalcache_memory.errors import ConfigError

    model = _entry_classes(MODEL_PACKAGE)["Qwen3VLForConditionalGeneration"](
        num_layers=4, model_type="qwen3_vl"
    )
    attn = model.model.layers[0].self_attn
    adapter = write_adapter(
        tmp_path / "a", layers=(2, 3), num_layers=4, hidden=attn.hidden_size, kv=attn.kv_size
    )
    monkeypatch.setenv(ADAPTER_ENV, str(adapter))  # written for qwen2_5_vl
    with pytest.raises(ConfigError, match="model_type"):
        model.load_weights([])


def test_processor_replaces_the_qwen_vl_processor_for_both_architectures(fake_sglang):
    module = importlib.import_module(PROCESSOR_PACKAGE + ".qwen_vl")
    base = sys.modules["sglang.srt.multimodal.processors.qwen_vl"].QwenVLImageProcessor
    classes = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]
    assert len(classes) == 1 and issubclass(classes[0], base)
    assert sorted(m.__name__ for m in classes[0].models) == sorted(NAMES)
