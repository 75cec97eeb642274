"""Issue 27, finding 10: the docs' examples run and the example config says what it holds.

The runnable examples of docs/RUNTIMES.md and docs/HGKV.md called ``make_allocation`` with a removed keyword
and crashed; examples/causalcache.yaml set ``min_gain: 0.0`` while calling itself the config with the
defaults (the default is ``auto``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from doc_snippets import ROOT, call_problems, snippets

EXAMPLE = ROOT / "examples" / "causalcache.yaml"


@pytest.mark.parametrize("doc", ["docs/RUNTIMES.md", "docs/HGKV.md"])
def test_the_documented_make_allocation_calls_bind(doc):
    blocks = [s for s in snippets(ROOT / doc) if "make_allocation(" in s.code]
    assert blocks
    assert [p for s in blocks for p in call_problems(s)] == []


def _leaves(data: object, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    if isinstance(data, dict):
        return {k: v for key, value in data.items() for k, v in _leaves(value, (*prefix, str(key))).items()}
    return {prefix: data}


def test_the_full_example_config_shows_every_key_at_its_default():
    """Only policy.kind differs (simulated, so the example runs); the runtime sections are commented out."""
    from causalcache_memory.config import load_config
    from causalcache_memory.config.models import CausalCacheConfig

    defaults = _leaves(CausalCacheConfig().model_dump(mode="json"))
    loaded = _leaves(load_config(EXAMPLE).model_dump(mode="json"))
    paths = {("archive", "url"), ("checkpointer", "path")}  # relative paths resolve against the file
    differ = {k for k, v in defaults.items() if loaded[k] != v and k not in paths}
    assert differ == {("policy", "kind")}
    assert all(str(loaded[k]) == str((EXAMPLE.parent / str(defaults[k])).resolve()) for k in paths)
    written = set(_leaves(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))))
    assert set(defaults) - written == {("policy", "transformers"), ("policy", "sglang"), ("policy", "openai")}
    assert "every key at its default value" in EXAMPLE.read_text(encoding="utf-8")


def test_the_snippet_checker_catches_a_renamed_keyword(tmp_path: Path):
    """The static check is what makes a non-runnable snippet fail on a renamed keyword."""
    from doc_snippets import Snippet

    code = 'from causalcache_memory.allocation.base import make_allocation\nmake_allocation((), t=1, budget=0, allocator="x", nope=1)\n'
    problems = call_problems(Snippet(ROOT / "docs" / "HGKV.md", 1, code, "example"))
    assert len(problems) == 1 and "nope" in problems[0]
