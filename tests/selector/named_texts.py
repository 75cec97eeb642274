"""Screens named in tests: their sha256 from a name, and a screen-text source keyed by those names."""

from __future__ import annotations

import hashlib
from typing import Any


def sha_of(name: str) -> str:
    """The sha256 a test uses for the screen called ``name``."""
    return hashlib.sha256(name.encode()).hexdigest()


class NamedTexts:
    """``get_text`` / ``get_lines`` of screens given by name (``{name: text}``, ``{name: lines}``)."""

    def __init__(self, texts: dict[str, str], lines: dict[str, list[Any]] | None = None) -> None:
        self.texts = {sha_of(k): v for k, v in texts.items()}
        self.lines = {sha_of(k): v for k, v in (lines or {}).items()}

    def get_text(self, sha256: str) -> str | None:
        return self.texts.get(sha256)

    def get_lines(self, sha256: str) -> list[Any] | None:
        return self.lines.get(sha256)
