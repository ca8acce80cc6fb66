"""The BM25 stopword hint: sql/stopwords.sql, the Store's automatic refresh, and the recall
statement that uses it (DESIGN departure: docs/design-departures.md).

The hint (rrf_meta 'bm25_stopwords') only says which of a query's words the statement
counts in the index at query time; the words still in half of the rows are left out of
the scan, and the list is FTS5's bm25() over the whole query all the same (exhaustively
tested in tests/test_bm25_exact.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest

import sqlite_rrf
from sqlite_rrf.core.sql_files import read_sql
from sqlite_rrf.core.statements import recall_statement
from sqlite_rrf.store import Store
from test_recall import DIM, NOW, WORDS, assert_same, reference_recall, run_recall

# Words porter leaves as they are, so a plain-Python document count is the index's.
COMMON = ("the", "of")


def corpus(n, rng, *, studies_share=0.6):
    """n episodes: every one has 'the' and 'of'; a share has 'studies' (porter: 'studi');
    the rest are Greek letters (each in well under half of them)."""
    eps = []
    for i in range(n):
        words = list(rng.choice(WORDS, size=int(rng.integers(3, 9)))) + list(COMMON)
        if rng.random() < studies_share:
            words.append("studies")
        rng.shuffle(words)
        eps.append(
            dict(
                id=f"e{i}",
                content=" ".join(words),
                embedding=rng.normal(size=DIM),
                created_at=NOW - i * 60_000,
                accessed_at=NOW - i * 30_000,
                access_count=int(rng.integers(0, 5)),
            )
        )
    return eps


def python_stopwords(conn):
    """Terms in at least half the episodes, counted in Python over the content (the
    corpus only has words porter leaves unchanged, plus 'studies' -> 'studi')."""
    docs = [set(c.lower().split()) for (c,) in conn.execute("SELECT content FROM episodes")]
    df = Counter(w for d in docs for w in d)
    return sorted(("studi" if w == "studies" else w) for w, c in df.items() if 2 * c >= len(docs))


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("stop") / "m.db"
    with Store(path) as s:
        s.add_many(corpus(1500, np.random.default_rng(1)))
    s = Store(path)
    yield s
    s.close()


def test_store_computes_the_stopwords_after_an_import(big):
    assert big.stopwords == python_stopwords(big.conn)
    assert set(big.stopwords) >= {"the", "of", "studi"}
    assert big.meta("bm25_stopwords_rows") == 1500
    assert big.stats()["bm25_stopwords"] == big.stopwords


def test_none_below_1000_episodes(tmp_path):
    with Store(tmp_path / "s.db") as s:
        s.add_many(corpus(999, np.random.default_rng(2)))
        assert s.stopwords == []
        assert s.refresh_stopwords() == []
        assert s.refresh_stopwords(min_rows=10) == python_stopwords(s.conn)


def test_refreshed_when_the_count_moves_ten_percent(tmp_path):
    rng = np.random.default_rng(3)
    with Store(tmp_path / "d.db") as s:
        s.add_many(corpus(1000, rng))
        assert s.meta("bm25_stopwords_rows") == 1000 and "studi" in s.stopwords
        # 99 more episodes without 'studies' or 'of': below the 10 % drift, not refreshed
        more = corpus(99, rng, studies_share=0.0)
        for i, e in enumerate(more):
            e["id"] = f"m{i}"
            e["content"] = e["content"].replace(" of", "").replace("of ", "")
        s.add_many(more)
        assert s.meta("bm25_stopwords_rows") == 1000
        # 1,000 more such episodes: refreshed; 'studies' is in under half of them now
        more = corpus(1000, rng, studies_share=0.0)
        for i, e in enumerate(more):
            e["id"] = f"n{i}"
        s.add_many(more)
        assert s.meta("bm25_stopwords_rows") == 2099
        assert "studi" not in s.stopwords and s.stopwords == python_stopwords(s.conn)


def test_recall_equals_the_reference_with_stopwords(big):
    rng = np.random.default_rng(4)
    for query in ("the alpha of studies", "studies of the omega sigma", "zeta", "what of the"):
        qvec = rng.normal(size=DIM)
        for profile in ("rrf", "memory"):
            assert_same(
                run_recall(big.conn, query, qvec, limit=40, profile=profile),
                reference_recall(big.conn, query, qvec, limit=40, profile=profile),
            )


def bm25_hits(conn, query):
    """{id: (bm25_rank, bm25_score)} of the statement's BM25 list (every candidate)."""
    got = run_recall(conn, query, None, limit=100_000, pool="all", profile="rrf")
    return {h["id"]: (h["bm25_rank"], h["bm25_score"]) for h in got if h["bm25_rank"] is not None}


def test_stopwords_are_left_out_of_the_scan_not_out_of_the_list(big):
    """'the' and 'of' are in every row: the statement scans only the rows that hold
    'omega', and its BM25 list is still bm25()'s over all three words, values included
    (the dropped words' 1e-6 IDF counted in each row's text)."""
    conn = big.conn
    hits = bm25_hits(conn, "the omega of")
    assert len(hits) == 50
    old = conn.execute(
        "SELECT e.id, bm25(episodes_fts) FROM episodes_fts JOIN episodes AS e "
        'ON e.rowid = episodes_fts.rowid WHERE episodes_fts MATCH \'"the" OR "omega" OR "of"\' '
        "ORDER BY bm25(episodes_fts), episodes_fts.rowid"
    ).fetchall()
    assert len(old) == 1500  # the whole query matches every row
    content = dict(conn.execute("SELECT id, content FROM episodes"))
    assert all("omega" in content[i].split() for i in hits)
    assert {i: sc for i, (_, sc) in hits.items()} == dict(old[:50])  # bit for bit
    pruned = conn.execute(
        "SELECT fts5_query('the omega of', 'or', ?, 'porter unicode61')", (" ".join(big.stopwords),)
    ).fetchone()[0]
    assert pruned == '"omega"'
    assert (
        conn.execute(
            "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH ?", (pruned,)
        ).fetchone()[0]
        < 500
    )


def test_a_stale_hint_changes_no_list(big):
    """A hint that names a rare word ('omega') or misses a common one ('the') gives the
    same list; only the time changes."""
    conn = big.conn
    want = {q: bm25_hits(conn, q) for q in ("the omega of", "omega sigma", "the of xyzzy")}
    saved = big.meta("bm25_stopwords")
    try:
        for stale in ("omega sigma", "of", "", "studi omega the of"):
            conn.execute("UPDATE rrf_meta SET value = ? WHERE key = 'bm25_stopwords'", (stale,))
            for q, w in want.items():
                assert bm25_hits(conn, q) == w, (stale, q)
    finally:
        conn.execute("UPDATE rrf_meta SET value = ? WHERE key = 'bm25_stopwords'", (saved,))


def test_a_query_of_stopwords_only_still_searches(big):
    hits = bm25_hits(big.conn, "The OF the")
    want = big.conn.execute(
        "SELECT e.id, bm25(episodes_fts) FROM episodes_fts JOIN episodes AS e "
        'ON e.rowid = episodes_fts.rowid WHERE episodes_fts MATCH \'"The" OR "OF"\' '
        "ORDER BY bm25(episodes_fts), episodes_fts.rowid LIMIT 50"
    ).fetchall()
    assert {i: sc for i, (_, sc) in hits.items()} == dict(want)


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell")
def test_stopwords_sql_and_recall_run_in_the_sqlite3_shell(tmp_path):
    with Store(tmp_path / "sh.db") as s:
        s.add_many(corpus(1100, np.random.default_rng(5)))
        s.conn.execute("DELETE FROM rrf_meta WHERE key LIKE 'bm25_stopwords%'")
        qvec = np.random.default_rng(6).normal(size=DIM)
        (tmp_path / "stopwords.sql").write_text(read_sql("stopwords.sql"))
        # the statement of pool 'recent' and profile 'rrf', as `sqlite-rrf sql --pool
        # recent --profile rrf` prints it (the shipped recall.sql is the default's)
        (tmp_path / "recall.sql").write_text(recall_statement("recent", "rrf"))
        script = "\n".join(
            [
                f".load {sqlite_rrf.loadable_path()}",
                ".param init",
                f".read {tmp_path / 'stopwords.sql'}",
                ".param set :query 'studies of the alpha beta'",
                f".param set :qvec '{json.dumps([float(np.float32(x)) for x in qvec])}'",
                ".param set :limit 10",
                ".param set :now 1800000000000",
                ".mode json",
                f".read {tmp_path / 'recall.sql'}",
            ]
        )
        out = subprocess.run(
            ["sqlite3", s.path], input=script, text=True, capture_output=True, timeout=60
        )
        assert out.returncode == 0 and not out.stderr, out.stderr
        assert s.stopwords == python_stopwords(s.conn) and "studi" in s.stopwords
        rows = json.loads(out.stdout)
        want = reference_recall(s.conn, "studies of the alpha beta", qvec, limit=10)
        assert [r["id"] for r in rows] == [h["id"] for h in want]
        for r, h in zip(rows, want):
            assert r["score"] == pytest.approx(h["score"], rel=1e-9)
