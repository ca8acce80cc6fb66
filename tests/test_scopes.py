"""Scopes: the shared scope has a name (``shared``, stored as ``''``), and a
recall covers the project's scope and the shared one by default, everywhere (the hook,
MCP, the command line); an explicit scope narrows it. These are the application layer's
rules (pysrc/sqlite_rrf/app.py)."""

from __future__ import annotations

import pytest

from sqlite_rrf.app import (
    ALL_SCOPES,
    SHARED_SCOPE,
    UserError,
    recall_scopes,
    scope_name,
    stored_scope,
)


def test_the_shared_scope_is_named_shared_and_stored_empty():
    assert SHARED_SCOPE == "shared"
    assert stored_scope("shared") == ""
    assert stored_scope("") == ""
    assert stored_scope("shop") == "shop"
    assert scope_name("") == "shared"
    assert scope_name("shop") == "shop"
    for name in ("", "shop", "a b"):
        assert stored_scope(scope_name(name)) == name


def test_a_recall_covers_the_project_and_the_shared_scope_by_default():
    assert recall_scopes(None, "shop") == ("shop", "")
    assert recall_scopes(None, None) == ("",)
    assert recall_scopes(None, "") == ("",)
    assert recall_scopes(None, "shared") == ("",)
    assert recall_scopes(None, ALL_SCOPES) is None


def test_an_explicit_scope_narrows_the_recall():
    assert recall_scopes("blog", "shop") == ("blog",)
    assert recall_scopes("shop", "shop") == ("shop",)
    assert recall_scopes("shared", "shop") == ("",)
    assert recall_scopes("", "shop") == ("",)
    assert recall_scopes(ALL_SCOPES, "shop") is None


@pytest.mark.parametrize("bad", ['""', "''", ' "" '])
def test_quotes_are_not_a_scope_name(bad):
    for call in (
        lambda: stored_scope(bad),
        lambda: recall_scopes(bad, "shop"),
        lambda: recall_scopes(None, bad),
    ):
        with pytest.raises(UserError) as e:
            call()
        assert "shared" in str(e.value) and "scope" in str(e.value)


def test_every_scope_is_refused_for_a_write():
    with pytest.raises(UserError, match=r"^--scope: '\*' means every scope"):
        stored_scope("*", "--scope")


@pytest.mark.parametrize("bad", [3, ["shop"], None, b"shop"])
def test_a_scope_that_is_not_text_is_refused(bad):
    with pytest.raises(UserError, match=r"^scope: expected a scope's name \(text\)"):
        stored_scope(bad)
    if bad is not None:
        with pytest.raises(UserError, match=r"^scope: expected a scope's name"):
            recall_scopes(bad, "shop")


# ---- the statement: one ranking over a union of scopes (:scope and :scope2) ----

import numpy as np

from sqlite_rrf.store import Store, StoreError
from test_recall import DIM, NOW, assert_same, make_episodes, reference_recall, run_recall

#: The scopes of :func:`scope_db`'s episodes: two projects, a tiny one, the shared one.
SCOPES = ("proj-a", "proj-b", "tiny", "")


@pytest.fixture(scope="module")
def scope_db(tmp_path_factory):
    """1,500 episodes over :data:`SCOPES` ('tiny' holds 1 %), kinds and times spread,
    so that the union of two scopes is neither all rows nor one scope's rows."""
    rng = np.random.default_rng(23)
    eps = make_episodes(1500, rng)
    for i, ep in enumerate(eps):
        ep["scope"] = "tiny" if i % 100 == 3 else ("proj-a", "proj-b", "")[i % 3]
        ep["kind"] = ("fact", "event", None)[i % 3 if i % 7 else 1]
    s = Store(tmp_path_factory.mktemp("scopes") / "s.db")
    s.add_many(eps)
    yield s
    s.close()


#: (:scope, :scope2) and the scopes the reference keeps.
UNIONS = [
    (("proj-a", ""), ("proj-a", "")),
    (("tiny", ""), ("tiny", "")),
    (("proj-b", "tiny"), ("proj-b", "tiny")),
    (("proj-a", "no-such-scope"), ("proj-a",)),
    ((None, "proj-b"), ("proj-b",)),
    (("", ""), ("",)),
]


@pytest.mark.parametrize("pool", ["recent", "all", "quantized"])
@pytest.mark.parametrize("profile", ["rrf", "hybrid", "memory"])
@pytest.mark.parametrize("pair,union", UNIONS)
def test_two_scopes_are_one_ranking_of_their_union(scope_db, pool, profile, pair, union):
    """sql/recall.sql with :scope and :scope2 ranks the episodes of either scope as one
    list: both lists (BM25 and the vector pool) are those of the union's rows, exactly
    as the plain-Python reference (tests/test_recall.py) ranks them."""
    rng = np.random.default_rng(len(pool) * 31 + len(profile) + len(str(pair)))
    scope, scope2 = pair
    for query in ("alpha beta", "gamma delta epsilon", "omega"):
        q = rng.normal(size=DIM)
        kw = dict(limit=12, pool=pool, profile=profile, pool_size=20, bm25_limit=15, oversample=3)
        got = run_recall(scope_db.conn, query, q, scope=scope, scope2=scope2, **kw)
        want = reference_recall(scope_db.conn, query, q, scope=union, **kw)
        assert_same(got, want)
        assert len(got) == 12
        in_scope = dict(scope_db.conn.execute("SELECT id, scope FROM episodes"))
        assert {in_scope[h["id"]] for h in got} <= set(union)
    if len(union) == 2:  # both scopes reach the top somewhere: a union, not one scope
        seen = set()
        for query in ("alpha beta", "gamma delta epsilon", "omega", "zeta", "rho sigma"):
            got = run_recall(
                scope_db.conn,
                query,
                rng.normal(size=DIM),
                scope=scope,
                scope2=scope2,
                **dict(kw, limit=40),
            )
            seen |= {in_scope[h["id"]] for h in got}
        assert seen == set(union)


@pytest.mark.parametrize("pool", ["recent", "all"])
def test_two_scopes_with_the_other_filters(scope_db, pool):
    """:scope2 composes with :kind, :since and :until like :scope does."""
    rng = np.random.default_rng(4)
    filters = dict(
        kind="fact", since=1_700_000_000_000 + 2 * 10**9, until=1_700_000_000_000 + 9 * 10**9
    )
    for query in ("alpha beta", "omega"):
        q = rng.normal(size=DIM)
        kw = dict(limit=10, pool=pool, profile="rrf", pool_size=20, bm25_limit=15, **filters)
        got = run_recall(scope_db.conn, query, q, scope="proj-a", scope2="", **kw)
        want = reference_recall(scope_db.conn, query, q, scope=("proj-a", ""), **kw)
        assert_same(got, want)
        assert got


def test_store_recall_takes_a_tuple_of_scopes(scope_db):
    """Store.recall(scope=(a, b)) is the statement's :scope a and :scope2 b, in one
    ranking; a list is the same; order and repeats do not matter."""
    rng = np.random.default_rng(8)
    q = rng.normal(size=DIM)
    kw = dict(
        limit=10,
        qvec=q,
        touch=False,
        collapse=False,
        time_expressions=False,
        now=NOW,
        profile="rrf",
        pool="all",
        pool_size=20,
        bm25_limit=15,
    )
    got = [h.id for h in scope_db.recall("alpha beta", scope=("proj-a", ""), **kw)]
    want = [
        h["id"]
        for h in reference_recall(
            scope_db.conn,
            "alpha beta",
            q,
            scope=("proj-a", ""),
            limit=10,
            pool="all",
            profile="rrf",
            pool_size=20,
            bm25_limit=15,
        )
    ]
    assert got == want
    assert [h.id for h in scope_db.recall("alpha beta", scope=["", "proj-a", ""], **kw)] == got
    one = [h.id for h in scope_db.recall("alpha beta", scope=("proj-a",), **kw)]
    assert one == [h.id for h in scope_db.recall("alpha beta", scope="proj-a", **kw)]
    assert one != got
    hits = scope_db.recall("alpha beta", scope=("proj-b", "tiny"), **dict(kw, limit=40))
    in_scope = dict(scope_db.conn.execute("SELECT id, scope FROM episodes"))
    assert {in_scope[h.id] for h in hits} == {"proj-b", "tiny"}


@pytest.mark.parametrize(
    "bad,match",
    [
        (3, r"^scope: must be text, a list or tuple of texts, or None"),
        ({"proj-a"}, r"^scope: must be text, a list or tuple"),
        (("proj-a", 3), r"^scope: each scope must be text, got int"),
        ((), r"^scope: an empty list names no scope"),
        (("a", "b", "c"), r"^scope: one recall covers at most 2 scopes"),
    ],
)
def test_store_recall_refuses_a_bad_scope(scope_db, bad, match):
    with pytest.raises(StoreError, match=match):
        scope_db.recall("alpha", scope=bad, touch=False)


def test_the_recent_pool_of_two_scopes_reads_an_index_in_order(scope_db):
    """The 'recent' pool never sorts: one scope seeks idx_episodes_scope_accessed_at, two
    scopes read idx_episodes_accessed_at newest first (only one branch runs)."""
    from sqlite_rrf.core.sql_files import statement_params
    from sqlite_rrf.core.statements import recall_statement

    sql = recall_statement("recent", "rrf")
    start = sql.index("pool_recent AS (") + len("pool_recent AS (")
    body = sql[start : sql.index("\n)", start)]
    params = sql[sql.index("params AS (") :]
    params = params[: params.index("\n)") + 2]
    q = "WITH " + params + "\n" + body
    b = dict.fromkeys(statement_params(q))
    plan = [r[3] for r in scope_db.conn.execute("EXPLAIN QUERY PLAN " + q, b)]
    assert any("SCAN episodes USING INDEX idx_episodes_accessed_at" in d for d in plan), plan
    assert any("idx_episodes_scope_accessed_at (scope=?)" in d for d in plan), plan
    assert not any("TEMP B-TREE" in d for d in plan), plan
    for pair in (
        ("proj-a", ""),
        ("tiny", None),
        (None, "tiny"),
        ("tiny", "tiny"),
        ("tiny", "proj-b"),
        (None, None),
    ):
        b.update(scope=pair[0], scope2=pair[1], pool_size=30)
        got = [r[0] for r in scope_db.conn.execute(q, b)]
        keep = {s for s in pair if s is not None}
        want = [
            r[0]
            for r in scope_db.conn.execute(
                "SELECT rowid, scope FROM episodes WHERE embedding IS NOT NULL "
                "ORDER BY accessed_at DESC, rowid"
            )
            if not keep or r[1] in keep
        ][:30]
        assert got == want, pair


@pytest.mark.parametrize("profile", ["rrf", "hybrid"])
def test_the_knn_pool_of_two_scopes_is_the_exact_pool_of_their_union(tmp_path, profile):
    """'knn' with two scopes is the exact nearest of their union (the index cannot
    filter), so it ranks as 'all' does, which the reference checks above."""
    pytest.importorskip("sqlite_vec", reason="sqlite-vec is not installed")
    rng = np.random.default_rng(3)
    eps = make_episodes(400, rng)
    for i, ep in enumerate(eps):
        ep["scope"] = ("proj-a", "proj-b", "")[i % 3]
    with Store(tmp_path / "k.db") as s:
        s.add_many(eps)
        s.enable_knn()
        for query in ("alpha beta", "omega"):
            q = rng.normal(size=DIM)
            kw = dict(
                limit=15,
                qvec=q,
                touch=False,
                collapse=False,
                time_expressions=False,
                now=NOW,
                profile=profile,
                pool_size=25,
                scope=("proj-a", ""),
            )
            knn = s.recall(query, pool="knn", **kw)
            exact = s.recall(query, pool="all", **kw)
            assert [h.id for h in knn] == [h.id for h in exact]
            assert [h.score for h in knn] == pytest.approx([h.score for h in exact], rel=1e-12)
            want = reference_recall(
                s.conn,
                query,
                q,
                scope=("proj-a", ""),
                limit=15,
                pool="all",
                profile=profile,
                pool_size=25,
            )
            assert [h.id for h in knn] == [h["id"] for h in want]


# ---- every way in recalls the project's scope and the shared one by default ----

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import embedding_model, needs_model

#: A project's memories, another project's and the user's shared ones; every text
#: answers "postgres port".
MEMORIES = [
    dict(id="shop-port", scope="shop", content="The shop's Postgres listens on port 5433."),
    dict(id="shop-deploy", scope="shop", content="Shop deploys go out on Tuesdays."),
    dict(id="blog-port", scope="blog", content="The blog's Postgres listens on port 5432."),
    dict(
        id="user-psql",
        scope="",
        content="The user wants Postgres examples with psql, never pgAdmin; port numbers in full.",
    ),
]
QUERY = "postgres port"


def _no_model_env(tmp_path: Path) -> dict:
    """The environment of a process that can load no model (offline, an empty cache)."""
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    cache = tmp_path / "empty-hf-cache"
    cache.mkdir(exist_ok=True)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache))
    return env


def _memory_db(path: Path, with_model: bool) -> Path:
    emb = None
    if with_model:
        from sqlite_rrf.embedding.embedder import Embedder

        emb = Embedder(embedding_model())
    try:
        with Store(path, embedder=emb) as s:
            s.add_many(MEMORIES)
    finally:
        if emb is not None:
            emb.close()
    return path


def _project(tmp_path: Path) -> Path:
    """A git work tree named 'shop' and the subdirectory an agent works in."""
    root = tmp_path / "code" / "shop"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root / "src"


def _env(tmp_path: Path, with_model: bool) -> dict:
    if with_model:
        return dict(os.environ, SQLITE_RRF_MODEL=str(embedding_model()))
    return _no_model_env(tmp_path)


def _sqlite_rrf(*args: str, env: dict, cwd: Path, stdin: bytes = b"") -> tuple:
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *args],
        input=stdin,
        capture_output=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def _hook_ids(out: str) -> list:
    return [
        line.split("_(id `", 1)[1].split("`", 1)[0]
        for line in out.splitlines()
        if line.startswith("- ")
    ]


@pytest.mark.parametrize("with_model", [False, pytest.param(True, marks=needs_model)])
def test_the_hook_recalls_the_project_and_the_shared_memory_together(tmp_path, with_model):
    db = _memory_db(tmp_path / "m.db", with_model)
    cwd = _project(tmp_path)
    env = _env(tmp_path, with_model)
    payload = json.dumps({"session_id": "s", "prompt": QUERY, "cwd": str(cwd)}).encode()
    rc, out, err = _sqlite_rrf(
        "hook",
        str(db),
        "--no-server",
        "--limit",
        "5",
        "--min-relevance",
        "0",
        env=env,
        cwd=tmp_path,
        stdin=payload,
    )
    assert rc == 0, err
    assert out.splitlines()[0].startswith(
        "Recalled from memory (sqlite-rrf, scope `shop` and the shared scope)"
    ), out
    got = _hook_ids(out)
    assert {"shop-port", "user-psql"} <= set(got), out
    assert "blog-port" not in got, out
    # --scope narrows: one project, the shared memory only, or every scope
    for scope, want in (
        ("shop", {"shop-port"}),
        ("shared", {"user-psql"}),
        ("", {"user-psql"}),
        ("*", {"shop-port", "blog-port", "user-psql"}),
    ):
        rc, out, err = _sqlite_rrf(
            "hook",
            str(db),
            "--no-server",
            "--scope",
            scope,
            "--limit",
            "5",
            "--min-relevance",
            "0",
            env=env,
            cwd=tmp_path,
            stdin=payload,
        )
        got = set(_hook_ids(out))
        assert rc == 0 and want <= got, (scope, out, err)
        if scope != "*":
            assert got <= {
                m["id"]
                for m in MEMORIES
                if m["scope"] == ("" if scope in ("shared", "") else scope)
            }, (scope, out)
    rc, out, err = _sqlite_rrf(
        "hook", str(db), "--no-server", "--scope", '""', env=env, cwd=tmp_path, stdin=payload
    )
    assert rc == 0 and out == "" and "'shared'" in err and "--scope" in err, (out, err)


@pytest.mark.parametrize("with_model", [False, pytest.param(True, marks=needs_model)])
def test_cli_recall_covers_the_project_and_the_shared_scope(tmp_path, with_model):
    db = _memory_db(tmp_path / "m.db", with_model)
    cwd = _project(tmp_path)
    env = _env(tmp_path, with_model)
    rc, out, err = _sqlite_rrf("recall", str(db), QUERY, "--json", "--limit", "5", env=env, cwd=cwd)
    assert rc == 0, err
    got = [h["id"] for h in json.loads(out)]
    assert {"shop-port", "user-psql"} <= set(got) and "blog-port" not in got, got
    for scope, want in (("blog", ["blog-port"]), ("shared", ["user-psql"]), ("", ["user-psql"])):
        rc, out, err = _sqlite_rrf(
            "recall", str(db), QUERY, "--json", "--scope", scope, env=env, cwd=cwd
        )
        assert rc == 0 and [h["id"] for h in json.loads(out)] == want, (scope, out, err)
    rc, out, err = _sqlite_rrf(
        "recall", str(db), QUERY, "--json", "--limit", "5", "--scope", "*", env=env, cwd=cwd
    )
    assert {"shop-port", "blog-port", "user-psql"} <= {h["id"] for h in json.loads(out)}
    rc, out, err = _sqlite_rrf("recall", str(db), QUERY, "--scope", '""', env=env, cwd=cwd)
    assert rc == 1 and out == "" and "--scope" in err and "'shared'" in err, (out, err)
    assert "Error" not in err and "Traceback" not in err


def test_cli_add_to_the_shared_scope_by_its_name(tmp_path):
    db = tmp_path / "m.db"
    env = _no_model_env(tmp_path)
    for scope in ("shared", ""):
        rc, out, err = _sqlite_rrf(
            "add", str(db), f"A shared note {scope!r}.", "--scope", scope, env=env, cwd=tmp_path
        )
        assert rc == 0, err
    rc, out, err = _sqlite_rrf("add", str(db), "quotes", "--scope", '""', env=env, cwd=tmp_path)
    assert rc == 1 and "'shared'" in err, err
    with Store(db) as s:
        assert [r[0] for r in s.conn.execute("SELECT scope FROM episodes")] == ["", ""]


def test_mcp_recall_covers_the_servers_project_and_the_shared_scope(tmp_path):
    """The MCP SDK's own client, a server started in the project 'shop' (its scope derived
    from the working directory)."""
    pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK 2.x is not installed")
    from test_mcp import call, connect, error, no_model_env, run

    db = _memory_db(tmp_path / "m.db", False)
    cwd = _project(tmp_path)
    env = no_model_env(tmp_path)

    async def main():
        async with connect(db, env=env, errlog=tmp_path / "err.txt", cwd=cwd) as s:
            got = await call(s, "recall", query=QUERY, limit=5, min_relevance=0)
            ids = [h["id"] for h in got["hits"]]
            assert {"shop-port", "user-psql"} <= set(ids) and "blog-port" not in ids, got
            assert got["scopes"] == ["shop", "shared"]
            for scope, want in (
                ("blog", ["blog-port"]),
                ("shared", ["user-psql"]),
                ("", ["user-psql"]),
            ):
                got = await call(s, "recall", query=QUERY, scope=scope, min_relevance=0)
                assert [h["id"] for h in got["hits"]] == want, (scope, got)
            got = await call(s, "recall", query=QUERY, scope="*", limit=5, min_relevance=0)
            assert {"shop-port", "blog-port", "user-psql"} <= {h["id"] for h in got["hits"]}
            for tool, args in (("recall", dict(query=QUERY)), ("remember", dict(content="x"))):
                msg = await error(s, tool, scope='""', **args)
                assert msg.startswith("scope: ") and "'shared'" in msg, msg
            r = await call(
                s, "remember", content="The user reads diffs in unified form.", scope="shared"
            )
            assert r["scope"] == "shared"
        with Store(db) as st:
            assert st.conn.execute(
                "SELECT scope FROM episodes WHERE id = ?", (r["id"],)
            ).fetchall() == [("",)]
            assert st.conn.execute(
                "SELECT count(*) FROM episodes WHERE scope IN ('\"\"', 'shared')"
            ).fetchall() == [(0,)]

    run(main())
