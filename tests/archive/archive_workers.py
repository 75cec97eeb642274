"""Worker functions for the multi-process archive tests (importable by spawned children)."""

from __future__ import annotations

import io


def screenshot(i: int) -> bytes:
    """Deterministic small PNG number ``i`` (same ``i`` -> same bytes in every process)."""
    from PIL import Image

    image = Image.new("RGB", (24, 16), (i % 256, (7 * i) % 256, (13 * i) % 256))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def put_many(root: str, ids: list[int], episode: str) -> dict[int, str]:
    from causalcache_memory.archive import LocalArchive

    archive = LocalArchive(root)
    hashes = {i: archive.put(screenshot(i)).sha256 for i in ids}
    archive.retain(episode, hashes.values())
    return hashes
