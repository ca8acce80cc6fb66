"""The words a person reads stay short and connected.

* README.md is at most 700 words (whitespace-separated, code blocks included): the rest
  lives in docs/.
* Every relative Markdown link of README.md, CHANGELOG.md and docs/**/*.md names a file
  of the repository, and a ``#fragment`` on a Markdown page names one of its headings
  (GitHub's anchors: lower case, punctuation dropped, spaces as ``-``).
* docs/index.md links every page of docs/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_WORDS = 700

needs_docs = pytest.mark.skipif(not DOCS.is_dir(), reason="docs/ is not shipped here")

# a fence: three or more backticks (with no backtick after them: that is inline code) or tildes
_FENCE = re.compile(r"^\s*(`{3,}(?=[^`]*$)|~{3,})")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def prose_lines(text: str) -> List[str]:
    """The lines of ``text`` outside fenced code blocks."""
    out: List[str] = []
    fence = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * len(m.group(1))
            elif line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        if fence is None:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> Set[str]:
    """The anchors of a Markdown page's headings (repeats numbered -1, -2, … as GitHub does)."""
    seen: Dict[str, int] = {}
    out: Set[str] = set()
    for line in prose_lines(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        out.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def link_problems(page: Path) -> List[str]:
    """The relative links of ``page`` whose file or heading does not exist."""
    problems: List[str] = []
    text = page.read_text(encoding="utf-8")
    for n, line in enumerate(prose_lines(text), 1):
        # inline code is not a link
        for m in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, fragment = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.exists():
                problems.append(f"{where}: no file {path_part}")
                continue
            if fragment and dest.suffix == ".md":
                if fragment not in anchors(dest.read_text(encoding="utf-8")):
                    problems.append(f"{where}: {dest.name} has no heading #{fragment}")
    return problems


def pages() -> List[Path]:
    found = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    found += sorted(DOCS.rglob("*.md")) if DOCS.is_dir() else []
    return [p for p in found if p.exists()]


def test_readme_is_short():
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= README_MAX_WORDS, f"README.md has {words} words (at most {README_MAX_WORDS})"


@needs_docs
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    assert link_problems(page) == []


@needs_docs
def test_the_index_links_every_page():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {
        (DOCS / m.group(1)).resolve()
        for m in re.finditer(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", index)
    }
    missing = [
        str(p.relative_to(DOCS))
        for p in sorted(DOCS.rglob("*.md"))
        if p.name != "index.md" and p.resolve() not in linked
    ]
    assert missing == []


def test_the_checks_can_fail(tmp_path):
    """A missing file, a missing heading and a link inside code are told apart."""
    assert slug("`sqlite-rrf recall DB QUERY`") == "sqlite-rrf-recall-db-query"
    assert slug("My Python's sqlite3 cannot load extensions") == (
        "my-pythons-sqlite3-cannot-load-extensions"
    )
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
    # five backticks with more backticks on the line are inline code, not a fence
    assert prose_lines("````` ``x`` `````\n# H\n") == ["````` ``x`` `````", "# H"]
    page = tmp_path / "p.md"
    other = tmp_path / "q.md"
    other.write_text("# Q\n## Part two\n", encoding="utf-8")
    page.write_text(
        "[ok](q.md#part-two) [gone](nowhere.md) [bad](q.md#part-three) `[code](x.md)`\n"
        "[web](https://example.org/x) [self](#top)\n# Top\n```\n[in a block](y.md)\n```\n",
        encoding="utf-8",
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        problems = link_problems(page)
    finally:
        ROOT = saved
    assert problems == [
        "p.md: (nowhere.md): no file nowhere.md",
        "p.md: (q.md#part-three): q.md has no heading #part-three",
    ]
