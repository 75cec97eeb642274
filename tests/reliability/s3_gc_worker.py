"""One process of the S3 GC race campaign (``s3_gc_campaign.py``); the endpoint comes from the AWS variables.

Usage: ``python s3_gc_worker.py ROLE URL FOLDER INDEX GENERATION GRACE``

* ``writer``: forever ``put`` screenshot ``i`` (ids shared by all writers, so puts of one object race),
  wait a random part of the grace, ``retain`` it (``require_stored=True``) under episode
  ``w<INDEX>-g<GENERATION>``, then append ``"<i> <sha>"`` to ``FOLDER/w<INDEX>-g<GENERATION>.log``: a line
  exists only for an object whose ``put`` and ``retain`` both returned. A ``retain`` refused with
  ``BlobNotFoundError`` (collected meanwhile: on a loaded machine ``retain`` can come later than the
  grace) appends ``refused``.
* ``retainer``: forever retain an object some writer acknowledged earlier (possibly of a released episode,
  so possibly being collected right now) under ``r<INDEX>-g<GENERATION>`` (``require_stored=True``); log
  ``"<i> <sha>"`` when ``retain`` returned, ``refused`` on ``BlobNotFoundError``.
* ``releaser``: forever release every episode listed in ``FOLDER/release.txt`` (idempotent).
* ``collector``: forever ``gc(grace_seconds=GRACE)``; append each run's deleted count to ``FOLDER/gc.log``.

The campaign kills writers, retainers and releasers with SIGKILL at random moments.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from reliability_helpers import screenshot

from causalcache_memory.archive import open_archive
from causalcache_memory.errors import BlobNotFoundError

#: screenshot ids the writers share
IDS = 300


def acknowledged(folder: Path, pattern: str) -> list[tuple[int, str]]:
    """``(id, sha)`` of every complete line of the logs matching ``pattern`` (a torn last line is skipped)."""
    out = []
    for path in sorted(folder.glob(pattern)):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and len(parts[1]) == 64:
                out.append((int(parts[0]), parts[1]))
    return out


def writer(archive, folder: Path, index: int, generation: int, grace: float) -> None:
    rng = random.Random(1000 * index + generation)
    with open(folder / f"w{index}-g{generation}.log", "a", encoding="utf-8") as log:
        while True:
            i = rng.randrange(IDS)
            sha = archive.put(screenshot(i, size=(40 + i % 9, 24))).sha256
            time.sleep(rng.uniform(0, grace / 2))
            try:
                archive.retain(f"w{index}-g{generation}", [sha], require_stored=True)
            except BlobNotFoundError:
                log.write(f"refused {sha}\n")
            else:
                log.write(f"{i} {sha}\n")
            log.flush()


def retainer(archive, folder: Path, index: int, generation: int) -> None:
    rng = random.Random(7 + generation)
    with open(folder / f"r{index}-g{generation}.log", "a", encoding="utf-8") as log:
        while True:
            acks = acknowledged(folder, "w*-g*.log")
            if not acks:
                time.sleep(0.05)
                continue
            i, sha = acks[rng.randrange(len(acks))]
            try:
                archive.retain(f"r{index}-g{generation}", [sha], require_stored=True)
                ok = True
            except BlobNotFoundError:
                ok = False
            log.write(f"{i} {sha}\n" if ok else f"refused {sha}\n")
            log.flush()
            time.sleep(rng.uniform(0, 0.05))


def releaser(archive, folder: Path) -> None:
    done: set[str] = set()
    while True:
        path = folder / "release.txt"
        names = path.read_text().split() if path.exists() else []
        for name in names:
            if name not in done:
                archive.release(name)
                done.add(name)
        time.sleep(0.05)


def collector(archive, folder: Path, grace: float) -> None:
    with open(folder / "gc.log", "a", encoding="utf-8") as log:
        while True:
            log.write(f"{archive.gc(grace_seconds=grace).deleted}\n")
            log.flush()
            time.sleep(0.02)


def main() -> None:
    role, url, folder_arg, index, generation, grace = sys.argv[1:7]
    archive, folder = open_archive(url), Path(folder_arg)
    if role == "writer":
        writer(archive, folder, int(index), int(generation), float(grace))
    elif role == "retainer":
        retainer(archive, folder, int(index), int(generation))
    elif role == "releaser":
        releaser(archive, folder)
    else:
        collector(archive, folder, float(grace))


if __name__ == "__main__":
    main()
