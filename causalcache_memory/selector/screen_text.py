"""Screen text for the selector: where it comes from and how one screen's text is encoded (once per blob).

A :class:`ScreenTextSource` answers ``get_text(sha256) -> str | None``: the text drawn on the screenshot
with that content hash (an accessibility-tree dump or OCR output), lines separated by ``"\\n"``; None when
unknown. Every archive that stores screen text has ``get_text``; the lab reads the synthetic world's
screens with its exact OCR (:mod:`causalcache_lab.selector.world_text`). A source may also offer
``get_lines(sha256) -> [(text, (x0, y0, x1, y1))] | None`` with boxes relative to the screen size, which
lets the features name the element under the witness's point; without it only the witness's own text
is used.

:func:`encode_text` turns one screen's text into :class:`BlobText` (hashed word sets, value-shaped tokens
and their shapes, per-line words), and :class:`ScreenTextCache` keeps those per content hash (LRU), so a
screen is tokenized once however many decisions read it. The text is first read as drawn
(:func:`~causalcache_memory.selector.screen_normalize.normalize_screen_text`: accessibility dumps and OCR
chrome to plain lines; the identity on the synthetic worlds' text). Unknown text is not cached: text that arrives
later (OCR running in the background) is picked up by the next read.

Value-shaped tokens are whitespace tokens holding a digit (order numbers, codes, prices, addresses'
numbers), stripped of surrounding punctuation and of a leading ``#`` or ``$``; their *shape* maps digits to
``9``, upper-case letters to ``A`` and lower-case letters to ``a`` (``TK-3781`` -> ``AA-9999``), which is
what a guessed value of the right kind shares with the real one.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from causalcache_memory.errors import ArchiveError
from causalcache_memory.selector.screen_normalize import normalize_line, normalize_screen_text

__all__ = [
    "SHAPE_BUCKETS",
    "SHAPE_WIDTH",
    "TEXT_BUCKETS",
    "TEXT_WIDTH",
    "BlobText",
    "ScreenTextCache",
    "ScreenTextSource",
    "TextWithLines",
    "archive_screen_text",
    "encode_text",
    "goal_names",
    "label_at",
    "shape_ids",
    "value_shape",
    "value_tokens",
    "word_ids",
]

#: hash buckets and kept width of a screen's distinct words
TEXT_BUCKETS = 1024
TEXT_WIDTH = 96
#: hash buckets and kept width of a screen's distinct value shapes
SHAPE_BUCKETS = 64
SHAPE_WIDTH = 16
_WORD = re.compile(r"[a-z0-9]+")
_STRIP = "\"'.,;:!?()[]{}<>"
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)([A-Z][a-z]+)")


@runtime_checkable
class ScreenTextSource(Protocol):
    """Anything with ``get_text(sha256) -> str | None`` (lines joined by ``"\\n"``; None = unknown)."""

    def get_text(self, sha256: str) -> str | None: ...


class TextWithLines:
    """A text source whose ``get_text`` is ``source``'s and whose ``get_lines`` is ``lines``: the deployed
    memory's archive (the stored text) with its screen-text writer's OCR line boxes
    (:meth:`~causalcache_memory.archive.text_writer.ScreenTextWriter.get_lines`), so the witness's label
    lookup works on OCR'd screens."""

    def __init__(self, source: Any, lines: Any) -> None:
        self.source, self.lines = source, lines

    def get_text(self, sha256: str) -> str | None:
        return self.source.get_text(sha256)

    def get_lines(self, sha256: str) -> Any:
        return self.lines(sha256)


def archive_screen_text(archive: Any) -> ScreenTextSource | None:
    """The archive itself when it can answer ``get_text`` (its stored screen text), else None: the one
    default text source of the deployed memory, ``train selector --recipe`` and ``causalcache learn``."""
    return archive if callable(getattr(archive, "get_text", None)) else None


def _bucket(item: str, buckets: int = TEXT_BUCKETS) -> int:
    return zlib.crc32(item.encode()) % buckets


def _ids(items: set[str], buckets: int, width: int) -> np.ndarray:
    ids = sorted({_bucket(item, buckets) for item in items})[:width]
    return np.array(ids + [buckets] * (width - len(ids)), dtype=np.int32)


def word_ids(words: set[str]) -> np.ndarray:
    """Bucket ids of ``words`` padded to :data:`TEXT_WIDTH` with :data:`TEXT_BUCKETS`."""
    return _ids(words, TEXT_BUCKETS, TEXT_WIDTH)


def shape_ids(shapes: set[str]) -> np.ndarray:
    """Bucket ids of value ``shapes`` padded to :data:`SHAPE_WIDTH` with :data:`SHAPE_BUCKETS`."""
    return _ids(shapes, SHAPE_BUCKETS, SHAPE_WIDTH)


def value_shape(token: str) -> str:
    """``TK-3781`` -> ``AA-9999``: digits to 9, upper case to A, lower case to a, the rest kept."""
    return re.sub(r"[a-z]", "a", re.sub(r"[A-Z]", "A", re.sub(r"[0-9]", "9", token)))


def value_tokens(text: str) -> list[str]:
    """Whitespace tokens of ``text`` holding a digit, stripped of punctuation and a leading ``#``/``$``."""
    out = []
    for raw in text.split():
        tok = raw.strip(_STRIP).lstrip("#$")
        if len(tok) >= 2 and any(c.isdigit() for c in tok):
            out.append(tok)
    return out


def goal_names(goal: str) -> set[str]:
    """Lower-cased capitalised words of ``goal`` that do not start a sentence (item and app names)."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(goal)}
    return {m.group().lower() for m in _NAME.finditer(goal) if m.start() not in starts}


@dataclass(frozen=True, slots=True)
class BlobText:
    """One screen's text, encoded once (see the module docstring).

    Attributes:
        words: ``(TEXT_WIDTH,)`` bucket ids of the distinct lower-cased words (padded with TEXT_BUCKETS).
        n_words: number of distinct word buckets.
        values: ``(TEXT_WIDTH,)`` bucket ids of the distinct value-shaped tokens (exact strings).
        n_values: their number.
        shapes: ``(SHAPE_WIDTH,)`` bucket ids of the distinct value shapes.
        line_words: the words of each line, in reading order.
        line_values: the bucket ids of each line's value-shaped tokens.
        value_set: the distinct value-shaped tokens themselves, lower-cased (every one, not capped: the
            witness-source check, :mod:`~causalcache_memory.selector.witness_check`, compares exact strings).
    """

    words: np.ndarray
    n_words: int
    values: np.ndarray
    n_values: int
    shapes: np.ndarray
    line_words: tuple[frozenset[str], ...]
    line_values: tuple[frozenset[int], ...]
    value_set: frozenset[str] = frozenset()


def encode_text(text: str) -> BlobText:
    """Encode one screen's text (lines separated by ``"\\n"``)."""
    lines = [line for line in text.split("\n") if line.strip()]
    line_words = tuple(frozenset(_WORD.findall(line.lower())) for line in lines)
    words = set().union(*line_words) if line_words else set()
    values = {v for line in lines for v in value_tokens(line)}
    lowered = frozenset(x.lower() for x in values)
    w = word_ids(words)
    v = _ids(set(lowered), TEXT_BUCKETS, TEXT_WIDTH)
    return BlobText(
        w,
        int((w < TEXT_BUCKETS).sum()),
        v,
        int((v < TEXT_BUCKETS).sum()),
        shape_ids({value_shape(x) for x in values}),
        line_words,
        tuple(frozenset(_bucket(v.lower()) for v in value_tokens(line)) for line in lines),
        lowered,
    )


def label_at(lines: Sequence[tuple[str, Sequence[float]]], x: float, y: float) -> str | None:
    """Text of the line whose box holds ``(x, y)`` (relative), else the nearest line on the same row."""
    best, best_dx = None, float("inf")
    for text, box in lines:
        x0, y0, x1, y1 = box
        if not y0 <= y <= y1:
            continue
        dx = 0.0 if x0 <= x <= x1 else min(abs(x - x0), abs(x - x1))
        if dx < best_dx:
            best, best_dx = text, dx
    return best


class ScreenTextCache:
    """Per content hash :class:`BlobText` of a :class:`ScreenTextSource` (LRU; thread-safe).

    ``get`` returns None when the source has no text for the hash (not cached: asked again next time) or
    fails to read it (an archive error only masks the text features). The source's text goes through
    :func:`~causalcache_memory.selector.screen_normalize.normalize_screen_text` first (accessibility dumps
    and OCR chrome to drawn text; the identity on the synthetic worlds' text), and ``lines`` through
    :func:`~causalcache_memory.selector.screen_normalize.normalize_line`; ``normalize=False`` reads the
    text as it is (what this library did before the normaliser; for measurements).
    """

    def __init__(self, source: ScreenTextSource, maxsize: int = 4096, *, normalize: bool = True) -> None:
        self.source = source
        self.maxsize = int(maxsize)
        self.normalize = bool(normalize)
        self._items: OrderedDict[str, BlobText] = OrderedDict()
        self._lines: OrderedDict[str, tuple[tuple[str, tuple[float, ...]], ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sha: str | None) -> BlobText | None:
        if sha is None:
            return None
        with self._lock:
            found = self._items.get(sha)
            if found is not None:
                self._items.move_to_end(sha)
                return found
        try:
            text = self.source.get_text(sha)
        except (ArchiveError, OSError, LookupError, ValueError):  # an unreadable text only masks features
            return None
        if text is None:
            return None
        text = str(text)
        blob = encode_text(normalize_screen_text(text) if self.normalize else text)
        with self._lock:
            self._items[sha] = blob
            if len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return blob

    def lines(self, sha: str | None) -> tuple[tuple[str, tuple[float, ...]], ...] | None:
        """The source's ``get_lines(sha)`` (text + relative box per line), cached; None without it."""
        getter = getattr(self.source, "get_lines", None)
        if sha is None or getter is None:
            return None
        with self._lock:
            found = self._lines.get(sha)
        if found is not None:
            return found
        try:
            raw = getter(sha)
        except (ArchiveError, OSError, LookupError, ValueError):
            return None
        if raw is None:
            return None
        value = tuple((str(t), tuple(float(c) for c in box)) for t, box in raw)
        if self.normalize:
            value = tuple((line, box) for line, box in ((normalize_line(t), b) for t, b in value) if line)
        with self._lock:
            self._lines[sha] = value
            if len(self._lines) > self.maxsize:
                self._lines.popitem(last=False)
        return value
