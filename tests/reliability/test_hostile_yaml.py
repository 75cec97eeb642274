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


# ---------------------------------------------------------------- issue 27, finding 4
def _flat_values(count: int) -> bytes:
    """A flat flow list of ``count`` plain values (no anchor, no alias)."""
    return b"budget: [" + b",".join([b"1"] * count) + b"]\n"


@pytest.mark.parametrize(
    "data",
    [_flat_values(520_000), b"budget:\n" + b"- a\n" * 260_000],
    ids=["flow list of 520k values", "block list of 260k values"],
)
def test_many_plain_values_are_refused_before_any_node_is_built(tmp_path, monkeypatch, data):
    """A 1 MiB flat file used to be composed whole (14 s CPU, 429 MB) and then blamed on aliases."""
    from causalcache_memory.config import loader

    def no_graph(self):
        raise AssertionError("the node graph was built before the value limit was checked")

    monkeypatch.setattr(loader._BoundedLoader, "get_single_node", no_graph)
    path = tmp_path / "flat.yaml"
    path.write_bytes(data)
    assert len(data) <= loader.MAX_CONFIG_BYTES
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and f"more than {loader.MAX_NODES} values" in message
    assert "alias" not in message


def test_a_config_just_under_the_value_limit_still_loads(tmp_path):
    from causalcache_memory.config import loader

    path = tmp_path / "ok.yaml"
    items = ", ".join(["1"] * (loader.MAX_NODES - 20))
    path.write_text(f"budget: 4\nrender:\n  request: [{items}]\n")
    with pytest.raises(ConfigError, match=r"render\.request"):  # refused by the schema, not by the bound
        load_config(path)


def _load_in_subprocess(target: str, **kwargs) -> subprocess.CompletedProcess:
    code = textwrap.dedent(
        f"""
        from causalcache_memory.config import load_config
        from causalcache_memory.errors import ConfigError
        try:
            load_config({target!r})
        except ConfigError as exc:
            print("refused:", exc)
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, **kwargs)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs POSIX FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    proc = _load_in_subprocess(str(fifo))  # opening a FIFO for reading used to wait for a writer forever
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("refused:") and str(fifo) in proc.stdout and "regular file" in proc.stdout


@pytest.mark.skipif(not __import__("os").path.exists("/dev/stdin"), reason="needs /dev/stdin")
def test_dev_stdin_is_refused_without_blocking():
    import os

    read_end, write_end = os.pipe()  # stdin is a pipe kept open and never written: a read would block
    try:
        proc = _load_in_subprocess("/dev/stdin", stdin=read_end)
    finally:
        os.close(write_end)
        os.close(read_end)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        proc.stdout.startswith("refused:") and "/dev/stdin" in proc.stdout and "regular file" in proc.stdout
    )


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="regular file"):
        load_config(tmp_path)
