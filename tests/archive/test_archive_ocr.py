"""OCR engines (archive.ocr): the real rapidocr engine on a 1920x1080 screen when it is installed, and
ScreenTextWriter's bounds without one."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest

from causalcache_memory.archive import LocalArchive
from causalcache_memory.archive.ocr import RapidOcrEngine, build_ocr
from causalcache_memory.archive.text_writer import ScreenTextWriter, clip_text
from causalcache_memory.config import OcrConfig
from causalcache_memory.errors import ConfigError


def _screen() -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1920, 1080), (236, 236, 236))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=30)
    draw.rectangle([80, 60, 1100, 400], fill=(255, 255, 255), outline=(90, 90, 90))
    draw.text((110, 100), "Order A-1042  Desk Lamp", fill=(0, 0, 0), font=font)
    draw.text((110, 200), "Ship to: 12 Elm Street", fill=(0, 0, 0), font=font)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_rapidocr_reads_a_1080p_screen_and_the_writer_stores_it(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    engine = build_ocr(OcrConfig(engine="rapidocr"))
    assert isinstance(engine, RapidOcrEngine)
    archive = LocalArchive(tmp_path / "a")
    sha = archive.put(_screen()).sha256
    writer = ScreenTextWriter(engine)
    try:
        writer.submit(archive, sha, None)
        assert writer.drain(120)
    finally:
        writer.close()
    text = archive.get_text(sha)
    assert text is not None and "A-1042" in text and "Elm" in text
    assert writer.counts["ocr"] == 1 and writer.ocr_seconds > 0


def test_no_engine_is_none_and_an_unknown_one_is_a_config_error():
    assert build_ocr(OcrConfig()) is None
    with pytest.raises(ConfigError, match="'easyocr' is not an OCR engine"):
        build_ocr(type("Cfg", (), {"engine": "easyocr"})())


class Blocking:
    name = "blocking"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls = 0
        self.order: list[int] = []

    def read(self, image: bytes) -> str:
        from PIL import Image

        self.calls += 1
        self.order.append(Image.open(io.BytesIO(image)).getpixel((0, 0))[0])
        self.started.set()
        assert self.gate.wait(30)
        return "text"


def test_the_ocr_queue_is_bounded_serves_newest_first_and_drops_the_oldest(tmp_path, make_png, caplog):
    archive = LocalArchive(tmp_path / "a")
    shas = [archive.put(make_png((i, 0, 0))).sha256 for i in range(6)]
    engine = Blocking()
    writer = ScreenTextWriter(engine, max_pending=2)
    try:
        with caplog.at_level("WARNING", logger="causalcache_memory"):
            writer.submit(archive, shas[0], None)  # taken by the worker at once, blocks on the gate
            while engine.calls == 0:
                engine.started.wait(0.05)
            for sha in shas[1:]:
                writer.submit(archive, sha, None)
            writer.submit(archive, shas[5], None)  # already waiting: not queued twice
        assert writer.counts["dropped"] == 3  # 1, 2, 3: the oldest waiting ones
        assert writer.stats()["waiting"] == 2
        assert len([r for r in caplog.records if "OCR is 2 screenshots behind" in r.getMessage()]) == 1
        engine.gate.set()
        assert writer.drain(30)
    finally:
        writer.close()
    assert engine.order == [0, 5, 4]  # the running one, then newest first
    assert [archive.get_text(s) is not None for s in shas] == [True, False, False, False, True, True]


def test_clip_text_cuts_at_a_character_boundary():
    assert clip_text("abc", 10) == "abc"
    assert clip_text("aé€", 4) == "aé"  # 1 + 2 bytes; the 3-byte € does not fit


def test_tesseract_engine_passes_the_languages_and_groups_words_into_boxed_lines(monkeypatch, make_png):
    import types

    import causalcache_memory.archive.ocr as ocr

    calls: list[tuple[tuple[int, int], str]] = []
    words = [  # (text, conf, block, par, line, left, top, width, height); tesseract's blank/-1 rows included
        ("", -1, 1, 1, 1, 0, 0, 40, 30),
        ("Desk", 91, 1, 1, 2, 5, 20, 10, 6),
        ("Lamp", 88, 1, 1, 2, 17, 21, 12, 6),
        ("Order", 95, 1, 1, 1, 4, 3, 14, 7),
        ("A-1042", 90, 1, 1, 1, 20, 3, 15, 7),
        ("  ", 50, 1, 1, 3, 0, 28, 3, 2),
    ]

    def image_to_data(image, lang: str, output_type: str) -> dict:
        calls.append((image.size, lang))
        keys = ("text", "conf", "block_num", "par_num", "line_num", "left", "top", "width", "height")
        return {key: [w[i] for w in words] for i, key in enumerate(keys)}

    fake = types.SimpleNamespace(image_to_data=image_to_data, Output=types.SimpleNamespace(DICT="dict"))
    monkeypatch.setattr(ocr, "is_available", lambda module: True)
    monkeypatch.setattr(ocr.shutil, "which", lambda name: "/usr/bin/tesseract")
    monkeypatch.setattr(ocr, "require", lambda module, purpose="": fake)
    engine = build_ocr(OcrConfig(engine="tesseract", languages="eng+deu"))
    assert engine is not None and engine.read(make_png(size=(40, 30))) == "Order A-1042\nDesk Lamp"
    assert calls == [((40, 30), "eng+deu")]
    lines = engine.read_lines(np.zeros((30, 40, 3), dtype=np.uint8))
    assert [(ln.text, ln.box) for ln in lines] == [
        ("Order A-1042", (4, 3, 35, 10)),
        ("Desk Lamp", (5, 20, 29, 27)),
    ]
