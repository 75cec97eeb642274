"""JSON Lines helpers shared by the record files (trajectories, replacement groups)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["read_jsonl", "write_jsonl"]

T = TypeVar("T")


def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write one compact JSON object per line; returns how many were written."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")
            n += 1
    return n


def read_jsonl(
    path: str | Path, parse: Callable[[Any], T], *, what: str, error: type[Exception]
) -> Iterator[T]:
    """``parse(obj)`` for every non-blank line; a bad line raises ``error`` naming the file and line."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield parse(json.loads(line))
            except (KeyError, TypeError, ValueError) as exc:
                raise error(f"{path}:{lineno}: not a valid {what}: {exc}") from exc
