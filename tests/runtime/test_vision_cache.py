"""The vision-encoder output cache of TransformersPolicy: same scores, fewer encodings, bounded memory."""

from __future__ import annotations

import logging

import pytest

from causalcache_memory.config.models import PolicyConfig, TransformersPolicyConfig
from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime import transformers_policy
from causalcache_memory.runtime.qwen_encoding import collate
from causalcache_memory.runtime.transformers_policy import TransformersPolicy, policy_from_config
from causalcache_memory.runtime.vision_cache import VisionCache, unsupported_reason

torch = pytest.importorskip("torch")

TARGETS = ["pyautogui.click(x=0.5, y=0.25)", "a longer target response that pads the other rows", "wait"]
FAMILIES = ["qwen2_5_vl", "qwen3_vl"]


def sibling(policy: TransformersPolicy, vision_cache_mb: int) -> TransformersPolicy:
    """A policy on the same model and processor with its own cache setting."""
    return TransformersPolicy(
        policy.model,
        policy.processor,
        family=policy.family,
        name=policy.name,
        max_new_tokens=policy.max_new_tokens,
        vision_cache_mb=vision_cache_mb,
    )


class TowerCounter:
    """Counts vision-tower calls (forward hook on ``model.model.visual``)."""

    def __init__(self, policy: TransformersPolicy) -> None:
        self.calls = 0
        self._handle = policy.model.model.visual.register_forward_hook(self._seen)

    def _seen(self, module, args, output) -> None:
        self.calls += 1

    def close(self) -> None:
        self._handle.remove()


@pytest.fixture
def count_tower():
    counters: list[TowerCounter] = []

    def make(policy: TransformersPolicy) -> TowerCounter:
        counters.append(TowerCounter(policy))
        return counters[-1]

    yield make
    for counter in counters:
        counter.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_scores_with_the_cache_equal_scores_without(policies, make_prompt, family) -> None:
    """Duplicate images in one batch, rows of different lengths (padding), then a second call of hits."""
    off, on = sibling(policies[family], 0), sibling(policies[family], 64)
    assert off.vision_cache is None and on.vision_cache is not None
    # images (event 6's screenshot is the current screen): (5, 6, cur), (1, 5, 6, cur), (cur):
    # 8 occurrences of 3 distinct images, duplicates within a prompt and across prompts
    prompts = [make_prompt((5, 6)), make_prompt((1, 5, 6)), make_prompt(())]
    expected = off.score(prompts, TARGETS)
    assert on.score(prompts, TARGETS) == expected  # bit-identical on CPU float32
    stats = on.vision_cache.stats()
    assert (stats.images_encoded, stats.misses, stats.hits, stats.entries) == (3, 3, 5, 3)
    reordered = [prompts[2], prompts[0], prompts[1]]
    again = on.score(reordered, [TARGETS[2], TARGETS[0], TARGETS[1]])
    assert again == [expected[2], expected[0], expected[1]]
    assert on.vision_cache.stats().images_encoded == 3 and on.vision_cache.stats().hits == 13


@pytest.mark.parametrize("family", FAMILIES)
def test_generation_with_the_cache_equals_generation_without(policies, make_prompt, family) -> None:
    off, on = sibling(policies[family], 0), sibling(policies[family], 64)
    prompt = make_prompt((2, 4))
    first = on.generate(prompt)
    assert on.generate(prompt).response == first.response == off.generate(prompt).response
    assert on.vision_cache.stats().images_encoded == 3 and on.vision_cache.stats().hits == 3


def test_an_image_is_encoded_once_across_score_calls(policy, make_prompt, count_tower) -> None:
    on = sibling(policy, 64)
    tower = count_tower(on)
    on.score([make_prompt((1, 2))], TARGETS[:1])
    assert tower.calls == 1 and on.vision_cache.stats().images_encoded == 3
    on.score([make_prompt((1, 2)), make_prompt((2,))], TARGETS[:2])  # nothing new: no tower call
    assert tower.calls == 1 and on.vision_cache.stats().hits == 5
    on.score([make_prompt((3, 4)), make_prompt((4, 5))], TARGETS[:2])  # 3 new images, one tower call
    assert tower.calls == 2 and on.vision_cache.stats().images_encoded == 6


def test_eviction_keeps_the_cache_within_its_byte_bound(policy, make_prompt) -> None:
    probe = sibling(policy, 64)
    probe.score([make_prompt(())], TARGETS[:1])
    per_image = probe.vision_cache.stats().bytes  # one image (the current screen)
    assert per_image > 0
    on = sibling(policy, 64)
    on.vision_cache = VisionCache(2 * per_image + per_image // 2)  # room for two images
    expected = sibling(policy, 0).score([make_prompt((1, 2, 3))], TARGETS[:1])
    assert on.score([make_prompt((1, 2, 3))], TARGETS[:1]) == expected
    stats = on.vision_cache.stats()
    assert stats.entries == 2 and stats.bytes == 2 * per_image and stats.evictions == 2
    # least recently used went first: the last two stored (event 3, current screen) are hits now
    on.score([make_prompt((3,))], TARGETS[:1])
    assert on.vision_cache.stats().images_encoded == 4
    on.score([make_prompt((1,))], TARGETS[:1])  # event 1 was evicted
    assert on.vision_cache.stats().images_encoded == 5


def test_an_entry_larger_than_the_bound_is_used_and_not_stored(policy, make_prompt) -> None:
    on = sibling(policy, 64)
    on.vision_cache = VisionCache(1)
    expected = sibling(policy, 0).score([make_prompt((6,))], TARGETS[:1])  # event 6's screen is current
    assert on.score([make_prompt((6,))], TARGETS[:1]) == expected
    stats = on.vision_cache.stats()
    assert stats.entries == 0 and stats.bytes == 0 and stats.images_encoded == 1 and stats.hits == 1


def test_cache_off_runs_todays_path(policy, make_prompt, monkeypatch) -> None:
    off, on = sibling(policy, 0), sibling(policy, 8)
    seen = []
    forward = type(off.model).forward

    def spy(model, *args, **kwargs):
        seen.append(sorted(kwargs))
        return forward(model, *args, **kwargs)

    monkeypatch.setattr(type(off.model), "forward", spy)
    off.score([make_prompt((1,))], TARGETS[:1])
    assert "pixel_values" in seen[0] and "mm_encoder_outputs" not in seen[0]
    seen.clear()
    on.score([make_prompt((1,))], TARGETS[:1])
    assert "mm_encoder_outputs" in seen[0] and "pixel_values" not in seen[0]


def test_grad_forwards_bypass_the_cache(policy, make_prompt, count_tower) -> None:
    on = sibling(policy, 64)
    batch = collate(
        [on.encode(make_prompt((1, 2)))], [on.target_ids(TARGETS[0])], pad_token_id=on.pad_token_id
    )
    expected = on.target_logprobs(batch)[0]
    tower = count_tower(on)
    for _ in range(2):
        logprobs = on.target_logprobs(batch, grad=True)[0]
        assert logprobs.requires_grad
        assert torch.equal(logprobs.detach(), expected)
    assert tower.calls == 2  # the tower ran each time: nothing came from the cache
    assert on.vision_cache.stats().hits == 0 and on.vision_cache.stats().images_encoded == 3


@pytest.mark.parametrize("bad", [-1, 1.5, "512", True, None])
def test_bad_vision_cache_mb_is_refused(policy, tiny_dir, bad) -> None:
    with pytest.raises(ConfigError, match=r"vision_cache_mb=.*integer >= 0.*0 to turn the cache off"):
        sibling(policy, bad)
    with pytest.raises(ConfigError, match=r"vision_cache_mb="):
        TransformersPolicy.from_pretrained(tiny_dir, vision_cache_mb=bad)


def test_config_section_carries_the_knob_to_the_policy(tiny_dir) -> None:
    assert TransformersPolicyConfig(model_path="m").vision_cache_mb == 512
    with pytest.raises(ValueError, match="vision_cache_mb"):
        TransformersPolicyConfig(model_path="m", vision_cache_mb=-1)
    for mb, capacity in ((0, None), (3, 3 * 2**20)):
        section = TransformersPolicyConfig(model_path=str(tiny_dir), vision_cache_mb=mb)
        policy = policy_from_config(PolicyConfig(kind="transformers", transformers=section))
        assert (policy.vision_cache and policy.vision_cache.capacity_bytes) == capacity


def test_a_model_without_the_hook_runs_uncached_and_logs_once(
    policy, make_prompt, caplog, monkeypatch
) -> None:
    class OldForward(type(policy.model)):  # forward without mm_encoder_outputs (older transformers)
        def forward(self, input_ids=None, pixel_values=None, **kwargs):
            return super().forward(input_ids=input_ids, pixel_values=pixel_values, **kwargs)

    assert unsupported_reason(policy.model) is None
    monkeypatch.setattr(transformers_policy, "_LOGGED", set())
    model = policy.model
    model.__class__ = OldForward
    try:
        assert "mm_encoder_outputs" in unsupported_reason(model)
        with caplog.at_level(logging.WARNING, logger="causalcache_memory.runtime"):
            first, second = sibling(policy, 64), sibling(policy, 64)
        assert first.vision_cache is None and second.vision_cache is None
        assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
        assert "vision-encoder cache off" in caplog.records[0].getMessage()
        expected = sibling(policy, 0).score([make_prompt((1,))], TARGETS[:1])
        assert first.score([make_prompt((1,))], TARGETS[:1]) == expected
    finally:
        model.__class__ = OldForward.__mro__[1]


# ---------------------------------------------------------------------- CUDA
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_scores_with_the_cache_equal_scores_without(tiny_dirs, make_prompt, family, dtype) -> None:
    on = TransformersPolicy.from_pretrained(tiny_dirs[family], device="cuda", dtype=dtype, max_new_tokens=8)
    off = sibling(on, 0)
    prompts = [make_prompt((5, 6)), make_prompt((1, 5, 6)), make_prompt(())]
    expected = off.score(prompts, TARGETS)
    first, again = on.score(prompts, TARGETS), on.score(prompts, TARGETS)
    assert again == first  # hits give the stored features back unchanged
    assert first == pytest.approx(expected, abs=1e-4 if dtype == "float32" else 2e-2)
    assert on.vision_cache.stats().images_encoded == 3 and on.vision_cache.stats().hits == 13
    assert on.generate(prompts[0]).response == off.generate(prompts[0]).response


class _FakeTowerOutput:
    def __init__(self, pooler_output):  # type: ignore[no-untyped-def]
        self.pooler_output = pooler_output


class _FakeTowerModel:
    """A stand-in for a Qwen-VL model's ``get_image_features``: image features = its rows' column sums."""

    def __init__(self) -> None:
        self._param = torch.zeros(1)
        self.model = self
        self.calls = 0

    def parameters(self):  # type: ignore[no-untyped-def]
        yield self._param

    def get_image_features(self, rows, grid, return_dict=True):  # type: ignore[no-untyped-def]
        import time

        self.calls += 1
        time.sleep(0.001)  # let other threads run while this one is "on the tower"
        out, start = [], 0
        for t, h, w in grid.tolist():
            n = t * h * w
            out.append(rows[start : start + n].sum(dim=0, keepdim=True).repeat(2, 1))
            start += n
        return _FakeTowerOutput(tuple(out))


def test_threads_sharing_one_cache_keep_it_consistent() -> None:
    import threading

    images = [torch.full((4, 3), float(i)) for i in range(12)]  # 12 distinct images of 4 rows each
    entry_bytes = 2 * 3 * 4  # (2, 3) float32 features per image
    cache = VisionCache(capacity_bytes=5 * entry_bytes)  # holds 5 of the 12: evictions under contention
    model = _FakeTowerModel()
    errors: list[BaseException] = []
    lookups = 0
    count = threading.Lock()

    def work(seed: int) -> None:
        nonlocal lookups
        rng = torch.Generator().manual_seed(seed)
        try:
            for _ in range(60):
                pick = torch.randint(0, len(images), (3,), generator=rng).tolist()
                rows = torch.cat([images[i] for i in pick])
                out = cache.image_features(model, rows, torch.tensor([[1, 2, 2]] * len(pick)))
                for i, feats in zip(pick, out.pooler_output, strict=True):
                    torch.testing.assert_close(feats, images[i].sum(dim=0, keepdim=True).repeat(2, 1))
                with count:
                    lookups += len(pick)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    stats = cache.stats()
    assert stats.hits + stats.misses == lookups == 8 * 60 * 3
    assert stats.bytes == stats.entries * entry_bytes <= cache.capacity_bytes
    assert stats.images_encoded == stats.misses and stats.evictions > 0
