"""The recall statements' composition (pysrc/sqlite_rrf/statements.py) and the rule that
every recall default is written once, in sql/recall/params.sql.

- recall_defaults(), which reads params.sql as text (so that ``--help`` needs no
  SQLite), equals what SQLite computes from the same CTE with every parameter unbound,
  for every profile;
- the shipped sql/recall.sql is the composition that chooses pool and profile at run
  time, and every (pool, profile) statement prepares;
- no Python module and no other SQL fragment restates a default: a ``default N`` (or
  ``defaults N, …``) in the package whose N is a recall default fails here, as does a
  keyword default equal to one in a signature that takes a recall option.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import apsw
import pytest

import sqlite_rrf
from sqlite_rrf.resources import read_sql, statement_params
from sqlite_rrf.statements import (POOL_MODES, POOLS, PROFILES, recall_defaults,
                                   recall_statement)

PKG = Path(sqlite_rrf.__file__).parent
SQL = Path(__file__).resolve().parent.parent / "sql"


def sql_defaults(profile):
    conn = apsw.Connection(":memory:")
    sql = "WITH " + read_sql("recall/params.sql").strip() + " SELECT * FROM params"
    b = dict.fromkeys(statement_params(sql))
    b["profile"] = profile
    cur = conn.execute(sql, b)
    names = [d[0] for d in cur.getdescription()]
    return dict(zip(names, cur.fetchone()))


@pytest.mark.parametrize("profile", [None, *PROFILES])
def test_defaults_read_as_text_equal_what_sqlite_computes(profile):
    want = sql_defaults(profile)
    assert want.pop("min_similarity") is None
    # the query's time window has no default: no window
    assert want.pop("time_from") is None and want.pop("time_to") is None
    want.pop("now_ms")
    got = recall_defaults(profile)
    assert got.pop("profile") == sql_defaults(None)["profile"]  # the default profile
    assert want.pop("profile") == (profile or got_default_profile())
    assert got == want
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}


def got_default_profile():
    return sql_defaults(None)["profile"]


def test_shipped_statement_is_the_run_time_composition():
    assert read_sql("recall.sql") == recall_statement()


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("profile", PROFILES)
def test_every_pool_and_profile_statement_prepares_and_is_smaller(pool, profile):
    conn = apsw.Connection(":memory:")
    sqlite_rrf.load(conn)
    from sqlite_rrf.migrations import migrate

    migrate(conn)
    own = recall_statement(pool, profile)
    conn.execute("EXPLAIN " + own, dict.fromkeys(statement_params(own))).fetchall()
    assert len(own) < len(recall_statement())
    # only its own pool and profile are in it
    assert f"pool_{pool} AS" in own and f"score_{profile} AS" in own
    assert not [p for p in POOL_MODES if p != pool and f"pool_{p} AS" in own]
    assert not [p for p in PROFILES if p != profile and f"score_{p} AS" in own]


def test_unknown_pool_or_profile_is_refused():
    with pytest.raises(ValueError, match="pool: must be one of"):
        recall_statement("nearest")
    with pytest.raises(ValueError, match="profile: must be one of"):
        recall_defaults("fast")


# ---- every default written once ----

def _values() -> set:
    out = set()
    for profile in (None, *PROFILES):
        for v in recall_defaults(profile).values():
            out.add(v if isinstance(v, str) else f"{v:g}")
            if isinstance(v, float):
                out.add(repr(v))
    return out


DEFAULT_WORD = re.compile(r"\bdefaults?\s+(?:is\s+|of\s+)?['`]?([A-Za-z_]+|\d+(?:\.\d+)?)")
RECALL_OPTIONS = {"limit", "k", "pool", "pool_size", "bm25_limit", "profile", "alpha",
                  "oversample", "weights"}


def restatements(text: str, where: str) -> list:
    """Lines that say ``default <v>`` with v a recall default, and signatures that give
    a recall option a literal default equal to it."""
    values = _values()
    found = [f"{where}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
             for m in DEFAULT_WORD.finditer(line) if m.group(1) in values
             # "1,000" is a thousand; a lone "default 1" is a count, not the weights'
             and not re.match(r",\d{3}", line[m.end():])
             and not (m.group(1) == "1" and not line[m.end():].startswith(","))]
    if where.endswith(".py"):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args[-len(node.args.defaults):] if node.args.defaults else []
                pairs = list(zip(args, node.args.defaults))
                pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults)
                          if d is not None]
                for a, d in pairs:
                    if (a.arg in RECALL_OPTIONS and isinstance(d, ast.Constant)
                            and d.value is not None
                            and (d.value if isinstance(d.value, str) else f"{d.value:g}")
                            in values):
                        found.append(f"{where}:{d.lineno}: {node.name}({a.arg}={d.value!r})")
    return found


def test_no_module_restates_a_recall_default():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        found += restatements(path.read_text(encoding="utf-8"), str(path.relative_to(PKG)))
    for path in sorted((SQL / "recall").glob("*.sql")):
        if path.name != "params.sql":
            found += restatements(path.read_text(encoding="utf-8"), f"sql/recall/{path.name}")
    assert found == []


def test_the_restatement_check_can_fail():
    """The check above sees the kinds of restatement it is there to catch."""
    d = recall_defaults()
    text = (f'p.add_argument("--k", help="RRF constant (default {d["k"]:g})")\n'
            f'def recall(self, query, limit={d["result_limit"]}): pass\n'
            f'"""the fusion (default {d["profile"]})"""\n')
    assert len(restatements(text, "x.py")) == 3


def test_shipped_statement_prepares_with_room_for_one_more_profile():
    """SQLite (3.5x) limits how much a statement may expand its CTEs; each profile of
    the run-time-choosing statement expands `ranked` once more. The shipped file must
    prepare, with room for one more profile (one more expansion of `ranked`)."""
    conn = apsw.Connection(":memory:")
    sqlite_rrf.load(conn)
    from sqlite_rrf.migrations import migrate

    migrate(conn)
    sql = recall_statement()
    b = dict.fromkeys(statement_params(sql))
    conn.execute("EXPLAIN " + sql, b).fetchall()
    head, final = sql.split("-- 9. ")
    extra = ",\n".join(f"spare{i} AS (SELECT count(*) AS c FROM ranked)" for i in range(1))
    grown = (head.rstrip().rstrip(",") + ",\n" + extra + "\n-- 9. "
             + final.replace("FROM explain AS t", "FROM explain AS t, spare0"))
    assert grown != sql
    conn.execute("EXPLAIN " + grown, b).fetchall()
