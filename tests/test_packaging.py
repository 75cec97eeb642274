"""Packaging invariants: namespace mapping, explicit package list, light core import."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "peft", "langgraph", "langchain", "onnxruntime", "sglang", "matplotlib")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed() -> None:
    tool = _pyproject()["tool"]["setuptools"]
    listed = set(tool["packages"])
    mapping = tool["package-dir"]
    found = set()
    for package, folder in mapping.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            name = ".".join([package, *rel.parts]) if rel.parts else package
            if not any(
                name.startswith(other + ".") or name == other
                for other in mapping
                if other != package and other.startswith(package + ".")
            ):
                found.add(name)
    missing = sorted(found - listed)
    assert not missing, f"add these packages to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_lab_package_folder_is_listed() -> None:
    """The lab is its own distribution (``lab/pyproject.toml``) with its own package list."""
    lab = tomllib.loads((ROOT / "lab" / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(lab["tool"]["setuptools"]["packages"])
    base = ROOT / "lab" / "causalcache_lab"
    found = {
        ".".join(["causalcache_lab", *i.parent.relative_to(base).parts]) for i in base.rglob("__init__.py")
    }
    assert found == listed, (
        f"lab/pyproject.toml packages: missing {sorted(found - listed)}, extra {sorted(listed - found)}"
    )
    commands = lab["project"]["entry-points"]["causalcache.commands"]
    assert all((ROOT / "lab" / (module.replace(".", "/") + ".py")).is_file() for module in commands.values())


def test_no_generic_top_level_modules_installed() -> None:
    mapping = _pyproject()["tool"]["setuptools"]["package-dir"]
    assert all(name.startswith("causalcache_memory") for name in mapping)


def test_runtime_and_integrations_import_under_the_namespace() -> None:
    import causalcache_memory.integrations as integrations
    import causalcache_memory.runtime as runtime

    assert Path(runtime.__file__).parent == ROOT / "runtime"
    assert Path(integrations.__file__).parent == ROOT / "integrations"


def test_core_import_is_light() -> None:
    code = (
        "import sys, causalcache_memory, causalcache_memory.config, causalcache_memory.controller, "
        "causalcache_memory.factory, causalcache_memory.cli.main;"
        "causalcache_memory.cli.main.build_parser();"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"core import pulled heavy modules: {out}"


def _source_copy(dest: Path) -> Path:
    """What the wheel is built from, copied out of the checkout: a build writes ``build/`` and
    ``*.egg-info`` next to ``pyproject.toml``, and a test must not write into the checkout."""
    import shutil

    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in {"causalcache_memory", *_pyproject()["tool"]["setuptools"]["package-dir"].values()}:
        shutil.copytree(ROOT / folder, dest / folder, ignore=junk)
    return dest


def _checkout_state() -> set[str]:
    return {p.name for p in ROOT.iterdir()}


def test_wheel_ships_namespaced_packages_and_the_bundled_selector(tmp_path) -> None:
    """Build a wheel (from a copy of the sources), install it into an empty target and load the bundled
    scorer from there."""
    import zipfile

    before = _checkout_state()
    source = _source_copy(tmp_path / "src")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    assert _checkout_state() == before, "building the wheel wrote into the checkout"
    wheel = next(tmp_path.glob("causalcache_memory-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "causalcache_memory/assets/selector/selector.onnx" in names
    assert "causalcache_memory/runtime/sglang_client.py" in names
    assert "causalcache_memory/integrations/langgraph/memory.py" in names
    assert not [n for n in names if n.split("/")[0] in ("runtime", "integrations")]
    assert not [n for n in names if n.startswith(("causalcache_lab/", "causalcache_memory/lab/"))]
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    code = (
        "import causalcache_memory, pathlib;"
        "from causalcache_memory.selector.allocator import SelectorAllocator, bundled_model_path;"
        "p = SelectorAllocator(); print(causalcache_memory.__file__); print(bundled_model_path())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split()
    assert lines[0].startswith(str(target)) and lines[1].startswith(str(target))
