"""The README stays a page that links out, and no link in the documentation points at nothing."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", *DOCS, *sorted((REPO / "workloads" / "charts").glob("*/README.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return [t.split("#")[0] for t in LINK.findall(text)
            if not t.startswith(("http://", "https://", "#", "mailto:")) and t.split("#")[0]]


def test_readme_fits_on_a_page():
    assert len((REPO / "README.md").read_text().splitlines()) < 200


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_doc_is_linked_from_the_readme(doc):
    assert f"docs/{doc.name}" in relative_links(REPO / "README.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"
