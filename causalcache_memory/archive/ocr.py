"""OCR engines for screenshots that arrive without screen text (``archive.ocr.engine``).

Each engine turns the encoded bytes of one screenshot into its text, one line per detected text line in
reading order. Engines load lazily on first use, on the thread that runs OCR (never the decision path,
:mod:`~causalcache_memory.archive.text_writer`); :func:`build_ocr` checks that the engine is installed at
once, so a missing one fails when the memory is built, with the command that installs it.

* ``rapidocr``: ``rapidocr-onnxruntime`` (extra ``causalcache-memory[ocr]``), PP-OCRv4 detection and
  recognition models shipped inside the wheel, run by onnxruntime on CPU (no download at run time).
* ``tesseract``: Debian's ``tesseract-ocr`` (``apt-get install tesseract-ocr tesseract-ocr-eng``) through
  ``pytesseract``.
"""

from __future__ import annotations

import io
import shutil
import threading
from typing import Any, Protocol

from causalcache_memory._optional import is_available, require
from causalcache_memory.errors import ConfigError, MissingDependencyError

__all__ = ["OcrEngine", "RapidOcrEngine", "TesseractEngine", "build_ocr"]


class OcrEngine(Protocol):
    """Reads the text of one encoded screenshot."""

    name: str

    def read(self, image: bytes) -> str:
        """The text of ``image`` (PNG/JPEG/WEBP bytes): detected lines joined by ``\\n``."""
        ...


def _rgb(image: bytes) -> Any:
    from PIL import Image

    with Image.open(io.BytesIO(image)) as opened:
        return opened.convert("RGB")


class RapidOcrEngine:
    """``rapidocr-onnxruntime`` (models in the wheel); ``threads`` = onnxruntime intra-op threads."""

    name = "rapidocr"

    def __init__(self, threads: int = 1) -> None:
        self.threads = int(threads)
        self._engine: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._engine is None:
                module = require("rapidocr_onnxruntime", purpose="archive.ocr.engine: rapidocr")
                self._engine = module.RapidOCR(intra_op_num_threads=self.threads)
            return self._engine

    def read(self, image: bytes) -> str:
        import numpy as np

        result, _ = self._load()(np.asarray(_rgb(image))[:, :, ::-1])  # the engine takes BGR arrays
        return "\n".join(str(line[1]) for line in result or () if str(line[1]).strip())


class TesseractEngine:
    """Tesseract through ``pytesseract`` (``languages`` like ``"eng"`` or ``"eng+deu"``); its threads
    follow the environment variable ``OMP_THREAD_LIMIT`` of the process."""

    name = "tesseract"

    def __init__(self, languages: str = "eng") -> None:
        self.languages = languages

    def read(self, image: bytes) -> str:
        pytesseract = require("pytesseract", purpose="archive.ocr.engine: tesseract")
        text = pytesseract.image_to_string(_rgb(image), lang=self.languages)
        return "\n".join(line for line in text.splitlines() if line.strip())


def build_ocr(config: Any) -> OcrEngine | None:
    """The engine ``config`` (an :class:`~causalcache_memory.config.OcrConfig`) names; None for ``none``.

    Raises :class:`MissingDependencyError` naming what to install when the engine is not installed.
    """
    engine = getattr(config, "engine", "none")
    if engine == "none":
        return None
    if engine == "rapidocr":
        if not is_available("rapidocr_onnxruntime"):
            raise MissingDependencyError(
                "archive.ocr.engine: rapidocr needs rapidocr-onnxruntime, which is not installed: pip install "
                "'causalcache-memory[ocr]' (or set archive.ocr.engine: none)"
            )
        return RapidOcrEngine(threads=config.threads)
    if engine == "tesseract":
        if not is_available("pytesseract") or shutil.which("tesseract") is None:
            raise MissingDependencyError(
                "archive.ocr.engine: tesseract needs the tesseract binary and pytesseract: apt-get install "
                "tesseract-ocr tesseract-ocr-eng && pip install pytesseract (or use engine: rapidocr with "
                "pip install 'causalcache-memory[ocr]')"
            )
        return TesseractEngine(languages=config.languages)
    raise ConfigError(f"archive.ocr.engine={engine!r} is not an OCR engine: use none, rapidocr or tesseract")
