"""A throw-away copy of the working tree that imports as the installed package would.

``integrations/`` and ``runtime/`` are installed as ``causalcache_memory.integrations`` and
``causalcache_memory.runtime`` (``package-dir`` in pyproject.toml). A copy run with ``PYTHONPATH=<copy>``
gets the same module names through two symlinks inside the copy, so a test run there imports the copy's
files (and any bug planted or mutant written into them), never the checkout's: Python's path finder comes
before the editable install's finder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"causalcache_memory/runtime": "runtime", "causalcache_memory/integrations": "integrations"}


# skipped when the tree is not a git checkout (a copy of the working tree on another machine)
_JUNK_DIRS = {".git", "__pycache__", "build", "dist", ".venv", ".ci-venv", ".whl", "mutation-out", "runs"}
_JUNK_DIRS |= {".pytest_cache", ".ruff_cache", ".benchmarks", ".causalcache", ".gl"}


def tracked_files(root: Path = ROOT) -> list[str]:
    """Files of the working tree git knows or would add (tracked + untracked, not ignored); without git,
    every file outside build, cache and virtual-environment folders."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            check=True,
            capture_output=True,
        ).stdout
        return [p for p in out.decode().split("\0") if p and (root / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in _JUNK_DIRS and not d.endswith(".egg-info")]
            rel = Path(folder).relative_to(root)
            files += [str(rel / n) for n in names if not n.endswith((".pyc", ".sqlite"))]
        return files


def stage(dest: Path, root: Path = ROOT) -> Path:
    """Copy the working tree to ``dest`` (created) and link the mapped packages; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel in tracked_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    for link, real in MAPPED.items():
        path = dest / link
        if not path.exists():
            path.symlink_to(Path(os.path.relpath(dest / real, path.parent)), target_is_directory=True)
    return dest


def env_for(dest: Path) -> dict[str, str]:
    """Environment that imports ``causalcache_memory`` and the lab (``causalcache_lab``, from ``lab/``) from
    ``dest`` (no bytecode written there)."""
    env = dict(os.environ)
    paths = [str(dest), str(dest / "lab")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # one core per test run
        env.setdefault(var, "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("CUDA_VISIBLE_DEVICES", "")  # these runs are CPU runs, many at once: no GPU contexts
    return env
