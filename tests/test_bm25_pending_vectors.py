"""The BM25 list when the product's rows carry vectors and another client's rows do not.

The memory is written by the Store with an embedding on every row (as the command line
writes it with a model): 600 SciFact abstracts with their cached MiniLM vectors
(``../shared/data/scifact/corpus.minilm.npy``) and 300 'zorblax' episodes, each given
the cached vector of another SciFact abstract (their values do not matter to the BM25
list; what matters is that every product-written row has one, so the sign codes, the
vector pool and the similarity all run). Then the Debian ``sqlite3`` shell, without the
extension, runs tests/soak/recipe_shell_txn.py's one transaction: the zorblax rows but
the last are deleted and as many title-only rows inserted, 20 INSERT OR REPLACE of five
forms, 20 upserts, 10 UPDATE of content, 10 DELETE. None of the rows it writes has a
vector (``sqlite-rrf embed`` would give them one).

With no write through the product in between (an observer's ``PRAGMA data_version``
shows none), a recall with a query vector (the statement's pools 'quantized', 'all' and
'recent'; profile 'rrf', weights 1,0,0,0, no fold) returns bm25()'s top 20 over the OR
query of every word (rows tied at the cut: any of them), and its BM25 list at depth 50 is
bm25()'s row for row and bit for bit; the command line's recall of the issue, with the
real model embedding the query, is bm25()'s top 20 too. The control: the list bm25() gave
before the shell's transaction is not the list after it, for the rows the shell wrote.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCIFACT = os.path.join(os.path.dirname(ROOT), "shared", "data", "scifact")
MODEL = os.environ.get("SQLITE_RRF_MODEL") or os.path.join(
    os.path.dirname(ROOT), "shared", "models", "all-MiniLM-L6-v2-f16.gguf"
)
SHELL = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")
DOCS = 600
ZORBLAX = 300
POOLS = ("quantized", "all", "recent")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SHELL is None, reason="the sqlite3 shell is not installed"),
    pytest.mark.skipif(
        not os.path.exists(os.path.join(SCIFACT, "corpus.minilm.npy")),
        reason="the SciFact data and its cached vectors (../shared/data/scifact) are not there",
    ),
]


def _recipe():
    spec = importlib.util.spec_from_file_location(
        "rrf_recipe_shell_txn_vectors", os.path.join(HERE, "soak", "recipe_shell_txn.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """The memory after the shell's transaction: (recipe module, db path, the queries,
    {query: its vector}, {query: bm25()'s ranked list before the shell})."""
    import numpy as np

    from sqlite_rrf.store import Store

    recipe = _recipe()
    docs, _claims = recipe.load_corpus(SCIFACT)
    with open(os.path.join(SCIFACT, "corpus.minilm.ids.json"), encoding="utf-8") as f:
        ids = json.load(f)
    vecs = np.load(os.path.join(SCIFACT, "corpus.minilm.npy"))
    vec = {i: vecs[k] for k, i in enumerate(ids)}
    # the issue's first title is one of these documents (its row, and any title-only
    # copies the shell inserts, are in the list)
    first = [d for d in docs if d[1].startswith(recipe.ISSUE_TITLES[0])]
    rest = [d for d in docs if d not in first]
    used, spare = first + rest[: DOCS - len(first)], rest[DOCS - len(first) :]
    db = str(tmp_path_factory.mktemp("pending") / "memory.db")
    with Store(db) as store:
        store.add_many(
            [dict(id=f"sf{i}", content=f"{t} {a}", embedding=vec[i]) for i, t, a in used]
        )
        store.add_many(
            [
                dict(
                    id=f"z{i}",
                    content=f"note {i} about {recipe.WORD} {i}",
                    embedding=vec[spare[i][0]],
                )
                for i in range(1, ZORBLAX + 1)
            ]
        )
    written: list = []
    script = recipe.churn_script(used, ZORBLAX, 30, written)
    queries = [recipe.ISSUE_TITLES[0]] + recipe.touched_queries(written, 40)
    queries += [d[1] for d in used[1:11]]
    queries = list(dict.fromkeys(queries))
    by_title = {t: vec[i] for i, t, _a in used}
    qvec = {q: by_title.get(q, vec[used[0][0]]) for q in queries}
    with Store(db) as store:
        before = {q: recipe.ranked(store.conn, q) for q in queries}
    recipe.run_shell(db, script)
    return recipe, db, queries, qvec, before, written


def _observer(db):
    import apsw

    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    return conn, conn.execute("PRAGMA data_version").fetchone()[0]


def test_the_condition_holds(memory):
    """Every row the product wrote has a vector; no row the shell wrote has one."""
    import apsw

    _recipe_mod, db, _q, _v, _b, written = memory
    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = dict(
            conn.execute(
                "SELECT id GLOB 't[0-9]*', count(*) - count(embedding) FROM episodes GROUP BY 1"
            ).fetchall()
        )
        # the shell's title-only rows: none has a vector
        assert rows[1] == ZORBLAX - 1
        # of the rest, only the rows the shell replaced lack one (REPLACE writes a new row)
        replaced = sum(1 for form, _t, _n in written if form.startswith("replace"))
        assert 0 < rows[0] <= replaced
        assert conn.execute("SELECT count(*) FROM episodes_vectors").fetchone()[0] > DOCS / 2
    finally:
        conn.close()


@pytest.mark.parametrize("pool", POOLS)
def test_recall_with_a_query_vector_is_bm25s_list(memory, pool):
    """A recall with a query vector in each pool: its top 20 is bm25()'s (ties at the cut:
    any), its BM25 list at depth 50 is bm25()'s row for row and bit for bit, and the
    vector side ran (similarities computed); nothing was written."""
    from sqlite_rrf.store import Store

    recipe, db, queries, qvec, _before, _w = memory
    observer, version = _observer(db)
    differences, similar = [], 0
    with Store(db) as store:
        for q in queries:
            common = dict(
                weights=(1.0, 0.0, 0.0, 0.0),
                profile="rrf",
                pool=pool,
                qvec=qvec[q].tolist(),
                touch=False,
                force=True,
                collapse=False,
            )
            res = store.recall(q, limit=recipe.LIMIT, **common)
            similar += sum(1 for h in res if h.similarity is not None)
            got = sorted((h.id, h.bm25_rank) for h in res if h.bm25_rank is not None)
            differs = recipe.cli_differs(got, *recipe.ranked(store.conn, q))
            if differs:
                differences.append(f"{pool} top 20 {q[:60]!r}: {differs}")
            res = store.recall(q, limit=50, bm25_limit=50, **common)
            listed = sorted(
                ((h.rowid, h.bm25_score) for h in res if h.bm25_rank is not None),
                key=lambda r: (r[1], r[0]),
            )
            want = [tuple(r) for r in store.conn.execute(recipe.BM25_REF, (q, 50))]
            if listed != want:
                differences.append(
                    f"{pool} depth 50 {q[:60]!r}: missing {sorted(set(want) - set(listed))[:5]}"
                    f", extra {sorted(set(listed) - set(want))[:5]}"
                )
    assert observer.execute("PRAGMA data_version").fetchone()[0] == version
    observer.close()
    assert differences == [], "\n".join(differences)
    assert similar > len(queries)  # the vector side ran
    assert len(queries) > 50


@pytest.mark.skipif(not os.path.exists(MODEL), reason="the embedding model is not there")
def test_the_command_lines_recall_is_bm25s_list(memory):
    """The issue's command (``sqlite-rrf recall DB TITLE --json --limit 20 --no-touch
    --force --profile rrf --weights 1,0,0,0 --no-collapse --scope '*'``) with the real
    model, for the issue's title and the old titles of the first rows the shell replaced:
    bm25()'s top 20; nothing was written."""
    from sqlite_rrf.store import Store

    recipe, db, _queries, _v, _b, written = memory
    cli_qs = list(dict.fromkeys([recipe.ISSUE_TITLES[0]] + [t for _f, t, _n in written[:5]]))
    observer, version = _observer(db)
    env = dict(os.environ, SQLITE_RRF_MODEL=MODEL)
    differences, vectors = [], 0
    with Store(db) as store:
        for q in cli_qs:
            out = subprocess.run(
                [sys.executable, "-m", "sqlite_rrf", "recall", db, q, "--json", "--limit", "20"]
                + ["--no-touch", "--force", "--profile", "rrf", "--weights", "1,0,0,0"]
                + ["--no-collapse", "--scope", "*"],
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
            )
            assert out.returncode == 0, out.stderr
            hits = json.loads(out.stdout)
            vectors += sum(1 for h in hits if h["similarity"] is not None)
            got = sorted((h["id"], h["bm25_rank"]) for h in hits if h["bm25_rank"] is not None)
            differs = recipe.cli_differs(got, *recipe.ranked(store.conn, q))
            if differs:
                differences.append(f"{q[:60]!r}: {differs}")
    assert observer.execute("PRAGMA data_version").fetchone()[0] == version
    observer.close()
    assert differences == [], "\n".join(differences)
    assert vectors > 0  # the model embedded the query: the vector side ran


def test_the_check_sees_a_missed_row(memory):
    """Controls: the check flags bm25()'s top 20 with its 5th row left out and the 21st
    in its place (the issue's symptom), and, for the rows the shell wrote, bm25()'s list
    from before the shell's transaction taken as the list after it."""
    from sqlite_rrf.store import Store

    recipe, db, queries, _v, before, _w = memory
    q = recipe.ISSUE_TITLES[0]
    with Store(db) as store:
        above, tied = recipe.ranked(store.conn, q)
        assert not recipe.cli_differs(above + tied[: recipe.LIMIT - len(above)], above, tied)
        rows = [tuple(r) for r in store.conn.execute(recipe.BM25_REF, (q, 40))]
        ids = [
            store.conn.execute("SELECT id FROM episodes WHERE rowid = ?", (r,)).fetchone()[0]
            for r, _s in rows
        ]
        rank, last, dense = 0, None, []
        for _r, s in rows:
            rank, last = (rank + 1, s) if s != last else (rank, last)
            dense.append(rank)
        # the 5th row and the first row below the 20th's score: both unique scores
        fifth = next(i for i in range(4, 20) if dense.count(dense[i]) == 1)
        below = next(
            i for i in range(20, 40) if dense[i] > dense[19] and dense.count(dense[i]) == 1
        )
        got = [(ids[i], dense[i]) for i in range(20) if i != fifth] + [(ids[below], dense[below])]
        said = recipe.cli_differs(sorted(got), above, tied)
        assert f"missing (id, bm25() rank) [{(ids[fifth], dense[fifth])!r}]" in said, said
        stale = [
            q
            for q in queries
            if recipe.cli_differs(
                before[q][0] + before[q][1][: recipe.LIMIT - len(before[q][0])],
                *recipe.ranked(store.conn, q),
            )
        ]
    assert len(stale) > len(queries) // 4


def _fold_differs(hits, conn, recipe, q):
    """'' when ``hits`` (dicts with id, score, bm25_rank, duplicate_ids, best first) are
    what the fold may make of bm25()'s list for ``q``: in score order, and every row
    bm25() ranks above a shown hit is shown or folded into a shown hit (named in its
    duplicate_ids); else what is wrong."""
    shown = {h["id"] for h in hits}
    folded = {d for h in hits for d in (h["duplicate_ids"] or ())}
    worst = max(h["bm25_rank"] for h in hits if h["bm25_rank"] is not None)
    rows = [tuple(r) for r in conn.execute(recipe.BM25_REF, (q, 200))]
    rank, last, left_out = 0, None, []
    for rowid, score in rows:
        if score != last:
            rank, last = rank + 1, score
        if rank >= worst:
            break
        row = conn.execute("SELECT id FROM episodes WHERE rowid = ?", (rowid,)).fetchone()
        if row[0] not in shown and row[0] not in folded:
            left_out.append((row[0], rank))
    scores = [h["score"] for h in hits]
    said = []
    if left_out:
        said.append(f"left out, not folded: {left_out}; the worst shown is rank {worst}")
    if scores != sorted(scores, reverse=True):
        said.append("not in score order")
    return "; ".join(said)


def test_the_fold_leaves_out_only_duplicates(memory):
    """With the fold on (the default): each hit left out of bm25()'s order is a duplicate
    folded into a shown hit (the shell's title-only rows repeat titles), the slots are
    refilled from the next ranks, and the hits stay in score order (no newest-first
    reorder among hits about the same thing pushes a better hit past the cut)."""
    from sqlite_rrf.store import Store

    recipe, db, queries, qvec, _before, _w = memory
    differences, folds = [], 0
    with Store(db) as store:
        for q in queries:
            res = store.recall(
                q,
                limit=recipe.LIMIT,
                weights=(1.0, 0.0, 0.0, 0.0),
                profile="rrf",
                qvec=qvec[q].tolist(),
                touch=False,
                force=True,
            )
            hits = [dataclasses.asdict(h) for h in res]
            folds += sum(1 for h in hits if h["duplicate_ids"])
            said = _fold_differs(hits, store.conn, recipe, q)
            if said:
                differences.append(f"{q[:60]!r}: {said}")
    assert differences == [], "\n".join(differences)
    assert folds > 0  # the shell's repeated titles were folded
