"""Finding 11: config loading is bounded in time and memory and names the file for every error."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from causalcache_memory.config import load_config, parse_config
from causalcache_memory.errors import ConfigError


def _alias_bomb(levels: int, width: int = 10, key: str = "budget") -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    lines.append(f"{key}: *l{levels - 1}")
    return "\n".join(lines) + "\n"


HOSTILE: dict[str, tuple[bytes, str]] = {
    "alias bomb": (_alias_bomb(6).encode(), "expands to more than"),
    "self-referential alias": (b"budget: &a [*a]\n", "refers to itself"),
    "5000-digit integer": (b"budget: " + b"9" * 5000 + b"\n", "integer of 5000 characters"),
    "deep flow nesting": (b"budget: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nesting deeper"),
    "deep block nesting": ("".join("  " * i + f"k{i}:\n" for i in range(100)).encode(), "nesting deeper"),
    "invalid UTF-8": (b'budget: 4\nrender:\n  request: "\xff\xfe"\n', "not valid UTF-8 at byte"),
    "duplicate key": (b"budget: 4\nbudget: 64\n", "duplicate key 'budget' at line 2"),
    "duplicate nested key": (b"allocation:\n  seed: 1\n  seed: 2\n", "duplicate key 'seed'"),
    "infinite timeout": (b"allocation:\n  selector:\n    timeout_ms: .inf\n", "finite number"),
    "NaN timeout": (b"allocation:\n  selector:\n    timeout_ms: .nan\n", "finite number"),
    "bool for budget": (b"budget: true\n", "budget"),
    "bool for beam width": (b"allocation:\n  selector:\n    beam_width: true\n", "boolean"),
    "bool for seed": (b"allocation:\n  seed: false\n", "boolean"),
    "bool for max_pixels": (b"archive:\n  max_pixels: true\n", "boolean"),
    "python tag": (b"budget: !!python/object/apply:os.system ['true']\n", "invalid YAML"),
    "oversized file": (b"# " + b"x" * (1 << 20) + b"\n", "larger than"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_config_is_a_config_error_naming_the_file(tmp_path, case):
    data, fragment = HOSTILE[case]
    path = tmp_path / "hostile.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and fragment in message
    assert len(message) < 2000


def test_alias_bomb_under_any_key_finishes(tmp_path):
    """A 10**9-value alias bomb used to be json.dumps-ed into the error message (minutes, GiB)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb(9, key="render"))
    code = textwrap.dedent(
        f"""
        from causalcache_memory.config import load_config
        from causalcache_memory.errors import ConfigError
        try:
            load_config({str(path)!r})
        except ConfigError as exc:
            print("refused", len(str(exc)))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("refused")


def test_small_anchors_still_work(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("defaults: &d\n  seed: 3\nallocation:\n  <<: *d\n  allocator: recent\n")
    with pytest.raises(ConfigError, match="defaults: unknown key"):
        load_config(path)  # the anchor host is an unknown key; the merge itself is fine
    path.write_text("allocation: &a\n  seed: 3\n  allocator: recent\n")
    assert load_config(path).allocation.seed == 3


def test_bool_refused_for_numbers_in_code_too():
    with pytest.raises(ConfigError, match="beam_width"):
        parse_config({"allocation": {"selector": {"beam_width": True}}})
    assert parse_config({"two_pass": False}).two_pass is False  # a real bool field takes a bool
