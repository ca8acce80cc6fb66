"""The Datasette plugin (sqlite_rrf.datasette_plugin; docs/datasette.md).

Through Datasette's own test client, on a memory database made by Store: the plugin is
listed, the extension's functions run in Datasette's SQL, the ``recall`` canned query
returns what ``Store.recall(..., touch=False)`` returns for the same parameters (and
leaves the database as it was), empty form fields mean "default", and a Python whose
sqlite3 module cannot load extensions gets a clear error. Then once for real: a
``datasette`` server in a subprocess and Debian's chromium, headless, rendering the
recall page to a screenshot (build/datasette-recall.png).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

import pytest

datasette_app = pytest.importorskip(
    "datasette.app", reason="Datasette is not installed: pip install 'sqlite-rrf[datasette]'"
)
from datasette.utils.sqlite import sqlite3 as ds_sqlite3

import sqlite_rrf
from sqlite_rrf import datasette_plugin as plugin
from sqlite_rrf.store import PROFILES, Store

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
NOW = 1_800_000_000_000  # a fixed clock (ms) for ages, the same on both sides
DAY = 86_400_000
#: The browser window: the recall form (its nine first fields) and five rows below it.
WINDOW = (1400, 1540)


def _can_load(module) -> bool:
    conn = module.connect(":memory:")
    try:
        return hasattr(conn, "enable_load_extension")
    finally:
        conn.close()


needs_loading = pytest.mark.skipif(
    not _can_load(ds_sqlite3),
    reason=f"the sqlite3 module Datasette uses ({ds_sqlite3.__name__}) cannot load "
    "extensions: pip install 'sqlite-rrf[datasette]' (pysqlite3-binary)",
)

# ---------------------------------------------------------------- the memory database

# (theme, 4-d embedding direction, sentences): explicit small embeddings, exact in
# float32, so the query vector sent as JSON text and as a float32 blob are the same.
THEMES = {
    "db": (
        [1.0, 0.125, 0.0, 0.0],
        [
            "We chose SQLite for the agent's memory because it is one file.",
            "The memory database uses WAL mode so readers never block the writer.",
            "FTS5 gives BM25 keyword ranking inside SQLite.",
            "Vector similarity is computed by vec_cosine over float32 blobs.",
            "Reciprocal rank fusion merges the BM25 and vector lists.",
            "The recall statement is one SQL query with CTEs.",
            "Postgres was considered for the memory store but rejected as too heavy.",
            "Migrations run inside BEGIN IMMEDIATE with a checksum row.",
        ],
    ),
    "cook": (
        [0.0, 1.0, 0.25, 0.0],
        [
            "The sourdough starter needs feeding twice a day.",
            "Risotto wants warm stock added one ladle at a time.",
            "Roast the peppers until the skin blisters, then peel.",
            "Use a cast iron pan for the steak and let it rest.",
            "The lentil soup was better with smoked paprika.",
            "Bake the bread at 250 degrees with steam for the first minutes.",
            "Fresh basil goes in the pesto at the very end.",
        ],
    ),
    "travel": (
        [0.0, 0.0, 1.0, 0.375],
        [
            "The train from Zurich to Milan crosses the Gotthard base tunnel.",
            "Book the ferry to the islands a week ahead in summer.",
            "The hotel in Lisbon is near the tram 28 stop.",
            "Pack a rain jacket for the Scottish highlands.",
            "The night bus to Krakow leaves at eleven.",
            "Passport renewal takes about six weeks.",
            "The museum is closed on Mondays.",
        ],
    ),
    "garden": (
        [0.25, 0.0, 0.0, 1.0],
        [
            "Tomatoes need staking once they reach knee height.",
            "Water the seedlings in the morning, not at night.",
            "The compost heap should be turned every two weeks.",
            "Plant garlic in autumn for a summer harvest.",
            "Slugs ate the lettuce; try copper tape around the bed.",
            "Prune the apple tree in late winter.",
            "The database of seed varieties lives in a spreadsheet.",
        ],
    ),
}
QUERY = "which database did we choose for the agent memory"
QVEC = [1.0, 0.125, 0.25, 0.0]  # db-01's direction


def _episodes():
    eps = []
    i = 0
    for theme, (direction, sentences) in THEMES.items():
        for j, text in enumerate(sentences):
            # a small per-episode tilt (multiples of 1/8) so similarities differ
            emb = [
                d + (0.125 * ((i + j + n) % 3) if d == 0 else 0.0) for n, d in enumerate(direction)
            ]
            eps.append(
                dict(
                    id=f"{theme}-{j + 1:02d}",
                    content=text,
                    embedding=emb,
                    created_at=NOW - (i * 3 + 1) * DAY,
                    accessed_at=NOW - ((i * 7) % 40 + 1) * DAY,
                    access_count=(i * 5) % 9,
                    importance="high" if i % 11 == 3 else "normal",
                    scope=theme if i % 2 else "",
                    kind="note" if i % 3 else "fact",
                )
            )
            i += 1
    return eps


@pytest.fixture(scope="module")
def memory_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("datasette") / "memory.db"
    with Store(path) as store:
        store.add_many(_episodes())
    return path


@pytest.fixture(scope="module")
def knn_db(tmp_path_factory) -> Path:
    pytest.importorskip(
        "sqlite_vec", reason="sqlite-vec is not installed: pip install 'sqlite-rrf[knn]'"
    )
    path = tmp_path_factory.mktemp("datasette-knn") / "knnmem.db"
    with Store(path) as store:
        store.add_many(_episodes())
        store.enable_knn()
    return path


@pytest.fixture(scope="module")
def plain_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("datasette-plain") / "notes.db"
    conn = ds_sqlite3.connect(str(path))
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes(body) VALUES ('no episodes here')")
    conn.commit()
    conn.close()
    return path


def fetch(paths, *dbs, metadata=None):
    """GET each path with Datasette's test client on a fresh Datasette over ``dbs``;
    returns the responses. (Datasette's 1 s limit on a query is raised: the recall
    statement is compiled on each fresh connection, and this machine may be busy.)"""

    async def go():
        ds = datasette_app.Datasette(
            [str(d) for d in dbs], metadata=metadata, settings={"sql_time_limit_ms": 60_000}
        )
        await ds.invoke_startup()
        return [await ds.client.get(p) for p in paths]

    return asyncio.run(go())


def get_json(path, *dbs, metadata=None):
    (r,) = fetch([path], *dbs, metadata=metadata)
    assert r.status_code == 200, r.text
    return r.json()


def qs(**params) -> str:
    return urllib.parse.urlencode(params)


def store_recall(db: Path, **kw):
    with Store(db) as store:
        return store.recall(
            QUERY if "query" not in kw else kw.pop("query"),
            kw.pop("limit", 3),
            touch=False,
            force=True,
            now=NOW,
            collapse=False,
            **kw,
        )  # the statement's ranking, as the page's


def assert_same(rows, hits):
    assert [r["id"] for r in rows] == [h.id for h in hits]
    for r, h in zip(rows, hits):
        assert r["score"] == pytest.approx(h.score, rel=1e-12, abs=1e-15)
        for col in ("bm25_rank", "vec_rank", "recency_rank", "access_rank"):
            assert r[col] == getattr(h, col), (h.id, col)
        if h.similarity is None:
            assert r["similarity"] is None
        else:
            assert r["similarity"] == pytest.approx(h.similarity, rel=1e-12)
        assert set(json.loads(r["explain"] or "{}")) == set(h.explain), h.id


# ---------------------------------------------------------------- the plugin itself


def test_form_fields_are_the_statements_parameters():
    """Every named parameter of recall.sql is a form field (query first), each is
    wrapped so that '' means NULL, and numbers are converted: a new parameter in
    recall.sql shows up here and must be classified (TEXT_PARAMS or numeric)."""
    from sqlite_rrf.core.sql_files import statement_params
    from sqlite_rrf.core.statements import recall_statement

    q = plugin.canned_query()
    assert q["params"][:9] == [
        "query",
        "limit",
        "profile",
        "pool",
        "scope",
        "kind",
        "since",
        "until",
        "min_relevance",
    ]
    # the statement's parameters, and profile and pool, which choose the statement
    in_sql = set(statement_params(recall_statement()))  # relevance is the statement's
    assert set(q["params"]) == in_sql | {"profile", "pool"}
    assert {
        "query",
        "qvec",
        "limit",
        "since",
        "until",
        "scope",
        "kind",
        "min_relevance",
        "now",
        "time_from",
        "time_to",
    } <= in_sql
    code = "\n".join(line for line in q["sql"].splitlines() if not line.lstrip().startswith("--"))
    for name in in_sql:
        assert plugin.queries.form_param(name) in code, name
    # an empty qvec is the query's embedding; since/until read ISO dates
    assert "coalesce(nullif(:qvec, ''), rrf_embed(:query))" in code
    assert "rrf_form_time(:since, 'since')" in code
    # no parameter is left bare: each :x appears only inside its wrapper
    bare = code
    for wrapped in sorted(
        (plugin.queries.form_param(n) for n in q["params"]), key=len, reverse=True
    ):
        bare = bare.replace(wrapped, "")
    assert [n for n in q["params"] if f":{n}" in bare] == []
    # the statement's own comments are kept verbatim
    assert "-- 3. Candidates: the pool plus the BM25 hits it missed" in q["sql"]
    assert "UPDATE " not in code.upper()  # read-only: recall here never touches


@needs_loading
def test_plugin_is_listed(memory_db):
    plugins = get_json("/-/plugins.json", memory_db)
    (mine,) = [p for p in plugins if "sqlite_rrf" in p["name"].replace("-", "_")]
    assert {"prepare_connection", "canned_queries", "startup"} <= set(mine["hooks"])
    assert mine["version"] == sqlite_rrf.__version__


@needs_loading
def test_rrf_functions_run_in_datasette_sql(memory_db):
    sql = (
        "SELECT rrf_version() AS v, fts5_query('agent''s memory: -x') AS q, "
        "vec_cosine('[1, 0]', '[1, 1]') AS c"
    )
    (row,) = get_json(f"/memory.json?{qs(sql=sql, _shape='array')}", memory_db)
    assert row["v"] == sqlite_rrf.__version__
    assert row["q"] == '"agent" OR "s" OR "memory" OR "x"'
    assert row["c"] == pytest.approx(2**-0.5)


HYBRID_SQL = """
WITH bm25 AS (
  SELECT rowid, row_number() OVER (ORDER BY bm25(episodes_fts), rowid) AS r
  FROM episodes_fts WHERE episodes_fts MATCH fts5_query(:q)
),
vec AS (
  SELECT rowid, row_number() OVER (ORDER BY vec_cosine(embedding, :v) DESC, rowid) AS r
  FROM episodes
),
lists AS (SELECT rowid, r FROM bm25 UNION ALL SELECT rowid, r FROM vec)
SELECT e.id, rrf_fuse(l.r) AS score
FROM lists AS l JOIN episodes AS e ON e.rowid = l.rowid
GROUP BY l.rowid ORDER BY score DESC, e.rowid LIMIT 5
"""


@needs_loading
def test_hybrid_query_with_rrf_fuse_and_vec_cosine(memory_db):
    rows = get_json(
        f"/memory.json?{qs(sql=HYBRID_SQL, q=QUERY, v=json.dumps(QVEC), _shape='array')}", memory_db
    )
    # the same statement over apsw
    import apsw

    conn = apsw.Connection(str(memory_db))
    sqlite_rrf.load(conn)
    expected = conn.execute(HYBRID_SQL, {"q": QUERY, "v": json.dumps(QVEC)}).fetchall()
    conn.close()
    assert [(r["id"], r["score"]) for r in rows] == [(i, pytest.approx(s)) for i, s in expected]
    assert rows[0]["id"] == "db-01"  # "We chose SQLite for the agent's memory …"


@needs_loading
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("with_qvec", [True, False], ids=["qvec", "no-qvec"])
def test_recall_canned_query_matches_store(memory_db, profile, with_qvec):
    params = dict(query=QUERY, limit=5, profile=profile, now=NOW, _shape="array")
    if with_qvec:
        params["qvec"] = json.dumps(QVEC)
    rows = get_json(f"/memory/recall.json?{qs(**params)}", memory_db)
    hits = store_recall(memory_db, limit=5, profile=profile, qvec=QVEC if with_qvec else None)
    assert len(hits) == 5
    assert_same(rows, hits)


@needs_loading
def test_recall_options_reach_the_statement(memory_db):
    kw = dict(
        weights=(1.0, 0.5, 0.0, 2.0),
        k=10.0,
        pool="all",
        bm25_limit=3,
        min_similarity=0.5,
        alpha=0.25,
    )
    params = dict(
        query="memory sqlite bread",
        limit=7,
        profile="rrf",
        now=NOW,
        qvec=json.dumps(QVEC),
        w_bm25=1,
        w_vec=0.5,
        w_recency=0,
        w_access=2,
        k=10,
        pool="all",
        bm25_limit=3,
        min_similarity=0.5,
        alpha=0.25,
        _shape="array",
    )
    rows = get_json(f"/memory/recall.json?{qs(**params)}", memory_db)
    hits = store_recall(
        memory_db, query="memory sqlite bread", limit=7, profile="rrf", qvec=QVEC, **kw
    )
    assert_same(rows, hits)
    assert all(r["recency_rank"] is not None for r in rows)
    assert "recency" not in json.loads(rows[0]["explain"])  # weight 0: list off


@needs_loading
@pytest.mark.parametrize(
    "filters",
    [
        dict(scope=next(iter(THEMES))),
        dict(kind="fact"),
        dict(since=NOW - 30 * DAY, until=NOW - 5 * DAY),
    ],
)
def test_filters_reach_the_statement(memory_db, filters):
    params = dict(
        query="memory sqlite bread",
        limit=20,
        profile="rrf",
        now=NOW,
        qvec=json.dumps(QVEC),
        _shape="array",
        **filters,
    )
    rows = get_json(f"/memory/recall.json?{qs(**params)}", memory_db)
    hits = store_recall(
        memory_db, query="memory sqlite bread", limit=20, profile="rrf", qvec=QVEC, **filters
    )
    assert rows and len(rows) < len(_episodes())
    assert_same(rows, hits)


@needs_loading
def test_empty_fields_mean_defaults(memory_db):
    """A form submitted with every field empty but the query: the statement's
    defaults (limit 3, profile memory, no vector list)."""
    empty = {name: "" for name in plugin.canned_query()["params"]}
    empty.update(query=QUERY, now=str(NOW), _shape="array")
    rows = get_json(f"/memory/recall.json?{qs(**empty)}", memory_db)
    hits = store_recall(memory_db)
    assert len(rows) == 3
    assert_same(rows, hits)
    assert all(r["vec_rank"] is None and r["similarity"] is None for r in rows)
    # only the query given: Datasette fills the other fields with ''
    rows2 = get_json(f"/memory/recall.json?{qs(query=QUERY, now=NOW, _shape='array')}", memory_db)
    assert rows2 == rows


@needs_loading
def test_bad_number_is_an_error_not_a_zero(memory_db):
    """A number field holding text fails the query (never read as 0); the page says
    which field and why in the command line's words, not SQLite's "malformed JSON"."""
    r_json, r_page = fetch(
        [
            f"/memory/recall.json?{qs(query=QUERY, limit='three')}",
            f"/memory/recall?{qs(query=QUERY, limit='three')}",
        ],
        memory_db,
    )
    assert r_json.status_code == 400
    assert r_json.json()["error"] == "limit: expected a number such as 5 or 0.6, got 'three'"
    assert r_page.status_code == 400
    assert "limit: expected a number such as 5 or 0.6, got &#39;three&#39;" in r_page.text
    assert "malformed JSON" not in r_page.text


@needs_loading
def test_recall_is_read_only(memory_db):
    def snapshot():
        conn = ds_sqlite3.connect(str(memory_db))
        try:
            return conn.execute(
                "SELECT id, accessed_at, access_count FROM episodes ORDER BY id"
            ).fetchall()
        finally:
            conn.close()

    before = snapshot()
    fetch(
        [f"/memory/recall.json?{qs(query=QUERY, limit=10)}", f"/memory/recall?{qs(query=QUERY)}"],
        memory_db,
    )
    assert snapshot() == before
    q = get_json("/memory.json", memory_db)
    (recall,) = [c for c in q["queries"] if c["name"] == "recall"]
    assert not recall.get("write")


@needs_loading
def test_recall_page_html(memory_db):
    (r,) = fetch([f"/memory/recall?{qs(query=QUERY, limit=5, qvec=json.dumps(QVEC))}"], memory_db)
    assert r.status_code == 200
    html = r.text
    assert plugin.TITLE in html
    for name in ("query", "limit", "profile", "qvec"):
        assert f'name="{name}"' in html
    for hit in store_recall(memory_db, limit=5, qvec=QVEC):
        assert hit.id in html


@needs_loading
def test_no_canned_query_without_episodes(memory_db, plain_db):
    r_recall, r_sql, r_db = fetch(
        [
            "/notes/recall.json",
            f"/notes.json?{qs(sql='select rrf_version() as v', _shape='array')}",
            "/notes.json",
        ],
        memory_db,
        plain_db,
    )
    assert r_recall.status_code == 404
    assert r_sql.json() == [{"v": sqlite_rrf.__version__}]
    assert not any(q["name"].startswith("recall") for q in r_db.json()["queries"])
    assert "recall_knn" not in [q["name"] for q in get_json("/memory.json", memory_db)["queries"]]


@needs_loading
def test_recall_knn_canned_query(knn_db):
    q = get_json("/knnmem.json", knn_db)
    assert {"recall", "recall_knn"} <= {c["name"] for c in q["queries"]}
    params = dict(query=QUERY, limit=4, qvec=json.dumps(QVEC), pool_size=6, now=NOW, _shape="array")
    rows = get_json(f"/knnmem/recall_knn.json?{qs(**params)}", knn_db)
    hits = store_recall(knn_db, limit=4, pool="knn", pool_size=6, qvec=QVEC)
    assert_same(rows, hits)


@needs_loading
@pytest.mark.parametrize("form, stored", [("shared", ""), ("", None), ("*", None)])
def test_scope_field_names_the_shared_scope(memory_db, form, stored):
    """The scope field takes the shared scope's name ('shared' is stored as ''); empty
    and '*' are every scope; quotes only are refused with the CLI's words."""
    params = dict(
        query="memory sqlite bread",
        limit=20,
        profile="rrf",
        now=NOW,
        qvec=json.dumps(QVEC),
        scope=form,
        _shape="array",
    )
    rows = get_json(f"/memory/recall.json?{qs(**params)}", memory_db)
    hits = store_recall(
        memory_db, query="memory sqlite bread", limit=20, profile="rrf", qvec=QVEC, scope=stored
    )
    assert rows
    assert_same(rows, hits)
    quotes = '""'
    (r,) = fetch([f"/memory/recall?{qs(query=QUERY, scope=quotes)}"], memory_db)
    assert r.status_code == 400
    assert "is quotes, not a scope&#39;s name" in r.text


@needs_loading
def test_iso_since_and_until(memory_db):
    """since/until take an ISO date (UTC) as the CLI's --since does, the same rows as
    their ms; a bad one is said in the CLI's words, not "malformed JSON"."""
    import datetime as dt

    def iso(ms):
        return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M")

    since, until = NOW - 30 * DAY, NOW - 5 * DAY
    base = dict(
        query="memory sqlite bread",
        limit=20,
        profile="rrf",
        now=NOW,
        qvec=json.dumps(QVEC),
        _shape="array",
    )
    rows = get_json(
        f"/memory/recall.json?{qs(**base, since=iso(since), until=iso(until))}", memory_db
    )
    hits = store_recall(
        memory_db,
        query="memory sqlite bread",
        limit=20,
        profile="rrf",
        qvec=QVEC,
        since=since // 60_000 * 60_000,
        until=until // 60_000 * 60_000,
    )
    assert rows and len(rows) < len(_episodes())
    assert_same(rows, hits)
    r, r_json = fetch(
        [
            f"/memory/recall?{qs(query=QUERY, since='yesterdy')}",
            f"/memory/recall.json?{qs(query=QUERY, until='2026-13-01')}",
        ],
        memory_db,
    )
    assert r.status_code == 400
    assert "since: expected milliseconds since the epoch or an ISO date" in r.text
    assert "malformed JSON" not in r.text and "user-defined function" not in r.text
    assert r_json.status_code == 400
    assert r_json.json()["error"].startswith("until: expected milliseconds since the epoch")


# ---------------------------------------------------------------- with the real model

MODEL = os.environ.get("SQLITE_RRF_MODEL") or "/work/shared/models/all-MiniLM-L6-v2-f16.gguf"
needs_model = pytest.mark.skipif(
    not os.path.isfile(MODEL),
    reason=f"the embedding model is missing ({MODEL}); set SQLITE_RRF_MODEL to a GGUF file",
)
#: Queries for the demo memory: plain, one naming a time ("last week": a window), and
#: one whose words hit nothing (the vector list alone finds it).
MODEL_QUERIES = [
    "where are the postgres credentials kept?",
    "what did we decide about the deploys last week",
    "holiday plans of the team lead",
]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """``sqlite-rrf demo``'s memory (32 episodes, all in the shared scope), embedded
    with the real model."""
    if not os.path.isfile(MODEL):
        pytest.skip(f"the embedding model is missing ({MODEL})")
    path = tmp_path_factory.mktemp("datasette-demo") / "demo.db"
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "demo", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, SQLITE_RRF_MODEL=MODEL),
        cwd=path.parent,
    )
    assert p.returncode == 0, p.stderr
    return path


def cli_recall(db: Path, query: str, *args: str, model: str = MODEL):
    """``sqlite-rrf recall DB QUERY --json --no-touch ARGS`` with the model: the hits."""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "recall",
            str(db),
            query,
            "--json",
            "--no-touch",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, SQLITE_RRF_MODEL=model),
        cwd=db.parent,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@needs_loading
@needs_model
@pytest.mark.parametrize("query", MODEL_QUERIES)
def test_page_embeds_the_query_and_recalls_as_the_cli(demo_db, query, monkeypatch):
    """No qvec: the plugin embeds the typed query with the database's model, and the
    page returns what `sqlite-rrf recall` returns (ids, order, scores, ranks), the
    vector list included."""
    monkeypatch.setenv("SQLITE_RRF_MODEL", MODEL)
    rows = get_json(f"/demo/recall.json?{qs(query=query, limit=5, _shape='array')}", demo_db)
    hits = cli_recall(demo_db, query, "--limit", "5")
    assert [r["id"] for r in rows] == [h["id"] for h in hits]
    for r, h in zip(rows, hits):
        for col in ("bm25_rank", "vec_rank"):
            assert r[col] == h[col], (h["id"], col)
        assert r["score"] == pytest.approx(h["score"], rel=1e-9, abs=1e-12)
        assert r["similarity"] == pytest.approx(h["similarity"], rel=1e-6)
        assert r["relevance"] == pytest.approx(h["relevance"], rel=1e-9)
    assert all(r["vec_rank"] is not None for r in rows)  # the vector list is on
    q = get_json("/demo.json", demo_db)
    (recall,) = [c for c in q["queries"] if c["name"] == "recall"]
    assert (
        "The vector list is on: the query is embedded with all-MiniLM-L6-v2"
        in recall["description"]
    )


@needs_loading
@needs_model
def test_iso_since_as_the_cli(demo_db, monkeypatch):
    """since=2026-11-01 (an ISO date, which gave "malformed JSON" before) keeps the
    episodes the CLI's --since keeps."""
    import datetime as dt

    monkeypatch.setenv("SQLITE_RRF_MODEL", MODEL)
    since = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=60)).strftime("%Y-%m-%d")
    query = "postgres database"
    rows = get_json(
        f"/demo/recall.json?{qs(query=query, limit=8, since=since, _shape='array')}", demo_db
    )
    hits = cli_recall(demo_db, query, "--limit", "8", "--since", since)
    every = cli_recall(demo_db, query, "--limit", "8")
    assert [r["id"] for r in rows] == [h["id"] for h in hits]
    assert [h["id"] for h in hits] != [h["id"] for h in every]  # the filter did something


@needs_loading
@needs_model
def test_model_from_the_plugin_configuration(demo_db, monkeypatch):
    """Without $SQLITE_RRF_MODEL, the plugin's configured model embeds the query."""
    monkeypatch.delenv("SQLITE_RRF_MODEL", raising=False)
    meta = {"plugins": {plugin.PLUGIN_NAME: {"model": MODEL}}}
    rows = get_json(
        f"/demo/recall.json?{qs(query=MODEL_QUERIES[0], limit=3, _shape='array')}",
        demo_db,
        metadata=meta,
    )
    hits = cli_recall(demo_db, MODEL_QUERIES[0], "--limit", "3")
    assert [r["id"] for r in rows] == [h["id"] for h in hits]
    assert rows[0]["vec_rank"] == 1


@needs_loading
@needs_model
def test_no_model_the_page_still_works(demo_db, tmp_path, monkeypatch):
    """A model that cannot be loaded turns the vector list off: the page still recalls
    (BM25, recency, access) and its description says why."""
    missing = tmp_path / "no-such-model.gguf"
    monkeypatch.setenv("SQLITE_RRF_MODEL", str(missing))
    rows = get_json(
        f"/demo/recall.json?{qs(query=MODEL_QUERIES[0], limit=3, _shape='array')}", demo_db
    )
    assert rows and rows[0]["id"] == "ep-001"
    assert all(r["vec_rank"] is None and r["similarity"] is None for r in rows)
    (r,) = fetch([f"/demo/recall?{qs(query=MODEL_QUERIES[0])}"], demo_db)
    assert r.status_code == 200
    assert "The vector list is off:" in r.text and "no-such-model.gguf" in r.text


@needs_loading
@needs_model
def test_page_layout(demo_db, monkeypatch):
    """The HTML page: scores to 3 decimals, ISO dates, explain in words (the vector's
    rank and cosine), the select boxes' script; the JSON keeps the raw numbers."""
    monkeypatch.setenv("SQLITE_RRF_MODEL", MODEL)
    url = f"/demo/recall?{qs(query=MODEL_QUERIES[0], limit=3)}"
    (r,) = fetch([url], demo_db)
    assert r.status_code == 200
    html = r.text
    assert '<td class="col-score"><span title="1.0">1.000</span></td>' in html
    assert "vector #1 (cos 0.7" in html and "blend 0.5·cos/best 1.000" in html
    # the ISO time may wrap after its date (<wbr>): its column is a date's width
    assert re.search(
        r'<td class="col-created_at"><span title="\d+ ms">20\d\d-\d\d-\d\d<wbr>T\d\d:\d\d', html
    )
    assert '"profile": [["", "default (hybrid)"]' in html  # the select boxes' script
    rows = get_json(
        f"/demo/recall.json?{qs(query=MODEL_QUERIES[0], limit=3, _shape='array')}", demo_db
    )
    assert isinstance(rows[0]["created_at"], int) and json.loads(rows[0]["explain"])


# ---------------------------------------------------------------- a Python that cannot load


class _NoLoadConnection:
    """A connection like the sqlite3 module's where it was built without
    --enable-loadable-sqlite-extensions."""

    def execute(self, *a):  # pragma: no cover - never reached
        raise AssertionError

    def close(self):
        pass


class _NoLoadModule:
    __name__ = "sqlite3"

    @staticmethod
    def connect(path):
        return _NoLoadConnection()


def test_clear_error_when_sqlite3_cannot_load_extensions():
    with pytest.raises(plugin.DatasetteExtensionError) as e:
        plugin.prepare_connection(_NoLoadConnection())
    msg = str(e.value)
    assert "enable_load_extension" in msg and "pysqlite3-binary" in msg
    assert "sqlite-rrf[datasette]" in msg
    with pytest.raises(plugin.DatasetteExtensionError, match="pysqlite3"):
        plugin.check_module(_NoLoadModule)
    assert isinstance(e.value, sqlite_rrf.ExtensionLoadError)


def test_datasette_refuses_to_start_without_extension_loading(memory_db):
    """``datasette memory.db`` on Python's own sqlite3 (pysqlite3 hidden): where that
    module cannot load extensions, Datasette stops at startup with the message."""
    import sqlite3

    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        pytest.skip("this Python's sqlite3 can load extensions; nothing to refuse")
    code = (
        "import sys; sys.modules['pysqlite3'] = None; sys.argv = ['datasette'] + "
        "sys.argv[1:]; from datasette.cli import cli; cli()"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "serve", str(memory_db), "--get", "/-/versions.json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Error: sqlite-rrf's Datasette plugin cannot load its SQLite extension" in p.stderr
    assert "pysqlite3-binary" in p.stderr
    assert "Traceback" not in p.stderr


# ---------------------------------------------------------------- a real browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _png_info(data: bytes):
    """(width, height, distinct byte values in the decompressed image): enough to
    tell a rendered page from a blank one without an image library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def _chromium(*args, tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@needs_loading
@needs_model
@pytest.mark.slow
@pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason=f"{CHROMIUM} is missing: Debian's chromium "
    "(apt-get install chromium; `make system-deps`)",
)
def test_recall_in_headless_chromium(demo_db, tmp_path):
    """`datasette demo.db` in a subprocess (the model from $SQLITE_RRF_MODEL), the recall
    page with a typed query and an ISO since in headless Chromium: the rows are those of
    `sqlite-rrf recall` in its order, with the vector list (the explain names the
    vector's rank); profile and pool are select boxes; no "malformed JSON". The
    screenshot goes to build/datasette-recall.png (docs/img/datasette-recall.png is one)."""
    import datetime as dt

    port = _free_port()
    log = open(tmp_path / "datasette.log", "w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "datasette",
            "serve",
            str(demo_db),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--setting",
            "sql_time_limit_ms",
            "60000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, SQLITE_RRF_MODEL=MODEL),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/versions.json", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    pytest.fail(
                        "datasette did not start:\n" + (tmp_path / "datasette.log").read_text()
                    )
                time.sleep(0.2)
        query = "where are the postgres credentials kept?"
        since = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=400)).strftime("%Y-%m-%d")
        url = f"{base}/demo/recall?{qs(query=query, limit=5, since=since)}"
        expected = [h["id"] for h in cli_recall(demo_db, query, "--limit", "5", "--since", since)]
        # the first request loads the model: made here, so the browser's is a page view
        with urllib.request.urlopen(url, timeout=120) as r:
            assert r.status == 200

        shot = tmp_path / "datasette-recall.png"
        p = _chromium(f"--screenshot={shot}", url, tmp=tmp_path / "profile-shot")
        assert shot.exists(), p.stderr[-2000:]
        data = shot.read_bytes()
        out = ROOT / "build" / "datasette-recall.png"
        out.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, out)
        assert len(data) > 20_000, f"screenshot is only {len(data)} bytes"
        width, height, distinct = _png_info(data)
        assert (width, height) == WINDOW
        assert distinct > 50, "the screenshot looks blank"

        for attempt in range(2):  # a loaded machine: the first may end before the page
            p = _chromium("--dump-dom", url, tmp=tmp_path / f"profile-dom{attempt}")
            dom = p.stdout
            if plugin.TITLE in dom:
                break
        assert plugin.TITLE in dom, (p.returncode, dom[-2000:], p.stderr[-2000:])
        assert "malformed JSON" not in dom and "message-error" not in dom
        assert "The vector list is on" in dom
        # the script made profile and pool select boxes, the current value kept
        for name in ("profile", "pool"):
            assert re.search(rf'<select name="{name}" id="qp\d+">', dom), name
        assert '<option value="rrf">rrf</option>' in dom
        assert f'name="since" value="{since}"' in dom
        # the rows, in the CLI's order, each with its vector rank in the explain
        ids = re.findall(r'<td class="col-id">([^<]+)</td>', dom)
        assert ids == expected
        explains = re.findall(r'<div class="rrf-explain">(.*?)</div>', dom)
        assert len(explains) == len(expected)
        assert all(re.search(r"vector #\d+ \(cos 0\.\d{3}\)", e) for e in explains), explains
        assert "vector #1 (cos" in explains[0]
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


# ---------------------------------------------------------------- table pages


@needs_loading
def test_table_pages_show_times_and_vectors_in_words(memory_db):
    """The ``episodes`` table's page and a row's page: ``created_at`` and ``accessed_at``
    as ISO 8601 UTC times (the ms in the title), the embedding as ``4-d vector`` (its
    bytes in the title), not Datasette's ``<Binary: 16 bytes>``; the JSON keeps the raw
    values."""
    from sqlite_rrf.app import iso_time

    (ep,) = [e for e in _episodes() if e["id"] == "db-01"]
    table, row_json = fetch(
        ["/memory/episodes?id=db-01", "/memory/episodes.json?id=db-01&_shape=array"],
        memory_db,
    )
    assert table.status_code == 200 and row_json.status_code == 200
    (raw,) = row_json.json()
    assert raw["created_at"] == ep["created_at"]  # the JSON: ms, as stored
    html = table.text
    created = iso_time(ep["created_at"])
    assert f'<span title="{ep["created_at"]} ms since the epoch">{created}</span>' in html, html[
        -3000:
    ]
    assert f'<span title="{ep["accessed_at"]} ms since the epoch">' in html
    assert ">4-d vector</span>" in html and "16 bytes: 4 little-endian float32" in html
    assert "Binary:" not in html  # nor the content key: its hex
    assert re.search(
        r'<td class="col-content_key[^"]*"><span title="[^"]*SHA-256[^"]*">[0-9a-f]{32}<', html
    )
    (row_page,) = fetch([f"/memory/episodes/{raw['rowid']}"], memory_db)
    assert row_page.status_code == 200
    assert f">{created}</span>" in row_page.text and ">4-d vector</span>" in row_page.text
    # another database's table of the same column names is left alone
    (notes,) = fetch(["/memory/rrf_meta"], memory_db)
    assert notes.status_code == 200 and "-d vector" not in notes.text


#: The page that measures another page of the same origin in an iframe as wide as the
#: browser's window: the right edge of the widest element of its body, the document's
#: scroll width, and how many rows its table has, written into its own DOM (Chromium's
#: --dump-dom prints it).
MEASURE_HTML = """<!doctype html><html><head><meta charset="utf-8"></head>
<body style="margin:0"><iframe id="f" style="width:WIDTHpx;height:1500px;border:0"></iframe>
<script>
var f = document.getElementById('f');
f.addEventListener('load', function () {
  var d = f.contentDocument, right = 0, widest = '';
  d.querySelectorAll('body *').forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.right > right) { right = r.right; widest = el.tagName + '.' + el.className; }
  });
  var out = document.createElement('pre');
  out.id = 'measured';
  out.textContent = 'right=' + Math.ceil(right) + ' scroll=' + d.documentElement.scrollWidth +
    ' rows=' + d.querySelectorAll('table.rows-and-columns tbody tr').length +
    ' widest=' + widest;
  document.body.appendChild(out);
});
f.src = decodeURIComponent(location.hash.slice(1));
</script></body></html>
"""


@needs_loading
@needs_model
@pytest.mark.slow
@pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason=f"{CHROMIUM} is missing: Debian's chromium "
    "(apt-get install chromium; `make system-deps`)",
)
def test_recall_page_fits_in_1400_px(demo_db, tmp_path):
    """The recall page of the demo memory, every list on (the model), its ten columns
    of numbers and two of text, in a 1,400 px wide window of headless Chromium: no
    element reaches past the window's right edge, and nothing scrolls sideways."""
    from sqlite_rrf.datasette_plugin.page import WIDTH_PX

    assert WIDTH_PX == WINDOW[0] == 1400
    static = tmp_path / "static"
    static.mkdir()
    (static / "measure.html").write_text(MEASURE_HTML.replace("WIDTH", str(WIDTH_PX)))
    port = _free_port()
    log = open(tmp_path / "datasette.log", "w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "datasette",
            "serve",
            str(demo_db),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--static",
            f"measure:{static}",
            "--setting",
            "sql_time_limit_ms",
            "60000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, SQLITE_RRF_MODEL=MODEL),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/versions.json", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    pytest.fail(
                        "datasette did not start:\n" + (tmp_path / "datasette.log").read_text()
                    )
                time.sleep(0.2)
        page = f"/demo/recall?{qs(query=MODEL_QUERIES[0], limit=5)}"
        with urllib.request.urlopen(base + page, timeout=120) as r:  # loads the model
            assert r.status == 200
        url = f"{base}/measure/measure.html#{urllib.parse.quote(page, safe='')}"
        measured = None
        for attempt in range(2):  # a loaded machine: the first may end before the page
            p = _chromium(
                "--virtual-time-budget=20000",
                "--dump-dom",
                url,
                tmp=tmp_path / f"profile-width{attempt}",
            )
            measured = re.search(r"right=(\d+) scroll=(\d+) rows=(\d+) widest=(\S*)", p.stdout)
            if measured:
                break
        assert measured, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
        right, scroll, rows = (int(measured.group(i)) for i in (1, 2, 3))
        assert rows == 5, measured.group(0)  # the recall's rows, not an error page
        assert right <= WIDTH_PX and scroll <= WIDTH_PX, measured.group(0)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@needs_loading
def test_since_not_before_until_is_said_not_an_empty_page(memory_db):
    """since later than until: the page says so in the command line's words, and the JSON
    is a 400 with that line, instead of an empty answer; relative times are read."""
    r, r_json, ok = fetch(
        [
            f"/memory/recall?{qs(query=QUERY, since='2026-11-02', until='2026-11-01')}",
            f"/memory/recall.json?{qs(query=QUERY, since='yesterday', until='3 days ago')}",
            f"/memory/recall.json?{qs(query=QUERY, since='last week', until='now')}",
        ],
        memory_db,
    )
    said = "since '2026-11-02' (2026-11-02T00:00:00Z) is not before until '2026-11-01'"
    assert said in r.text.replace("&#39;", "'"), r.text[-2000:]
    assert r_json.status_code == 400
    assert r_json.json()["error"].startswith("since 'yesterday' (")
    assert "is not before until '3 days ago'" in r_json.json()["error"]
    assert ok.status_code == 200, ok.text
