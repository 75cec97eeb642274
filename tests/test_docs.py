"""Every Python snippet in docs/*.md and README.md: checked statically, and run unless marked no-run; and
every section reference between the front door (README, RESULTS, BENCHMARKS), docs/ and the notebook
resolves to a heading.

Snippets of one document run in order in one namespace (like a notebook), in a temporary directory.
README.md and docs/LANGGRAPH.md call the user's own code (``take_screenshot``, ``vlm``...): they run in
tests/integrations/test_doc_snippets.py, which provides those stand-ins. The marker convention is
described in docs/TESTING.md, "Doc snippets".
"""

from __future__ import annotations

import re

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


# --- references between the front door, the docs and the notebook --------------------------------------

RESULTS = ROOT / "RESULTS.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
HISTORY = ROOT / "docs" / "notebook" / "RESULTS-history.md"
#: the documents a reader meets: their section references must resolve (the notebook is kept verbatim)
CITING = [
    ROOT / "README.md",
    RESULTS,
    BENCHMARKS,
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "docs" / "notebook" / "README.md",
]
_ID = r"(?:C[0-9]+|[0-9]+[a-z]?)"
_IDS = rf"{_ID}(?:(?:\s*[-–,]\s*|\s+and\s+){_ID})*"
_TAIL = rf"`?\)?,?\s+(?:sections?\s+|§\s*)?({_IDS})\b"
#: "RESULTS.md C1", "RESULTS.md, section 8f", "RESULTS 9p" (not "RESULTS-history.md")
RESULTS_REF = re.compile(rf"(?<![\w/-])RESULTS(?:\.md)?(?!-){_TAIL}")
HISTORY_REF = re.compile(rf"RESULTS-history\.md{_TAIL}")
BENCHMARKS_REF = re.compile(rf"(?<![\w/-])BENCHMARKS(?:\.md)?(?!-){_TAIL}")


def _headings(path) -> set[str]:
    """Section ids of a document's headings: ``## C1. ...`` -> C1, ``### 9p. ...`` -> 9p."""
    text = path.read_text(encoding="utf-8")
    return set(re.findall(rf"^#+\s+({_ID})\.\s", text, flags=re.M))


def _references(rx: re.Pattern[str]) -> list[tuple[str, str]]:
    found = []
    for doc in CITING:
        for match in rx.finditer(doc.read_text(encoding="utf-8")):
            found += [(str(doc.relative_to(ROOT)), ref) for ref in re.findall(_ID, match.group(1))]
    return found


def test_results_references_name_a_current_claim():
    claims = _headings(RESULTS)
    refs = _references(RESULTS_REF)
    assert refs, "the docs cite RESULTS.md's claims"
    dangling = [(doc, ref) for doc, ref in refs if ref not in claims]
    assert dangling == [], (
        "cite a claim of RESULTS.md (C1, C2, ...) or the notebook's section "
        "('notebook/RESULTS-history.md 9p'); old section numbers are history"
    )


def test_history_references_name_a_section_of_the_notebook():
    sections = _headings(HISTORY)
    assert {"8f", "9p", "10"} <= sections
    refs = _references(HISTORY_REF)
    assert refs
    assert [(doc, ref) for doc, ref in refs if ref not in sections] == []


def test_benchmarks_references_name_a_section():
    sections = _headings(BENCHMARKS)
    refs = _references(BENCHMARKS_REF)
    assert refs
    assert [(doc, ref) for doc, ref in refs if ref not in sections] == []


def test_results_is_short_and_every_claim_says_how_to_reproduce_it():
    text = RESULTS.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 320, (
        "RESULTS.md holds current claims only; history goes to docs/notebook"
    )
    claims = re.split(r"^## (?=C[0-9]+\.)", text, flags=re.M)[1:]
    assert len(claims) >= 5
    for claim in claims:
        name = claim.splitlines()[0]
        assert "|" in claim, f"{name}: a claim is a table"
        assert "```bash" in claim or "Command" in claim, (
            f"{name}: a claim names the command that reproduces it"
        )


def test_docs_results_holds_only_files_a_current_claim_cites():
    cited = RESULTS.read_text(encoding="utf-8") + BENCHMARKS.read_text(encoding="utf-8")
    files = sorted(p.name for p in (ROOT / "docs" / "results").iterdir())
    assert files
    assert [name for name in files if name not in cited] == [], "move it to docs/notebook/results"
    named = set(re.findall(r"docs/results/([\w.-]+\.\w+)", cited))
    assert [name for name in sorted(named) if not (ROOT / "docs" / "results" / name).is_file()] == []
