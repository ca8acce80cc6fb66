#!/usr/bin/env python3
"""The BM25 list after another client's one-transaction churn (``make churn`` runs it
before the random churn; tests/test_churn.py runs it too).

The memory: SciFact's abstracts (``../shared/data/scifact``, title and abstract), plus
``--zorblax`` (3,100) episodes ``z1`` ... whose text holds one made-up word
(``zorblax``), all written by the Store, each with a vector, as the command line writes
them with a model (``--vectors``): SciFact's cached MiniLM vectors
(``corpus.minilm.npy``), and for the zorblax episodes either the model's own (``model``,
through the evaluation's embedding cache) or the cached vector of a SciFact abstract
(``borrowed``: what a vector says does not matter to the BM25 list, only that the row
has one); ``none`` writes no vector (the recipe as it first was).
Then the Debian ``sqlite3`` shell (3.40, **no** rrf extension), in ONE transaction:

* deletes ``z1`` ... ``z<zorblax - 1>``;
* inserts as many title-only episodes (a SciFact title each), so the count is unchanged;
* 20 ``INSERT OR REPLACE`` (of five forms: another text under the same id, the same
  text, the title alone, another text at the row's own rowid, another text at a second
  row's rowid), 20 ``INSERT ... ON CONFLICT(id) DO UPDATE``, 10 ``UPDATE ... SET
  content`` and 10 ``DELETE`` of SciFact rows.

None of the rows the shell writes has a vector (it cannot embed), and no write through
the product comes to embed them. With no write through the product in between, every
query (the two SciFact titles of the issue; the old title and the new text's first
words of each row the transaction wrote, ``--touched`` of them, the REPLACEs first;
``--queries`` random titles and claims) is checked against FTS5's ``bm25()`` over the OR
query of every word:

* the command line's list for the issue's two titles and the old titles of
  ``--cli-touched`` rows written (``sqlite-rrf recall DB QUERY --json
  --limit 20 --no-touch --force --profile rrf --weights 1,0,0,0 --no-collapse --scope
  '*'``), with the model (when it is there: ``$SQLITE_RRF_MODEL``, else
  ``../shared/models``) embedding the query, so the vector pool and the similarities
  run: bm25()'s top 20 (rows tied at the cut: any of them);
* with vectors, the statement's BM25 list at depths 20 and 50 through ``Store.recall``
  with a query vector (the cached vector of the query's own abstract, else of the first
  one) in the default pool, row for row and bit for bit;
* at depths 20 and 50, row for row and bit for bit, every path of the BM25 list
  (tests/soak/churn.py's checks: the statement with ``rrf_bm25_or_top`` and with its
  per-row filtered scan under the stored, no, a fresh and an all-words stopword hint,
  and one without the query's words that are common now;
  ``rrf_bm25_or_top``, ``rrf_bm25_or`` and ``rrf_bm25`` called directly; bm25() of a
  freshly built index), and the list of a Store opened, and used for the same queries,
  before the shell wrote;
* ``rrf_bm25``, ``rrf_bm25_or_top`` and ``rrf_bm25_or`` alone at depths 1 to 10, where
  they prune most.

    python tests/soak/recipe_shell_txn.py --workdir build/churn-recipe

An observer connection's ``PRAGMA data_version`` shows that nothing the checks ran
committed a write. Prints what it checked and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
SCIFACT = os.path.join(os.path.dirname(ROOT), "shared", "data", "scifact")
SHELL = "/usr/bin/sqlite3"
MODEL = os.environ.get("SQLITE_RRF_MODEL") or os.path.join(
    os.path.dirname(ROOT), "shared", "models", "all-MiniLM-L6-v2-f16.gguf"
)
#: What the zorblax episodes' vectors are (see the docstring).
VECTORS = ("model", "borrowed", "none")
WORD = "zorblax"
#: The issue's two titles (the first as the issue gives it, shorter than SciFact's).
ISSUE_TITLES = (
    "The Evolution of Dominance in Sporophytic Self-Incompatibility",
    "Cryo-EM structure of a herpesvirus capsid at 3.1 \u00c5",
)
LIMIT = 20
#: The BM25 list's depths checked by every path: the recall's LIMIT, and the statement's
#: default bm25_limit (the command line's list above is drawn from that one).
DEPTHS = (LIMIT, 50)
#: Shallower depths, where the functions prune most, checked on the functions alone.
SHALLOW = (1, 2, 3, 5, 10)


def sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def load_corpus(folder: str) -> Tuple[List[Tuple[str, str, str]], List[str]]:
    """SciFact's documents as (id, title, abstract), and its claims."""
    docs = []
    with open(os.path.join(folder, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append((str(d["_id"]), d["title"], d["text"]))
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as f:
        claims = [json.loads(line)["text"] for line in f]
    return docs, claims


def zorblax_text(i: int) -> str:
    return f"note {i} about {WORD} {i}"


def product_vectors(
    folder: str, docs: List[Tuple[str, str, str]], zorblax: int, how: str
) -> Tuple[Optional[Dict[str, Any]], Optional[List[Any]]]:
    """The vectors the Store writes with its rows: ({SciFact id: cached vector}, the
    zorblax episodes' vectors in order), as ``how`` (:data:`VECTORS`) says; (None, None)
    for ``none``. ``model`` embeds the zorblax texts with the model at :data:`MODEL`
    through the evaluation's embedding cache (seconds once cached)."""
    if how not in VECTORS:
        raise ValueError(f"vectors: one of {VECTORS}, got {how!r}")
    if how == "none":
        return None, None
    import numpy as np

    with open(os.path.join(folder, "corpus.minilm.ids.json"), encoding="utf-8") as f:
        ids = json.load(f)
    mat = np.load(os.path.join(folder, "corpus.minilm.npy"))
    by_id = {i: mat[k] for k, i in enumerate(ids)}
    if how == "borrowed":
        return by_id, [by_id[docs[(i - 1) % len(docs)][0]] for i in range(1, zorblax + 1)]
    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.embedding.models import DEFAULT_N_CTX
    from sqlite_rrf.evaluation.embcache import EmbeddingCache, embed_cached, model_fingerprint

    texts = [zorblax_text(i) for i in range(1, zorblax + 1)]
    with EmbeddingCache(model_fingerprint(MODEL, DEFAULT_N_CTX), None) as cache:
        zmat, _n, _s = embed_cached(texts, cache, lambda: Embedder(MODEL, n_ctx=DEFAULT_N_CTX))
    return by_id, list(zmat)


def build(
    db: str,
    docs: List[Tuple[str, str, str]],
    zorblax: int,
    vectors: Tuple[Optional[Dict[str, Any]], Optional[List[Any]]] = (None, None),
) -> None:
    """The memory, written by the Store (as the command line's ``add`` writes it), with
    the vectors of :func:`product_vectors` when given."""
    from sqlite_rrf.store import Store

    sf, zv = vectors
    with Store(db) as store:
        batch: List[Dict[str, Any]] = [dict(id=f"sf{i}", content=f"{t} {a}") for i, t, a in docs]
        zs: List[Dict[str, Any]] = [
            dict(id=f"z{i}", content=zorblax_text(i)) for i in range(1, zorblax + 1)
        ]
        if sf is not None and zv is not None:
            for row, (i, _t, _a) in zip(batch, docs):
                row["embedding"] = sf[i]
            for row, v in zip(zs, zv):
                row["embedding"] = v
        for k in range(0, len(batch), 2000):
            store.add_many(batch[k : k + 2000])
        for k in range(0, len(zs), 2000):
            store.add_many(zs[k : k + 2000])


def churn_script(
    docs: List[Tuple[str, str, str]],
    zorblax: int,
    seed: int,
    touched: Optional[List[Tuple[str, str, str]]] = None,
) -> str:
    """The other client's one transaction. ``touched`` (when given) gets one (form, old
    title, new text) per SciFact row the transaction wrote, in the order written.

    The INSERT OR REPLACEs vary what a REPLACE can do, four of each form: ``replace``
    another document's text (the id conflicts: the old row goes, the new one takes a new
    rowid, and SQLite fires no DELETE trigger for the old row, recursive_triggers being
    off); ``replace-same`` the row's own text again; ``replace-title`` its title alone;
    ``replace-rowid`` another text at the row's own rowid (both rowid and id conflict
    with one row); ``replace-two`` another text with the rowid of one row and the id of
    another (two rows removed by one statement)."""
    rng = random.Random(seed)
    lines = [".bail on", "BEGIN;"]
    gone = [f"z{i}" for i in range(1, zorblax)]
    for k in range(0, len(gone), 500):
        lines.append(
            "DELETE FROM episodes WHERE id IN ("
            + ", ".join(sql_text(x) for x in gone[k : k + 500])
            + ");"
        )
    for i in range(len(gone)):
        _id, title, _a = rng.choice(docs)
        lines.append(
            f"INSERT INTO episodes(id, content) VALUES ({sql_text(f't{i}')}, {sql_text(title)});"
        )
    picked = rng.sample(range(len(docs)), 60)
    text = lambda: (lambda d: f"{d[1]} {d[2]}")(rng.choice(docs))  # noqa: E731
    note = touched.append if touched is not None else (lambda _t: None)
    forms = ("replace", "replace-same", "replace-title", "replace-rowid", "replace-two")
    for k, j in enumerate(picked[:20]):
        form, sid, (_i, title, abstract) = (
            forms[k % len(forms)],
            sql_text("sf" + docs[j][0]),
            docs[j],
        )
        new = {"replace-same": f"{title} {abstract}", "replace-title": title}.get(form) or text()
        rowid = "NULL"
        if form == "replace-rowid":
            rowid = f"(SELECT rowid FROM episodes WHERE id = {sid})"
        elif form == "replace-two":  # the rowid of the next picked row that is still there
            other = sql_text("sf" + docs[picked[(k + 1) % 20]][0])
            rowid = f"(SELECT rowid FROM episodes WHERE id = {other})"
        lines.append(
            "INSERT OR REPLACE INTO episodes(rowid, id, content) VALUES "
            f"({rowid}, {sid}, {sql_text(new)});"
        )
        note((form, title, new))
    for j in picked[20:40]:
        new = text()
        lines.append(
            f"INSERT INTO episodes(id, content) VALUES ({sql_text('sf' + docs[j][0])}, "
            f"{sql_text(new)}) ON CONFLICT(id) DO UPDATE SET content = excluded.content;"
        )
        note(("upsert", docs[j][1], new))
    for j in picked[40:50]:
        new = text()
        lines.append(
            f"UPDATE episodes SET content = {sql_text(new)} "
            f"WHERE id = {sql_text('sf' + docs[j][0])};"
        )
        note(("update", docs[j][1], new))
    for j in picked[50:60]:
        lines.append(f"DELETE FROM episodes WHERE id = {sql_text('sf' + docs[j][0])};")
        note(("delete", docs[j][1], ""))
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def touched_queries(touched: List[Tuple[str, str, str]], n: int) -> List[str]:
    """Queries from the rows the transaction wrote, the REPLACEs first: each row's old
    title, and the first words of its new text (a title, or the start of one), for the
    first ``n`` rows; no query twice."""
    out: List[str] = []
    for _form, title, new in touched[:n]:
        out.append(title)
        if new:
            out.append(" ".join(new.split()[:12]))
    return list(dict.fromkeys(q for q in out if q.strip()))


def run_shell(db: str, script: str) -> None:
    out = subprocess.run(
        [SHELL, "-batch", db], input=script, capture_output=True, text=True, timeout=600
    )
    if out.returncode != 0 or out.stderr.strip():
        raise RuntimeError(f"the sqlite3 shell failed ({out.returncode}): {out.stderr[:500]}")


BM25_REF = (
    "SELECT rowid, bm25(episodes_fts) AS s FROM episodes_fts WHERE episodes_fts MATCH "
    "coalesce(fts5_query(?1), '\"\"') ORDER BY s, rowid LIMIT ?2"
)


def bm25_list(
    store: Any, query: str, n: int, qvec: Any = None, similar: Optional[List[int]] = None
) -> List[Tuple[int, float]]:
    """The statement's BM25 list through ``store.recall`` (no touch; no vector pool, or,
    with ``qvec``, the default pool and the similarities of the query vector ``qvec``,
    the vector list weighing 0), as (rowid, bm25 score), best first, ties by rowid (as
    tests/soak/churn.py reads it). ``similar`` (when given) gets the number of hits with
    a similarity."""
    vector: Dict[str, Any] = {"pool_size": 0} if qvec is None else {"qvec": list(qvec)}
    res = store.recall(
        query,
        limit=n,
        weights=(1.0, 0.0, 0.0, 0.0),
        bm25_limit=n,
        profile="rrf",
        touch=False,
        force=True,
        collapse=False,
        **vector,
    )
    if similar is not None:
        similar.append(sum(1 for h in res if h.similarity is not None))
    return sorted(
        ((h.rowid, h.bm25_score) for h in res if h.bm25_rank is not None),
        key=lambda r: (r[1], r[0]),
    )


def cli_list(db: str, query: str, similar: Optional[List[int]] = None) -> List[Tuple[str, int]]:
    """The command line's recall of the issue: (id, BM25 rank) of its hits, by rank; the
    model at :data:`MODEL`, when it is there, embeds the query. ``similar`` (when given)
    gets the number of hits with a similarity (0: the vector side did not run)."""
    env = dict(os.environ)
    if os.path.exists(MODEL):
        env["SQLITE_RRF_MODEL"] = MODEL
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "recall",
            db,
            query,
            "--json",
            "--limit",
            str(LIMIT),
            "--no-touch",
            "--force",
            "--profile",
            "rrf",
            "--weights",
            "1,0,0,0",
            "--no-collapse",
            "--scope",
            "*",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"sqlite-rrf recall failed: {out.stderr[:500]}")
    hits = json.loads(out.stdout)
    if similar is not None:
        similar.append(sum(1 for h in hits if h["similarity"] is not None))
    return sorted((h["id"], h["bm25_rank"]) for h in hits if h["bm25_rank"] is not None)


def ranked(conn: Any, query: str) -> Tuple[List[Tuple[str, int]], List[Tuple[str, int]]]:
    """bm25()'s top LIMIT as (id, rank), the statement's dense rank (equal scores share
    one): the rows ranked above the LIMIT-th row's rank, and every row of that rank (a
    tie at the cut: the recall may keep any of them)."""
    rows = [tuple(r) for r in conn.execute(BM25_REF, (query, LIMIT + 50))]
    out: List[Tuple[str, int]] = []
    rank, last = 0, None
    for rowid, s in rows:
        if s != last:
            rank, last = rank + 1, s
        row = conn.execute("SELECT id FROM episodes WHERE rowid = ?", (rowid,)).fetchone()
        # a rowid of the index that no row of episodes has (a REPLACE's phantom) is named
        out.append((row[0] if row else f"<rowid {rowid}: in the index, not in episodes>", rank))
    if len(out) <= LIMIT:
        return sorted(out), []
    cut = out[LIMIT - 1][1]
    return sorted(r for r in out if r[1] < cut), sorted(r for r in out if r[1] == cut)


def cli_differs(
    got: List[Tuple[str, int]], above: List[Tuple[str, int]], tied: List[Tuple[str, int]]
) -> str:
    """'' when the command line's list is bm25()'s top LIMIT (any of the rows tied at the
    cut), else what differs."""
    rest = [r for r in got if r not in above]
    if (
        all(r in got for r in above)
        and set(rest) <= set(tied)
        and len(got) == min(LIMIT, len(above) + len(tied))
    ):
        return ""
    return (
        f"missing (id, bm25() rank) {sorted(set(above) - set(got))}, extra "
        f"{sorted(set(rest) - set(tied))}, {len(got)} rows"
    )


def shallow(conn: Any, q: str, report: Dict[str, Any]) -> None:
    """rrf_bm25, rrf_bm25_or_top and rrf_bm25_or (the words in half of the rows now
    dropped) at the SHALLOW depths against bm25(): the top m rows, m as B13 allows
    (tests/soak/churn.py's check_paths does the same at the recall's depths)."""
    import churn  # tests/soak/churn.py

    stop = set(conn.execute(churn.STOP_NOW).fetchone()[0].split())
    terms = conn.execute("SELECT fts5_query(?, 'terms', NULL, 'porter unicode61')", (q,))
    common = " ".join(t for _p, t in json.loads(terms.fetchone()[0]) if t in stop)
    floor = -churn.DROP_BOUND * len(common.split())
    for n in SHALLOW:
        want = [tuple(r) for r in conn.execute(BM25_REF, (q, n))]
        top = conn.execute(churn.FN_TOP, (q, n, common)).fetchall()
        paths = {
            "rrf_bm25": [tuple(r) for r in conn.execute(churn.FN_FULL, (q, n))],
            "rrf_bm25_or_top": [tuple(r) for r in json.loads(top[0][0])] if top else [],
            "rrf_bm25_or": [tuple(r) for r in conn.execute(churn.FN_OR, (q, n, common))],
        }
        for name, got in paths.items():
            m = len(want)
            if common and name != "rrf_bm25":
                m = sum(1 for _r, v in got if v < floor)
            report["shallow_checks"] = report.get("shallow_checks", 0) + 1
            if got[:m] != want[:m]:
                report["differences"].append(
                    f"{name} {q[:60]!r} top {n}: {churn.Churn.difference(got[:m], want[:m])}"
                )


def check(
    db: str,
    queries: List[str],
    cli_queries: List[str],
    between: Optional[Callable[[Any], None]] = None,
    warm: Any = None,
    qvecs: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Every query's BM25 list against bm25(), by every path (tests/soak/churn.py's checks,
    on a Store that writes nothing: opened after the shell, recall without touch); and the
    list of ``warm``, a Store opened and used for these queries before the shell wrote
    (as a server holds one), against the same bm25() list; with ``qvecs`` ({query: its
    query vector}), the list of a recall with that vector too.
    ``between(store)`` runs once the Store is open, before the checks (the tests' control
    of the observer)."""
    sys.path.insert(0, HERE)
    import apsw
    import churn  # tests/soak/churn.py

    from sqlite_rrf.store import Store

    report: Dict[str, Any] = {
        "queries": 0,
        "cli_queries": 0,
        "cli_similar": [],
        "warm_queries": 0,
        "vector_queries": 0,
        "vector_similar": [],
        "differences": [],
    }
    # an observer: PRAGMA data_version moves when another connection commits, so it tells
    # whether anything the checks ran (the command line, the Store) wrote to the database
    observer = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    version = observer.execute("PRAGMA data_version").fetchone()[0]
    store = Store(db)
    try:
        conn = store.conn
        if between is not None:
            between(store)
        for q in cli_queries:
            differs = cli_differs(cli_list(db, q, report["cli_similar"]), *ranked(conn, q))
            report["cli_queries"] += 1
            if differs:
                report["differences"].append(f"sqlite-rrf recall {q[:60]!r}: {differs}")
        args = churn.make_args(episodes=0, ops=0, checkpoints=0, quiet=True, workdir=None)
        c = churn.Churn.__new__(churn.Churn)
        c.args, c.store = args, store
        c.cte, c.cte_params = churn.bm25_cte()
        c.checked, c.mismatch, c.examples = churn.Counter(), churn.Counter(), []
        c.fresh_ready, c.stop_now = False, ""
        c.failures, c.failure_count = [], 0
        for q in queries:
            for n in DEPTHS:
                c.check_bm25(q, n)
                if qvecs is not None:
                    got = bm25_list(store, q, n, qvecs[q], report["vector_similar"])
                    want = [tuple(r) for r in conn.execute(BM25_REF, (q, n))]
                    report["vector_queries"] += 1
                    if got != want:
                        report["differences"].append(
                            f"a recall with a query vector, {q[:60]!r} top {n}: "
                            f"{churn.Churn.difference(got, want)}"
                        )
                if warm is not None:
                    got = bm25_list(warm, q, n)
                    want = [tuple(r) for r in conn.execute(BM25_REF, (q, n))]
                    report["warm_queries"] += 1
                    if got != want:
                        report["differences"].append(
                            f"a Store opened before the shell wrote, {q[:60]!r} top {n}: "
                            f"{churn.Churn.difference(got, want)}"
                        )
            shallow(conn, q, report)
            report["queries"] += 1
        report["checked"] = dict(c.checked)
        report["mismatch"] = dict(c.mismatch)
        report["differences"] += c.examples
    finally:
        store.close()
    if observer.execute("PRAGMA data_version").fetchone()[0] != version:
        report["differences"].append("a write through the product came before the checks ended")
    observer.close()
    return report


def run(
    workdir: str,
    scifact: str = SCIFACT,
    zorblax: int = 3100,
    queries: int = 40,
    seed: int = 30,
    cli: bool = True,
    between: Optional[Callable[[Any], None]] = None,
    touched: int = 60,
    cli_touched: int = 20,
    vectors: str = "borrowed",
) -> Dict[str, Any]:
    """Build, churn in the shell, check. The queries: the issue's two titles, those of
    the first ``touched`` rows the shell's transaction wrote (touched_queries: the
    REPLACEs first), and ``queries`` random titles and claims; the command line's recall
    for the issue's titles and the old titles of the first ``cli_touched`` rows written.
    ``vectors`` (:data:`VECTORS`) says what the Store writes as vectors. The report's
    ``differences`` lists every miss."""
    os.makedirs(workdir, exist_ok=True)
    db = os.path.join(workdir, "recipe.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    docs, claims = load_corpus(scifact)
    written: List[Tuple[str, str, str]] = []
    script = churn_script(docs, zorblax, seed, written)
    rng = random.Random(seed + 1)
    titles = [d[1] for d in docs]
    from_touched = touched_queries(written, touched)
    qs = list(ISSUE_TITLES) + from_touched
    qs += [rng.choice(titles) if rng.random() < 0.7 else rng.choice(claims) for _ in range(queries)]
    qs = list(dict.fromkeys(qs))
    cli_qs = list(dict.fromkeys(list(ISSUE_TITLES) + [t for _f, t, _n in written[:cli_touched]]))
    from sqlite_rrf.store import Store

    t0 = time.perf_counter()
    vecs = product_vectors(scifact, docs, zorblax, vectors)
    build(db, docs, zorblax, vecs)
    qvecs = None
    if vecs[0] is not None:
        by_title = {t: vecs[0][i] for i, t, _a in docs}
        qvecs = {q: by_title.get(q, vecs[0][docs[0][0]]) for q in qs}
    counts = Store(db)
    try:
        built = counts.conn.execute("SELECT count(*), count(embedding) FROM episodes").fetchone()
    finally:
        counts.close()
    warm = Store(db)  # a long-lived reader: its statements and caches made before the shell
    for q in qs:
        for n in DEPTHS:
            bm25_list(warm, q, n)
    t1 = time.perf_counter()
    run_shell(db, script)
    t2 = time.perf_counter()
    try:
        report = check(db, qs, cli_qs if cli else [], between, warm, qvecs)
    finally:
        warm.close()
    import apsw

    after = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        no_vector = after.execute("SELECT count(*) - count(embedding) FROM episodes").fetchone()[0]
    finally:
        after.close()
    report.update(
        db=db,
        episodes=len(docs) + zorblax,
        touched=[f for f, _t, _n in written],
        touched_queries=len(from_touched),
        vectors=vectors,
        built=list(built),
        without_vector=no_vector,
        build_s=round(t1 - t0, 1),
        shell_s=round(t2 - t1, 1),
        check_s=round(time.perf_counter() - t2, 1),
    )
    return report


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default="build/churn-recipe")
    p.add_argument("--scifact", default=SCIFACT)
    p.add_argument("--zorblax", type=int, default=3100)
    p.add_argument("--queries", type=int, default=40, help="random titles and claims")
    p.add_argument("--seed", type=int, default=30)
    p.add_argument(
        "--touched",
        type=int,
        default=60,
        help="rows the transaction wrote whose titles are queried",
    )
    p.add_argument(
        "--cli-touched", type=int, default=20, help="of those, recalled by the command line"
    )
    p.add_argument(
        "--vectors",
        choices=VECTORS,
        default=None,
        help="the zorblax episodes' vectors (default: the model's when it is there, else "
        "borrowed from SciFact's cached ones); none: no vector on any row",
    )
    p.add_argument("--json", help="also write the report to this file")
    a = p.parse_args(argv)
    if not os.path.exists(os.path.join(a.scifact, "corpus.jsonl")):
        print(f"recipe: skipped, no SciFact data in {a.scifact}")
        return 0
    r = run(
        a.workdir,
        a.scifact,
        a.zorblax,
        a.queries,
        a.seed,
        touched=a.touched,
        cli_touched=a.cli_touched,
        vectors=a.vectors or ("model" if os.path.exists(MODEL) else "borrowed"),
    )
    print(
        f"recipe: {r['episodes']} episodes (built {r['build_s']} s, shell {r['shell_s']} s; "
        f"vectors {r['vectors']}: {r['built'][1]} of {r['built'][0]} rows the Store wrote, "
        f"{r['without_vector']} rows without one after the shell), "
        f"{r['cli_queries']} command-line recalls ({sum(r['cli_similar'])} hits with a "
        f"similarity), {r['queries']} queries checked by "
        f"{r['checked'].get('bm25_paths', 0)} paths, {r.get('shallow_checks', 0)} shallow "
        f"checks of the functions, {r['warm_queries']} of a Store opened before the shell, "
        f"{r['vector_queries']} with a query vector ({r['check_s']} s): "
        f"{len(r['differences'])} differences"
    )
    for d in r["differences"][:20]:
        print("  " + d)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=1)
    return 1 if r["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
