"""The ``sqlite-rrf`` command line, run as a user runs it: in a subprocess, through
``python -m sqlite_rrf`` and once through the ``sqlite-rrf`` console script.

Expectations are computed here, not copied from the CLI's output: database
contents are read back with apsw, ``recall`` results are checked against a
plain-Python reference of the fusion (DESIGN.md, "The recall statement") whose BM25
scores are computed from FTS5's published formula over the tokens FTS5 produces,
and against :meth:`Store.recall` in this process on a copy of the database.

Tests marked ``embed`` load the shared GGUF model (every ``recall``, ``add`` and
every ``import`` of episodes without embeddings embeds); the others never need it
and run with ``SQLITE_RRF_MODEL`` pointing at a file that does not exist, so an
unexpected attempt to embed fails them.
"""

from __future__ import annotations

import collections
import importlib.metadata
import json
import math
import os
import re
import shutil
import subprocess
import sys

import apsw
import numpy as np
import pytest

import sqlite_rrf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.environ.get("SQLITE_RRF_MODEL") or os.path.join(
    os.path.dirname(REPO), "shared", "models", "all-MiniLM-L6-v2-f16.gguf"
)
N_MIGRATIONS = len(
    [
        f
        for f in os.listdir(os.path.join(REPO, "sql", "migrations"))
        if re.match(r"^\d{4}_[a-z0-9_]+\.sql$", f)
    ]
)
LISTS = ("bm25", "vector", "recency", "access")
DEFAULT_W = (1.0, 1.0, 0.6, 0.4)
JSON_KEYS = {
    "id",
    "content",
    "score",
    "bm25_rank",
    "vec_rank",
    "recency_rank",
    "access_rank",
    "similarity",
    "explain",
    "duplicates",
    "duplicate_ids",
    "relevance",
    "fused_score",
}


def _llama_importable() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except Exception:
        return False
    return True


def requires_model(f):
    f = pytest.mark.skipif(
        not os.path.isfile(MODEL), reason=f"the embedding model {MODEL} is not there"
    )(f)
    f = pytest.mark.skipif(
        not _llama_importable(),
        reason="llama-cpp-python is not installed: pip install 'sqlite-rrf[embed]'",
    )(f)
    return pytest.mark.embed(f)


# ---- running the CLI ----


def run(*args, cwd, model=None, env=None, stdin=None, script=False, timeout=300):
    """Run the CLI. Without ``model`` no model is available: SQLITE_RRF_MODEL is unset and
    the default model is looked up, offline, in an empty Hugging Face cache."""
    e = dict(os.environ)
    e.pop("SQLITE_RRF_LOADABLE", None)
    e.pop("SQLITE_RRF_MODEL", None)
    e["HF_HUB_OFFLINE"] = "1"
    e["HF_HUB_CACHE"] = os.path.join(str(cwd), "empty-hf-cache")
    if model:
        e["SQLITE_RRF_MODEL"] = model
    e.update(env or {})
    if script:
        cmd = [os.path.join(os.path.dirname(sys.executable), "sqlite-rrf")]
    else:
        cmd = [sys.executable, "-m", "sqlite_rrf"]
    return subprocess.run(
        cmd + [str(a) for a in args],
        cwd=str(cwd),
        env=e,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    return p


def fails_clearly(p, *needles):
    """Exit status 1, one line on stderr naming what is wrong, no traceback."""
    assert p.returncode == 1, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in p.stderr, f"{n!r} not in {p.stderr!r}"
    return lines[0]


# ---- reading databases back ----


def dump(path):
    """Every episode and every rrf_meta row (the whole state a write could change)."""
    c = apsw.Connection(str(path))
    try:
        eps = c.execute(
            "SELECT rowid, id, content, embedding, created_at, accessed_at, "
            "access_count, importance, kind, metadata FROM episodes "
            "ORDER BY rowid"
        ).fetchall()
        meta = c.execute("SELECT key, value FROM rrf_meta ORDER BY key").fetchall()
    finally:
        c.close()
    return eps, meta


def rows_by_id(path):
    c = apsw.Connection(str(path))
    try:
        cur = c.execute("SELECT * FROM episodes")
        cols = [d[0] for d in cur.getdescription()]
        return {r[cols.index("id")]: dict(zip(cols, r)) for r in cur}
    finally:
        c.close()


def meta(path, key):
    c = apsw.Connection(str(path))
    try:
        r = c.execute("SELECT value FROM rrf_meta WHERE key = ?", (key,)).fetchall()
    finally:
        c.close()
    return r[0][0] if r else None


def copy_db(src, dst):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(src) + suffix):
            shutil.copyfile(str(src) + suffix, str(dst) + suffix)
    return dst


def write_jsonl(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for ln in lines:
            f.write((ln if isinstance(ln, str) else json.dumps(ln)) + "\n")
    return path


def f32(v):
    return np.asarray(v, dtype="<f4")


def unit_cos(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- small episodes with 8-dimensional embeddings (no model needed) ----

RNG = np.random.default_rng(20240917)
T0 = 1_700_000_000_000


def small_episodes(prefix="e", n=6, dim=8):
    out = []
    for i in range(n):
        ep = {
            "id": f"{prefix}{i}",
            "content": f"small episode {i} about topic {i % 3}",
            "embedding": [float(x) for x in f32(RNG.standard_normal(dim))],
        }
        if i % 2 == 0:
            ep.update(created_at=T0 + i * 1000, accessed_at=T0 + i * 2000, access_count=i)
        if i % 3 == 1:
            ep.update(importance="high", kind="fact", metadata={"n": i, "tags": ["a", "b"]})
        if i == 5:
            ep.update(created_at=T0 + 77, importance="low")  # accessed_at defaults to created_at
        out.append(ep)
    return out


@pytest.fixture
def db8(tmp_path):
    """A database holding three 8-d episodes, imported by the CLI."""
    path = tmp_path / "base.db"
    ok(
        run(
            "import",
            path,
            write_jsonl(tmp_path / "base.jsonl", small_episodes("base", 3)),
            cwd=tmp_path,
        )
    )
    return path


# ---- init, --version, path, sql ----


def test_init_creates_and_init_twice_is_a_no_op(tmp_path):
    path = tmp_path / "mem.db"
    p = ok(run("init", path, cwd=tmp_path))
    assert f"schema version {N_MIGRATIONS}" in p.stdout
    c = apsw.Connection(str(path))
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"episodes", "episodes_fts", "schema_migrations", "rrf_meta"} <= tables
    schema = c.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    migs = c.execute("SELECT * FROM schema_migrations").fetchall()
    assert len(migs) == N_MIGRATIONS
    assert c.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    c.close()
    ok(run("init", path, cwd=tmp_path))
    c = apsw.Connection(str(path))
    assert c.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == schema
    assert c.execute("SELECT * FROM schema_migrations").fetchall() == migs
    c.close()


def test_init_in_missing_directory_is_a_clear_error(tmp_path):
    fails_clearly(run("init", tmp_path / "no" / "such" / "dir.db", cwd=tmp_path), "dir.db")


def test_version(tmp_path):
    p = ok(run("--version", cwd=tmp_path))
    assert p.stdout == f"sqlite-rrf {importlib.metadata.version('sqlite-rrf')}\n"


def test_path_prints_the_loadable_path(tmp_path):
    p = ok(run("path", cwd=tmp_path))
    printed = p.stdout.strip()
    assert p.stdout == printed + "\n"
    assert printed == sqlite_rrf.loadable_path()
    assert os.path.isabs(printed)
    assert any(os.path.isfile(printed + s) for s in (".so", ".dylib", ".dll"))
    # the path loads with apsw as the shell's .load would
    c = apsw.Connection(":memory:")
    c.enable_load_extension(True)
    c.load_extension(printed)
    assert c.execute("SELECT rrf_fuse(1)").fetchall()[0][0] == pytest.approx(1 / 61)
    c.close()
    p = ok(run("path", cwd=tmp_path, env={"SQLITE_RRF_LOADABLE": "/opt/elsewhere/rrf"}))
    assert p.stdout == "/opt/elsewhere/rrf\n"


def test_sql_prints_the_recall_statement_exactly(tmp_path):
    with open(os.path.join(REPO, "sql", "recall.sql"), encoding="utf-8") as f:
        want = f.read()
    p = ok(run("sql", cwd=tmp_path))
    assert p.stdout == want


def test_console_script(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "sqlite-rrf")
    assert os.access(script, os.X_OK), script
    p = ok(run("--version", cwd=tmp_path, script=True))
    assert p.stdout == f"sqlite-rrf {importlib.metadata.version('sqlite-rrf')}\n"
    path = tmp_path / "s.db"
    ok(run("init", path, cwd=tmp_path, script=True))
    eps = small_episodes("cs", 2)
    ok(run("import", path, write_jsonl(tmp_path / "cs.jsonl", eps), cwd=tmp_path, script=True))
    st = json.loads(ok(run("stats", path, "--json", cwd=tmp_path, script=True)).stdout)
    assert st["episodes"] == 2 and st["embedding_dim"] == 8
    # exit statuses pass through the console script
    fails_clearly(run("stats", tmp_path / "missing.db", cwd=tmp_path, script=True), "missing.db")
    assert run("recall", cwd=tmp_path, script=True).returncode == 2  # usage error


# ---- import (embeddings given: no model) ----


def test_import_with_embeddings(tmp_path):
    path = tmp_path / "imp.db"
    eps = small_episodes("imp", 6)
    src = write_jsonl(tmp_path / "eps.jsonl", [eps[0], eps[1], "", "   ", *eps[2:]])
    assert not path.exists()
    t0 = int(__import__("time").time() * 1000)
    p = ok(run("import", path, src, cwd=tmp_path))
    t1 = int(__import__("time").time() * 1000)
    assert "imported 6 episodes" in p.stdout
    got = rows_by_id(path)
    assert set(got) == {e["id"] for e in eps}
    for e in eps:
        r = got[e["id"]]
        assert r["content"] == e["content"]
        assert r["embedding"] == f32(e["embedding"]).tobytes()
        assert r["importance"] == e.get("importance", "normal")
        assert r["kind"] == e.get("kind")
        assert (None if r["metadata"] is None else json.loads(r["metadata"])) == e.get("metadata")
        assert r["access_count"] == e.get("access_count", 0)
        if "created_at" in e:
            assert r["created_at"] == e["created_at"]
            assert r["accessed_at"] == e.get("accessed_at", e["created_at"])
        else:
            assert t0 <= r["created_at"] <= t1
            assert r["accessed_at"] == r["created_at"]
    assert meta(path, "embedding_dim") == 8
    assert meta(path, "embedding_model") is None  # nothing was embedded
    # rows are searchable: the FTS triggers ran
    c = apsw.Connection(str(path))
    assert c.execute(
        "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'topic'"
    ).fetchall() == [(6,)]
    c.close()


def test_import_from_stdin_and_replace(tmp_path, db8):
    eps = small_episodes("in", 2)
    text = "".join(json.dumps(e) + "\n" for e in eps)
    ok(run("import", db8, "-", cwd=tmp_path, stdin=text))
    assert {"in0", "in1"} <= set(rows_by_id(db8))
    # importing the same ids again is refused; --replace replaces content
    before = dump(db8)
    fails_clearly(run("import", db8, "-", cwd=tmp_path, stdin=text))
    assert dump(db8) == before  # (the message's content: see the duplicate-id-in-db case)
    eps[0]["content"] = "replaced content"
    text = "".join(json.dumps(e) + "\n" for e in eps)
    ok(run("import", db8, "-", "--replace", cwd=tmp_path, stdin=text))
    got = rows_by_id(db8)
    assert got["in0"]["content"] == "replaced content"
    assert len(got) == 5


GOOD = [
    {
        "id": f"ok{i}",
        "content": f"good line {i}",
        "embedding": [float(x) for x in f32(RNG.standard_normal(8))],
    }
    for i in range(3)
]


def _emb(n=8, value=None):
    return [value if value is not None else 0.5 + i for i in range(n)]


BAD_LINES = {
    "invalid-json": ('{"id": "bad", "content": "unterminated"', ["JSON"]),
    "not-an-object": ('["bad", "content"]', ["object"]),
    "unknown-field": (
        json.dumps({"id": "bad", "content": "c", "embedding": _emb(), "body": "typo"}),
        ["body"],
    ),
    "content-type": (json.dumps({"id": "bad", "content": 42, "embedding": _emb()}), ["content"]),
    "content-missing": (json.dumps({"id": "bad", "embedding": _emb()}), ["content"]),
    "id-type": (json.dumps({"id": 7, "content": "c", "embedding": _emb()}), ["id"]),
    "access-count-type": (
        json.dumps({"id": "bad", "content": "c", "embedding": _emb(), "access_count": "3"}),
        ["access_count"],
    ),
    "created-at-negative": (
        json.dumps({"id": "bad", "content": "c", "embedding": _emb(), "created_at": -5}),
        ["created_at"],
    ),
    "importance": (
        json.dumps({"id": "bad", "content": "c", "embedding": _emb(), "importance": "urgent"}),
        ["importance"],
    ),
    "embedding-string": (
        json.dumps({"id": "bad", "content": "c", "embedding": "0.1,0.2"}),
        ["embedding"],
    ),
    "embedding-non-number": (
        json.dumps({"id": "bad", "content": "c", "embedding": [0.1, "x", 0.3, 0, 0, 0, 0, 0]}),
        ["embedding"],
    ),
    "embedding-zero": (
        json.dumps({"id": "bad", "content": "c", "embedding": _emb(8, 0.0)}),
        ["embedding"],
    ),
    "wrong-dimension": (
        json.dumps({"id": "bad", "content": "c", "embedding": _emb(7)}),
        ["dimension", "7"],
    ),
    "duplicate-id-in-file": (
        json.dumps({"id": "ok0", "content": "again", "embedding": _emb()}),
        ["ok0"],
    ),
    "duplicate-id-in-db": (
        json.dumps({"id": "base1", "content": "again", "embedding": _emb()}),
        ["base1"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_import_bad_line_is_reported_and_nothing_is_written(tmp_path, db8, case):
    bad, needles = BAD_LINES[case]
    # line 1, 2: good; line 3: blank (counts as a line); line 4: bad; line 5: good
    src = write_jsonl(tmp_path / "bad.jsonl", [GOOD[0], GOOD[1], "", bad, GOOD[2]])
    before = dump(db8)
    line = fails_clearly(run("import", db8, src, cwd=tmp_path), "line 4", *needles)
    assert "bad.jsonl" in line
    assert re.search(r"\bline 4\b", line)
    assert dump(db8) == before
    assert not {"ok0", "ok1", "ok2", "bad"} & set(rows_by_id(db8))


def test_import_wrong_dimension_against_the_database(tmp_path, db8):
    eps = [
        {
            "id": f"w{i}",
            "content": "sixteen dims",
            "embedding": [float(x) for x in f32(RNG.standard_normal(16))],
        }
        for i in range(2)
    ]
    before = dump(db8)
    fails_clearly(
        run("import", db8, write_jsonl(tmp_path / "w.jsonl", eps), cwd=tmp_path),
        "line 1",
        "dimension",
        "8",
        "16",
    )
    assert dump(db8) == before


def test_import_missing_file(tmp_path, db8):
    before = dump(db8)
    fails_clearly(run("import", db8, tmp_path / "nope.jsonl", cwd=tmp_path), "nope.jsonl")
    assert dump(db8) == before


# ---- stats ----


def test_stats_json_and_text(tmp_path):
    path = tmp_path / "st.db"
    eps = small_episodes("st", 6)
    eps.append(
        {"id": "st-noemb", "content": "no embedding", "created_at": T0 - 5, "access_count": 3}
    )
    # an episode without embedding needs the model: import the embedded ones, then
    # write the last one directly
    ok(run("import", path, write_jsonl(tmp_path / "st.jsonl", eps[:-1]), cwd=tmp_path))
    c = apsw.Connection(str(path))
    c.execute(
        "INSERT INTO episodes(id, content, created_at, accessed_at, access_count) "
        "VALUES ('st-noemb', 'no embedding', ?, ?, 3)",
        (T0 - 5, T0 - 5),
    )
    c.close()
    created = [r["created_at"] for r in rows_by_id(path).values()]

    st = json.loads(ok(run("stats", path, "--json", cwd=tmp_path)).stdout)
    assert st["episodes"] == 7
    assert st["with_embedding"] == 6
    assert st["embedding_dim"] == 8
    assert st["embedding_model"] is None
    assert st["schema_version"] == N_MIGRATIONS
    assert st["oldest_created_at"] == min(created) == T0 - 5
    assert st["newest_created_at"] == max(created)
    assert st["total_accesses"] == sum(e.get("access_count", 0) for e in eps)
    assert st["by_importance"] == dict(
        collections.Counter(e.get("importance", "normal") for e in eps)
    )
    assert st["size_bytes"] == os.path.getsize(path)

    text = ok(run("stats", path, cwd=tmp_path)).stdout
    fields = dict(re.findall(r"^\s*(\w+): (.*)$", text, re.M))
    assert fields["episodes"] == "7"
    assert fields["with_embedding"] == "6"
    assert fields["embedding_dim"] == "8"
    assert fields["schema_version"] == str(N_MIGRATIONS)


@pytest.mark.parametrize("cmd", [["stats"], ["stats", "--json"], ["recall", "a query"]])
def test_missing_database_is_a_clear_error(tmp_path, cmd):
    path = tmp_path / "absent.db"
    args = [cmd[0], path] + cmd[1:]
    fails_clearly(run(*args, cwd=tmp_path), str(path), "no such database")
    assert not path.exists(), "the error must not create the database"


def test_database_newer_than_the_cli_is_a_clear_error(tmp_path, db8):
    c = apsw.Connection(str(db8))
    c.execute("INSERT INTO schema_migrations VALUES (9999, 'future', 'x', 0)")
    c.close()
    fails_clearly(run("stats", db8, cwd=tmp_path), "9999", "newer")


# ---- a missing model ----


def test_missing_model_is_a_one_line_error_naming_the_path(tmp_path, db8):
    missing = tmp_path / "models" / "not-here.gguf"
    before = dump(db8)
    fails_clearly(run("add", db8, "some text", cwd=tmp_path, model=str(missing)), str(missing))
    src = write_jsonl(tmp_path / "noemb.jsonl", [{"id": "ne", "content": "needs a model"}])
    fails_clearly(run("import", db8, src, cwd=tmp_path, model=str(missing)), str(missing))
    other = tmp_path / "flag-model.gguf"
    fails_clearly(
        run("recall", db8, "query", "--model", other, cwd=tmp_path, model=str(missing)), str(other)
    )
    assert dump(db8) == before


# ======================================================================
# Tests that embed (the shared GGUF model)
# ======================================================================


@pytest.fixture(scope="module")
def embedder():
    if not _llama_importable():
        pytest.skip("llama_cpp (the embed extra) is not importable")
    if not os.path.isfile(MODEL):
        pytest.skip(f"the embedding model {MODEL} is not there")
    from sqlite_rrf.embedding.embedder import Embedder

    e = Embedder(MODEL, n_ctx=256)
    yield e
    e.close()


QUERY = "postgres credentials vault"
OTHER_QUERY = "which hot drink does the user like"
POOL_QUERY = "rotate signing material"

# (content, created_at offset in hours, accessed_at offset in hours, access_count, importance)
CORPUS = [
    (
        "Production Postgres credentials are stored in Vault under secret/prod/db and rotate "
        "every ninety days.",
        1,
        1,
        0,
        "normal",
    ),
    ("The staging Postgres cluster runs version 16 with two replicas.", 30, 31, 2, "normal"),
    ("Vault tokens for CI jobs expire after one hour.", 12, 40, 1, "normal"),
    (
        "Nightly backups of Postgres go to cold object storage for thirty days; restores are "
        "tested monthly by the platform team.",
        20,
        20,
        2,
        "high",
    ),
    ("The user prefers green tea over coffee during long debugging sessions.", 50, 52, 5, "low"),
    (
        "We chose FastAPI over Flask for the reporting service because of async support.",
        44,
        44,
        0,
        "normal",
    ),
    (
        "Incident: the ETL job failed because a bucket policy denied the new role.",
        33,
        70,
        3,
        "normal",
    ),
    ("Quarterly offsite planning: agenda, budget, venue shortlist.", 2, 2, 0, "normal"),
    ("The frontend build uses Vite and pnpm workspaces.", 60, 61, 1, "normal"),
    ("Customer invoices are archived for seven years to satisfy auditors.", 8, 9, 0, "normal"),
    ("On-call engineers rotate weekly and hand over on Mondays.", 65, 66, 4, "normal"),
    ("Grafana dashboards show request latency per endpoint.", 70, 75, 2, "normal"),
]
HIDDEN = 7  # the offsite episode: oldest access; its embedding is POOL_QUERY's


@pytest.fixture(scope="module")
def corpus(embedder):
    """The episodes (with their embeddings) as the tests expect them in the DB."""
    eps = []
    vecs = embedder.embed_many([c[0] for c in CORPUS])
    for i, ((content, created, accessed, count, imp), v) in enumerate(zip(CORPUS, vecs)):
        if i == HIDDEN:
            v = embedder.embed(POOL_QUERY)
        eps.append(
            {
                "id": f"ep{i:02d}",
                "content": content,
                "embedding": [float(x) for x in f32(v)],
                "created_at": T0 + created * 3_600_000,
                "accessed_at": T0 + accessed * 3_600_000,
                "access_count": count,
                "importance": imp,
                "rowid": i + 1,
            }
        )
    return eps


@pytest.fixture(scope="module")
def recall_db(tmp_path_factory, corpus):
    """A database of CORPUS imported by the CLI (embeddings given: no model needed)."""
    d = tmp_path_factory.mktemp("recall")
    path = d / "base.db"
    src = write_jsonl(
        d / "corpus.jsonl", [{k: v for k, v in e.items() if k != "rowid"} for e in corpus]
    )
    ok(run("import", path, src, cwd=d))
    got = rows_by_id(path)
    assert [got[e["id"]]["rowid"] for e in corpus] == [e["rowid"] for e in corpus]
    return path


@pytest.fixture
def rdb(tmp_path, recall_db):
    """A fresh copy of the recall database for one test."""
    return copy_db(recall_db, tmp_path / "r.db")


# ---- the plain-Python reference of the recall ----


def fts_terms(texts):
    """The terms FTS5's 'porter unicode61' tokenizer makes of each text (a scratch
    table and fts5vocab: tokenizing is not under test here, ranking is)."""
    c = apsw.Connection(":memory:")
    c.execute(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter unicode61');"
        "CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');"
    )
    for i, t in enumerate(texts):
        c.execute("INSERT INTO t(rowid, x) VALUES (?, ?)", (i, t))
    out = [[] for _ in texts]
    for term, doc in c.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        out[doc].append(term)
    c.close()
    return out


def bm25_scores(episodes, query):
    """FTS5's bm25() (k1 = 1.2, b = 0.75; negative, lower is better) of every episode
    that matches any query term, from the formula in the FTS5 documentation."""
    terms = fts_terms([e["content"] for e in episodes] + [query])
    docs, qterms = terms[:-1], list(dict.fromkeys(terms[-1]))
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    k1, b = 1.2, 0.75
    out = {}
    for e, d in zip(episodes, docs):
        counts = collections.Counter(d)
        if not any(counts[q] for q in qterms):
            continue
        s = 0.0
        for q in qterms:
            n_q = sum(1 for dd in docs if q in dd)
            idf = math.log((n - n_q + 0.5) / (n_q + 0.5))
            if idf <= 0:
                idf = 1e-6
            f = counts[q]
            s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))
        out[e["id"]] = -s
    return out


def dense_rank(values, reverse=True):
    order = sorted(set(values.values()), reverse=reverse)
    pos = {v: i + 1 for i, v in enumerate(order)}
    return {k: pos[v] for k, v in values.items()}


def reference(episodes, qvec, query, *, k=60.0, w=DEFAULT_W, pool="recent", pool_size=200):
    """Every candidate of the recall with its ranks, similarity and score, fused by
    the 'rrf' profile (DESIGN.md's four lists; the tests ask the CLI for it)."""
    bm = bm25_scores(episodes, query)
    bm25_rank = dense_rank(bm, reverse=False)  # lower bm25 is better; equal scores share
    by_id = {e["id"]: e for e in episodes}
    if pool == "all":
        pool_ids = set(by_id)
    else:
        pool_ids = {
            e["id"]
            for e in sorted(episodes, key=lambda e: (-e["accessed_at"], e["rowid"]))[:pool_size]
        }
    cands = pool_ids | set(bm25_rank)
    sim = {i: unit_cos(by_id[i]["embedding"], qvec) for i in cands}
    ranks = {
        "bm25": {i: bm25_rank.get(i) for i in cands},
        "vector": dense_rank(sim),
        "recency": dense_rank({i: by_id[i]["created_at"] for i in cands}),
        "access": dense_rank({i: by_id[i]["access_count"] for i in cands}),
    }
    out = {}
    for i in cands:
        contrib = {
            name: wt / (k + ranks[name][i])
            for name, wt in zip(LISTS, w)
            if wt > 0 and ranks[name][i] is not None
        }
        score = sum(contrib.values())
        if by_id[i]["importance"] == "high":
            score += 1 / (k + 1) - 1 / (k + 11)
        out[i] = {
            "id": i,
            "score": score,
            "similarity": sim[i],
            "contrib": contrib,
            "bm25_rank": ranks["bm25"][i],
            "vec_rank": ranks["vector"][i],
            "recency_rank": ranks["recency"][i],
            "access_rank": ranks["access"][i],
            "rowid": by_id[i]["rowid"],
            "importance": by_id[i]["importance"],
        }
    return out


def check_against_reference(hits, ref, limit):
    """``hits``: dicts as ``recall --json`` prints them. The ids must be the top
    ``limit`` by reference score (ties within float noise may come in either order)
    and every value must be the reference's."""
    assert len(hits) == min(limit, len(ref))
    eps = 1e-12
    for h in hits:
        r = ref[h["id"]]
        for key in ("bm25_rank", "vec_rank", "recency_rank", "access_rank"):
            assert h[key] == r[key], (h["id"], key, h[key], r[key])
        assert h["similarity"] == pytest.approx(r["similarity"], abs=2e-5)
        assert h["score"] == pytest.approx(r["score"], rel=1e-12, abs=1e-15)
        lists = {k: v for k, v in h["explain"].items() if k in LISTS}
        assert set(lists) == set(r["contrib"]), (h["id"], h["explain"])
        for name, c in r["contrib"].items():
            assert lists[name]["contribution"] == pytest.approx(c, rel=1e-12)
            assert (
                lists[name]["rank"]
                == {
                    "bm25": r["bm25_rank"],
                    "vector": r["vec_rank"],
                    "recency": r["recency_rank"],
                    "access": r["access_rank"],
                }[name]
            )
        assert ("importance" in h["explain"]) == (r["importance"] == "high")
    scores = [ref[h["id"]]["score"] for h in hits]
    assert all(a >= b - eps for a, b in zip(scores, scores[1:])), scores
    returned = {h["id"] for h in hits}
    floor = min(scores)
    assert not [i for i, r in ref.items() if i not in returned and r["score"] > floor + eps]


def recall_json(db, query, *args, cwd):
    if "--profile" not in args:
        args = ("--profile", "rrf", *args)
    p = ok(run("recall", db, query, "--json", *args, cwd=cwd, model=MODEL))
    hits = json.loads(p.stdout)
    assert isinstance(hits, list)
    for h in hits:
        assert set(h) == JSON_KEYS
    return hits, p


# ---- recall ----


@requires_model
def test_recall_json_matches_reference_and_store(tmp_path, rdb, corpus, embedder):
    from sqlite_rrf.store import Store

    snapshot = copy_db(rdb, tmp_path / "snapshot.db")
    before = dump(rdb)
    hits, _ = recall_json(rdb, QUERY, "--no-touch", "--limit", "5", cwd=tmp_path)
    assert dump(rdb) == before  # --no-touch
    qvec = embedder.embed(QUERY)
    ref = reference(corpus, qvec, QUERY)
    check_against_reference(hits, ref, 5)
    # the episode with all three query words leads both the BM25 and the vector list
    ep00 = next(h for h in hits if h["id"] == "ep00")
    assert ep00["bm25_rank"] == 1 and ep00["vec_rank"] == 1
    # the same recall by the Python API on a copy
    with Store(str(snapshot), embedder=embedder) as store:
        res = store.recall(QUERY, limit=5, touch=False, profile="rrf")
    assert not res.skipped
    assert [h.id for h in res] == [h["id"] for h in hits]
    for h, s in zip(hits, res):
        assert h["content"] == s.content
        assert h["score"] == pytest.approx(s.score, rel=1e-12)
        assert (h["bm25_rank"], h["vec_rank"], h["recency_rank"], h["access_rank"]) == (
            s.bm25_rank,
            s.vec_rank,
            s.recency_rank,
            s.access_rank,
        )
        assert h["similarity"] == pytest.approx(s.similarity, abs=2e-5)
        assert h["explain"].keys() == s.explain.keys()


# a hit's head line: rank, id, score, its absolute relevance (printed when known), and
# the marks of high importance and of the near-duplicates it stands for
_HIT = re.compile(
    r"^(\d+)\. (\S+)  score (\d+\.\d+)(?:  relevance (\d\.\d{3}))?"
    r"(  \[high importance\])?(?:  \[stands for (\d+) near-duplicates?\])?$"
)
_RANKS = re.compile(
    r"^   bm25 (#\d+|-) · vector (#\d+ \(cos (-?\d+\.\d+)\)|-) · "
    r"recency (#\d+|-) · access (#\d+|-)$"
)
_EXPLAIN = re.compile(
    r"^   explain: (?:\((.*)\) × (\d+\.\d+) \(recency/access\)|(.*)) = "
    r"(\d+\.\d+)$"
)
_HYBRID = re.compile(
    r"^   explain: blend (\d+(?:\.\d+)?)·cos/best (\d+\.\d+) \+ "
    r"(\d+(?:\.\d+)?)·bm25/best (\d+\.\d+) = (\d+\.\d+); "
    r"\+ \(1 − \d+\.\d+\) × "
    r"nudge (\d+\.\d+) \(recency/use/importance\) = (\d+\.\d+)$"
)
_PART = re.compile(r"^(\w+) (\d+\.\d+) = (?:([\d.]+)/\(k\+(\d+)\)|boost)$")


def parse_text(out):
    hits = []
    for line in out.splitlines():
        m = _HIT.match(line)
        assert m or not re.match(r"^\d+\. ", line), f"a hit's head line not understood: {line!r}"
        if m:
            hits.append(
                {
                    "n": int(m[1]),
                    "id": m[2],
                    "score": float(m[3]),
                    "relevance": m[4] and float(m[4]),
                    "high": bool(m[5]),
                    "duplicates": int(m[6] or 0),
                }
            )
            continue
        m = _RANKS.match(line)
        if m:
            assert hits, f"a ranks line before any hit's head line: {line!r}"

            def r(s):
                return None if s == "-" else int(s[1:].split()[0])

            hits[-1].update(
                bm25_rank=r(m[1]),
                vec_rank=r(m[2]),
                recency_rank=r(m[4]),
                access_rank=r(m[5]),
                similarity=None if m[3] is None else float(m[3]),
            )
            continue
        m = _HYBRID.match(line)
        if m:
            alpha, cos, beta, bm25, rel, nudge, total = (float(x) for x in m.groups())
            # the printed arithmetic adds up (to the printed precision)
            assert alpha + beta == pytest.approx(1.0), line
            assert alpha * cos + beta * bm25 == pytest.approx(rel, abs=2e-4), line
            assert rel + (1 - rel) * nudge == pytest.approx(total, abs=2e-4), line
            hits[-1]["explain"] = {"alpha": alpha, "cosine": cos, "bm25": bm25, "nudge": nudge}
            hits[-1]["explain_total"] = total
            continue
        m = _EXPLAIN.match(line)
        if m:
            parts = [_PART.match(p) for p in (m[1] or m[3]).split(" + ")]
            assert all(parts), line
            hits[-1]["explain"] = [
                (p[1], float(p[2]), p[3] and float(p[3]), p[4] and int(p[4])) for p in parts
            ]
            hits[-1]["multiplier"] = m[2] and float(m[2])
            hits[-1]["explain_total"] = float(m[4])
    return hits


@requires_model
def test_recall_text_and_explain(tmp_path, rdb, corpus, embedder):
    ref = reference(corpus, embedder.embed(QUERY), QUERY)
    top = sorted(ref.values(), key=lambda r: -r["score"])[:3]
    plain = ok(
        run("recall", rdb, QUERY, "--no-touch", "--profile", "rrf", cwd=tmp_path, model=MODEL)
    ).stdout
    explained = ok(
        run(
            "recall",
            rdb,
            QUERY,
            "--no-touch",
            "--explain",
            "--profile",
            "rrf",
            cwd=tmp_path,
            model=MODEL,
        )
    ).stdout
    assert "explain:" not in plain
    # each hit's absolute relevance is printed on its head line, as --json gives it
    relevance = {
        h["id"]: h["relevance"] for h in recall_json(rdb, QUERY, "--no-touch", cwd=tmp_path)[0]
    }
    for out, with_explain in ((plain, False), (explained, True)):
        hits = parse_text(out)
        assert [h["n"] for h in hits] == [1, 2, 3]
        assert [h["id"] for h in hits] == [r["id"] for r in top]
        for h in hits:
            r = ref[h["id"]]
            assert h["score"] == pytest.approx(r["score"], abs=5e-6)
            assert h["high"] == (r["importance"] == "high")
            assert h["relevance"] == pytest.approx(relevance[h["id"]], abs=5e-4)
            assert (h["bm25_rank"], h["vec_rank"], h["recency_rank"], h["access_rank"]) == (
                r["bm25_rank"],
                r["vec_rank"],
                r["recency_rank"],
                r["access_rank"],
            )
            assert h["similarity"] == pytest.approx(r["similarity"], abs=1e-3)
            # the content is shown
            first_words = " ".join(
                next(e for e in corpus if e["id"] == h["id"])["content"].split()[:4]
            )
            assert first_words in out
            if not with_explain:
                assert "explain" not in h
                continue
            names = [p[0] for p in h["explain"]]
            assert names[: len(r["contrib"])] == [n for n in LISTS if n in r["contrib"]]
            assert ("importance" in names) == (r["importance"] == "high")
            for name, c, weight, rank in h["explain"]:
                if name == "importance":
                    assert c == pytest.approx(1 / 61 - 1 / 71, abs=5e-6)
                    continue
                assert c == pytest.approx(r["contrib"][name], abs=5e-6)
                assert weight == DEFAULT_W[LISTS.index(name)]
                assert c == pytest.approx(weight / (60 + rank), abs=5e-6)
            assert sum(p[1] for p in h["explain"]) == pytest.approx(h["score"], abs=3e-5)
            assert h["explain_total"] == h["score"]


@requires_model
def test_touch_no_touch_and_topic_gate(tmp_path, rdb, corpus, embedder):
    import time

    before = dump(rdb)
    quiet, p = recall_json(rdb, QUERY, "--no-touch", cwd=tmp_path)
    assert dump(rdb) == before, "--no-touch changes nothing, not even the gate's memory"
    assert p.stderr == ""
    assert len(quiet) == 3

    # default: the returned rows are touched (same state, so the same hits)
    t0 = int(time.time() * 1000)
    touched, p = recall_json(rdb, QUERY, cwd=tmp_path)
    t1 = int(time.time() * 1000)
    assert "skipped" not in p.stderr, "a --no-touch recall must not arm the topic gate"
    assert [h["id"] for h in touched] == [h["id"] for h in quiet]
    old = {r[1]: r for r in before[0]}
    new = {r[1]: r for r in dump(rdb)[0]}
    returned = {h["id"] for h in touched}
    for i, r in new.items():
        if i in returned:
            assert r[6] == old[i][6] + 1, "access_count + 1"
            assert t0 <= r[5] <= t1, "accessed_at = now"
        else:
            assert r == old[i]
    # without a session the command line is never gated (the gate belongs to the caller)
    again, p = recall_json(rdb, QUERY, "--no-touch", cwd=tmp_path)
    assert "skipped" not in p.stderr and len(again) == 3
    # a session's gate: its memory is the query's embedding, in the database, per session
    recall_json(rdb, QUERY, "--session", "agent-1", cwd=tmp_path)
    last = meta(rdb, "topic_gate:agent-1")
    assert isinstance(last, bytes)
    assert unit_cos(np.frombuffer(last, "<f4"), embedder.embed(QUERY)) > 0.999

    # the gate is off unless asked for: the same query in that session is answered
    again, p = recall_json(rdb, QUERY, "--session", "agent-1", "--no-touch", cwd=tmp_path)
    assert "skipped" not in p.stderr and len(again) == 3
    # with --topic-gate, the same query again in that session, in another process:
    # skipped, nothing touched
    state = dump(rdb)
    p = ok(
        run("recall", rdb, QUERY, "--session", "agent-1", "--topic-gate", cwd=tmp_path, model=MODEL)
    )
    assert p.stdout == ""
    assert "skipped" in p.stderr and "force" in p.stderr
    assert dump(rdb) == state
    skipped, p = recall_json(rdb, QUERY, "--session", "agent-1", "--topic-gate", cwd=tmp_path)
    assert skipped == [] and "skipped" in p.stderr
    assert dump(rdb) == state
    # another agent on the same memory is not gated by agent-1's query
    other_agent, p = recall_json(
        rdb, QUERY, "--session", "agent-2", "--topic-gate", "--no-touch", cwd=tmp_path
    )
    assert "skipped" not in p.stderr and len(other_agent) == 3

    # --force recalls anyway
    forced, p = recall_json(
        rdb, QUERY, "--session", "agent-1", "--topic-gate", "--force", cwd=tmp_path
    )
    assert "skipped" not in p.stderr
    assert len(forced) == 3
    assert {h["id"] for h in forced} >= {"ep00"}

    # another topic is not gated
    assert unit_cos(embedder.embed(QUERY), embedder.embed(OTHER_QUERY)) < 0.85
    other, p = recall_json(rdb, OTHER_QUERY, "--no-touch", cwd=tmp_path)
    assert "skipped" not in p.stderr and len(other) == 3
    assert other[0]["id"] == "ep04"  # the tea episode


@requires_model
def test_recall_pool_k_weights_limit(tmp_path, rdb, corpus, embedder):
    qvec = embedder.embed(POOL_QUERY)
    hidden = corpus[HIDDEN]["id"]
    n = len(corpus)

    # a small recent pool misses the hidden episode (oldest access, no query word)
    hits, _ = recall_json(
        rdb,
        POOL_QUERY,
        "--no-touch",
        "--pool",
        "recent",
        "--pool-size",
        "5",
        "--limit",
        str(n),
        cwd=tmp_path,
    )
    ref = reference(corpus, qvec, POOL_QUERY, pool="recent", pool_size=5)
    assert hidden not in ref
    assert {h["id"] for h in hits} == set(ref)
    check_against_reference(hits, ref, n)

    # --pool all finds it, with other k and weights
    args = ["--no-touch", "--pool", "all", "--k", "10", "--weights", "0.5,2,0,0.25", "--limit", "4"]
    hits, _ = recall_json(rdb, POOL_QUERY, *args, cwd=tmp_path)
    ref = reference(corpus, qvec, POOL_QUERY, pool="all", k=10.0, w=(0.5, 2.0, 0.0, 0.25))
    assert len(ref) == n
    check_against_reference(hits, ref, 4)
    found = next(h for h in hits if h["id"] == hidden)
    assert found["vec_rank"] == 1 and found["similarity"] == pytest.approx(1.0, abs=1e-4)
    assert all("recency" not in h["explain"] for h in hits), "weight 0 turns the list off"


@requires_model
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--weights", "1,2,3"], "--weights"),
        (["--weights", "a,b,c,d"], "--weights"),
        (["--weights", "1,-1,0,0"], "weights"),
        (["--weights", "nan,1,1,1"], "weights"),
        (["--k", "-1"], "k"),
    ],
)
def test_recall_bad_options_are_clear_errors(tmp_path, rdb, args, needle):
    before = dump(rdb)
    fails_clearly(run("recall", rdb, QUERY, *args, cwd=tmp_path, model=MODEL), needle)
    assert dump(rdb) == before


# ---- import and add that embed ----


@requires_model
def test_import_without_embeddings_embeds(tmp_path, embedder):
    path = tmp_path / "emb.db"
    given = [float(x) for x in f32(embedder.embed("something else entirely"))]
    eps = [
        {"id": "a", "content": "Production Postgres credentials live in Vault."},
        {"id": "b", "content": "The user prefers green tea.", "importance": "high"},
        {"id": "c", "content": "A line with its own embedding.", "embedding": given},
    ]
    p = ok(run("import", path, write_jsonl(tmp_path / "e.jsonl", eps), cwd=tmp_path, model=MODEL))
    assert "imported 3 episodes" in p.stdout
    got = rows_by_id(path)
    for e in eps[:2]:
        v = np.frombuffer(got[e["id"]]["embedding"], "<f4")
        assert v.shape == (embedder.dim,)
        assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
        assert unit_cos(v, embedder.embed(e["content"])) >= 0.999
    assert got["c"]["embedding"] == f32(given).tobytes()
    assert got["b"]["importance"] == "high"
    assert meta(path, "embedding_dim") == embedder.dim
    assert meta(path, "embedding_model") == os.path.abspath(MODEL)


@requires_model
def test_add(tmp_path, embedder):
    path = tmp_path / "add.db"
    p = ok(
        run(
            "add",
            path,
            "Deploys are frozen on Fridays.",
            "--id",
            "note-1",
            "--importance",
            "high",
            "--kind",
            "rule",
            cwd=tmp_path,
            model=MODEL,
        )
    )
    assert p.stdout == "note-1\n"
    p = ok(run("add", path, "The user's cat is called Miso.", cwd=tmp_path, model=MODEL))
    new_id = p.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", new_id), p.stdout
    got = rows_by_id(path)
    assert set(got) == {"note-1", new_id}
    r = got["note-1"]
    assert (r["content"], r["importance"], r["kind"], r["access_count"]) == (
        "Deploys are frozen on Fridays.",
        "high",
        "rule",
        0,
    )
    assert (
        unit_cos(
            np.frombuffer(r["embedding"], "<f4"), embedder.embed("Deploys are frozen on Fridays.")
        )
        >= 0.999
    )
    assert got[new_id]["content"] == "The user's cat is called Miso."
    # the same id again: a clear error, nothing changed
    before = dump(path)
    fails_clearly(
        run("add", path, "Another text.", "--id", "note-1", cwd=tmp_path, model=MODEL),
        "already exists",
    )
    assert dump(path) == before


@requires_model
@pytest.mark.parametrize("cmd", ["import", "recall"])
def test_model_dimension_mismatch_is_a_clear_error(tmp_path, db8, cmd):
    before = dump(db8)
    if cmd == "import":
        src = write_jsonl(tmp_path / "n.jsonl", [{"id": "n", "content": "needs embedding"}])
        p = run("import", db8, src, cwd=tmp_path, model=MODEL)
    else:
        p = run("recall", db8, "topic", cwd=tmp_path, model=MODEL)
    fails_clearly(p, "8", "384")
    assert dump(db8) == before


# ---- demo ----


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    if not _llama_importable():
        pytest.skip("llama_cpp (the embed extra) is not importable")
    if not os.path.isfile(MODEL):
        pytest.skip(f"the embedding model {MODEL} is not there")
    d = tmp_path_factory.mktemp("demo")
    p = ok(run("demo", d / "memory.db", cwd=d, model=MODEL))
    return d, p


def _vault_episode_id():
    path = os.path.join(os.path.dirname(sqlite_rrf.__file__), "data", "sample_episodes.jsonl")
    with open(path, encoding="utf-8") as f:
        eps = [json.loads(ln) for ln in f if ln.strip()]
    ids = [
        e["id"]
        for e in eps
        if "Vault" in e["content"] and "Postgres" in e["content"] and "credentials" in e["content"]
    ]
    assert len(ids) == 1, ids
    return ids[0], len(eps)


@requires_model
def test_demo_prints_three_explained_hits(demo_run):
    d, p = demo_run
    _, n = _vault_episode_id()
    hits = parse_text(p.stdout)
    assert [h["n"] for h in hits] == [1, 2, 3]
    assert all("explain" in h for h in hits)
    assert all(h["relevance"] is not None and 0 <= h["relevance"] <= 1 for h in hits)
    c = apsw.Connection(str(d / "memory.db"))
    assert c.execute("SELECT count(*) FROM episodes").fetchall() == [(n,)]
    c.close()
    assert set(os.listdir(d)) <= {"memory.db", "memory.db-wal", "memory.db-shm"}


@requires_model
def test_demo_first_hit_is_the_vault_episode(demo_run):
    _, p = demo_run
    vault, _ = _vault_episode_id()
    hits = parse_text(p.stdout)
    assert hits[0]["id"] == vault


# ---- read-only media ----


def _read_only_mount(src, mnt):
    """Bind-mount ``src`` read-only at ``mnt``; False where this machine does not allow it."""
    mnt.mkdir()
    if shutil.which("mount") is None:
        return False
    p = subprocess.run(["mount", "--bind", str(src), str(mnt)], capture_output=True)
    if p.returncode != 0:
        return False
    p = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
    if p.returncode != 0:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        return False
    return True


def test_a_database_on_read_only_media_recalls(tmp_path):
    """A rollback-journal database on a read-only file system: `recall --no-touch` works
    (no WAL switch, no migration lock), a touching recall works too and says why it did
    not touch, a write fails with one line."""
    src = tmp_path / "media"
    src.mkdir()
    db = src / "m.db"
    ok(
        run(
            "add",
            db,
            "Production Postgres credentials are kept in Vault",
            "--id",
            "a",
            cwd=tmp_path,
        )
    )
    ok(run("add", db, "The user prefers green tea", "--id", "b", cwd=tmp_path))
    c = apsw.Connection(str(db))
    c.execute("PRAGMA journal_mode = DELETE")
    c.close()
    assert not (src / "m.db-wal").exists()
    mnt = tmp_path / "ro"
    if not _read_only_mount(src, mnt):
        pytest.skip("cannot bind-mount a read-only file system here")
    try:
        rodb = mnt / "m.db"
        with pytest.raises(OSError):
            (mnt / "probe").write_text("x")
        hits, p = recall_json(rodb, "postgres credentials", "--no-touch", cwd=tmp_path)
        assert hits[0]["id"] == "a" and "Traceback" not in p.stderr
        hits, p = recall_json(rodb, "postgres credentials", cwd=tmp_path)
        assert hits[0]["id"] == "a" and "read-only" in p.stderr and "not touched" in p.stderr
        fails_clearly(run("add", rodb, "x", cwd=tmp_path), "read-only")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


# ---- the parser: words and imports ----


def _subparsers():
    import argparse

    from sqlite_rrf import cli

    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_every_positional_argument_has_help():
    missing = [
        f"{name} {a.dest}"
        for name, p in _subparsers().items()
        for a in p._actions
        if not a.option_strings and not a.help
    ]
    assert missing == []


def test_help_names_every_profile_without_pointing_at_files():
    from sqlite_rrf.cli import PROFILE_SUMMARIES
    from sqlite_rrf.store import PROFILES

    assert list(PROFILE_SUMMARIES) == list(PROFILES)
    (profile,) = [a for a in _subparsers()["recall"]._actions if "--profile" in a.option_strings]
    for name, what in PROFILE_SUMMARIES.items():
        assert f"{name}: {what}" in profile.help
    # The wheel ships no docs/: no help may send the user there.
    for name, p in _subparsers().items():
        for a in p._actions:
            assert "docs/" not in (a.help or ""), (name, a.dest, a.help)


def test_recall_choices_are_the_stores():
    # The command line names the pools and profiles without importing the store.
    from sqlite_rrf import store

    choices = {a.dest: a.choices for a in _subparsers()["recall"]._actions}
    assert tuple(choices["pool"]) == store.POOL_MODES
    assert tuple(choices["profile"]) == store.PROFILES


HEAVY = (
    "numpy",
    "apsw",
    "sqlite_rrf.store",
    "sqlite_rrf.embedding.embedder",
    "llama_cpp",
    "sqlite_rrf.evaluation.runner",
)


def _imported_by(tmp_path, *args):
    """The HEAVY modules that ``sqlite-rrf ARGS`` imports (stdout: the command's, last line:
    the modules)."""
    code = (
        "import sys\nfrom sqlite_rrf.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
        "except SystemExit as e:\n    rc = e.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\nsys.exit(rc)\n"
    )
    e = dict(os.environ, HF_HUB_OFFLINE="1")
    e.pop("SQLITE_RRF_MODEL", None)
    p = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=str(tmp_path),
        env=e,
        capture_output=True,
        text=True,
        timeout=120,
    )
    ok(p)
    return json.loads(p.stdout.splitlines()[-1].replace("'", '"'))


def test_a_command_imports_only_what_it_runs(tmp_path):
    for args in (["--help"], ["recall", "--help"], ["eval", "--help"], ["path"], ["sql"]):
        assert _imported_by(tmp_path, *args) == [], args
    db = tmp_path / "m.db"
    ok(
        run(
            "import",
            db,
            "-",
            cwd=tmp_path,
            stdin='{"id": "a", "content": "postgres credentials in the vault"}\n',
        )
    )
    # A database without embeddings recalls without the embedder or the evaluation.
    assert _imported_by(tmp_path, "recall", db, "postgres") == ["apsw", "numpy", "sqlite_rrf.store"]


# ---- no duplicates, the latest fact first ----


def test_add_twice_is_one_episode_and_an_import_says_how_many_repeated(tmp_path):
    db = tmp_path / "m.db"
    first = ok(run("add", db, "The user uses fish shell, not bash.", cwd=tmp_path))
    again = ok(
        run("add", db, "the user uses  FISH shell, not bash.", "--importance", "high", cwd=tmp_path)
    )
    assert again.stdout == first.stdout and len(first.stdout.split()) == 1
    assert "no copy was stored" in again.stderr and "refreshed" in again.stderr
    rows = rows_by_id(db)
    assert list(rows) == [first.stdout.strip()]
    assert rows[first.stdout.strip()]["importance"] == "high"
    # 500 lines, 106 of them repeating an earlier line's text (case and spaces aside)
    texts = [f"memory {i}: the user likes item {i}" for i in range(394)]
    lines = [{"content": t} for t in texts] + [
        {"content": "  " + texts[i * 3].upper()} for i in range(106)
    ]
    p = ok(run("import", db, "-", cwd=tmp_path, stdin="".join(json.dumps(x) + "\n" for x in lines)))
    assert "imported 394 episodes" in p.stdout
    assert "106 repeated a text already stored" in p.stdout, p.stdout
    assert len(rows_by_id(db)) == 395
    # lines with ids of their own are stored, and said to repeat
    p = ok(
        run(
            "import",
            db,
            "-",
            cwd=tmp_path,
            stdin=json.dumps({"id": "x1", "content": texts[0]}) + "\n",
        )
    )
    assert "imported 1 episode " in p.stdout and "1 has an id of its own" in p.stdout


SCENARIO_FACT = "The team's shared password is stored in 1Password."
SCENARIO_FIX = "Update: the shared password moved from 1Password to Vault."


@requires_model
def test_recall_shows_the_correction_and_the_copies_once(tmp_path):
    db = tmp_path / "m.db"
    day = 86_400_000
    t0 = 1_700_000_000_000
    others = [
        "We chose SQLite for the agent's memory.",
        "The deploy runs on Fridays.",
        "Lunch is at noon.",
        "The VPN password rotates monthly.",
    ]
    lines = [{"content": t, "created_at": t0} for t in others]
    lines += [
        {"id": f"copy{i}", "content": SCENARIO_FACT, "created_at": t0 + i * day} for i in range(3)
    ]
    lines.append({"id": "fix", "content": SCENARIO_FIX, "created_at": t0 + 5 * day})
    ok(
        run(
            "import",
            db,
            "-",
            cwd=tmp_path,
            model=MODEL,
            stdin="".join(json.dumps(x) + "\n" for x in lines),
        )
    )
    q = "where is the shared password?"
    for limit in ("2", "3"):
        hits, _ = recall_json(
            db, q, "--profile", "hybrid", "--limit", limit, "--no-touch", cwd=tmp_path
        )
        # the correction and the fact, its three copies in one slot (the newest); which
        # of the two ranks first is the statement's (a correction made with --replaces
        # hides the fact: tests/test_replaces.py)
        assert sorted(h["id"] for h in hits[:2]) == ["copy2", "fix"], hits
        (fact,) = [h for h in hits if h["id"] == "copy2"]
        assert fact["duplicates"] == 2 and sorted(fact["duplicate_ids"]) == ["copy0", "copy1"]
        assert len(hits) == int(limit)
    p = ok(run("recall", db, q, "--limit", "2", "--no-touch", cwd=tmp_path, model=MODEL))
    assert SCENARIO_FIX in p.stdout and p.stdout.count(SCENARIO_FACT) == 1
    assert "[stands for 2 near-duplicates]" in p.stdout
    # --no-collapse: the statement's ranking as it is
    raw, _ = recall_json(
        db, q, "--profile", "hybrid", "--limit", "2", "--no-touch", "--no-collapse", cwd=tmp_path
    )
    assert [h["content"] for h in raw] == [SCENARIO_FACT, SCENARIO_FACT]
