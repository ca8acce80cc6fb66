"""The prompt hook's and the MCP server's requirements live in docs/contract.md.

Each requirement (H1… of the hook, M1… of the MCP server) is defined there once, in order,
and every ID the tests and the code cite is one of them; the modules point to the page
instead of restating the list.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "contract.md"
PKG = ROOT / "pysrc" / "sqlite_rrf"

pytestmark = pytest.mark.skipif(not CONTRACT.exists(), reason="docs/ is not shipped here")

#: Where each family of IDs is cited: the tests, and the modules (comments and docstrings).
CITING = {
    "H": [
        "tests/test_hook.py",
        "pysrc/sqlite_rrf/hook.py",
        "pysrc/sqlite_rrf/app/prompt_recall.py",
    ],
    "M": ["tests/test_mcp.py", "pysrc/sqlite_rrf/mcp"],
}
#: The module whose docstring held each list.
HOME = {"H": PKG / "hook.py", "M": PKG / "mcp" / "__init__.py"}


def defined(text: str, family: str) -> List[str]:
    """The IDs ``text`` defines, in order: list items that start ``* **H4a.**``."""
    return re.findall(rf"^\* \*\*({family}\d+[a-z]?)\.\*\*", text, re.M)


def order_key(rid: str):
    m = re.fullmatch(r"[A-Z](\d+)([a-z]?)", rid)
    assert m, rid
    return int(m.group(1)), m.group(2)


def cited(family: str) -> set:
    """Every ID of ``family`` cited by its tests and modules."""
    found = set()
    for rel in CITING[family]:
        path = ROOT / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            if f.exists():
                found |= set(re.findall(rf"\b({family}\d+[a-z]?)\b", f.read_text("utf-8")))
    return found


@pytest.mark.parametrize("family", ["H", "M"])
def test_each_requirement_is_defined_once_in_order(family):
    ids = defined(CONTRACT.read_text(encoding="utf-8"), family)
    assert ids, f"docs/contract.md defines no {family} requirement"
    assert len(ids) == len(set(ids)), ids
    assert ids == sorted(ids, key=order_key)


@pytest.mark.parametrize("family", ["H", "M"])
def test_every_cited_requirement_is_in_the_contract(family):
    ids = set(defined(CONTRACT.read_text(encoding="utf-8"), family))
    assert cited(family) - ids == set()


@pytest.mark.parametrize("family", ["H", "M"])
def test_the_module_points_to_the_contract_instead_of_restating_it(family):
    import ast

    doc = ast.get_docstring(ast.parse(HOME[family].read_text(encoding="utf-8"))) or ""
    assert "docs/contract.md" in doc
    restated = re.findall(rf"^\s*({family}\d+[a-z]?)\. ", doc, re.M)
    assert restated == []


def test_the_checks_can_fail():
    text = "* **H1.** one\n* **H4b.** b\n* **H4a.** a\n* **H1.** again\n"
    ids = defined(text, "H")
    assert ids == ["H1", "H4b", "H4a", "H1"]
    assert ids != sorted(ids, key=order_key)
    assert len(ids) != len(set(ids))
    assert defined("H1. in a docstring\n", "H") == []
    assert sorted(["M10", "M9", "M5a", "M5"], key=order_key) == ["M5", "M5a", "M9", "M10"]
