"""``memory.close()`` with a long OCR read running returns within ``archive.ocr.close_timeout_s``.

Issue 56 (item 5): close waited without bound for a running OCR job (98 s wall for one 6000x6000
screenshot under load). Here the real rapidocr engine reads a 6000x6000 screenshot with ~70 lines of
large text (about a minute of recognition on one thread), the memory is closed while the read runs, and:

* close returns within its timeout (plus scheduling slack on a loaded machine: the bound shown is
  ``timeout + 5 s``, against a read that takes many times that);
* the read is killed: it stops at its next recognition batch (``cancelled``), or, if it is inside one
  onnxruntime call past the timeout, it is abandoned (``close_timeouts``, a WARNING naming
  ``archive.ocr.close_timeout_s``) and stops at the batch after;
* nothing is stored for that screen, and the worker thread ends.
"""

from __future__ import annotations

import io
import time

import pytest

from causalcache_memory.config import CausalCacheConfig


def _huge_screen() -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (6000, 6000), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=64)
    for row in range(70):
        words = " ".join(f"Order SO-{10000 + 97 * row + k} shipped" for k in range(8))
        draw.text((40, 40 + 84 * row), words, fill=(10, 10, 10), font=font)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def test_close_kills_a_6000x6000_read_within_its_timeout(tmp_path, caplog):
    pytest.importorskip("rapidocr_onnxruntime")
    pytest.importorskip("langgraph")
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    archive = LocalArchive(tmp_path / "archive")
    config = CausalCacheConfig(archive={"ocr": {"engine": "rapidocr", "close_timeout_s": 3.0}})
    memory = CausalCacheMemory(config=config, archive=archive, allocation="recent")
    sha = archive.put(_huge_screen()).sha256
    writer = memory.screen_texts
    writer.submit(memory._controller().archive, sha, None, thread="huge")
    deadline = time.monotonic() + 120
    while writer._clock.status.get(sha) != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)  # into the read (decode, detection, the first recognition batches)
    worker = writer._worker
    assert worker is not None and worker.is_alive() and writer.counts["ocr"] == 0  # the read is running
    with caplog.at_level("WARNING", logger="causalcache_memory"):
        start = time.monotonic()
        memory.close()
        took = time.monotonic() - start
    assert took < 3.0 + 5.0, f"close took {took:.1f} s with archive.ocr.close_timeout_s=3"
    worker.join(120)  # killed at its next batch (at once when close returned True)
    assert not worker.is_alive()
    stats = writer.stats()
    assert stats["cancelled"] == 1 and stats["ocr"] == 0
    assert stats["close_timeouts"] == len(
        [r for r in caplog.records if "close_timeout_s=3.0" in r.getMessage()]
    )
    assert archive.get_text(sha) is None
