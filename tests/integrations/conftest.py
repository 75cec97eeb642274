"""Fixtures of the LangGraph integration tests (the fakes live in ``lg_support.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain")

from lg_support import archive, saver_factory  # noqa: F401  (fixtures)
