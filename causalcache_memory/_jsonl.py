"""JSON helpers: the JSON Lines record files (trajectories, replacement groups) and strict JSON files.

Strict JSON: Python's ``json`` writes a non-finite float as the bare token ``NaN`` (or ``Infinity``), which
RFC 8259 does not allow and which jq 1.6, JavaScript's ``JSON.parse`` and most other readers reject.
:func:`finite_json` turns every such figure into ``null`` (a figure that does not exist, e.g. the rate of
an arm without episodes) before anything the project writes for other programs to read.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["dumps_json", "finite_json", "json_lines", "read_jsonl", "write_json", "write_jsonl"]

T = TypeVar("T")


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) inside dicts, lists and tuples replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """``json``'s fallback for objects it cannot write: numbers (numpy scalars) as finite floats or None,
    anything else as its ``str``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return number if math.isfinite(number) else None


def dumps_json(data: Any, *, indent: int | None = 1, sort_keys: bool = False) -> str:
    """``data`` as strict JSON text: non-finite floats as ``null`` (:func:`finite_json`), numpy scalars as
    numbers, other objects as their ``str``. It never writes ``NaN`` and never raises for a value."""
    return json.dumps(finite_json(data), indent=indent, sort_keys=sort_keys, default=_plain, allow_nan=False)


def write_json(path: str | Path, data: Any, *, sort_keys: bool = False) -> None:
    """Write ``data`` as strict JSON (:func:`dumps_json`) atomically: a temporary file beside ``path``,
    flushed to disk, then renamed over it, so a reader sees the old or the new file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(dumps_json(data, sort_keys=sort_keys))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write one compact JSON object per line; returns how many were written."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")
            n += 1
    return n


def json_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every non-blank line of a JSON Lines file, numbered from 1: the one
    place the project walks such a file (each reader parses and names its own errors)."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, line


def read_jsonl(
    path: str | Path, parse: Callable[[Any], T], *, what: str, error: type[Exception]
) -> Iterator[T]:
    """``parse(obj)`` for every non-blank line; a bad line raises ``error`` naming the file and line."""
    for lineno, line in json_lines(path):
        try:
            yield parse(json.loads(line))
        except (KeyError, TypeError, ValueError) as exc:
            raise error(f"{path}:{lineno}: not a valid {what}: {exc}") from exc
