"""The recall statements' composition (pysrc/sqlite_rrf/core/statements.py) and the rule that
every recall default is written once, in the table sqlite_rrf.core.statements.DEFAULTS.

- recall_defaults(), which reads that table, equals what SQLite computes from the
  ``params`` CTE written from it with every parameter unbound, for every profile;
- the shipped sql/recall.sql (the statement of the default pool and profile) and
  sql/recall/params.sql are current (``python -m sqlite_rrf.core.statements --write``);
- every (pool, profile) statement prepares, under SQLite's default limits and with
  SQLITE_LIMIT_EXPR_DEPTH at half its default, and holds only its own pool and profile;
- the filters are written once (sql/recall/filter.sql, no_filter.sql);
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
from sqlite_rrf.core.sql_files import read_sql, statement_params
from sqlite_rrf.core.statements import (
    POOL_MODES,
    PROFILES,
    main,
    params_cte,
    recall_defaults,
    recall_statement,
)

PKG = Path(sqlite_rrf.__file__).parent
SQL = Path(__file__).resolve().parent.parent / "sql"


def sql_defaults(profile):
    conn = apsw.Connection(":memory:")
    d = recall_defaults()
    sql = "WITH " + params_cte(d["pool"], profile or d["profile"]) + " SELECT * FROM params"
    b = dict.fromkeys(statement_params(sql))
    b["profile"] = profile
    cur = conn.execute(sql, b)
    names = [d[0] for d in cur.getdescription()]
    return dict(zip(names, cur.fetchone()))


@pytest.mark.parametrize("profile", [None, *PROFILES])
def test_defaults_equal_what_sqlite_computes(profile):
    want = sql_defaults(profile)
    assert want.pop("min_similarity") is None
    # no policy unless a floor is given (the hook and MCP give one)
    assert want.pop("min_relevance") is None
    # the query's time window has no default: no window
    assert want.pop("time_from") is None and want.pop("time_to") is None
    want.pop("now_ms")
    got = recall_defaults(profile)
    # the statement's own profile; recall_defaults names the default one
    assert want.pop("profile") == (profile or got["profile"])
    assert got.pop("profile") == sql_defaults(None)["profile"]
    assert got == want
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}


def test_a_default_is_changed_in_one_place(monkeypatch):
    """The table is the source: a change there is what the statement and
    recall_defaults() both say (nothing else holds the value)."""
    from sqlite_rrf.core import statements

    table = tuple((p, c, 7 if c == "result_limit" else v) for p, c, v in statements.DEFAULTS)
    monkeypatch.setattr(statements, "DEFAULTS", table)
    assert recall_defaults()["result_limit"] == 7
    assert sql_defaults(None)["result_limit"] == 7


def test_shipped_files_are_current():
    """sql/recall.sql and sql/recall/params.sql are what --write writes now."""
    d = recall_defaults()
    assert read_sql("recall.sql") == recall_statement() == recall_statement(d["pool"], d["profile"])
    assert read_sql("recall/params.sql") == params_cte(d["pool"], d["profile"]) + "\n"


def test_write_rewrites_both_files(tmp_path, monkeypatch):
    from sqlite_rrf.core import statements

    (tmp_path / "recall").mkdir()
    monkeypatch.setattr(statements, "sql_dir", lambda: str(tmp_path))
    assert main(["--write"]) == 0
    assert (tmp_path / "recall.sql").read_text(encoding="utf-8") == read_sql("recall.sql")
    assert (tmp_path / "recall" / "params.sql").read_text(encoding="utf-8") == read_sql(
        "recall/params.sql"
    )


def _connection(pool: str) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    sqlite_rrf.load(conn)
    from sqlite_rrf.core.migrations import migrate

    migrate(conn)
    if pool == "knn":
        pytest.importorskip("sqlite_vec", reason="the 'knn' pool needs sqlite-vec")
        from sqlite_rrf.core.knn import load_sqlite_vec

        load_sqlite_vec(conn)
        conn.execute(read_sql("knn.sql").replace("{dim}", "4"))
    return conn


#: SQLite's default SQLITE_LIMIT_EXPR_DEPTH (SQLITE_MAX_EXPR_DEPTH)
DEFAULT_EXPR_DEPTH = 1000


@pytest.mark.parametrize("depth", [None, DEFAULT_EXPR_DEPTH // 2])
@pytest.mark.parametrize("pool", POOL_MODES)
@pytest.mark.parametrize("profile", PROFILES)
def test_every_statement_prepares_within_half_the_depth_limit(pool, profile, depth):
    conn = _connection(pool)
    if depth is not None:
        assert conn.limit(apsw.SQLITE_LIMIT_EXPR_DEPTH, -1) == DEFAULT_EXPR_DEPTH
        conn.limit(apsw.SQLITE_LIMIT_EXPR_DEPTH, depth)
        assert conn.limit(apsw.SQLITE_LIMIT_EXPR_DEPTH, -1) == depth
    own = recall_statement(pool, profile)
    conn.execute("EXPLAIN " + own, dict.fromkeys(statement_params(own))).fetchall()
    # only its own pool and profile are in it
    assert f"pool_{pool} AS" in own and f"score_{profile} AS" in own
    assert f"explain_{profile} AS" in own
    assert not [p for p in POOL_MODES if p != pool and f"pool_{p} AS" in own]
    assert not [
        p for p in PROFILES if p != profile and (f"score_{p} AS" in own or f"explain_{p} AS" in own)
    ]
    # nor a parameter that would choose another one
    assert not {"pool", "profile"} & set(statement_params(own))


def test_the_depth_check_can_fail():
    """The limit is enforced on these statements: 40 is too little."""
    conn = _connection("quantized")
    conn.limit(apsw.SQLITE_LIMIT_EXPR_DEPTH, 40)
    sql = recall_statement()
    with pytest.raises(apsw.SQLError, match="too deep|too large"):
        conn.execute("EXPLAIN " + sql, dict.fromkeys(statement_params(sql))).fetchall()


def _predicate(name: str) -> str:
    return "\n".join(
        l for l in read_sql(f"recall/{name}.sql").splitlines() if not l.startswith("--")
    ).strip()


def test_the_filters_are_written_once():
    """The filter predicate and its 'no filter' test are in their own fragment only;
    every other fragment says {filter} / {no_filter}, and each statement has them
    where the fragments say so."""
    pieces = {"filter": "scope IN (:scope, :scope2)", "no_filter": ":kind IS NULL AND"}
    for path in sorted((SQL / "recall").glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        for name, piece in pieces.items():
            assert text.count(piece) == (path.stem == name), (path.name, piece)
    for pool in POOL_MODES:
        used = read_sql("recall/bm25.sql") + read_sql(f"recall/pool_{pool}.sql")
        own = recall_statement(pool, "rrf")
        for name in pieces:
            n = used.count("{" + name + "}")
            assert n >= 1 and own.count(_predicate(name).splitlines()[-1]) == n, (pool, name)
        assert "{filter}" not in own and "{no_filter}" not in own


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
RECALL_OPTIONS = {
    "limit",
    "k",
    "pool",
    "pool_size",
    "bm25_limit",
    "profile",
    "alpha",
    "oversample",
    "weights",
}


def restatements(text: str, where: str) -> list:
    """Lines that say ``default <v>`` with v a recall default, and signatures that give
    a recall option a literal default equal to it."""
    values = _values()
    found = [
        f"{where}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        for m in DEFAULT_WORD.finditer(line)
        if m.group(1) in values
        # "1,000" is a thousand; a lone "default 1" is a count, not the weights'
        and not re.match(r",\d{3}", line[m.end() :])
        and not (m.group(1) == "1" and not line[m.end() :].startswith(","))
    ]
    if where.endswith(".py"):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args[-len(node.args.defaults) :] if node.args.defaults else []
                pairs = list(zip(args, node.args.defaults))
                pairs += [
                    (a, d)
                    for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults)
                    if d is not None
                ]
                for a, d in pairs:
                    if (
                        a.arg in RECALL_OPTIONS
                        and isinstance(d, ast.Constant)
                        and d.value is not None
                        and (d.value if isinstance(d.value, str) else f"{d.value:g}") in values
                    ):
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
    text = (
        f'p.add_argument("--k", help="RRF constant (default {d["k"]:g})")\n'
        f"def recall(self, query, limit={d['result_limit']}): pass\n"
        f'"""the fusion (default {d["profile"]})"""\n'
    )
    assert len(restatements(text, "x.py")) == 3


@pytest.mark.parametrize(
    "args, pool, profile",
    [
        ([], None, None),
        (["--profile", "rrf"], None, "rrf"),
        (["--pool", "recent", "--profile", "decay"], "recent", "decay"),
        (["--pool", "knn"], "knn", None),
    ],
)
def test_cli_prints_the_statement_of_a_pool_and_profile(args, pool, profile):
    """`sqlite-rrf sql` prints sql/recall.sql, and with --pool/--profile any other."""
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "sql", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == recall_statement(pool, profile)
    assert (
        f"pool '{pool or recall_defaults()['pool']}', profile "
        f"'{profile or recall_defaults()['profile']}'" in p.stdout
    )
    if not args:
        assert p.stdout == read_sql("recall.sql")
