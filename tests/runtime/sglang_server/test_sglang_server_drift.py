"""Drift guard: every SGLang name the serving package relies on, read from the pinned wheel with ast.

The wheel check is opt-in (marker ``sglang_drift``; set ``CAUSALCACHE_SGLANG_DRIFT=1``): it runs
``pip download --no-deps sglang==0.5.23`` (about 10 MB, no install) or reads an unpacked copy named by
``CAUSALCACHE_SGLANG_SRC`` (the directory holding ``sglang/``). The checker itself is tested always.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from causalcache_memory.runtime.sglang_server import SGLANG_VERSION
from causalcache_memory.runtime.sglang_server.sglang_names import REQUIRED, Required, check_source


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_checker_reports_missing_and_changed_names(tmp_path):
    _write(
        tmp_path,
        "m.py",
        """
        LIMIT = 3
        class A:
            x: int
            models = []
            def __init__(self):
                self.q_size, self.kv_size = 1, 2
            def forward(self, ids, forward_batch):
                self.proj(ids)
        """,
    )
    ok = (
        Required("m.py", "LIMIT", "constant"),
        Required("m.py", "A", "fields", ("x",)),
        Required("m.py", "A", "class_attrs", ("models",)),
        Required("m.py", "A.__init__", "assigns", ("q_size", "kv_size")),
        Required("m.py", "A.forward", "calls", ("proj",)),
        Required("m.py", "A.forward", "function", ("self", "ids")),
    )
    assert check_source(tmp_path, ok) == []
    bad = (
        Required("m.py", "A.forward", "function", ("self", "input_ids")),
        Required("m.py", "A.forward", "calls", ("qkv_proj",)),
        Required("m.py", "A", "fields", ("y",)),
        Required("m.py", "B", "class"),
        Required("gone.py", "C", "class"),
        Required("m.py", "OTHER", "constant"),
    )
    problems = check_source(tmp_path, bad)
    assert len(problems) == 6
    assert "do not start with ['self', 'input_ids']" in problems[0]
    assert "file missing" in problems[4]


def _sglang_source(tmp_path_factory) -> Path:
    given = os.environ.get("CAUSALCACHE_SGLANG_SRC")
    if given:
        return Path(given) / "sglang"
    out = tmp_path_factory.mktemp("sglang-wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            f"sglang=={SGLANG_VERSION}",
            "-d",
            str(out),
        ],
        check=True,
        timeout=600,
    )
    wheel = next(out.glob("sglang-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(out, [n for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")])
    return out / "sglang"


@pytest.mark.sglang_drift
@pytest.mark.skipif(
    os.environ.get("CAUSALCACHE_SGLANG_DRIFT") != "1", reason="opt-in: set CAUSALCACHE_SGLANG_DRIFT=1"
)
def test_pinned_sglang_wheel_still_has_every_name(tmp_path_factory):
    root = _sglang_source(tmp_path_factory)
    assert (root / "version.py").is_file()
    assert check_source(root) == [], f"{len(REQUIRED)} names checked"
