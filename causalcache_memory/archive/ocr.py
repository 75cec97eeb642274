"""OCR engines for screenshots that arrive without screen text (``archive.ocr.engine``).

Each engine reads the text *lines* of one screenshot (:class:`OcrLine`: text and pixel box), in reading
order; ``read(image)`` joins them with ``\\n``. ``read_lines(array, cancel=...)`` takes an RGB array
``(H, W, 3)`` uint8, so the incremental reader (:mod:`~causalcache_memory.archive.ocr_incremental`) can
hand it a crop, and checks ``cancel`` (a :class:`threading.Event`) between its stages: a set event makes it
raise :class:`~causalcache_memory.errors.OcrCancelledError` within one stage (one recognition batch), which
is how ``close()`` stops a long read (:mod:`~causalcache_memory.archive.text_writer`). Engines load lazily
on first use, on the thread that runs OCR (never the decision path); :func:`build_ocr` checks that the
engine is installed at once, so a missing one fails when the memory is built, with the command that
installs it.

* ``rapidocr``: ``rapidocr-onnxruntime`` (extra ``causalcache-memory[ocr]``), PP-OCRv4 detection and
  recognition models shipped inside the wheel, run by onnxruntime on CPU (no download at run time). The
  pipeline is the engine's own models driven here, with settings chosen by measurement (BENCHMARKS.md,
  "Screen text at agent speed"):

  - detection on the screen scaled down so its longer side is at most ``det_side`` pixels (960 by
    default, PP-OCR's usual side limit; rapidocr's default runs detection on the full 1080p frame), boxes
    scaled back, and the text crops cut from the **full-resolution** screen for recognition;
  - no angle classifier (screens are upright; ``use_cls``);
  - recognition of all crops sorted by aspect ratio, in batches of ``rec_batch`` (less padding per batch),
    each batch only as wide as its widest crop (``rec_min_width``; rapidocr pads to 320 at least);
  - onnxruntime sessions built here: ``intra_op_num_threads = threads``, ``inter_op_num_threads = 1``,
    sequential execution, no spinning of idle worker threads (they would burn the CPU the agent needs on
    a shared machine), full graph optimisation.
* ``tesseract``: Debian's ``tesseract-ocr`` (``apt-get install tesseract-ocr tesseract-ocr-eng``) through
  ``pytesseract``'s ``image_to_data`` (words grouped into lines with their boxes).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from causalcache_memory._optional import is_available, require
from causalcache_memory.errors import ConfigError, MissingDependencyError, OcrCancelledError

__all__ = [
    "OcrEngine",
    "OcrLine",
    "RapidOcrEngine",
    "TesseractEngine",
    "build_ocr",
    "check_cancel",
    "decode_rgb",
    "join_lines",
]


@dataclass(frozen=True, slots=True)
class OcrLine:
    """One text line read from a screen: its text and pixel box ``(x0, y0, x1, y1)`` (x1, y1 exclusive)."""

    text: str
    box: tuple[int, int, int, int]

    def relative(self, width: int, height: int) -> tuple[str, tuple[float, float, float, float]]:
        """``(text, (x0/W, y0/H, x1/W, y1/H))``: the ``get_lines`` form the selector's label lookup reads."""
        x0, y0, x1, y1 = self.box
        return self.text, (x0 / width, y0 / height, x1 / width, y1 / height)


class OcrEngine(Protocol):
    """Reads the text lines of one screenshot."""

    name: str

    def read_lines(
        self, image: Any, *, cancel: threading.Event | None = None, screen: tuple[int, int] | None = None
    ) -> list[OcrLine]:
        """Lines of the RGB array ``image`` ``(H, W, 3)`` uint8, in reading order. ``screen`` = ``(W, H)``
        of the whole screen when ``image`` is a crop of it (so the crop is read at the scale the whole
        screen would be)."""
        ...

    def read(self, image: bytes) -> str:
        """The text of ``image`` (PNG/JPEG/WEBP bytes): detected lines joined by ``\\n``."""
        ...


def decode_rgb(image: bytes) -> Any:
    """``(H, W, 3)`` uint8 RGB array of the encoded ``image``."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(image)) as opened:
        return np.asarray(opened.convert("RGB"))


def _crop_key(crop: Any) -> bytes:
    """Digest of a text crop's exact pixels and shape (the recognition memo's key)."""
    digest = hashlib.blake2b(str(crop.shape).encode(), digest_size=16)
    digest.update(memoryview(crop.tobytes()))
    return digest.digest()


def check_cancel(cancel: threading.Event | None) -> None:
    """Raise :class:`OcrCancelledError` when ``cancel`` is set."""
    if cancel is not None and cancel.is_set():
        raise OcrCancelledError("OCR read cancelled: the screen-text writer was closed")


def join_lines(lines: list[OcrLine]) -> str:
    """The screen text of ``lines``: their texts joined by ``\\n``."""
    return "\n".join(line.text for line in lines)


def reading_order(lines: list[OcrLine]) -> list[OcrLine]:
    """``lines`` top to bottom, left to right within a row (rows: vertical centres within half a line)."""
    out = sorted(lines, key=lambda ln: (ln.box[1] + ln.box[3], ln.box[0]))
    rows: list[list[OcrLine]] = []
    for line in out:
        centre = (line.box[1] + line.box[3]) / 2
        if rows:
            last = rows[-1][0]
            if abs(centre - (last.box[1] + last.box[3]) / 2) <= max(4, (last.box[3] - last.box[1]) / 2):
                rows[-1].append(line)
                continue
        rows.append([line])
    return [line for row in rows for line in sorted(row, key=lambda ln: ln.box[0])]


class RapidOcrEngine:
    """``rapidocr-onnxruntime``'s models driven by the pipeline described in the module docstring.

    Args:
        threads: onnxruntime intra-op threads of one read.
        det_side: longest side (pixels) of the image the text detector sees; ``0`` = full resolution.
        rec_batch: text crops per recognition batch.
        use_cls: run the 180-degree angle classifier (off: screens are upright).
        rec_min_width: the narrowest recognition input (pixels at the model's height of 48); rapidocr
            pads every batch to at least 320, so a short word costs as much as a long line; 48 keeps
            each batch as wide as its widest crop (same words on the benchmark, half the recognition CPU).
        memo_size: recognized crops remembered by their exact pixels (0 = none): a line drawn again
            pixel for pixel (an app switched back to, a row scrolled, a dialog closed) is not recognized
            twice.
    """

    name = "rapidocr"

    def __init__(
        self,
        threads: int = 1,
        *,
        det_side: int = 960,
        rec_batch: int = 4,
        use_cls: bool = False,
        memo_size: int = 8192,
        rec_min_width: int = 48,
    ) -> None:
        self.threads = int(threads)
        self.rec_min_width = int(rec_min_width)
        self.det_side = int(det_side)
        self.rec_batch = int(rec_batch)
        self.use_cls = bool(use_cls)
        self.memo_size = int(memo_size)
        self.memo_hits = 0
        self._memo: OrderedDict[bytes, tuple[str, float]] = OrderedDict()
        self._engine: Any = None
        self._lock = threading.Lock()

    def _session_options(self) -> Any:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.enable_cpu_mem_arena = False
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return opts

    def _load(self) -> Any:
        with self._lock:
            if self._engine is None:
                module = require("rapidocr_onnxruntime", purpose="archive.ocr.engine: rapidocr")
                import onnxruntime as ort

                engine = module.RapidOCR(intra_op_num_threads=self.threads, inter_op_num_threads=1)
                opts = self._session_options()
                for part in (engine.text_det.infer, engine.text_rec.session, engine.text_cls.infer):
                    path = part.session._model_path
                    part.session = ort.InferenceSession(
                        path, sess_options=opts, providers=["CPUExecutionProvider"]
                    )
                engine.text_det.limit_type, engine.text_det.limit_side_len = (
                    "min",
                    32,
                )  # we scale, it only pads
                engine.text_rec.rec_batch_num = self.rec_batch
                shape = list(engine.text_rec.rec_image_shape)  # [3, 48, 320]: 320 = the narrowest batch
                engine.text_rec.rec_image_shape = [*shape[:2], max(shape[1], self.rec_min_width)]
                self._engine = engine
            return self._engine

    def read_lines(
        self, image: Any, *, cancel: threading.Event | None = None, screen: tuple[int, int] | None = None
    ) -> list[OcrLine]:
        import numpy as np

        engine = self._load()
        rgb = np.ascontiguousarray(image)
        height, width = rgb.shape[:2]
        if height < 8 or width < 8:
            return []
        bgr = np.ascontiguousarray(rgb[:, :, ::-1])  # the models take BGR
        check_cancel(cancel)
        boxes = self._detect(engine, bgr, max(screen) if screen else max(width, height))
        if boxes is None or not len(boxes):
            return []
        check_cancel(cancel)
        boxes = engine.sorted_boxes(boxes)
        crops = engine.get_crop_img_list(bgr, [np.asarray(b, dtype=np.float32) for b in boxes])
        if self.use_cls:
            crops, _, _ = engine.text_cls(crops)
        texts = self._recognize(engine, crops, cancel)
        out = []
        for box, (text, score) in zip(boxes, texts, strict=True):
            text = str(text).strip()
            if not text or float(score) < 0.5:
                continue
            xs, ys = np.asarray(box)[:, 0], np.asarray(box)[:, 1]
            x0, y0 = max(0, int(np.floor(xs.min()))), max(0, int(np.floor(ys.min())))
            x1, y1 = min(width, int(np.ceil(xs.max())) + 1), min(height, int(np.ceil(ys.max())) + 1)
            out.append(OcrLine(text, (x0, y0, x1, y1)))
        return reading_order(out)

    def _detect(self, engine: Any, bgr: Any, side: int) -> Any:
        """Text boxes (full-resolution pixels) of ``bgr``, detected at the scale that brings ``side`` (the
        longer side of the whole screen) down to ``det_side``."""
        import cv2

        height, width = bgr.shape[:2]
        scale = 1.0
        if self.det_side and side > self.det_side:
            scale = self.det_side / side
        if scale < 1.0:
            size = (max(32, round(width * scale)), max(32, round(height * scale)))
            small = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
            sx, sy = width / size[0], height / size[1]
        else:
            small, sx, sy = bgr, 1.0, 1.0
        boxes, _ = engine.text_det(small)
        if boxes is None or not len(boxes):
            return None
        boxes = boxes.astype("float32")
        boxes[:, :, 0] = (boxes[:, :, 0] * sx).clip(0, width - 1)
        boxes[:, :, 1] = (boxes[:, :, 1] * sy).clip(0, height - 1)
        return boxes

    def _recognize(
        self, engine: Any, crops: list[Any], cancel: threading.Event | None
    ) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        keys = [_crop_key(crop) for crop in crops]
        todo = []
        with self._lock:
            for i, key in enumerate(keys):
                found = self._memo.get(key)
                if found is None:
                    todo.append(i)
                else:
                    self._memo.move_to_end(key)
                    out[i] = found
        self.memo_hits += len(crops) - len(todo)
        order = sorted(todo, key=lambda i: crops[i].shape[1] / max(1, crops[i].shape[0]))
        for start in range(0, len(order), self.rec_batch):
            check_cancel(cancel)
            chunk = order[start : start + self.rec_batch]
            texts, _ = engine.text_rec([crops[i] for i in chunk])
            with self._lock:
                for i, result in zip(chunk, texts, strict=True):
                    out[i] = (str(result[0]), float(result[1]))
                    self._memo[keys[i]] = out[i]
                while len(self._memo) > self.memo_size:
                    self._memo.popitem(last=False)
        return out

    def read(self, image: bytes) -> str:
        return join_lines(self.read_lines(decode_rgb(image)))


class TesseractEngine:
    """Tesseract through ``pytesseract`` (``languages`` like ``"eng"`` or ``"eng+deu"``); its threads
    follow the environment variable ``OMP_THREAD_LIMIT`` of the process. Lines are Tesseract's own
    (block, paragraph, line) groups of words with a confidence above 0, their box the words' union."""

    name = "tesseract"

    def __init__(self, languages: str = "eng") -> None:
        self.languages = languages

    def read_lines(
        self, image: Any, *, cancel: threading.Event | None = None, screen: tuple[int, int] | None = None
    ) -> list[OcrLine]:
        from PIL import Image

        pytesseract = require("pytesseract", purpose="archive.ocr.engine: tesseract")
        check_cancel(cancel)
        data = pytesseract.image_to_data(
            Image.fromarray(image), lang=self.languages, output_type=pytesseract.Output.DICT
        )
        check_cancel(cancel)
        groups: dict[tuple[int, int, int], list[int]] = {}
        for i, word in enumerate(data["text"]):
            if str(word).strip() and float(data["conf"][i]) > 0:
                groups.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]), []).append(
                    i
                )
        out = []
        for idx in groups.values():
            x0 = min(data["left"][i] for i in idx)
            y0 = min(data["top"][i] for i in idx)
            x1 = max(data["left"][i] + data["width"][i] for i in idx)
            y1 = max(data["top"][i] + data["height"][i] for i in idx)
            out.append(OcrLine(" ".join(str(data["text"][i]).strip() for i in idx), (x0, y0, x1, y1)))
        return reading_order(out)

    def read(self, image: bytes) -> str:
        return join_lines(self.read_lines(decode_rgb(image)))


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
        return RapidOcrEngine(
            threads=config.threads,
            det_side=getattr(config, "det_side", 960),
            rec_batch=getattr(config, "rec_batch", 4),
        )
    if engine == "tesseract":
        if not is_available("pytesseract") or shutil.which("tesseract") is None:
            raise MissingDependencyError(
                "archive.ocr.engine: tesseract needs the tesseract binary and pytesseract: apt-get install "
                "tesseract-ocr tesseract-ocr-eng && pip install pytesseract (or use engine: rapidocr with "
                "pip install 'causalcache-memory[ocr]')"
            )
        return TesseractEngine(languages=config.languages)
    raise ConfigError(f"archive.ocr.engine={engine!r} is not an OCR engine: use none, rapidocr or tesseract")
