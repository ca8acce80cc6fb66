"""The 'knn' pool: sqlite-vec's vec0 index over all episodes (sql/knn.sql,
sql/pool_knn.sql), kept in sync with episodes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip(
    "sqlite_vec", reason="sqlite-vec is not installed: pip install 'sqlite-rrf[knn]'"
)

from sqlite_rrf.core.sql_files import read_sql
from sqlite_rrf.core.statements import recall_statement
from sqlite_rrf.store import Store, StoreError

DIM = 12


def vec_rows(store):
    return dict(store.conn.execute("SELECT rowid, embedding FROM episodes_vec"))


def emb_rows(store):
    return dict(
        store.conn.execute("SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL")
    )


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(5)
    s = Store(tmp_path / "k.db")
    s.add_many(
        [
            dict(
                id=f"e{i}",
                content=f"w{i % 17} alpha beta{i % 5}",
                embedding=rng.normal(size=DIM) if i % 9 else None,
            )
            for i in range(400)
        ]
    )
    s.enable_knn()
    yield s
    s.close()


def ids(result):
    return [h.id for h in result]


@pytest.mark.parametrize("profile", ["memory", "rrf", "convex"])
def test_knn_equals_all_when_the_pool_covers_the_corpus(store, profile):
    q = np.random.default_rng(1).normal(size=DIM)
    kw = dict(limit=100, qvec=q, touch=False, force=True, profile=profile)
    exact = store.recall("alpha beta3", pool="all", pool_size=400, **kw)
    knn = store.recall("alpha beta3", pool="knn", pool_size=400, **kw)
    assert ids(knn) == ids(exact)
    assert [h.score for h in knn] == pytest.approx([h.score for h in exact], rel=1e-12)


def test_knn_pool_is_the_nearest_by_cosine(store):
    q = np.random.default_rng(2).normal(size=DIM)
    got = store.recall(
        "nothing-matches",
        pool="knn",
        pool_size=25,
        limit=400,
        qvec=q,
        touch=False,
        force=True,
        collapse=False,
    )  # the pool, as it is
    rows = emb_rows(store)
    sims = {
        r: float(
            np.frombuffer(b, "<f4")
            @ q
            / np.linalg.norm(np.frombuffer(b, "<f4"))
            / np.linalg.norm(q)
        )
        for r, b in rows.items()
    }
    nearest = sorted(sims, key=lambda r: -sims[r])[:25]
    assert sorted(h.rowid for h in got) == sorted(nearest)


def test_index_follows_inserts_updates_deletes_and_replaces(store):
    assert vec_rows(store) == emb_rows(store)
    store.add("new one", id="n1", embedding=np.ones(DIM))
    store.add("no vector", id="n2")
    store.upsert("changed", id="e1", embedding=np.arange(DIM) + 1.0)
    store.delete("e2")
    store.conn.execute("UPDATE episodes SET embedding = NULL WHERE id = 'e3'")
    store.add_many([dict(id="e4", content="replaced", embedding=-np.ones(DIM))], replace=True)
    store.conn.execute(
        "INSERT OR REPLACE INTO episodes(rowid, id, content, embedding) "
        "SELECT rowid, id, 'raw replace', ? FROM episodes WHERE id = 'e5'",
        (np.full(DIM, 2.0, "<f4").tobytes(),),
    )
    assert vec_rows(store) == emb_rows(store)


def test_knn_errors(tmp_path):
    with Store(tmp_path / "plain.db") as s:
        s.add("x", embedding=np.ones(DIM))
        with pytest.raises(StoreError, match="enable_knn"):
            s.recall("x", pool="knn", qvec=np.ones(DIM))
        s.enable_knn()
        with pytest.raises(StoreError, match="query vector"):
            s.recall("x", pool="knn")
        with pytest.raises(StoreError, match="at least 1"):
            s.recall("x", pool="knn", pool_size=0, qvec=np.ones(DIM))
    with Store(tmp_path / "empty.db") as s, pytest.raises(StoreError, match="dimension"):
        s.enable_knn()


def test_reopened_store_loads_sqlite_vec_itself(store):
    path = store.path
    store.close()
    with Store(path) as s:
        s.add("after reopen", id="r1", embedding=np.ones(DIM))
        assert vec_rows(s) == emb_rows(s)


def test_knn_statement_is_recall_sql_with_the_knn_pool():
    plain, knn = recall_statement(), recall_statement("knn")
    assert plain == read_sql("recall.sql")
    assert "FROM episodes_vec\n" in knn and "FROM episodes_vec\n" not in plain

    # the same fragments but the pool (and params, which names it): the BM25 list before
    # it, the fusion after it
    def bm25(sql):
        return sql.split("-- 1. Full-text hits")[1].split("-- 2. The vector pool")[0]

    assert bm25(knn) == bm25(plain)
    assert knn.split("-- 3. Candidates")[1] == plain.split("-- 3. Candidates")[1]


def test_cli_knn_and_sql(tmp_path, store):
    path = store.path
    store.close()
    run = [sys.executable, "-m", "sqlite_rrf"]
    p = subprocess.run(run + ["knn", path], capture_output=True, text=True)
    assert p.returncode == 0 and "already present" in p.stdout
    p = subprocess.run(run + ["sql", "--pool", "knn"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == recall_statement("knn")


def test_knn_pool_with_a_filter_is_the_nearest_of_the_rows_that_pass(store):
    """The index cannot filter, so with a scope (or kind/since/until) the knn form ranks
    the rows that pass exactly: its pool is their :pool_size nearest."""
    store.conn.execute("UPDATE episodes SET scope = 'p' WHERE rowid % 10 = 3")
    q = np.random.default_rng(3).normal(size=DIM)
    got = store.recall(
        "nothing-matches",
        pool="knn",
        pool_size=7,
        limit=400,
        qvec=q,
        touch=False,
        force=True,
        scope="p",
        collapse=False,
    )
    rows = dict(
        store.conn.execute(
            "SELECT rowid, embedding FROM episodes WHERE scope = 'p' AND embedding IS NOT NULL"
        )
    )
    sims = sorted(
        (
            (
                float(
                    np.frombuffer(b, "<f4")
                    @ q
                    / np.linalg.norm(np.frombuffer(b, "<f4"))
                    / np.linalg.norm(q)
                ),
                r,
            )
            for r, b in rows.items()
        ),
        reverse=True,
    )
    assert sorted(h.rowid for h in got) == sorted(r for _, r in sims[:7])
    unfiltered = store.recall(
        "nothing-matches", pool="knn", pool_size=7, limit=400, qvec=q, touch=False, force=True
    )
    assert {h.rowid for h in unfiltered} != {h.rowid for h in got}
