"""The Store is the only door to SQL for the front-ends and the application layer, read from
the source (no import runs).

A module of the front-end or application layer (the layers of ``tests/test_layers.py``:
the command line, the hook, MCP, the warm server; ``app/``, with ``app.manage`` and
``app.replicate``, and the evaluation) never runs SQL itself: it calls no
``.execute``, ``.executemany`` or ``.cursor()`` and never reaches a ``.conn``. What it needs
from the database is a method of :class:`sqlite_rrf.store.Store` (``store/``), so that the
SQL of a memory is written once and every way in reads the same rows.

The exceptions are named in :data:`EXEMPT`, each with its reason; :data:`ALLOWED` holds the
breaches tolerated for now, each with the Store method that replaces it.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Dict, List, Tuple

import pytest

from test_layers import APP, FRONT, LAYER_OF, MODULES, layer_key

#: What a front-end may not call (on anything: a connection, a cursor, a Store's ``conn``).
SQL_CALLS = frozenset({"execute", "executemany", "cursor"})
#: What a front-end may not reach (the Store's apsw connection).
SQL_ATTRIBUTES = frozenset({"conn"})

#: Modules (or packages) this rule does not cover, and why.
EXEMPT: Dict[str, str] = {
    # Datasette is a SQL client: the plugin gives it the recall statement as canned queries
    # and registers functions on Datasette's own connections; it has no Store.
    "sqlite_rrf.datasette_plugin": "Datasette is a SQL client",
    # the evaluation's cache of embeddings is a SQLite file of its own (text hash → vector),
    # not a memory
    "sqlite_rrf.evaluation.embcache": "a cache file of its own, not a memory",
}

#: Breaches tolerated for now: (module, attribute) → how many. Each names the Store method
#: that replaces it; the count only goes down (test_the_allowed_breaches_still_exist).
ALLOWED: Dict[Tuple[str, str], int] = {}


def covered(module: str) -> bool:
    """Whether the rule covers ``module``: a front-end or application module that no
    entry of :data:`EXEMPT` covers."""
    if any(module == e or module.startswith(e + ".") for e in EXEMPT):
        return False
    key = layer_key(module)
    return key is not None and LAYER_OF[key] in (FRONT, APP)


def sql_reaches(source: str, name: str = "<source>") -> List[Tuple[int, str, str]]:
    """``(line, attribute, code)`` of every SQL call (:data:`SQL_CALLS`) and every reach
    of a connection (:data:`SQL_ATTRIBUTES`) in ``source``."""
    tree = ast.parse(source, name)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in SQL_CALLS:
                found.append((node.lineno, node.func.attr, ast.unparse(node)[:80]))
        elif isinstance(node, ast.Attribute) and node.attr in SQL_ATTRIBUTES:
            found.append((node.lineno, node.attr, ast.unparse(node)[:80]))
    return sorted(found)


def breaches() -> Dict[Tuple[str, str], List[Tuple[int, str]]]:
    """(module, attribute) → (line, what) of each, for every covered module."""
    out: Dict[Tuple[str, str], List[Tuple[int, str]]] = {}
    for module, path in MODULES.items():
        if not covered(module):
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for line, attr, code in sql_reaches(source, path):
            out.setdefault((module, attr), []).append((line, f"{module}:{line}: {code}"))
    return out


def test_the_rule_covers_the_front_ends_and_the_app():
    for module in (
        "sqlite_rrf.cli.manage",
        "sqlite_rrf.hook",
        "sqlite_rrf.mcp.tools",
        "sqlite_rrf.serve.command",
        "sqlite_rrf.app.prompt_recall",
        "sqlite_rrf.app.manage",
        "sqlite_rrf.app.replicate",
    ):
        assert module in MODULES and covered(module), module
    for module in ("sqlite_rrf.store.records", "sqlite_rrf.core.statements", "sqlite_rrf.doctor"):
        assert not covered(module), module  # the store and the core run the SQL
    assert not covered("sqlite_rrf.datasette_plugin.queries")


def test_front_ends_reach_sql_only_through_the_store():
    found = breaches()
    over = []
    for key, where in found.items():
        if len(where) > ALLOWED.get(key, 0):
            over += [(key[0], line, what) for line, what in where]
    assert not over, (
        "SQL outside the Store: give it a Store method (store/) and call that:\n"
        + "\n".join(what for _, _, what in sorted(set(over)))
    )


def test_the_allowed_breaches_still_exist():
    # an entry of ALLOWED that is fixed (or fewer) is to be lowered or removed with it
    found = Counter({key: len(where) for key, where in breaches().items()})
    stale = sorted(
        f"{k}: {n} allowed, {found[k]} found" for k, n in ALLOWED.items() if found[k] < n
    )
    assert not stale, f"lower or remove these in ALLOWED: {stale}"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("n = store.conn.execute('SELECT 1').fetchall()\n", ["conn", "execute"]),
        ("conn.executemany('INSERT INTO t VALUES (?)', rows)\n", ["executemany"]),
        ("cur = connection.cursor()\n", ["cursor"]),
        ("c = self.store.conn\n", ["conn"]),
        ("with transaction(ep.store.conn):\n    pass\n", ["conn"]),
        # not SQL: a Store method, Datasette's execute_fn, a connection passed by name
        ("hits = store.recall('q')\nrows = store.episode_rows()\n", []),
        ("await db.execute_fn(f)\n", []),
        ("def peer(conn):\n    return conn\n", []),
    ],
)
def test_the_rule_sees_sql(source, expected):
    assert sorted(attr for _, attr, _ in sql_reaches(source)) == sorted(expected)
