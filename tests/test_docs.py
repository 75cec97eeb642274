"""Every Python snippet in docs/*.md and README.md: checked statically, and run unless marked no-run.

Snippets of one document run in order in one namespace (like a notebook), in a temporary directory.
README.md and docs/LANGGRAPH.md call the user's own code (``take_screenshot``, ``vlm``...): they run in
tests/integrations/test_doc_snippets.py, which provides those stand-ins. The marker convention is
described in docs/TESTING.md, "Doc snippets".
"""

from __future__ import annotations

import pytest
from doc_snippets import DOCS, ROOT, Snippet, call_problems, run_in_order, snippets

#: documents whose snippets run in another test (with stand-ins for the user's own code)
RUN_ELSEWHERE = {
    "README.md": "tests/integrations/test_doc_snippets.py",
    "docs/LANGGRAPH.md": "tests/integrations/test_doc_snippets.py",
}
ALL = [s for doc in DOCS for s in snippets(doc)]


def test_the_docs_have_snippets_and_every_elsewhere_runner_exists():
    assert len(ALL) >= 15
    assert all((ROOT / runner).is_file() for runner in RUN_ELSEWHERE.values())


@pytest.mark.parametrize("snippet", ALL, ids=lambda s: s.id)
def test_snippet_compiles_and_its_library_calls_bind(snippet: Snippet):
    assert call_problems(snippet) == []


def _runnable_docs() -> list[str]:
    docs = {str(s.doc.relative_to(ROOT)) for s in ALL if s.no_run is None}
    return sorted(docs - set(RUN_ELSEWHERE))


@pytest.mark.parametrize("doc", _runnable_docs())
def test_runnable_snippets_of_a_document_run_in_order(doc: str, tmp_path):
    blocks = [s for s in snippets(ROOT / doc) if s.no_run is None]
    assert blocks
    run_in_order(blocks, tmp_path)


def test_no_run_markers_give_a_reason():
    marked = [s for s in ALL if s.no_run is not None]
    assert marked  # the convention is in use (docs/TESTING.md)
    assert all(s.no_run and s.no_run != "no reason given" for s in marked), [s.id for s in marked]
