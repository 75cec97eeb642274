"""An imported dataset directory: what ``causalcache data import|stats|mine`` read and write.

Layout of ``DIR``::

    DIR/dataset.json        manifest: format, source, options, loader report, mining tolerance
    DIR/trajectories.jsonl  one Trajectory per line (causalcache_lab.data.trajectory)
    DIR/archive/            content-addressed screenshot archive (original bytes, de-duplicated)

An import stages its screenshots in ``DIR/.import-staging`` and copies them into ``DIR/archive`` only
when the whole load succeeded: a failed import leaves nothing behind (a ``DIR`` it created is removed).

Recipes point at ``DIR/trajectories.jsonl`` and ``DIR/archive`` (docs/DATA.md, "Pipeline").
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from causalcache_lab.data.trajectory import Trajectory, load_trajectories, save_trajectories
from causalcache_memory.actions.equivalence import Tolerance
from causalcache_memory.errors import ConfigError

__all__ = [
    "DATASET_FORMAT_VERSION",
    "Dataset",
    "dataset_stats",
    "import_dataset",
    "mine_dataset",
    "mining_tolerance",
    "open_dataset",
]

DATASET_FORMAT_VERSION = 1
MANIFEST, TRAJECTORIES, ARCHIVE = "dataset.json", "trajectories.jsonl", "archive"
#: where a running import stages its screenshots (removed when it ends, successful or not)
STAGING = ".import-staging"


@dataclass
class Dataset:
    root: Path
    manifest: dict[str, Any]
    trajectories: list[Trajectory]

    @property
    def archive_path(self) -> Path:
        return self.root / ARCHIVE

    def archive(self) -> Any:
        from causalcache_memory.archive.factory import open_archive

        return open_archive(self.archive_path)


def mining_tolerance(manifest: dict[str, Any], radius: float | None = None) -> Tolerance:
    """Mining equivalence: text and keys exact; pointers within ``radius`` (else the manifest's)."""
    base = Tolerance(text="exact")
    value = radius if radius is not None else manifest.get("mining", {}).get("radius")
    if value is None:
        return base
    return replace(base, desktop_radius=float(value), mobile_radius=float(value))


def import_dataset(
    fmt: str,
    src: str | Path,
    out: str | Path,
    *,
    radius: float | None = None,
    force: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Load ``src`` in format ``fmt`` into the dataset directory ``out``; returns the manifest."""
    from causalcache_lab.data.loaders import load, lookup_loader
    from causalcache_memory import __version__
    from causalcache_memory.archive.factory import open_archive

    src, out = Path(src), Path(out)
    if not src.exists():
        raise ConfigError(f"source {src} does not exist")
    if (out / TRAJECTORIES).exists() and not force:
        raise ConfigError(f"{out / TRAJECTORIES} already exists; choose a new --out or pass --force")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    staging = out / STAGING
    shutil.rmtree(staging, ignore_errors=True)  # left by an import that was killed
    try:
        result = load(fmt, src, open_archive(staging), **options)
        _commit_screens(open_archive(staging), open_archive(out / ARCHIVE))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not any(out.iterdir()):
            out.rmdir()
        raise
    shutil.rmtree(staging, ignore_errors=True)
    save_trajectories(out / TRAJECTORIES, result.trajectories)
    manifest = {
        "version": DATASET_FORMAT_VERSION,
        "format": fmt,
        "source": str(src.resolve()),
        "options": {k: str(v) for k, v in options.items() if v is not None},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "library_version": __version__,
        "platforms": dict(Counter(t.platform for t in result.trajectories)),
        "report": result.report.to_dict(),
        "mining": {"radius": radius if radius is not None else lookup_loader(fmt).radius},
    }
    _write_manifest(out, manifest)
    return manifest


def _commit_screens(staged: Any, final: Any) -> None:
    """Copy every screenshot of a finished load from the staging archive into the dataset's archive.

    A load writes into ``DIR/.import-staging`` first; only a load that succeeded reaches the dataset's
    archive, so a failed import leaves no blob behind (and never touches blobs already stored there,
    which other trajectories of a re-import may reference). The bytes were validated when staged.
    """
    for sha in staged.iter_hashes():
        raw, stored = final.check_image(staged.get_bytes(sha), decode=False)
        final.store_image(raw, stored)


def _write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def open_dataset(root: str | Path) -> Dataset:
    """Read an imported dataset directory."""
    root = Path(root)
    path = root / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{root} is not an imported dataset (no {MANIFEST}); run causalcache data import")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if manifest.get("version") != DATASET_FORMAT_VERSION:
        raise ConfigError(
            f"{path}: dataset version {manifest.get('version')!r} is not {DATASET_FORMAT_VERSION}"
        )
    return Dataset(root, manifest, list(load_trajectories(root / TRAJECTORIES)))


def mine_dataset(
    root: str | Path,
    out: str | Path,
    *,
    budgets: tuple[int, ...] = (1, 2, 4),
    held_out_budgets: tuple[int, ...] = (8,),
    radius: float | None = None,
    dev: float = 0.15,
    test: float = 0.15,
    salt: str = "",
) -> Any:
    """Mine replacement groups of an imported dataset into ``out`` (JSONL); returns the MiningReport.

    The mining settings and yield are recorded in the manifest so ``data stats`` can report them.
    """
    from causalcache_lab.hgkv.groups import mine_groups, save_groups

    data = open_dataset(root)
    tolerance = mining_tolerance(data.manifest, radius)
    groups, report = mine_groups(
        data.trajectories,
        budgets=budgets,
        held_out_budgets=held_out_budgets,
        tolerance=tolerance,
        dev=dev,
        test=test,
        salt=salt,
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_groups(out, groups, {t.trajectory_id: t for t in data.trajectories})
    data.manifest["mining"] = {
        "radius": radius if radius is not None else data.manifest.get("mining", {}).get("radius"),
        "tolerance": {
            "desktop_radius": tolerance.desktop_radius,
            "mobile_radius": tolerance.mobile_radius,
            "text": tolerance.text,
        },
        "budgets": list(budgets),
        "held_out_budgets": list(held_out_budgets),
        "dev_fraction": dev,
        "test_fraction": test,
        "split_salt": salt,
        "groups": str(out.resolve()),
        "report": report.to_dict(),
    }
    _write_manifest(data.root, data.manifest)
    return report


def dataset_stats(root: str | Path, groups: str | Path | None = None) -> dict[str, Any]:
    """Tasks, steps, successes, split sizes, unparsed actions and groups per ``B`` of a dataset."""
    from causalcache_lab.data.split import trajectory_split
    from causalcache_lab.hgkv.groups import load_groups

    data = open_dataset(root)
    trajs = data.trajectories
    mining = data.manifest.get("mining", {})
    dev, test, salt = (
        mining.get("dev_fraction", 0.15),
        mining.get("test_fraction", 0.15),
        mining.get("split_salt", ""),
    )
    successful = [t for t in trajs if t.success]
    stats: dict[str, Any] = {
        "format": data.manifest.get("format"),
        "tasks": len(trajs),
        "steps": sum(len(t) for t in trajs),
        "successes": len(successful),
        "unparsed_actions": sum(not s.parsed for t in trajs for s in t.steps),
        "steps_with_app": sum(s.app is not None for t in trajs for s in t.steps),
        "missing_first_screen": sum(bool(t.steps) and t.steps[0].screenshot_before is None for t in trajs),
        "missing_last_screen": sum(bool(t.steps) and t.steps[-1].screenshot_after is None for t in trajs),
        "splits": dict(
            Counter(trajectory_split(t.trajectory_id, dev=dev, test=test, salt=salt) for t in successful)
        ),
        "task_splits": dict(Counter(str(t.metadata["split"]) for t in trajs if "split" in t.metadata)),
        "platforms": dict(Counter(t.platform for t in trajs)),
    }
    path = Path(groups) if groups else (Path(mining["groups"]) if mining.get("groups") else None)
    if path is not None and path.is_file():
        gs = list(load_groups(path))
        stats["groups_file"] = str(path)
        stats["groups_per_budget"] = {str(b): n for b, n in sorted(Counter(g.budget for g in gs).items())}
        stats["held_out_budgets"] = sorted({g.budget for g in gs if g.held_out})
        stats["groups_per_split"] = dict(Counter(g.split for g in gs if not g.held_out))
    return stats
