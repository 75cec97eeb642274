"""Type-check the library with mypy (CI runs it; ``make typecheck``).

mypy cannot map one package onto several folders, and the library installs ``integrations/`` and
``runtime/`` as ``causalcache_memory.integrations`` and ``causalcache_memory.runtime`` (``package-dir`` in
pyproject.toml). So this script lays out the package as installed, with symlinks in
``build/typecheck/`` (git-ignored, reused so mypy's cache stays warm), runs
``mypy -p causalcache_memory`` there with the repository's ``[tool.mypy]`` settings, and prints every
error with the path of the file in the checkout. Exit status: mypy's.

Usage: ``python tools/typecheck.py [extra mypy arguments]``
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "typecheck"
#: installed name -> folder in the checkout (pyproject.toml's package-dir)
MAPPED = {"runtime": ROOT / "runtime", "integrations": ROOT / "integrations"}


def stage() -> Path:
    """``build/typecheck/causalcache_memory`` with one symlink per entry of the package folder, plus the
    mapped sub-packages; stale links are replaced."""
    package = STAGE / "causalcache_memory"
    package.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in (ROOT / "causalcache_memory").iterdir() if p.name != "__pycache__"}
    wanted.update(MAPPED)
    for link in package.iterdir():
        if link.name not in wanted or not link.is_symlink() or link.resolve() != wanted[link.name].resolve():
            link.unlink()
    for name, target in wanted.items():
        if not (package / name).is_symlink():
            (package / name).symlink_to(target, target_is_directory=target.is_dir())
    return STAGE


def checkout_path(line: str) -> str:
    """A mypy line with the staged path replaced by the file's path in the checkout."""
    for name, target in MAPPED.items():
        prefix = f"causalcache_memory/{name}/"
        if line.startswith(prefix):
            return str(target.relative_to(ROOT) / line[len(prefix) :])
    return line


def main(argv: list[str]) -> int:
    cwd = stage()
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["-p", "causalcache_memory", *argv]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=dict(os.environ))
    for line in (done.stdout + done.stderr).splitlines():
        print(checkout_path(line))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
