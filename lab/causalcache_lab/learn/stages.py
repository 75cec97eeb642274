"""Resumable stages: each writes into a work folder and is published atomically with a manifest.

``<root>/<stage>/manifest.json`` records the stage's inputs (and their hash), its result and its time.
:meth:`Stages.run` skips a stage whose manifest has the same inputs hash; otherwise it works in
``<root>/.<stage>.partial/`` (kept between interrupted runs with the same inputs, so a stage such as
labelling can resume inside it), writes the manifest there and renames the folder into place. A stage's
inputs include the hashes of the stages it reads, so changing an early input reruns everything after it.
A reader never sees a half-written stage folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causalcache_memory._jsonl import write_json

__all__ = ["StageResult", "Stages", "file_digest", "inputs_hash"]

logger = logging.getLogger("causalcache_lab.learn.stages")

MANIFEST = "manifest.json"
_INPUTS = "inputs.json"


def inputs_hash(inputs: Mapping[str, Any]) -> str:
    """sha256 (16 hex digits) of the canonical JSON of ``inputs``."""
    blob = json.dumps(inputs, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    """sha256 (16 hex digits) of a file's bytes (inputs that are files are hashed by content)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class StageResult:
    """A finished stage: its folder, manifest and whether this run skipped it."""

    name: str
    path: Path
    manifest: dict[str, Any]
    skipped: bool

    @property
    def result(self) -> dict[str, Any]:
        return self.manifest["result"]

    @property
    def hash(self) -> str:
        return self.manifest["inputs_hash"]


class Stages:
    """The stage folders under ``root`` (see the module doc)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def manifest(self, name: str) -> dict[str, Any] | None:
        path = self.root / name / MANIFEST
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def run(
        self, name: str, inputs: Mapping[str, Any], work: Callable[[Path], dict[str, Any]]
    ) -> StageResult:
        """Run ``work(folder) -> result`` unless a manifest with these inputs exists (module doc)."""
        digest = inputs_hash(inputs)
        final = self.root / name
        old = self.manifest(name)
        if old is not None and old.get("inputs_hash") == digest:
            logger.info("stage %s: up to date (inputs %s), skipped", name, digest)
            return StageResult(name, final, old, True)
        partial = self.root / f".{name}.partial"
        if partial.exists() and _partial_hash(partial) != digest:
            shutil.rmtree(partial)  # left by a run with other inputs: not resumable
        partial.mkdir(parents=True, exist_ok=True)
        write_json(partial / _INPUTS, {"inputs_hash": digest}, sort_keys=True)
        logger.info("stage %s: running (inputs %s)", name, digest)
        start = time.perf_counter()
        result = work(partial)
        manifest = {
            "stage": name,
            "inputs_hash": digest,
            "inputs": dict(inputs),
            "result": result,
            "seconds": round(time.perf_counter() - start, 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_json(partial / MANIFEST, manifest, sort_keys=True)
        (partial / _INPUTS).unlink()
        self._publish(partial, final)
        return StageResult(name, final, manifest, False)

    def _publish(self, partial: Path, final: Path) -> None:
        stale = final.with_name(f".{final.name}.stale")
        if stale.exists():
            shutil.rmtree(stale)
        if final.exists():
            os.replace(final, stale)
        os.replace(partial, final)
        if stale.exists():
            shutil.rmtree(stale)


def _partial_hash(partial: Path) -> str | None:
    try:
        return json.loads((partial / _INPUTS).read_text(encoding="utf-8")).get("inputs_hash")
    except (OSError, ValueError):
        return None
