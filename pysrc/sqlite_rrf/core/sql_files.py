"""Where the package's SQL lives: ``sqlite_rrf/sql`` in an installed package (copied
there from the repository's top-level ``sql/`` at build time), or ``sql/`` itself in
an editable checkout."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Callable, List

#: The package directory (``sqlite_rrf/``): the built extension and, installed, ``sql/``.
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sql_dir() -> str:
    """The directory holding ``recall.sql`` and ``migrations/``."""
    for candidate in (
        os.path.join(_HERE, "sql"),
        os.path.normpath(os.path.join(_HERE, "..", "..", "sql")),
    ):
        if os.path.isfile(os.path.join(candidate, "recall.sql")):
            return candidate
    raise FileNotFoundError(
        "sqlite-rrf's SQL files are missing (looked in sqlite_rrf/sql and the checkout's sql/); "
        "reinstall the package"
    )


@lru_cache(maxsize=None)
def read_sql(name: str) -> str:
    """The text of ``sql/<name>`` (e.g. ``'recall.sql'``)."""
    with open(os.path.join(sql_dir(), name), encoding="utf-8") as f:
        return f.read()


def data_path(name: str) -> str:
    """Path of a file shipped in ``sqlite_rrf/data`` (the demo's sample episodes)."""
    return os.path.join(_HERE, "data", name)


# a comment or a quoted string (group 1, skipped), or a named parameter :name (group 2)
_SQL_TOKEN_RE = re.compile(
    r"(--[^\n]*|/\*.*?\*/|'(?:''|[^'])*'|\"(?:\"\"|[^\"])*\")|(?<![:\w]):([A-Za-z_]\w*)",
    re.DOTALL,
)


def statement_params(sql: str) -> List[str]:
    """The named parameters (``:name``) of ``sql`` in order of first appearance,
    comments and quoted strings skipped."""
    seen: dict = {}
    for m in _SQL_TOKEN_RE.finditer(sql):
        if m.group(2):
            seen.setdefault(m.group(2))
    return list(seen)


def replace_params(sql: str, replace: Callable[[str], str]) -> str:
    """``sql`` with every named parameter ``:name`` replaced by ``replace(name)``;
    comments and quoted strings are kept as they are (a ``:word`` in them is not a
    parameter)."""
    return _SQL_TOKEN_RE.sub(lambda m: m.group(1) or replace(m.group(2)), sql)
